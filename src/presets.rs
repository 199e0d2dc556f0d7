//! Machines nobody here has, described as the seeds describe them, for synthetic
//! workloads and simulation: `sisreplay machines` lists them. CPUs are numbered as Linux
//! numbers them on these parts: first thread 0 of every core (socket by socket), then
//! thread 1 of every core in the same order.

use crate::topology::{CpuTopo, Topology};

/// A preset's shape.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Sockets (packages).
    pub sockets: u32,
    /// NUMA nodes in each socket.
    pub nodes_per_socket: u32,
    /// LLCs in each NUMA node.
    pub llcs_per_node: u32,
    /// Cores sharing each LLC.
    pub cores_per_llc: u32,
    /// Cores per cluster (a shared L2 or cluster tag); equal to cores_per_llc when none.
    pub cores_per_cluster: u32,
    /// Hardware threads per core (SMT width; 1 without SMT).
    pub threads: u32,
}

/// A named machine a seed describes, for `--machine NAME`.
pub struct Preset {
    /// The name `--machine` takes (`spr-2s112`).
    pub name: &'static str,
    /// Its sockets, nodes, LLCs, clusters and cores.
    pub shape: Shape,
    /// Where the description comes from and what is assumed.
    pub source: &'static str,
}

/// Every preset, in the order `sisreplay machines` lists them.
pub const PRESETS: &[Preset] = &[
    Preset {
        name: "spr-2s112",
        shape: Shape {
            sockets: 2,
            nodes_per_socket: 1,
            llcs_per_node: 1,
            cores_per_llc: 56,
            cores_per_cluster: 56,
            threads: 2,
        },
        source: "seed 000 (SIS_UTIL v3): Sapphire Rapids, 2 sockets of 56 cores with SMT2, \
                 112 CPUs per LLC, netperf and tbench at 28..224 threads",
    },
    Preset {
        name: "kunpeng920",
        shape: Shape {
            sockets: 2,
            nodes_per_socket: 2,
            llcs_per_node: 1,
            cores_per_llc: 32,
            cores_per_cluster: 4,
            threads: 1,
        },
        source: "seed 001 (SIS_UTIL review, CLS->LLC): Kunpeng 920, 2 sockets of 2 NUMA nodes, \
                 32 cores per node sharing an LLC, clusters of 4 cores, no SMT",
    },
    Preset {
        name: "hygon-384",
        shape: Shape {
            sockets: 2,
            nodes_per_socket: 4,
            llcs_per_node: 3,
            cores_per_llc: 8,
            cores_per_cluster: 8,
            threads: 2,
        },
        source: "seed 002 (newidle balance restricted to the LLC): Hygon 7447v, 384 logical \
                 CPUs in 2 sockets of 96 cores with SMT2. Assumed: the Zen-derived layout of \
                 8 cores (16 CPUs) per die sharing its L3, 3 dies per NUMA node, 4 nodes per \
                 socket; the seed says only that LLCs are dies and that pulls cross NUMA nodes",
    },
    Preset {
        name: "x86-40",
        shape: Shape {
            sockets: 2,
            nodes_per_socket: 1,
            llcs_per_node: 1,
            cores_per_llc: 10,
            cores_per_cluster: 10,
            threads: 2,
        },
        source: "seed 004 (capacity-aware idle selection): a 40-CPU x86 machine, 2 sockets of \
                 10 cores with SMT2, one LLC per socket",
    },
];

/// The preset called `name`.
pub fn lookup(name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.name == name)
}

impl Shape {
    /// Cores in the whole machine.
    pub fn cores(&self) -> u32 {
        self.sockets * self.nodes_per_socket * self.llcs_per_node * self.cores_per_llc
    }

    /// CPUs (hardware threads) in the whole machine.
    pub fn cpus(&self) -> u32 {
        self.cores() * self.threads
    }

    /// The topology, CPU ids as Linux numbers them.
    pub fn topology(&self, source: &str) -> Topology {
        let cores = self.cores();
        let cores_per_node = self.llcs_per_node * self.cores_per_llc;
        let cores_per_socket = self.nodes_per_socket * cores_per_node;
        let mut cpus = Vec::with_capacity(self.cpus() as usize);
        for thread in 0..self.threads {
            for core in 0..cores {
                let siblings: Vec<u32> = (0..self.threads).map(|t| t * cores + core).collect();
                // LLC and cluster ids are their lowest CPU: thread 0 of their first core.
                let llc_first = core / self.cores_per_llc * self.cores_per_llc;
                let cluster_first = core / self.cores_per_cluster * self.cores_per_cluster;
                cpus.push(CpuTopo {
                    cpu: thread * cores + core,
                    core,
                    smt_siblings: siblings,
                    cluster: cluster_first,
                    llc: llc_first,
                    package: core / cores_per_socket,
                    node: core / cores_per_node,
                    capacity: 1024,
                });
            }
        }
        Topology {
            source: source.to_string(),
            cpus,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Topo;

    #[test]
    fn spr_has_two_llcs_of_112_cpus_with_linux_numbering() {
        let p = lookup("spr-2s112").unwrap();
        let t = p.shape.topology(p.source);
        assert_eq!(t.cpus.len(), 224);
        t.validate().unwrap();
        let topo = Topo::new(&t, 224);
        assert_eq!(topo.llc_cpus.len(), 2);
        assert!(topo.llc_cpus.values().all(|v| v.len() == 112));
        // CPU 0's sibling is CPU 112, both in socket 0's LLC with CPU 55, not CPU 56.
        assert!(topo.same_core(0, 112));
        assert!(topo.share_cache(0, 55) && topo.share_cache(0, 167));
        assert!(!topo.share_cache(0, 56));
    }

    #[test]
    fn kunpeng_has_four_nodes_of_one_32_core_llc() {
        let p = lookup("kunpeng920").unwrap();
        let t = p.shape.topology(p.source);
        assert_eq!(t.cpus.len(), 128);
        let nodes: std::collections::BTreeSet<u32> = t.cpus.iter().map(|c| c.node).collect();
        assert_eq!(nodes.len(), 4);
        let topo = Topo::new(&t, 128);
        assert_eq!(topo.llc_cpus.len(), 4);
        assert!(!topo.smt_active);
        assert_eq!(t.cpus[5].cluster, 4);
        assert_eq!(t.cpus[33].package, 0);
        assert_eq!(t.cpus[64].package, 1);
    }

    #[test]
    fn hygon_and_x86_40_sizes() {
        let h = lookup("hygon-384").unwrap().shape;
        assert_eq!(
            (h.cpus(), h.sockets * h.nodes_per_socket * h.llcs_per_node),
            (384, 24)
        );
        let x = lookup("x86-40").unwrap().shape;
        assert_eq!(x.cpus(), 40);
        let t = x.topology("x");
        assert_eq!(Topo::new(&t, 40).llc_cpus.len(), 2);
    }
}
