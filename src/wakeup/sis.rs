//! select_idle_sibling (v5.18–v6.6 order, no clusters), shared by every policy: target,
//! prev, per-CPU kthread stacking, recent_used_cpu, SMT siblings of prev, then
//! select_idle_cpu over target's LLC under the policy's budget. Counts Mel Gorman's SIS
//! statistics (July 2021 definitions) and the runqueues probed.

use serde::{Deserialize, Serialize};

use crate::policy::{Budget, Policy, ScanContext};
use crate::state::Machine;

/// Which step decided, as the decisions CSV names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Path {
    /// target (wake_affine's choice) was idle.
    Target,
    /// prev_cpu was idle and shares target's LLC.
    Prev,
    /// p->recent_used_cpu was idle and shares target's LLC.
    Recent,
    /// Stacked on prev behind the per-CPU kthread that woke the task there.
    Kthread,
    /// An idle SMT sibling of prev (select_idle_smt).
    Smt,
    /// A wholly idle core (select_idle_core).
    Core,
    /// An idle CPU from select_idle_cpu's scan, the idle-core scan's fallback, or the
    /// best idle CPU the policy refused (CAS).
    Cpu,
    /// The search found no idle CPU and fell back to the target.
    Failed,
}

impl Path {
    /// The path's name in the decisions CSV and the tables.
    pub fn name(self) -> &'static str {
        match self {
            Path::Target => "target",
            Path::Prev => "prev",
            Path::Recent => "recent",
            Path::Kthread => "kthread",
            Path::Smt => "smt",
            Path::Core => "core",
            Path::Cpu => "cpu",
            Path::Failed => "failed",
        }
    }
}

/// Mel Gorman's SIS counters (out-of-tree, July 2021).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SisCounters {
    /// sis_search: select_idle_sibling calls.
    pub search: u64,
    /// sis_domain_search: calls that got past target, prev, kthread and recent to the LLC.
    pub domain_search: u64,
    /// sis_scanned: 1 per call for target/prev/recent, plus 1 per CPU examined by the SMT,
    /// core and CPU scans.
    pub scanned: u64,
    /// sis_failed: calls that fell through to return target.
    pub failed: u64,
    /// sis_recent_hit: recent_used_cpu taken.
    pub recent_hit: u64,
    /// sis_recent_miss: recent_used_cpu (≠ prev, ≠ target) rejected.
    pub recent_miss: u64,
    /// sis_core_search: cores examined by the idle-core scan.
    pub core_search: u64,
    /// sis_core_failed: of those, cores not wholly idle.
    pub core_failed: u64,
}

impl SisCounters {
    /// Adds `o`'s counts to these.
    pub fn add(&mut self, o: &SisCounters) {
        self.search += o.search;
        self.domain_search += o.domain_search;
        self.scanned += o.scanned;
        self.failed += o.failed;
        self.recent_hit += o.recent_hit;
        self.recent_miss += o.recent_miss;
        self.core_search += o.core_search;
        self.core_failed += o.core_failed;
    }
}

/// The modelled cost of a search: a fixed entry cost plus a cost per runqueue probed.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct TimeModel {
    /// Cost of a search that probes anything, before the first runqueue (ns).
    pub entry_ns: u64,
    /// Cost of each runqueue probed (ns).
    pub probe_ns: u64,
}

impl Default for TimeModel {
    /// Seed 000's histogram: 224 netperf threads on a 112-CPU LLC spend mostly 16–128 µs
    /// per select_idle_cpu, with the whole LLC scanned; 112 probes at 350 ns plus 500 ns
    /// of entry is 39.7 µs, the histogram's mode bucket [32, 64).
    fn default() -> TimeModel {
        TimeModel {
            entry_ns: 500,
            probe_ns: 350,
        }
    }
}

/// One wakeup as the search sees it.
#[derive(Debug, Clone, Copy)]
pub struct Wakee {
    /// prev_cpu: the CPU the wakee last ran on.
    pub prev: u32,
    /// wake_affine's choice (or prev).
    pub target: u32,
    /// The CPU the wakeup runs on.
    pub waker_cpu: u32,
    /// The waker is a per-CPU kernel thread (PF_KTHREAD, nr_cpus_allowed == 1), known by
    /// its comm.
    pub waker_is_percpu_kthread: bool,
    /// Waker in task context (not hard or soft IRQ).
    pub in_task: bool,
    /// The wakee's p->recent_used_cpu before this wakeup; None when never set.
    pub recent_used_cpu: Option<u32>,
    /// When the wakeup happens (ns), for the policy's time-dependent state.
    pub now_ns: u64,
}

/// What one policy's select_idle_sibling chose for one wakee, and what it cost.
#[derive(Debug, Clone)]
pub struct Decision {
    /// The CPU chosen (target when nothing idle was found).
    pub cpu: u32,
    /// Which step chose it.
    pub path: Path,
    /// Runqueues examined in select_idle_cpu and select_idle_smt.
    pub probed: u32,
    /// Modelled search time: entry_ns + probed · probe_ns, 0 when nothing was probed (ns).
    pub search_ns: u64,
    /// This search's SIS counters.
    pub counters: SisCounters,
    /// The steps in words, when asked for.
    pub steps: Vec<String>,
}

struct Walk<'a> {
    caploads: &'a [u32],
    explain: bool,
    steps: Vec<String>,
}

impl Walk<'_> {
    fn note(&mut self, f: impl FnOnce() -> String) {
        if self.explain {
            self.steps.push(f());
        }
    }
    fn capload(&self, cpu: u32) -> u32 {
        self.caploads.get(cpu as usize).copied().unwrap_or(1023)
    }
}

/// select_idle_sibling for one wakee under one policy.
pub fn select_idle_sibling(
    m: &Machine,
    policy: &mut dyn Policy,
    w: &Wakee,
    time: &TimeModel,
    caploads: &[u32],
    explain: bool,
) -> Decision {
    let mut k = SisCounters {
        search: 1,
        scanned: 1,
        ..Default::default()
    };
    let mut walk = Walk {
        caploads,
        explain,
        steps: Vec::new(),
    };
    let topo = &m.topo;
    let (target, prev) = (w.target, w.prev);
    let usable = |walk: &Walk, cpu: u32| m.is_idle(cpu) && policy.accepts(cpu, walk.capload(cpu));
    let done = |cpu, path, probed: u32, k: SisCounters, walk: Walk| Decision {
        cpu,
        path,
        probed,
        search_ns: if probed > 0 {
            time.entry_ns + probed as u64 * time.probe_ns
        } else {
            0
        },
        counters: k,
        steps: walk.steps,
    };
    if usable(&walk, target) {
        walk.note(|| format!("target {target} idle, took it"));
        return done(target, Path::Target, 0, k, walk);
    }
    walk.note(|| format!("target {target} busy"));
    if prev != target && topo.share_cache(prev, target) && usable(&walk, prev) {
        walk.note(|| format!("prev {prev} idle, took it"));
        return done(prev, Path::Prev, 0, k, walk);
    }
    if prev != target {
        walk.note(|| format!("prev {prev} busy or in another LLC"));
    }
    if w.waker_is_percpu_kthread
        && w.in_task
        && prev == w.waker_cpu
        && m.cpus
            .get(prev as usize)
            .is_some_and(|c| c.nr_running() <= 1)
    {
        walk.note(|| format!("woken by a per-CPU kthread on prev {prev}: stacked there"));
        return done(prev, Path::Kthread, 0, k, walk);
    }
    if let Some(r) = w.recent_used_cpu {
        if r != prev && r != target {
            if topo.share_cache(r, target) && usable(&walk, r) {
                k.recent_hit += 1;
                walk.note(|| format!("recent {r} idle, took it"));
                return done(r, Path::Recent, 0, k, walk);
            }
            k.recent_miss += 1;
            walk.note(|| format!("recent {r} not usable"));
        }
    }
    k.domain_search += 1;
    let span = topo.llc_span(target);
    let mut probed = 0u32;
    // has_idle_cores taken as the truth (the kernel's hint can lag either way).
    let has_idle_core = topo.smt_active
        && span
            .iter()
            .any(|&c| topo.smt[c as usize].iter().all(|&s| m.is_idle(s)));
    if topo.smt_active && !has_idle_core && topo.share_cache(prev, target) {
        for &s in &topo.smt[prev as usize] {
            if s == prev || !span.contains(&s) {
                continue;
            }
            probed += 1;
            k.scanned += 1;
            if usable(&walk, s) {
                walk.note(|| format!("SMT sibling {s} of prev idle, took it"));
                return done(s, Path::Smt, probed, k, walk);
            }
        }
    }
    let ctx = ScanContext {
        llc: topo.llc(target),
        llc_size: span.len() as u32,
        waker_cpu: w.waker_cpu,
        waker_llc: topo.llc(w.waker_cpu),
        now_ns: w.now_ns,
        idle_core: has_idle_core,
    };
    let budget = policy.budget(&ctx);
    // Scan order: for_each_cpu_wrap from target + 1; target itself comes last.
    let start = span.iter().position(|&c| c > target).unwrap_or(0);
    let order = span[start..].iter().chain(span[..start].iter()).copied();
    if budget == Budget::Cpus(0) {
        walk.note(|| "budget 0: no scan".to_string());
    } else if has_idle_core {
        let mut removed: Vec<u32> = Vec::new();
        let mut fallback = None;
        for c in order {
            if removed.contains(&c) {
                continue;
            }
            k.core_search += 1;
            let sibs = &topo.smt[c as usize];
            let mut all_idle = true;
            for &s in sibs {
                probed += 1;
                k.scanned += 1;
                if m.is_idle(s) {
                    if fallback.is_none() && span.contains(&s) && policy.accepts(s, walk.capload(s))
                    {
                        fallback = Some(s);
                    }
                } else {
                    all_idle = false;
                }
            }
            if all_idle {
                walk.note(|| format!("idle core at {c}, took it"));
                return done(c, Path::Core, probed, k, walk);
            }
            k.core_failed += 1;
            removed.extend_from_slice(sibs);
        }
        if let Some(f) = fallback {
            walk.note(|| format!("no idle core; idle CPU {f} seen on the way"));
            return done(f, Path::Cpu, probed, k, walk);
        }
    } else {
        let limit = budget.cpus(span.len() as u32);
        walk.note(|| format!("budget {limit}"));
        let mut backup: Option<(u32, u32)> = None;
        let mut exhausted_budget = false;
        let mut found = None;
        let mut seen = Vec::new();
        for (examined, c) in order.enumerate() {
            if examined as u32 == limit {
                exhausted_budget = true;
                break;
            }
            probed += 1;
            k.scanned += 1;
            if walk.explain {
                seen.push(c);
            }
            if m.is_idle(c) {
                let cap = walk.capload(c);
                if policy.accepts(c, cap) {
                    found = Some(c);
                    break;
                }
                if backup.is_none_or(|(_, b)| cap > b) {
                    backup = Some((c, cap));
                }
            }
        }
        walk.note(|| format!("probed {seen:?}"));
        if !exhausted_budget || found.is_some() {
            policy.after_scan(&ctx, time.entry_ns + probed as u64 * time.probe_ns);
        }
        if let Some(c) = found.or(backup.map(|b| b.0)) {
            walk.note(|| format!("took {c}"));
            return done(c, Path::Cpu, probed, k, walk);
        }
    }
    k.failed += 1;
    walk.note(|| format!("no idle CPU found: target {target}"));
    done(target, Path::Failed, probed, k, walk)
}
