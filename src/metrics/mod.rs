//! What replay counts per policy: SIS counters and both sets of derived percentages,
//! histograms of runqueues probed and of search time, placements by distance, rq-lock
//! traffic, and agreement with the recorded placements; and what the trace itself shows.

pub mod calibration;
pub mod kernel_sis;
pub mod observed;
pub mod windows;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::state::Topo;
use crate::wakeup::sis::{self, Path, SisCounters};
use windows::Slot;

/// The percentages derived from SIS counters, in Chen Yu's schedstat_parse.py and in
/// mmtests' MonitorProcschedstat.pm definitions (kernel-model.md §7.2).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Derived {
    /// schedstat_parse.py: 100·(search − failed)/scanned.
    pub se_eff: f64,
    /// schedstat_parse.py: 100·(domain_search − failed)/(scanned − fast).
    pub dom_eff: f64,
    /// 100·(search − domain_search)/search (both definitions).
    pub fast_rate: f64,
    /// schedstat_parse.py: 100·(search − failed)/search.
    pub success_rate: f64,
    /// mmtests "SIS Search Efficiency": 100·search/scanned (100 when nothing scanned).
    pub mm_search_eff: f64,
    /// mmtests "Domain Search Eff": 100·domain_search/domain_scanned.
    pub mm_domain_eff: f64,
    /// mmtests "Recent Success Rate": 100·hit/(hit + miss).
    pub mm_recent_success: f64,
}

fn pct(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        100.0 * a / b
    } else {
        0.0
    }
}

impl Derived {
    /// The percentages of `k`; a ratio whose denominator is 0 is 0 (mm_search_eff: 100).
    pub fn of(k: &SisCounters) -> Derived {
        let (search, dom, scanned, failed) = (
            k.search as f64,
            k.domain_search as f64,
            k.scanned as f64,
            k.failed as f64,
        );
        let fast = search - dom;
        let domain_scanned = scanned - fast;
        Derived {
            se_eff: pct(search - failed, scanned),
            dom_eff: pct(dom - failed, domain_scanned),
            fast_rate: pct(fast, search),
            success_rate: pct(search - failed, search),
            mm_search_eff: if scanned == 0.0 {
                100.0
            } else {
                pct(search, scanned)
            },
            mm_domain_eff: pct(dom, domain_scanned),
            mm_recent_success: pct(k.recent_hit as f64, (k.recent_hit + k.recent_miss) as f64),
        }
    }
}

/// A log2 histogram of microseconds, bucketed as bpftrace's hist(): `[0]`, `[1]`, `[2, 4)`, ...
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Log2Hist {
    /// Samples per bucket, indexed as in [`Log2Hist::add`]; up to the highest one used.
    pub buckets: Vec<u64>,
}

impl Log2Hist {
    /// Bucket 0 holds 0, bucket i ≥ 1 holds [2^(i−1), 2^i).
    pub fn add(&mut self, v: u64) {
        self.add_n(v, 1);
    }

    /// Adds `n` samples of value `v`.
    pub fn add_n(&mut self, v: u64, n: u64) {
        let i = if v == 0 {
            0
        } else {
            64 - v.leading_zeros() as usize
        };
        if self.buckets.len() <= i {
            self.buckets.resize(i + 1, 0);
        }
        self.buckets[i] += n;
    }

    /// Adds another histogram's samples.
    pub fn merge(&mut self, o: &Log2Hist) {
        if self.buckets.len() < o.buckets.len() {
            self.buckets.resize(o.buckets.len(), 0);
        }
        for (a, b) in self.buckets.iter_mut().zip(&o.buckets) {
            *a += b;
        }
    }

    /// bpftrace's label of bucket i.
    pub fn label(i: usize) -> String {
        fn unit(v: u64) -> String {
            match v {
                v if v >= 1 << 20 && v % (1 << 20) == 0 => format!("{}M", v >> 20),
                v if v >= 1 << 10 && v % (1 << 10) == 0 => format!("{}K", v >> 10),
                v => v.to_string(),
            }
        }
        match i {
            0 => "[0]".into(),
            1 => "[1]".into(),
            i => format!("[{}, {})", unit(1 << (i - 1)), unit(1 << i)),
        }
    }
}

/// How far a task moved: how placements are counted and what a move costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distance {
    /// Did not move.
    SameCpu,
    /// Another CPU sharing the LLC (cpus_share_cache).
    SameLlc,
    /// Another LLC in the same NUMA node.
    CrossLlc,
    /// Another NUMA node.
    CrossNuma,
}

impl Distance {
    /// The distance from CPU `from` to CPU `to`.
    pub fn between(topo: &Topo, from: u32, to: u32) -> Distance {
        if from == to {
            Distance::SameCpu
        } else if topo.share_cache(from, to) {
            Distance::SameLlc
        } else if topo.node_of.get(from as usize) != topo.node_of.get(to as usize) {
            Distance::CrossNuma
        } else {
            Distance::CrossLlc
        }
    }
}

/// Where a wakee ended up relative to its previous CPU.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Placements {
    /// Wakeups placed on prev_cpu itself.
    pub same_cpu: u64,
    /// Wakeups placed on another CPU of prev_cpu's LLC.
    pub same_llc: u64,
    /// Wakeups placed in another LLC of prev_cpu's NUMA node.
    pub cross_llc: u64,
    /// Wakeups placed on another NUMA node than prev_cpu's.
    pub cross_numa: u64,
}

impl Placements {
    /// Counts a move from `from` to `to` by its distance.
    pub fn count(&mut self, topo: &Topo, from: u32, to: u32) {
        *match Distance::between(topo, from, to) {
            Distance::SameCpu => &mut self.same_cpu,
            Distance::SameLlc => &mut self.same_llc,
            Distance::CrossLlc => &mut self.cross_llc,
            Distance::CrossNuma => &mut self.cross_numa,
        } += 1;
    }

    /// Adds another count's placements.
    pub fn merge(&mut self, o: &Placements) {
        self.same_cpu += o.same_cpu;
        self.same_llc += o.same_llc;
        self.cross_llc += o.cross_llc;
        self.cross_numa += o.cross_numa;
    }
}

/// One replayed wakeup as the fidelity accounting sees it.
#[derive(Debug, Clone, Copy)]
pub struct Decision {
    /// Trace time of the sched_waking (ns).
    pub now_ns: u64,
    /// The path the model's search took.
    pub path: Path,
    /// The step of select_task_rq_fair that chose the target (wake_wide,
    /// wake_affine_idle, wake_affine_weight, waker is prev).
    pub stage: &'static str,
    /// prev_cpu: the wakee's CPU at sched_waking (its target_cpu field).
    pub prev: u32,
    /// The CPU sched_waking was recorded on.
    pub waker_cpu: u32,
    /// The CPU the model chose.
    pub predicted: u32,
    /// The CPU the kernel chose (sched_wakeup's target_cpu).
    pub recorded: u32,
    /// Activated through the IPI wakelist (recorded on the target later).
    pub ipi: bool,
    /// What the kernel's select_idle_cpu returned, when probed: Some(None) where it was
    /// not called.
    pub kernel_idle_scan: Option<Option<i32>>,
    /// How the replayed machine held the kernel's CPU when the search ran.
    pub recorded_state: CpuSeen,
}

/// How the replayed machine held the kernel's chosen CPU when the search ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuSeen {
    /// Idle: running its idle task, nothing queued, no wakeup pending.
    Idle,
    /// Running or holding a task, as the trace's switches and wakeups say.
    Busy,
    /// Otherwise idle, with a wakeup queued to it by IPI whose queueing time the replay
    /// infers (the trace records only its waking and its activation).
    Pending,
}

/// select_idle_cpu, wakeup by wakeup: the kernel's calls and returns, from the probes of
/// a noinline kernel, against the model's search on the same wakeups. Where the counts
/// and their totals agree but these do not, the model finds idle CPUs on other
/// wakeups than the kernel did (a budget off by one, a CPU idle to one and not the
/// other).
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct IdleScanAgreement {
    /// Replayed wakeups whose select_idle_cpu the trace shows or rules out.
    pub wakeups: u64,
    /// Of those, where the kernel called select_idle_cpu.
    pub kernel_calls: u64,
    /// Where the model's search reached it (its idle-core or idle-CPU scan, or a
    /// budget that ended it at once).
    pub model_calls: u64,
    /// Where both called it.
    pub both_called: u64,
    /// Of `both_called`, where both found an idle CPU.
    pub both_found: u64,
    /// ... and found the same one.
    pub same_cpu: u64,
    /// Where the kernel found one and the model's search failed.
    pub kernel_alone_found: u64,
    /// Where the model found one and the kernel's search failed.
    pub model_alone_found: u64,
}

impl IdleScanAgreement {
    fn note(&mut self, d: &Decision) {
        let Some(kernel) = d.kernel_idle_scan else {
            return;
        };
        let model_called = matches!(d.path, Path::Core | Path::Cpu | Path::Failed);
        let model_found = matches!(d.path, Path::Core | Path::Cpu);
        self.wakeups += 1;
        self.kernel_calls += kernel.is_some() as u64;
        self.model_calls += model_called as u64;
        let Some(ret) = kernel.filter(|_| model_called) else {
            return;
        };
        self.both_called += 1;
        match (ret >= 0, model_found) {
            (true, true) => {
                self.both_found += 1;
                self.same_cpu += (ret as u32 == d.predicted) as u64;
            }
            (true, false) => self.kernel_alone_found += 1,
            (false, true) => self.model_alone_found += 1,
            (false, false) => {}
        }
    }

    fn merge(&mut self, o: &IdleScanAgreement) {
        self.wakeups += o.wakeups;
        self.kernel_calls += o.kernel_calls;
        self.model_calls += o.model_calls;
        self.both_called += o.both_called;
        self.both_found += o.both_found;
        self.same_cpu += o.same_cpu;
        self.kernel_alone_found += o.kernel_alone_found;
        self.model_alone_found += o.model_alone_found;
    }
}

/// What the machine state needed mending while the trace was replayed.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct StateRepairs {
    /// Equal-timestamp groups put in causal order (None: the source was not).
    pub ties: Option<crate::trace::causal::TieStats>,
    /// Runqueue membership the events contradicted, and how it was mended.
    pub runqueues: crate::state::machine::Repairs,
}

/// Fine time buckets of (decisions, agreeing), doubled in length whenever there would
/// be more than this many: the trace's length need not be known in advance.
const MAX_BUCKETS: usize = 4096;

/// Agreement of a policy with the kernel's recorded choices.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Fidelity {
    /// Wakeups replayed through the model.
    pub decisions: u64,
    /// Of `decisions`, those where the model chose the kernel's CPU.
    pub agree: u64,
    /// Per path the model took: (decisions, agreeing).
    pub by_path: BTreeMap<String, (u64, u64)>,
    /// Per step of select_task_rq_fair that chose the target (wake_wide,
    /// wake_affine_idle, wake_affine_weight, waker is prev): (decisions, agreeing).
    pub by_affine: BTreeMap<String, (u64, u64)>,
    /// Wakeups activated through the IPI wakelist (recorded on the target later).
    pub ipi: (u64, u64),
    /// Of `decisions`, those where the model's CPU shares an LLC with the kernel's (exact
    /// agreement included).
    pub same_llc_agree: u64,
    /// Wakeups whose CPU the kernel chose is in another LLC than prev_cpu.
    pub recorded_cross_llc: u64,
    /// Wakeups whose CPU the model chose is in another LLC than prev_cpu.
    pub predicted_cross_llc: u64,
    /// The baselines on the same wakeups: how often the kernel chose prev_cpu (a policy
    /// that never moves a task would agree this often).
    pub always_prev: u64,
    /// Wakeups where the kernel chose the waker's CPU (the other baseline).
    pub always_waker: u64,
    /// (decisions, agreeing) in each tenth of the time from the first replayed wakeup
    /// to the last: a state that drifts shows as falling agreement.
    pub by_decile: Vec<(u64, u64)>,
    /// What the reconstructed machine state needed mending over the trace.
    pub repairs: StateRepairs,
    /// select_idle_cpu wakeup by wakeup, where the trace probes it.
    pub idle_scan: IdleScanAgreement,
    /// Misses where the kernel took a CPU other than prev or the waker's that the replayed
    /// machine held running or holding a task when the search ran. In 6.1,
    /// select_idle_sibling returns such a CPU only if it read it idle (or running
    /// SCHED_IDLE tasks alone), so the kernel saw a change the trace records later: under
    /// an emulator, a vCPU stalled between a state change and its tracepoint. (NUMA
    /// balancing moving a sleeping task's wake_cpu, and select_fallback_rq, are the other
    /// ways there; neither shows in the trace.)
    pub busy_by_trace: u64,
    /// The same misses where the CPU was otherwise idle, with only a wakeup queued to it by
    /// IPI: when that was queued the replay infers, so these say less.
    pub pending_by_replay: u64,
    #[serde(skip)]
    buckets: Vec<(u64, u64)>,
    #[serde(skip)]
    bucket_ns: u64,
    #[serde(skip)]
    span: Option<(u64, u64)>,
    /// Each decision's time and agreement, kept instead of the buckets by a replay of a
    /// later time slice, which does not know the first decision the buckets count from.
    #[serde(skip)]
    times: Option<Vec<(u64, bool)>>,
}

impl Fidelity {
    /// The misses on a CPU the replayed machine held busy (see [`Fidelity::busy_by_trace`]),
    /// said in one line; None without misses.
    pub fn busy_by_trace_sentence(&self) -> Option<String> {
        let misses = self.decisions - self.agree;
        (misses > 0).then(|| {
            format!(
                "misses on a CPU other than prev or the waker's that the replayed state held \
                 busy at the search: {} running or holding a task by the trace, {} with only \
                 an IPI wakeup pending (its queueing inferred), of {misses}",
                self.busy_by_trace, self.pending_by_replay
            )
        })
    }

    /// `agree` as % of `decisions` (0 when nothing was replayed).
    pub fn agreement_pct(&self) -> f64 {
        pct(self.agree as f64, self.decisions as f64)
    }

    /// Counts one replayed wakeup.
    pub fn note(&mut self, d: &Decision, topo: &crate::state::Topo) {
        let agree = d.predicted == d.recorded;
        self.decisions += 1;
        self.agree += agree as u64;
        let e = self.by_path.entry(d.path.name().to_string()).or_default();
        e.0 += 1;
        e.1 += agree as u64;
        let e = self.by_affine.entry(d.stage.to_string()).or_default();
        e.0 += 1;
        e.1 += agree as u64;
        if d.ipi {
            self.ipi.0 += 1;
            self.ipi.1 += agree as u64;
        }
        self.same_llc_agree += topo.share_cache(d.predicted, d.recorded) as u64;
        self.recorded_cross_llc += !topo.share_cache(d.recorded, d.prev) as u64;
        self.predicted_cross_llc += !topo.share_cache(d.predicted, d.prev) as u64;
        self.always_prev += (d.recorded == d.prev) as u64;
        self.always_waker += (d.recorded == d.waker_cpu) as u64;
        if !agree && d.recorded != d.prev && d.recorded != d.waker_cpu {
            match d.recorded_state {
                CpuSeen::Idle => {}
                CpuSeen::Busy => self.busy_by_trace += 1,
                CpuSeen::Pending => self.pending_by_replay += 1,
            }
        }
        self.idle_scan.note(d);
        self.note_time(d.now_ns, agree);
    }

    /// From now on, keeps each decision's time for [`Fidelity::merge`] instead of
    /// bucketing it.
    pub fn keep_times(&mut self) {
        self.times = Some(Vec::new());
    }

    /// Adds the counts of a later stretch of the same trace (whose times were kept, see
    /// [`Fidelity::keep_times`]), as if they had been noted here.
    pub fn merge(&mut self, later: Fidelity) {
        self.decisions += later.decisions;
        self.agree += later.agree;
        for (into, from) in [
            (&mut self.by_path, later.by_path),
            (&mut self.by_affine, later.by_affine),
        ] {
            for (k, (n, a)) in from {
                let e = into.entry(k).or_default();
                e.0 += n;
                e.1 += a;
            }
        }
        self.ipi.0 += later.ipi.0;
        self.ipi.1 += later.ipi.1;
        self.same_llc_agree += later.same_llc_agree;
        self.recorded_cross_llc += later.recorded_cross_llc;
        self.predicted_cross_llc += later.predicted_cross_llc;
        self.always_prev += later.always_prev;
        self.always_waker += later.always_waker;
        self.busy_by_trace += later.busy_by_trace;
        self.pending_by_replay += later.pending_by_replay;
        self.idle_scan.merge(&later.idle_scan);
        for (now, agree) in later.times.unwrap_or_default() {
            self.note_time(now, agree);
        }
    }

    fn note_time(&mut self, now: u64, agree: bool) {
        if let Some(t) = self.times.as_mut() {
            t.push((now, agree));
            return;
        }
        let (t0, _) = *self.span.get_or_insert((now, now));
        self.span = Some((t0, now.max(t0)));
        if self.bucket_ns == 0 {
            self.bucket_ns = 1_000_000;
        }
        let mut i = (now.saturating_sub(t0) / self.bucket_ns) as usize;
        while i >= MAX_BUCKETS {
            self.buckets = self
                .buckets
                .chunks(2)
                .map(|c| c.iter().fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1)))
                .collect();
            self.bucket_ns *= 2;
            i = (now.saturating_sub(t0) / self.bucket_ns) as usize;
        }
        if self.buckets.len() <= i {
            self.buckets.resize(i + 1, (0, 0));
        }
        self.buckets[i].0 += 1;
        self.buckets[i].1 += agree as u64;
    }

    /// Closes the accounting: agreement by tenth of the time, and what the state needed.
    pub fn finish(&mut self, repairs: StateRepairs) {
        self.repairs = repairs;
        self.by_decile = vec![(0, 0); 10];
        let Some((t0, t1)) = self.span else {
            return;
        };
        let span = (t1 - t0).max(1) as u128;
        for (i, b) in self.buckets.iter().enumerate() {
            // A bucket goes to the tenth its middle falls in.
            let mid = (i as u128 * 2 + 1) * self.bucket_ns as u128 / 2;
            let k = ((mid * 10 / span) as usize).min(9);
            self.by_decile[k].0 += b.0;
            self.by_decile[k].1 += b.1;
        }
    }
}

/// Per time window, what compare needs for run-to-run variation.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Window {
    /// Trace time the window starts at (ns).
    pub start_ns: u64,
    /// SIS counters of the searches in the window.
    pub counters: SisCounters,
    /// Modelled search time summed over the window's wakeups (ns).
    pub search_ns: u64,
    /// Wakeups placed in another LLC than prev_cpu.
    pub cross_llc: u64,
    /// Wakeups decided in the window.
    pub wakeups: u64,
    /// Wakeups placed on another CPU than prev.
    pub moved: u64,
    /// Sum of the waking→running latencies that ended in this window, ns (observed only).
    pub latency_ns: u64,
    /// How many latencies `latency_ns` sums.
    pub latencies: u64,
}

impl Window {
    /// Adds a later window's counts to this one.
    pub fn merge(&mut self, o: &Window) {
        if self.wakeups == 0 {
            self.start_ns = o.start_ns;
        }
        self.counters.add(&o.counters);
        self.search_ns += o.search_ns;
        self.cross_llc += o.cross_llc;
        self.wakeups += o.wakeups;
        self.moved += o.moved;
        self.latency_ns += o.latency_ns;
        self.latencies += o.latencies;
    }
}

/// Everything one policy counted over a replay or simulation, as written to results.
#[derive(Debug, Clone, Serialize)]
pub struct PolicyMetrics {
    /// The policy spec as given, e.g. `sis_util:pct=117`.
    pub policy: String,
    /// SIS counters summed over every decision.
    pub counters: SisCounters,
    /// Percentages of `counters`, filled in by [`PolicyMetrics::finish`].
    pub derived: Derived,
    /// Decisions per select_idle_sibling path (`target`, `prev`, `recent`, ..., `failed`).
    pub paths: BTreeMap<String, u64>,
    /// Index = runqueues probed in one search.
    pub probed: Vec<u64>,
    /// Search time in µs, log2 buckets.
    pub search_us: Log2Hist,
    /// Modelled search time summed over every decision (ns).
    pub search_ns_total: u64,
    /// Chosen CPU against prev_cpu, by distance.
    pub placements: Placements,
    /// Placed on a busy CPU while target's LLC had an idle one.
    pub stacked_with_idle: u64,
    /// Wakeups that take another CPU's rq lock (chosen CPU ≠ waker's).
    pub remote_rq_locks: u64,
    /// Two acquisitions of one rq lock within the hold window.
    pub rq_lock_collisions: u64,
    /// Agreement with the kernel's recorded choices: replay only, None in simulation.
    pub fidelity: Option<Fidelity>,
    /// The same counts per time window, for run-to-run variation.
    pub windows: Vec<Window>,
}

impl PolicyMetrics {
    /// Nothing counted yet, no fidelity accounting.
    pub fn new(policy: &str) -> PolicyMetrics {
        PolicyMetrics {
            policy: policy.to_string(),
            counters: SisCounters::default(),
            derived: Derived::of(&SisCounters::default()),
            paths: BTreeMap::new(),
            probed: Vec::new(),
            search_us: Log2Hist::default(),
            search_ns_total: 0,
            placements: Placements::default(),
            stacked_with_idle: 0,
            remote_rq_locks: 0,
            rq_lock_collisions: 0,
            fidelity: None,
            windows: Vec::new(),
        }
    }
}

/// One replayed wakeup as every policy's decision is set against it: what the trace
/// recorded, and the machine around the decision.
#[derive(Debug, Clone, Copy)]
pub struct Replayed {
    /// Trace time of the sched_waking (ns).
    pub now: u64,
    /// The wakee.
    pub pid: i32,
    /// The CPU sched_waking was recorded on.
    pub waker_cpu: u32,
    /// prev_cpu: the wakee's CPU at sched_waking.
    pub prev: u32,
    /// The target the search starts from (wake_affine's choice).
    pub target: u32,
    /// The CPU the kernel chose.
    pub recorded_cpu: u32,
    /// The wakeup went through the IPI wakelist (recorded on the target later).
    pub ipi: bool,
    /// The step of select_task_rq_fair that chose the target.
    pub affine_stage: &'static str,
    /// The waker's and the wakee's wakee_flips as wake_wide compared them.
    pub flips: (u32, u32),
    /// The target's LLC had an idle CPU.
    pub span_idle: bool,
    /// The fine window the wakeup falls in.
    pub slot: Slot,
    /// What the kernel's select_idle_cpu returned for this wakeup, when the trace probes
    /// it (see [`IdleScanAgreement`]).
    pub kernel_idle_scan: Option<Option<i32>>,
    /// How the replayed machine held the kernel's CPU when the search ran.
    pub recorded_state: CpuSeen,
}

/// What a decision did to the machine beyond its own counts.
#[derive(Debug, Clone, Copy, Default)]
pub struct Effects {
    /// The chosen CPU was busy.
    pub chosen_busy: bool,
    /// The chosen CPU's rq lock was taken again within the hold window.
    pub lock_collision: bool,
}

impl PolicyMetrics {
    /// Counts one decision of this policy for a replayed wakeup.
    pub fn record(&mut self, w: &Replayed, d: &sis::Decision, topo: &Topo, fx: Effects) {
        self.counters.add(&d.counters);
        *self.paths.entry(d.path.name().to_string()).or_default() += 1;
        let p = d.probed as usize;
        if self.probed.len() <= p {
            self.probed.resize(p + 1, 0);
        }
        self.probed[p] += 1;
        if d.probed > 0 {
            self.search_us.add(d.search_ns / 1000);
        }
        self.search_ns_total += d.search_ns;
        let cross_llc = !topo.share_cache(d.cpu, w.prev);
        self.placements.count(topo, w.prev, d.cpu);
        if fx.chosen_busy && w.span_idle {
            self.stacked_with_idle += 1;
        }
        if d.cpu != w.waker_cpu {
            self.remote_rq_locks += 1;
            self.rq_lock_collisions += fx.lock_collision as u64;
        }
        let wd = windows::window_at(&mut self.windows, w.slot);
        wd.counters.add(&d.counters);
        wd.search_ns += d.search_ns;
        wd.cross_llc += cross_llc as u64;
        wd.wakeups += 1;
        wd.moved += (d.cpu != w.prev) as u64;
        if let Some(f) = self.fidelity.as_mut() {
            f.note(
                &Decision {
                    now_ns: w.now,
                    path: d.path,
                    stage: w.affine_stage,
                    prev: w.prev,
                    waker_cpu: w.waker_cpu,
                    predicted: d.cpu,
                    recorded: w.recorded_cpu,
                    ipi: w.ipi,
                    kernel_idle_scan: w.kernel_idle_scan,
                    recorded_state: w.recorded_state,
                },
                topo,
            );
        }
    }

    /// Adds the counts of a later stretch of the same trace, all but the windows (see
    /// replay::slices, which merges those in time order).
    pub fn merge(&mut self, later: PolicyMetrics) {
        self.counters.add(&later.counters);
        for (k, n) in later.paths {
            *self.paths.entry(k).or_default() += n;
        }
        if self.probed.len() < later.probed.len() {
            self.probed.resize(later.probed.len(), 0);
        }
        for (a, b) in self.probed.iter_mut().zip(&later.probed) {
            *a += b;
        }
        self.search_us.merge(&later.search_us);
        self.search_ns_total += later.search_ns_total;
        self.placements.merge(&later.placements);
        self.stacked_with_idle += later.stacked_with_idle;
        self.remote_rq_locks += later.remote_rq_locks;
        self.rq_lock_collisions += later.rq_lock_collisions;
        if let (Some(f), Some(l)) = (self.fidelity.as_mut(), later.fidelity) {
            f.merge(l);
        }
    }

    /// Computes what is derived from the counts, and regroups the windows into `n`.
    pub fn finish(&mut self, n: usize) {
        self.derived = Derived::of(&self.counters);
        self.windows = windows::regroup(std::mem::take(&mut self.windows), n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// select_idle_sibling returns prev, the waker's CPU, or a CPU it read idle: a miss
    /// on any other CPU that the replayed state holds busy is counted apart, by whether
    /// the trace or the replay's own inference made it busy.
    #[test]
    fn a_miss_on_a_cpu_held_busy_is_counted_apart() {
        let topo = crate::state::Topo::new(&crate::topology::Topology::flat(4), 4);
        let decision = |predicted, recorded, recorded_state| Decision {
            now_ns: 0,
            path: Path::Cpu,
            stage: "wake_affine_idle",
            prev: 1,
            waker_cpu: 0,
            predicted,
            recorded,
            ipi: false,
            kernel_idle_scan: None,
            recorded_state,
        };
        let mut f = Fidelity::default();
        for d in [
            decision(2, 3, CpuSeen::Busy),    // the kernel took busy CPU 3: counted
            decision(2, 3, CpuSeen::Pending), // only an inferred pending wakeup
            decision(2, 3, CpuSeen::Idle),    // CPU 3 idle: an ordinary miss
            decision(2, 1, CpuSeen::Busy),    // prev, busy: the fallback to target
            decision(2, 0, CpuSeen::Busy),    // the waker's CPU, busy: ordinary
            decision(3, 3, CpuSeen::Busy),    // agreed: not a miss
        ] {
            f.note(&d, &topo);
        }
        assert_eq!((f.decisions, f.agree), (6, 1));
        assert_eq!((f.busy_by_trace, f.pending_by_replay), (1, 1));
        let s = f.busy_by_trace_sentence().unwrap();
        assert!(
            s.contains(": 1 running or holding a task by the trace, 1 with"),
            "{s}"
        );
        assert!(s.ends_with("of 5"), "{s}");
        let mut later = Fidelity::default();
        later.keep_times();
        later.note(&decision(2, 3, CpuSeen::Busy), &topo);
        later.note(&decision(2, 3, CpuSeen::Pending), &topo);
        f.merge(later);
        assert_eq!((f.busy_by_trace, f.pending_by_replay), (2, 2));
    }

    /// The kernel's select_idle_cpu return against the model's path, one wakeup each.
    #[test]
    fn idle_scans_are_paired_wakeup_by_wakeup() {
        let decision = |path, predicted, kernel| Decision {
            now_ns: 0,
            path,
            stage: "wake_affine_idle",
            prev: 0,
            waker_cpu: 0,
            predicted,
            recorded: predicted,
            ipi: false,
            kernel_idle_scan: kernel,
            recorded_state: CpuSeen::Idle,
        };
        let mut a = IdleScanAgreement::default();
        for d in [
            decision(Path::Cpu, 3, Some(Some(3))), // both found, the same CPU
            decision(Path::Cpu, 2, Some(Some(3))), // both found, another CPU
            decision(Path::Failed, 0, Some(Some(1))), // the kernel alone found
            decision(Path::Core, 2, Some(Some(-1))), // the model alone found
            decision(Path::Failed, 0, Some(Some(-1))), // neither
            decision(Path::Target, 0, Some(Some(2))), // the model did not search
            decision(Path::Cpu, 2, Some(None)),    // the kernel did not call it
            decision(Path::Cpu, 2, None),          // not probed: not counted
        ] {
            a.note(&d);
        }
        assert_eq!(
            (a.wakeups, a.kernel_calls, a.model_calls, a.both_called),
            (7, 6, 6, 5)
        );
        assert_eq!(
            (
                a.both_found,
                a.same_cpu,
                a.kernel_alone_found,
                a.model_alone_found
            ),
            (2, 1, 1, 1)
        );
    }

    #[test]
    fn derived_percentages_both_ways() {
        // 100 searches, 60 fast, 40 into the domain, 10 failed, 300 runqueues scanned.
        let k = SisCounters {
            search: 100,
            domain_search: 40,
            scanned: 300,
            failed: 10,
            recent_hit: 3,
            recent_miss: 1,
            ..Default::default()
        };
        let d = Derived::of(&k);
        assert!((d.se_eff - 30.0).abs() < 1e-9); // 90/300
        assert!((d.dom_eff - 12.5).abs() < 1e-9); // 30/(300 − 60)
        assert!((d.fast_rate - 60.0).abs() < 1e-9);
        assert!((d.success_rate - 90.0).abs() < 1e-9);
        assert!((d.mm_search_eff - 100.0 / 3.0).abs() < 1e-9);
        assert!((d.mm_domain_eff - 40.0 / 2.4).abs() < 1e-9);
        assert!((d.mm_recent_success - 75.0).abs() < 1e-9);
        assert_eq!(Derived::of(&SisCounters::default()).mm_search_eff, 100.0);
    }

    #[test]
    fn agreement_by_tenth_and_baselines() {
        let topo = crate::state::Topo::new(&crate::topology::Topology::flat(4), 4);
        let mut f = Fidelity::default();
        // A wakeup every ms for 100 ms: the model agrees for the first 50 only; the
        // kernel keeps every wakee on prev (CPU 1), woken from CPU 0.
        for i in 0..=100u64 {
            let d = Decision {
                now_ns: i * 1_000_000,
                path: Path::Target,
                stage: "wake_affine_weight",
                prev: 1,
                waker_cpu: 0,
                predicted: if i < 50 { 1 } else { 0 },
                recorded: 1,
                ipi: false,
                kernel_idle_scan: None,
                recorded_state: CpuSeen::Idle,
            };
            f.note(&d, &topo);
        }
        f.finish(StateRepairs::default());
        assert_eq!((f.decisions, f.agree), (101, 50));
        assert_eq!((f.always_prev, f.always_waker), (101, 0));
        // Tenths of 10 ms; the last holds the wakeup at 100 ms too.
        let want: Vec<(u64, u64)> = (0..10)
            .map(|k| match k {
                0..5 => (10, 10),
                9 => (11, 0),
                _ => (10, 0),
            })
            .collect();
        assert_eq!(f.by_decile, want);
        assert_eq!(f.by_affine["wake_affine_weight"], (101, 50));
    }

    #[test]
    fn log2_buckets_as_bpftrace_prints_them() {
        let mut h = Log2Hist::default();
        for v in [0, 1, 2, 3, 4, 7, 8, 1023, 1024] {
            h.add(v);
        }
        assert_eq!(h.buckets, vec![1, 1, 2, 2, 1, 0, 0, 0, 0, 0, 1, 1]);
        assert_eq!(Log2Hist::label(2), "[2, 4)");
        assert_eq!(Log2Hist::label(11), "[1K, 2K)");
    }
}
