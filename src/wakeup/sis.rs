//! select_idle_sibling (v5.18–v6.6 order, no clusters), shared by every policy: target,
//! prev, per-CPU kthread stacking, recent_used_cpu, SMT siblings of prev, then
//! select_idle_cpu over target's LLC under the policy's budget. Counts Mel Gorman's SIS
//! statistics (July 2021 definitions) and the runqueues probed. The scans walk the LLC's
//! idle bitsets (`state::llc_idle`) rather than each runqueue, and count the runqueues
//! the kernel's walk would have probed on the way.

use serde::{Deserialize, Serialize};

use crate::policy::{Budget, Policy, ScanContext};
use crate::state::bitset::ones_wrapping;
use crate::state::llc_idle::LlcMasks;
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
    /// The search looked for an idle core and found none: the kernel clears the LLC's
    /// has_idle_cores hint (set_idle_cores(target, false)).
    pub cleared_idle_cores: bool,
    /// The CPUs the policy let select_idle_cpu examine (SIS_UTIL's nr_idle_scan, the LLC's
    /// size without a limit); None when the search ended before select_idle_cpu.
    pub budget: Option<u32>,
}

/// One search in progress: what it reads, and what it has counted, probed and noted so
/// far.
struct Search<'a> {
    m: &'a Machine,
    policy: &'a mut dyn Policy,
    time: &'a TimeModel,
    caploads: &'a [u32],
    explain: bool,
    steps: Vec<String>,
    k: SisCounters,
    /// Runqueues examined in select_idle_cpu and select_idle_smt.
    probed: u32,
    /// The policy's budget, once select_idle_cpu asked for it.
    budget: Option<u32>,
}

impl Search<'_> {
    fn note(&mut self, f: impl FnOnce() -> String) {
        if self.explain {
            self.steps.push(f());
        }
    }

    fn capload(&self, cpu: u32) -> u32 {
        self.caploads.get(cpu as usize).copied().unwrap_or(1023)
    }

    /// Idle, and one the policy takes (capacity-aware policies turn some down).
    fn usable(&self, cpu: u32) -> bool {
        self.m.is_idle(cpu) && self.policy.accepts(cpu, self.capload(cpu))
    }

    /// Ends the search on `cpu`, decided by `path`; a search that probed no runqueue
    /// costs nothing in the time model.
    fn done(self, cpu: u32, path: Path) -> Decision {
        let probed = self.probed;
        Decision {
            cpu,
            path,
            probed,
            search_ns: if probed > 0 {
                self.time.entry_ns + probed as u64 * self.time.probe_ns
            } else {
                0
            },
            counters: self.k,
            steps: self.steps,
            cleared_idle_cores: false,
            budget: self.budget,
        }
    }

    /// The checks before any scan, in the kernel's order: target, prev (in target's
    /// LLC), prev when woken by a per-CPU kthread running there, recent_used_cpu.
    fn early_pick(&mut self, w: &Wakee) -> Option<(u32, Path)> {
        let (m, topo) = (self.m, &self.m.topo);
        let (target, prev) = (w.target, w.prev);
        if self.usable(target) {
            self.note(|| format!("target {target} idle, took it"));
            return Some((target, Path::Target));
        }
        self.note(|| format!("target {target} busy"));
        if prev != target && topo.share_cache(prev, target) && self.usable(prev) {
            self.note(|| format!("prev {prev} idle, took it"));
            return Some((prev, Path::Prev));
        }
        if prev != target {
            self.note(|| format!("prev {prev} busy or in another LLC"));
        }
        if w.waker_is_percpu_kthread
            && w.in_task
            && prev == w.waker_cpu
            && m.cpus
                .get(prev as usize)
                .is_some_and(|c| c.nr_running() <= 1)
        {
            self.note(|| format!("woken by a per-CPU kthread on prev {prev}: stacked there"));
            return Some((prev, Path::Kthread));
        }
        if let Some(r) = w.recent_used_cpu {
            if r != prev && r != target {
                if topo.share_cache(r, target) && self.usable(r) {
                    self.k.recent_hit += 1;
                    self.note(|| format!("recent {r} idle, took it"));
                    return Some((r, Path::Recent));
                }
                self.k.recent_miss += 1;
                self.note(|| format!("recent {r} not usable"));
            }
        }
        None
    }

    /// select_idle_smt: with no idle core in the LLC, prev's SMT siblings in target's
    /// LLC, in order.
    fn select_idle_smt(&mut self, w: &Wakee, has_idle_core: bool) -> Option<u32> {
        let topo = &self.m.topo;
        if !topo.smt_active || has_idle_core || !topo.share_cache(w.prev, w.target) {
            return None;
        }
        // In target's LLC span: the span is the CPUs whose LLC id is target's.
        let llc = topo.llc(w.target);
        for &s in &topo.smt[w.prev as usize] {
            if s == w.prev || topo.llc_of.get(s as usize) != Some(&llc) {
                continue;
            }
            self.probed += 1;
            self.k.scanned += 1;
            if self.usable(s) {
                self.note(|| format!("SMT sibling {s} of prev idle, took it"));
                return Some(s);
            }
        }
        None
    }

    /// select_idle_cpu with an idle core in the LLC: select_idle_core on each core in
    /// scan order from span position `start`, unbounded, taking the first wholly idle
    /// core, else the first idle CPU seen on the way. The walk jumps between set bits
    /// of the LLC's masks; the cores it met on the way, each probed CPU by CPU by the
    /// kernel, are counted from the bitset of where a walk from `start` meets each core.
    fn select_idle_core(
        &mut self,
        span: &[u32],
        masks: &LlcMasks,
        start: usize,
    ) -> Option<(u32, Path)> {
        let Some(walks) = &masks.core_walks else {
            let order = span[start..].iter().chain(&span[..start]).copied();
            return self.select_idle_core_by_cpu(order, span);
        };
        let n = span.len();
        let at = |d: usize| span[(start + d) % n];
        if let Some(d) = ones_wrapping(|i| masks.core_idle.word(i), n, start, n).next() {
            let (cores, cpus) = walks.met(start, d + 1);
            self.k.core_search += cores as u64;
            self.k.core_failed += cores as u64 - 1;
            self.probed += cpus;
            self.k.scanned += cpus as u64;
            let c = at(d);
            self.note(|| format!("idle core at {c}, took it"));
            return Some((c, Path::Core));
        }
        // Every core met and failed, each CPU probed once.
        self.k.core_search += walks.cores as u64;
        self.k.core_failed += walks.cores as u64;
        self.probed += n as u32;
        self.k.scanned += n as u64;
        // The first core met with an idle CPU the policy takes; in it, the first such
        // CPU in SMT-list order.
        let first = &walks.first_met[start];
        let has_idle = |i| first.word(i) & masks.core_has_idle.word(i);
        let (m, topo) = (self.m, &self.m.topo);
        let f = ones_wrapping(has_idle, n, start, n).find_map(|d| {
            topo.smt[at(d) as usize]
                .iter()
                .copied()
                .find(|&s| m.llc_idle().is_idle(s) && self.policy.accepts(s, self.capload(s)))
        })?;
        self.note(|| format!("no idle core; idle CPU {f} seen on the way"));
        Some((f, Path::Cpu))
    }

    /// select_idle_core CPU by CPU, for an LLC whose SMT lists do not split it into
    /// cores (a hand-written topology): a core is skipped when an earlier core's list
    /// named it.
    fn select_idle_core_by_cpu(
        &mut self,
        order: impl Iterator<Item = u32>,
        span: &[u32],
    ) -> Option<(u32, Path)> {
        let (m, topo) = (self.m, &self.m.topo);
        let mut removed: Vec<u32> = Vec::new();
        let mut fallback = None;
        for c in order {
            if removed.contains(&c) {
                continue;
            }
            self.k.core_search += 1;
            let sibs = &topo.smt[c as usize];
            let mut all_idle = true;
            for &s in sibs {
                self.probed += 1;
                self.k.scanned += 1;
                if m.is_idle(s) {
                    if fallback.is_none()
                        && span.contains(&s)
                        && self.policy.accepts(s, self.capload(s))
                    {
                        fallback = Some(s);
                    }
                } else {
                    all_idle = false;
                }
            }
            if all_idle {
                self.note(|| format!("idle core at {c}, took it"));
                return Some((c, Path::Core));
            }
            self.k.core_failed += 1;
            removed.extend_from_slice(sibs);
        }
        let f = fallback?;
        self.note(|| format!("no idle core; idle CPU {f} seen on the way"));
        Some((f, Path::Cpu))
    }

    /// select_idle_cpu without an idle core: up to the policy's budget of CPUs in scan
    /// order from span position `start`, taking the first idle one the policy accepts,
    /// else the idle one with the most spare capacity seen. The walk jumps between the
    /// idle bits of the LLC's mask; every runqueue up to the CPU taken (or the whole
    /// budget) counts as probed, busy ones included, as the kernel's nr does. The
    /// policy hears the scan's cost unless the budget ran out with nothing found.
    fn scan_cpus(
        &mut self,
        ctx: &ScanContext,
        budget: Budget,
        span: &[u32],
        masks: &LlcMasks,
        start: usize,
    ) -> Option<u32> {
        let n = span.len();
        let limit = budget.cpus(ctx.llc_size);
        self.note(|| format!("budget {limit}"));
        let mut backup: Option<(u32, u32)> = None;
        let mut found = None;
        let mut visited = limit;
        for d in ones_wrapping(|i| masks.idle.word(i), n, start, limit as usize) {
            let c = span[(start + d) % n];
            let cap = self.capload(c);
            if self.policy.accepts(c, cap) {
                found = Some(c);
                visited = d as u32 + 1;
                break;
            }
            if backup.is_none_or(|(_, b)| cap > b) {
                backup = Some((c, cap));
            }
        }
        self.probed += visited;
        self.k.scanned += visited as u64;
        self.note(|| {
            let seen: Vec<u32> = (0..visited as usize)
                .map(|d| span[(start + d) % n])
                .collect();
            format!("probed {seen:?}")
        });
        let exhausted_budget = found.is_none() && (limit as usize) < n;
        if !exhausted_budget {
            let cost = self.time.entry_ns + self.probed as u64 * self.time.probe_ns;
            self.policy.after_scan(ctx, cost);
        }
        let c = found.or(backup.map(|b| b.0))?;
        self.note(|| format!("took {c}"));
        Some(c)
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
    let mut s = Search {
        m,
        policy,
        time,
        caploads,
        explain,
        steps: Vec::new(),
        k: SisCounters {
            search: 1,
            scanned: 1,
            ..Default::default()
        },
        probed: 0,
        budget: None,
    };
    if let Some((cpu, path)) = s.early_pick(w) {
        return s.done(cpu, path);
    }
    s.k.domain_search += 1;
    let topo = &m.topo;
    let target = w.target;
    let span = topo.llc_span(target);
    // test_idle_cores: the kernel's hint, which can stay set after the cores filled.
    let has_idle_core = m.has_idle_cores(target);
    if let Some(cpu) = s.select_idle_smt(w, has_idle_core) {
        return s.done(cpu, Path::Smt);
    }
    let ctx = ScanContext {
        llc: topo.llc(target),
        llc_size: span.len() as u32,
        waker_cpu: w.waker_cpu,
        waker_llc: topo.llc(w.waker_cpu),
        now_ns: w.now_ns,
        idle_core: has_idle_core,
    };
    let budget = s.policy.budget(&ctx);
    s.budget = Some(budget.cpus(ctx.llc_size));
    // Scan order: for_each_cpu_wrap from target + 1; target itself comes last.
    let after_target = match m.llc_idle().position(target) {
        Some(pos) => pos + 1,
        None => span.partition_point(|&c| c <= target),
    };
    let start = if after_target == span.len() {
        0
    } else {
        after_target
    };
    let masks = m.llc_idle().of(topo, target);
    let scans = budget != Budget::Cpus(0);
    let picked = if !scans {
        s.note(|| "budget 0: no scan".to_string());
        None
    } else if has_idle_core {
        s.select_idle_core(span, masks, start)
    } else {
        s.scan_cpus(&ctx, budget, span, masks, start)
            .map(|c| (c, Path::Cpu))
    };
    // A search for an idle core that took none: the kernel clears the hint.
    let cleared_idle_cores = scans && has_idle_core && !matches!(picked, Some((_, Path::Core)));
    let mut d = match picked {
        Some((cpu, path)) => s.done(cpu, path),
        None => {
            s.k.failed += 1;
            s.note(|| format!("no idle CPU found: target {target}"));
            s.done(target, Path::Failed)
        }
    };
    d.cleared_idle_cores = cleared_idle_cores;
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{PolicyInfo, ScanContext};
    use crate::state::Topo;
    use crate::topology::Topology;
    use crate::trace::event::build::{switch, wakeup};

    /// A policy that takes idle CPUs whose capload reaches `cutoff` (0: every one) and
    /// writes down the scan costs it hears.
    #[derive(Clone)]
    struct Picky {
        cutoff: u32,
        heard: Vec<u64>,
    }

    impl Policy for Picky {
        fn info(&self) -> &'static PolicyInfo {
            &crate::policy::no_limit::INFO
        }
        fn budget(&mut self, _: &ScanContext) -> Budget {
            Budget::Unlimited
        }
        fn after_scan(&mut self, _: &ScanContext, cost_ns: u64) {
            self.heard.push(cost_ns);
        }
        fn accepts(&self, _: u32, capload: u32) -> bool {
            capload >= self.cutoff
        }
    }

    /// select_idle_cpu's scan as the kernel writes it, CPU by CPU over the runqueues:
    /// the reference the bitset walk must match.
    fn scan_cpus_by_cpu(
        s: &mut Search,
        ctx: &ScanContext,
        budget: Budget,
        order: impl Iterator<Item = u32>,
    ) -> Option<u32> {
        let m = s.m;
        let limit = budget.cpus(ctx.llc_size);
        s.note(|| format!("budget {limit}"));
        let mut backup: Option<(u32, u32)> = None;
        let mut exhausted_budget = false;
        let mut found = None;
        let mut seen = Vec::new();
        for (examined, c) in order.enumerate() {
            if examined as u32 == limit {
                exhausted_budget = true;
                break;
            }
            s.probed += 1;
            s.k.scanned += 1;
            if s.explain {
                seen.push(c);
            }
            if m.runqueue_idle(c) {
                let cap = s.capload(c);
                if s.policy.accepts(c, cap) {
                    found = Some(c);
                    break;
                }
                if backup.is_none_or(|(_, b)| cap > b) {
                    backup = Some((c, cap));
                }
            }
        }
        s.note(|| format!("probed {seen:?}"));
        if !exhausted_budget || found.is_some() {
            let cost = s.time.entry_ns + s.probed as u64 * s.time.probe_ns;
            s.policy.after_scan(ctx, cost);
        }
        let c = found.or(backup.map(|b| b.0))?;
        s.note(|| format!("took {c}"));
        Some(c)
    }

    fn search<'a>(
        m: &'a Machine,
        policy: &'a mut Picky,
        time: &'a TimeModel,
        caploads: &'a [u32],
        explain: bool,
    ) -> Search<'a> {
        Search {
            m,
            policy,
            time,
            caploads,
            explain,
            steps: Vec::new(),
            k: SisCounters::default(),
            probed: 0,
            budget: None,
        }
    }

    /// Machines whose LLCs are larger than a word, SMT lists that split them into cores
    /// (interleaved as Linux numbers threads, adjacent, 4-way, of mixed sizes) and ones
    /// that do not.
    fn topologies() -> Vec<(&'static str, Topo)> {
        let spr = crate::presets::lookup("spr-2s112").unwrap();
        let with = |n: u32, llc: &dyn Fn(u32) -> u32, smt: &dyn Fn(u32) -> Vec<u32>| {
            let mut t = Topology::flat(n);
            for c in &mut t.cpus {
                c.llc = llc(c.cpu);
                c.smt_siblings = smt(c.cpu);
            }
            t
        };
        let adjacent = with(160, &|c| c / 80 * 80, &|c| vec![c & !1, c | 1]);
        let four = with(96, &|_| 0, &|c| (0..4).map(|t| c / 4 * 4 + t).collect());
        // Sibling lists that disagree: 1 names 0, 0 names only itself.
        let lopsided = with(70, &|_| 0, &|c| if c == 1 { vec![0, 1] } else { vec![c] });
        vec![
            ("spr-2s112", Topo::new(&spr.shape.topology(spr.name), 224)),
            ("flat-130", Topo::new(&Topology::flat(130), 130)),
            ("adjacent-2x80", Topo::new(&adjacent, 160)),
            ("smt4-96", Topo::new(&four, 96)),
            // CPUs 160..200 are not described: single-thread cores in LLC 0.
            ("adjacent-and-unlisted", Topo::new(&adjacent, 200)),
            ("lopsided", Topo::new(&lopsided, 70)),
        ]
    }

    /// Changes one CPU the way events do: a task starts or blocks, a wakeup queues a
    /// task (new, or one queued elsewhere), an IPI wakeup is pending, the CPU idles.
    fn stir(m: &mut Machine, rng: &mut fastrand::Rng, ts: u64, next_pid: &mut i32) {
        let n = m.topo.nr_cpus;
        let c = rng.u32(0..n);
        let curr = m.cpus[c as usize].curr;
        *next_pid += 1;
        match rng.u32(0..6) {
            0 | 1 => {
                m.apply(&switch(ts, c, curr, 1, *next_pid));
            }
            2 => {
                m.apply(&switch(ts, c, curr, 1, 0));
            }
            3 => {
                m.apply(&wakeup(ts, c, 0, *next_pid, c));
            }
            4 => {
                let other = rng.u32(0..n);
                if let Some(&p) = m.cpus[other as usize].queued.first() {
                    if m.cpus[other as usize].curr != p {
                        m.apply(&wakeup(ts, c, 0, p, c));
                    }
                }
            }
            _ => m.add_pending_wakeup(c),
        }
    }

    /// For random idle patterns, targets, budgets and policies that refuse some idle
    /// CPUs, the bitset walks take the same CPU, probe and count the same runqueues,
    /// tell the policy the same costs and explain the same steps as the walks CPU by
    /// CPU; and the bitsets always say what the runqueues say.
    #[test]
    fn the_bitset_walks_agree_with_the_walks_cpu_by_cpu() {
        let mut rng = fastrand::Rng::with_seed(2021);
        let time = TimeModel::default();
        // How often the scan took an accepted CPU, a refused one or none, and the core
        // walk a core, a CPU or none: each must happen for the test to mean anything.
        let mut outcomes = [0u32; 6];
        for (name, topo) in topologies() {
            let mut m = Machine::new(topo);
            let n = m.topo.nr_cpus;
            let (mut ts, mut next_pid) = (1_000u64, 1000);
            for round in 0..300 {
                // Fill up towards a random share of busy CPUs, so that walks find
                // idle cores, only idle CPUs, or nothing.
                let busy_share = rng.f64();
                for _ in 0..rng.u32(1..n) {
                    ts += 100;
                    let c = rng.u32(0..n);
                    if rng.f64() < busy_share {
                        stir(&mut m, &mut rng, ts, &mut next_pid);
                    } else if m.cpus[c as usize].curr != 0 || !m.is_idle(c) {
                        let curr = m.cpus[c as usize].curr;
                        m.apply(&switch(ts, c, curr, 1, 0));
                    }
                }
                assert!(m.llc_idle_agrees(), "{name} round {round}");
                let caploads: Vec<u32> = (0..n).map(|_| rng.u32(0..1024)).collect();
                for _ in 0..20 {
                    let target = rng.u32(0..n);
                    let span = m.topo.llc_span(target);
                    let start = match span.partition_point(|&c| c <= target) {
                        i if i == span.len() => 0,
                        i => i,
                    };
                    // select_idle_sibling finds the start from target's position.
                    let pos = m.llc_idle().position(target);
                    assert_eq!(pos.map(|p| (p + 1) % span.len()), Some(start));
                    let order = || span[start..].iter().chain(&span[..start]).copied();
                    let masks = m.llc_idle().of(&m.topo, target);
                    let budget = match rng.u32(0..3) {
                        0 => Budget::Unlimited,
                        _ => Budget::Cpus(rng.u32(1..=span.len() as u32 + 2)),
                    };
                    let picky = Picky {
                        cutoff: if rng.bool() { 0 } else { rng.u32(0..1024) },
                        heard: Vec::new(),
                    };
                    let ctx = ScanContext {
                        llc: m.topo.llc(target),
                        llc_size: span.len() as u32,
                        ..Default::default()
                    };
                    let explain = rng.bool();
                    let cutoff = picky.cutoff;
                    let (mut p_fast, mut p_ref) = (picky.clone(), picky);
                    let what = format!("{name} round {round} target {target} {budget:?}");
                    let (mut fast, mut reference) = (
                        search(&m, &mut p_fast, &time, &caploads, explain),
                        search(&m, &mut p_ref, &time, &caploads, explain),
                    );
                    let got = fast.scan_cpus(&ctx, budget, span, masks, start);
                    let want = scan_cpus_by_cpu(&mut reference, &ctx, budget, order());
                    assert_eq!(got, want, "scan: {what}");
                    outcomes[match got {
                        None => 0,
                        Some(c) if caploads[c as usize] >= cutoff => 1,
                        Some(_) => 2,
                    }] += 1;
                    assert_eq!(fast.probed, reference.probed, "scan: {what}");
                    assert_eq!(fast.k, reference.k, "scan: {what}");
                    assert_eq!(fast.steps, reference.steps, "scan: {what}");
                    drop((fast, reference));
                    assert_eq!(p_fast.heard, p_ref.heard, "scan: {what}");

                    let (mut fast, mut reference) = (
                        search(&m, &mut p_fast, &time, &caploads, explain),
                        search(&m, &mut p_ref, &time, &caploads, explain),
                    );
                    let got = fast.select_idle_core(span, masks, start);
                    let want = reference.select_idle_core_by_cpu(order(), span);
                    assert_eq!(got, want, "core: {what}");
                    outcomes[match got {
                        Some((_, Path::Core)) => 3,
                        Some(_) => 4,
                        None => 5,
                    }] += 1;
                    assert_eq!(fast.probed, reference.probed, "core: {what}");
                    assert_eq!(fast.k, reference.k, "core: {what}");
                    assert_eq!(fast.steps, reference.steps, "core: {what}");
                }
            }
        }
        assert!(outcomes.iter().all(|&n| n > 100), "{outcomes:?}");
    }
}
