//! The machine a trace ran on, as policies see it: every CPU with its SMT siblings,
//! cluster, last-level cache, package, NUMA node and capacity. Read from sysfs
//! (`here`), from a JSON file, or assumed flat when a trace does not say.
//!
//! JSON schema (what `--machine FILE.json` reads and bundles store):
//! ```json
//! { "source": "sysfs", "cpus": [
//!   { "cpu": 0, "core": 0, "smt_siblings": [0, 1], "cluster": 0, "llc": 0,
//!     "package": 0, "node": 0, "capacity": 1024 } ] }
//! ```
//! `llc` and `cluster` are ids: the lowest CPU number of the group sharing them.
//! `capacity` is on the kernel's 1024 scale; absent means 1024.

use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// One CPU of the machine and the groups it belongs to; group ids are the lowest CPU
/// number in the group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuTopo {
    /// The CPU number, as the kernel numbers it.
    pub cpu: u32,
    /// Core id: CPUs sharing it are SMT siblings.
    pub core: u32,
    /// Every hardware thread of this core, this CPU included.
    pub smt_siblings: Vec<u32>,
    /// The cluster (shared L2 or cluster tag; sysfs `cluster_cpus_list`), by its lowest CPU;
    /// the SMT siblings' when the kernel reports no clusters.
    pub cluster: u32,
    /// The last-level cache, the kernel's sd_llc span (sysfs: the highest cache level's
    /// `shared_cpu_list`), by its lowest CPU.
    pub llc: u32,
    /// The socket (`physical_package_id`).
    pub package: u32,
    /// The NUMA node (0 when sysfs lists no nodes).
    pub node: u32,
    /// arch_scale_cpu_capacity, on the kernel's 1024 scale (`cpu_capacity`): below 1024 on
    /// the little CPUs of asymmetric machines.
    #[serde(default = "full_capacity")]
    pub capacity: u32,
}

fn full_capacity() -> u32 {
    1024
}

/// The machine: its CPUs, each with its place in the cache and NUMA hierarchy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topology {
    /// Where the description came from: "sysfs", a file name, or "assumed".
    pub source: String,
    /// Every CPU described, in the order listed (from sysfs: the online CPUs, ascending).
    pub cpus: Vec<CpuTopo>,
}

/// Why a machine description could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    /// The description at `path` is missing, unreadable or inconsistent.
    #[error("{path}: {what}")]
    Bad {
        /// The file (or sysfs file) that could not be used.
        path: String,
        /// What is wrong with it.
        what: String,
    },
}

fn bad(path: impl std::fmt::Display, what: impl Into<String>) -> TopologyError {
    TopologyError::Bad {
        path: path.to_string(),
        what: what.into(),
    }
}

/// Parses a kernel CPU list such as `0-3,8,10-11`.
pub fn parse_cpu_list(s: &str) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.parse().ok()?, b.parse().ok()?);
                if b < a || b - a > 1 << 16 {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().ok()?),
        }
    }
    Some(out)
}

impl Topology {
    /// One LLC, no SMT: what consumers assume when a trace carries no description.
    pub fn flat(nr_cpus: u32) -> Topology {
        Topology {
            source: "assumed: one LLC, no SMT".into(),
            cpus: (0..nr_cpus)
                .map(|c| CpuTopo {
                    cpu: c,
                    core: c,
                    smt_siblings: vec![c],
                    cluster: 0,
                    llc: 0,
                    package: 0,
                    node: 0,
                    capacity: 1024,
                })
                .collect(),
        }
    }

    /// Reads the online CPUs of this machine from sysfs.
    pub fn from_sysfs(root: &Path) -> Result<Topology, TopologyError> {
        let cpu_dir = root.join("devices/system/cpu");
        let read = |p: &Path| -> Result<String, TopologyError> {
            fs::read_to_string(p).map_err(|e| bad(p.display(), e.to_string()))
        };
        let online_path = cpu_dir.join("online");
        let online = parse_cpu_list(&read(&online_path)?)
            .ok_or_else(|| bad(online_path.display(), "not a CPU list"))?;
        let node_of = |cpu: u32| -> u32 {
            let Ok(dir) = fs::read_dir(root.join("devices/system/node")) else {
                return 0;
            };
            for e in dir.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let Some(n) = name.strip_prefix("node").and_then(|n| n.parse().ok()) else {
                    continue;
                };
                if let Ok(list) = fs::read_to_string(e.path().join("cpulist")) {
                    if parse_cpu_list(&list).is_some_and(|l| l.contains(&cpu)) {
                        return n;
                    }
                }
            }
            0
        };
        let mut cpus = Vec::new();
        for cpu in online {
            let base = cpu_dir.join(format!("cpu{cpu}"));
            let topo = base.join("topology");
            let list = |name: &str| -> Result<Vec<u32>, TopologyError> {
                let p = topo.join(name);
                parse_cpu_list(&read(&p)?).ok_or_else(|| bad(p.display(), "not a CPU list"))
            };
            let int = |name: &str| -> Result<u32, TopologyError> {
                let p = topo.join(name);
                let t = read(&p)?;
                // cluster_id is -1 on machines without clusters.
                Ok(t.trim()
                    .parse::<i64>()
                    .map_err(|_| bad(p.display(), "not an integer"))?
                    .max(0) as u32)
            };
            let smt = list("thread_siblings_list")?;
            let cluster = list("cluster_cpus_list").unwrap_or_else(|_| smt.clone());
            // The LLC is the highest cache level present; its shared_cpu_list spans it.
            let mut llc: Option<(u32, Vec<u32>)> = None;
            if let Ok(dir) = fs::read_dir(base.join("cache")) {
                for e in dir.flatten() {
                    let p = e.path();
                    let level = fs::read_to_string(p.join("level"))
                        .ok()
                        .and_then(|l| l.trim().parse::<u32>().ok());
                    let shared = fs::read_to_string(p.join("shared_cpu_list"))
                        .ok()
                        .and_then(|l| parse_cpu_list(&l));
                    if let (Some(level), Some(shared)) = (level, shared) {
                        if llc.as_ref().is_none_or(|(l, _)| level > *l) {
                            llc = Some((level, shared));
                        }
                    }
                }
            }
            let llc_cpus = llc.map(|(_, s)| s).unwrap_or_else(|| vec![cpu]);
            let capacity = fs::read_to_string(base.join("cpu_capacity"))
                .ok()
                .and_then(|c| c.trim().parse().ok())
                .unwrap_or(1024);
            cpus.push(CpuTopo {
                cpu,
                core: int("core_id")?,
                smt_siblings: smt,
                cluster: *cluster.iter().min().unwrap_or(&cpu),
                llc: *llc_cpus.iter().min().unwrap_or(&cpu),
                package: int("physical_package_id")?,
                node: node_of(cpu),
                capacity,
            });
        }
        Ok(Topology {
            source: "sysfs".into(),
            cpus,
        })
    }

    /// Reads and checks a JSON description.
    pub fn from_json_file(path: &Path) -> Result<Topology, TopologyError> {
        let text = fs::read_to_string(path).map_err(|e| bad(path.display(), e.to_string()))?;
        let t: Topology = serde_json::from_str(&text).map_err(|e| {
            bad(
                path.display(),
                format!("line {} column {}: {e}", e.line(), e.column()),
            )
        })?;
        t.validate()
            .map_err(|w| bad(path.display(), w.to_string()))?;
        Ok(t)
    }

    /// Every CPU listed once, and every sibling named is a listed CPU.
    pub fn validate(&self) -> Result<(), InvalidTopology> {
        let mut seen = std::collections::BTreeSet::new();
        for c in &self.cpus {
            if c.cpu >= crate::trace::MAX_CPUS {
                return Err(InvalidTopology::BeyondNrCpus(c.cpu));
            }
            if !seen.insert(c.cpu) {
                return Err(InvalidTopology::ListedTwice(c.cpu));
            }
        }
        for c in &self.cpus {
            if let Some(&sibling) = c.smt_siblings.iter().find(|s| !seen.contains(s)) {
                return Err(InvalidTopology::UnlistedSibling {
                    cpu: c.cpu,
                    sibling,
                });
            }
            if !c.smt_siblings.contains(&c.cpu) {
                return Err(InvalidTopology::NotOwnSibling(c.cpu));
            }
        }
        if self.cpus.is_empty() {
            return Err(InvalidTopology::NoCpus);
        }
        Ok(())
    }
}

/// Why a topology cannot describe a machine.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidTopology {
    /// A CPU number no kernel can have.
    #[error("CPU {0} is beyond the {max} CPUs a kernel can have (NR_CPUS)", max = crate::trace::MAX_CPUS)]
    BeyondNrCpus(u32),
    /// The same CPU number appears twice.
    #[error("CPU {0} is listed twice")]
    ListedTwice(u32),
    /// An SMT sibling that is not one of the listed CPUs.
    #[error("CPU {cpu} names SMT sibling {sibling}, which is not listed")]
    UnlistedSibling {
        /// The CPU whose sibling list is wrong.
        cpu: u32,
        /// The sibling it names.
        sibling: u32,
    },
    /// The kernel's sibling masks include the CPU itself.
    #[error("CPU {0}'s smt_siblings must include itself")]
    NotOwnSibling(u32),
    /// A machine without CPUs.
    #[error("no CPUs")]
    NoCpus,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(
            parse_cpu_list("0-3,8,10-11\n"),
            Some(vec![0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(parse_cpu_list("5"), Some(vec![5]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("a"), None);
    }

    #[test]
    fn this_machine_matches_nproc() {
        let t = Topology::from_sysfs(Path::new("/sys")).unwrap();
        let online = std::thread::available_parallelism().unwrap().get();
        assert!(
            t.cpus.len() >= online,
            "{} CPUs in sysfs, {online} usable",
            t.cpus.len()
        );
        t.validate().unwrap();
    }
}
