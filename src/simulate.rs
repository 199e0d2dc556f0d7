//! `sisreplay simulate BUNDLE`: the captured trace becomes a task model (synth::traced),
//! re-run in closed loop under each policy. The same statistics are taken from the trace
//! and from every re-run, so the re-run under the traced kernel's own policy measures the
//! model's fidelity (CPU time per task, wakeups, migrations, latency, how long the work
//! took), and the other policies' re-runs say what would have happened next.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::bundle::provenance::{Provenance, SimulateRecord};
use crate::bundle::Bundle;
use crate::derived::{Derived, Migration, Pass, Slice, SliceEnd, SliceStart, WakeupLatency};
use crate::metrics::observed::Percentiles;
use crate::metrics::Placements;
use crate::parallel;
use crate::sim::{Scheduler, Sim, SimOptions, SimResult, WakeDelays};
use crate::state::flips::BeforeTrace;
use crate::state::{util_est, Topo};
use crate::synth::traced::{self, TracedShape};
use crate::trace::{Event, EventKind, EventSource};

/// What a stream of scheduler events shows, the same for a trace and a re-run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RunStats {
    /// First to last event.
    pub span_ns: u64,
    /// CPU time of all tasks (idle excluded), ns.
    pub cpu_ns: u64,
    /// CPU time per task (ns), from sched_switch; not serialized.
    #[serde(skip)]
    pub cpu_ns_by_pid: HashMap<i32, u64>,
    /// sched_wakeup events (wakeups of new tasks excluded).
    pub wakeups: u64,
    /// sched_migrate_task by distance (wakeup placement and balancing alike).
    pub migrations: Placements,
    /// Waking to running, ns.
    pub latency: Percentiles,
    /// The same for wakeups onto another CPU that was idle: IPI and idle exit.
    pub remote_idle_latency: Percentiles,
    /// The same for wakees that preempted their waker on the waker's CPU: the waker
    /// runs on to its next preemption point, then the context switch.
    pub local_preempt_latency: Percentiles,
    /// How many wakees preempted their waker on the waker's CPU (the samples above).
    pub local_preempts: u64,
    /// How many wakees on their waker's CPU ran only after the waker blocked: with
    /// `local_preempts`, how often the scheduler lets a wakee preempt its waker, which
    /// decides whether a waker reaches its own sleep before its wakee answers.
    pub local_after_block: u64,
    /// sched_migrate_task between a task's sched_waking and its sched_wakeup: wakeups
    /// placed off their previous CPU, by distance.
    pub wakeup_moves: Placements,
    /// `cpu_ns` as % of the span times the CPUs.
    pub busy_pct: f64,
    /// Time the CPUs spent stalled, ns: a task put on an idle CPU waited [`STALL_NS`]
    /// or more for it, counted while that CPU sat idle (overlapping waits once).
    #[serde(default)]
    pub stalled_ns: u64,
}

impl RunStats {
    /// The statistics of `events` (time-ordered) on the machine `topo`.
    pub fn of(events: &[Event], topo: &Topo) -> RunStats {
        RunStats::with_delays(events, topo).0
    }

    /// The statistics, and the machine's wakeup delays as samples a re-run draws from.
    pub fn with_delays(events: &[Event], topo: &Topo) -> (RunStats, WakeDelays) {
        let mut s = RunStats::default();
        let (Some(first), Some(last)) = (events.first(), events.last()) else {
            return (s, WakeDelays::default());
        };
        s.span_ns = last.ts.saturating_sub(first.ts);
        let n = topo.nr_cpus as usize;
        let mut lat = LatencySamples::default();
        let mut pass = Pass::default();
        // Since when each CPU has run the idle task (None: a task, or not seen yet).
        let mut idle_since: Vec<Option<u64>> = vec![None; n];
        for e in events {
            // A switch on a CPU the topology does not have is not counted.
            if matches!(e.kind, EventKind::Switch { .. }) && e.cpu as usize >= n {
                continue;
            }
            if let EventKind::Wakeup(_) = e.kind {
                s.wakeups += 1;
            }
            pass.feed(e, |d| match d {
                Derived::Slice(slice) => s.add_cpu_time(&slice, first.ts),
                Derived::Latency(l) => {
                    let idle = idle_since.get(l.cpu as usize).copied().flatten();
                    lat.add(&l, idle)
                }
                Derived::Migration(m) => s.count_migration(&m, topo),
            });
            if let EventKind::Switch { next_pid, .. } = e.kind {
                let slot = &mut idle_since[e.cpu as usize];
                *slot = (next_pid == 0).then(|| slot.unwrap_or(e.ts));
            }
        }
        pass.finish(last.ts, |d| {
            if let Derived::Slice(slice) = d {
                s.add_cpu_time(&slice, first.ts)
            }
        });
        s.cpu_ns = s.cpu_ns_by_pid.values().sum();
        s.latency = Percentiles::of(&mut lat.all);
        s.remote_idle_latency = Percentiles::of(&mut lat.remote_idle);
        s.local_preempts = lat.local_preempt.len() as u64;
        s.local_after_block = lat.local_after_block;
        s.local_preempt_latency = Percentiles::of(&mut lat.local_preempt);
        s.busy_pct = 100.0 * s.cpu_ns as f64 / (s.span_ns.max(1) as f64 * n.max(1) as f64);
        s.stalled_ns = stalled_ns(&mut lat.stalled);
        let delays = WakeDelays::from_samples(lat.remote_idle, lat.local_idle, lat.local_preempt);
        (s, delays)
    }

    /// A task's run slice: its time counts from the switch that began it, or from the
    /// first event for a CPU's first slice (the task ran since the trace began); after a
    /// switch the kernel did not record, how long it ran is unknown.
    fn add_cpu_time(&mut self, slice: &Slice, first_ns: u64) {
        if slice.pid == 0 {
            return;
        }
        let ran = match slice.start {
            SliceStart::BeforeTrace => Some(slice.end_ns.saturating_sub(first_ns)),
            _ => slice.recorded_ns(),
        };
        if let Some(ns) = ran {
            *self.cpu_ns_by_pid.entry(slice.pid).or_default() += ns;
        }
    }

    /// A migration by its distance, counted again among the wakeups' placements when it
    /// was one.
    fn count_migration(&mut self, m: &Migration, topo: &Topo) {
        let (from, to) = (m.orig_cpu.max(0) as u32, m.dest_cpu.max(0) as u32);
        self.migrations.count(topo, from, to);
        if m.at_wakeup {
            self.wakeup_moves.count(topo, from, to);
        }
    }

    /// Migrations that left the LLC.
    pub fn cross_llc(&self) -> u64 {
        self.migrations.cross_llc + self.migrations.cross_numa
    }

    /// Migrations off a CPU, same LLC or beyond.
    pub fn moved(&self) -> u64 {
        self.migrations.same_llc + self.cross_llc()
    }
}

/// A wakeup onto an idle CPU that waited longer than this found the CPU stalled: no
/// C-state takes a millisecond to leave (the deepest of current x86 servers about
/// 0.1-0.3 ms), a vCPU whose host thread is not running does.
pub const STALL_NS: u32 = 1_000_000;

/// The time covered by the waits `(cpu, from, to)`, each CPU's overlapping waits counted
/// once.
fn stalled_ns(waits: &mut [(u32, u64, u64)]) -> u64 {
    waits.sort_unstable();
    let span = |w: Option<(u32, u64, u64)>| w.map_or(0, |(_, from, to)| to.saturating_sub(from));
    let mut total = 0;
    let mut open: Option<(u32, u64, u64)> = None;
    for &(cpu, from, to) in waits.iter() {
        match &mut open {
            Some((c, _, end)) if *c == cpu && from <= *end => *end = (*end).max(to),
            _ => total += span(open.replace((cpu, from, to))),
        }
    }
    total + span(open)
}

/// Waking-to-running latencies, ns, as RunStats splits them.
#[derive(Default)]
struct LatencySamples {
    all: Vec<u32>,
    remote_idle: Vec<u32>,
    local_idle: Vec<u32>,
    local_preempt: Vec<u32>,
    local_after_block: u64,
    /// Waits of STALL_NS or more, their part with the CPU idle: (CPU, from, switch-in),
    /// ns.
    stalled: Vec<(u32, u64, u64)>,
}

impl LatencySamples {
    /// Counted from the waking that made the task runnable; `idle_since` is when the
    /// CPU it ran on last went idle.
    fn add(&mut self, l: &WakeupLatency, idle_since: Option<u64>) {
        let ns = l.ns().min(u32::MAX as u64) as u32;
        self.all.push(ns);
        if l.prev_pid == 0 {
            if l.waking_cpu != l.cpu {
                self.remote_idle.push(ns);
            } else {
                self.local_idle.push(ns);
            }
            // Stalled only while the CPU sat idle: a task that waited on another CPU and
            // was pulled here by an idle balance stalled nothing before this CPU idled.
            let from = l.waking_ns.max(idle_since.unwrap_or(l.waking_ns));
            if ns >= STALL_NS && from < l.switch_in_ns {
                self.stalled.push((l.cpu, from, l.switch_in_ns));
            }
        }
        let preempted = l.prev_end == SliceEnd::Preempted;
        if l.waking_cpu == l.cpu && l.prev_pid == l.waker && l.waker != 0 {
            if preempted {
                self.local_preempt.push(ns);
            } else {
                self.local_after_block += 1;
            }
        }
    }
}

/// How close a re-run came to the trace.
#[derive(Debug, Clone, Serialize)]
pub struct Agreement {
    /// Σ|CPU time of a task in the re-run − in the trace| / Σ CPU time in the trace, %.
    pub runtime_error_pct: f64,
    /// Tasks whose CPU time is within 10 % of the trace's (of those that ran ≥ 1 ms).
    pub tasks_within_10pct: f64,
    /// Re-run over trace, for each.
    pub span_ratio: f64,
    /// sched_wakeup events, re-run over trace.
    pub wakeups_ratio: f64,
    /// sched_migrate_task events, re-run over trace.
    pub migrations_ratio: f64,
    /// Migrations that left the LLC, re-run over trace.
    pub cross_llc_ratio: f64,
    /// Median wakeup latency, re-run over trace.
    pub latency_p50_ratio: f64,
    /// 99th percentile wakeup latency, re-run over trace.
    pub latency_p99_ratio: f64,
}

fn ratio(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        if a == 0.0 {
            1.0
        } else {
            f64::INFINITY
        }
    } else {
        a / b
    }
}

impl Agreement {
    /// `run` against `trace`; a ratio over a zero is 1 when both are zero, else infinite.
    pub fn of(run: &RunStats, trace: &RunStats) -> Agreement {
        let mut diff = 0u64;
        let (mut within, mut counted) = (0u64, 0u64);
        for (pid, &t) in &trace.cpu_ns_by_pid {
            let r = run.cpu_ns_by_pid.get(pid).copied().unwrap_or(0);
            diff += r.abs_diff(t);
            if t >= 1_000_000 {
                counted += 1;
                within += (r.abs_diff(t) * 10 <= t) as u64;
            }
        }
        Agreement {
            runtime_error_pct: 100.0 * diff as f64 / trace.cpu_ns.max(1) as f64,
            tasks_within_10pct: 100.0 * within as f64 / counted.max(1) as f64,
            span_ratio: ratio(run.span_ns as f64, trace.span_ns as f64),
            wakeups_ratio: ratio(run.wakeups as f64, trace.wakeups as f64),
            migrations_ratio: ratio(run.moved() as f64, trace.moved() as f64),
            cross_llc_ratio: ratio(run.cross_llc() as f64, trace.cross_llc() as f64),
            latency_p50_ratio: ratio(run.latency.p50 as f64, trace.latency.p50 as f64),
            latency_p99_ratio: ratio(run.latency.p99 as f64, trace.latency.p99 as f64),
        }
    }
}

/// One check of the self-fidelity gate: a statistic of the re-run under the traced
/// kernel's own policy against the same statistic of the trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// The statistic, e.g. "wakeups" or "latency p99 ns".
    pub name: String,
    /// Its value in the trace (for the task checks, the tasks counted).
    pub trace: f64,
    /// Its value in the re-run (for the task checks, the tasks that pass).
    pub rerun: f64,
    /// What agreement means, as printed: "±10 %", "±3 points", "x1.5", "all".
    pub tolerance: String,
    /// The re-run is within the tolerance.
    pub pass: bool,
    /// Outside its tolerance, but the two counts are too few to tell apart (see
    /// [`too_few_to_judge`]): shown, neither passes nor misses, and the gate's verdict
    /// says so.
    #[serde(default)]
    pub too_few: bool,
}

/// Two counts of events that differ by no more than their noise: a count of n varies by
/// about √n between runs of one workload (Poisson), so a trace's and a re-run's differ
/// by about √(trace + re-run) by chance alone, and by up to twice that one time in
/// twenty. 5 cross-LLC placements against 2 cannot say the re-run is wrong; 5 against
/// 200, or 3,087 against 2,167, can.
pub fn too_few_to_judge(rerun: u64, trace: u64) -> bool {
    let d = rerun.abs_diff(trace);
    d.saturating_mul(d) <= 4 * (rerun + trace)
}

/// The gate a closed-loop counterfactual has to pass to be believed: the re-run of
/// the trace under the policy the traced kernel ran reproduces the trace (wakeups
/// ±10 %, wakeups moved off their previous CPU and cross-LLC placements ±15 %, busy
/// ±3 points, waking-to-running latency p50 and p99 within x1.5, every task's CPU
/// time ±10 %, every task finishing). A counterfactual re-run of a trace whose
/// self-fidelity misses any check is marked untrustworthy; a count outside its
/// tolerance by no more than its noise (a few cross-LLC placements) is shown as too
/// few to judge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SelfFidelity {
    /// The policy the traced kernel ran, whose re-run was checked.
    pub traced_policy: String,
    /// Each check, in the order printed.
    pub checks: Vec<Check>,
    /// Every check passed but those whose counts are too few to judge.
    pub trustworthy: bool,
}

/// |run − trace| ≤ pct % of trace, in integers (a zero trace admits only zero).
fn within_pct(run: u64, trace: u64, pct: u64) -> bool {
    run.abs_diff(trace) * 100 <= pct * trace
}

/// run / trace within [1/1.5, 1.5], in integers (a zero trace admits only zero).
fn within_x1_5(run: u64, trace: u64) -> bool {
    2 * run <= 3 * trace && 2 * trace <= 3 * run
}

impl SelfFidelity {
    /// The checks of the re-run `run` (under `traced_policy`, `unfinished` of `tasks`
    /// tasks left waiting) against the trace.
    pub fn of(
        traced_policy: &str,
        run: &RunStats,
        trace: &RunStats,
        unfinished: u64,
        tasks: usize,
    ) -> SelfFidelity {
        let mut checks = Vec::new();
        let mut count = |name: &str, r: u64, t: u64, pct: u64| {
            let pass = within_pct(r, t, pct);
            checks.push(Check {
                name: name.into(),
                trace: t as f64,
                rerun: r as f64,
                tolerance: format!("±{pct} %"),
                pass,
                too_few: !pass && too_few_to_judge(r, t),
            })
        };
        count("wakeups", run.wakeups, trace.wakeups, 10);
        let moved = |s: &RunStats| {
            let m = &s.wakeup_moves;
            m.same_llc + m.cross_llc + m.cross_numa
        };
        let cross = |s: &RunStats| s.wakeup_moves.cross_llc + s.wakeup_moves.cross_numa;
        count("moved off prev", moved(run), moved(trace), 15);
        count("cross-LLC", cross(run), cross(trace), 15);
        checks.push(Check {
            name: "busy %".into(),
            trace: trace.busy_pct,
            rerun: run.busy_pct,
            tolerance: "±3 points".into(),
            pass: (run.busy_pct - trace.busy_pct).abs() <= 3.0,
            too_few: false,
        });
        for (name, r, t) in [
            ("latency p50 ns", run.latency.p50, trace.latency.p50),
            ("latency p99 ns", run.latency.p99, trace.latency.p99),
        ] {
            checks.push(Check {
                name: name.into(),
                trace: t as f64,
                rerun: r as f64,
                tolerance: "x1.5".into(),
                pass: within_x1_5(r, t),
                too_few: false,
            });
        }
        // Every task that ran 1 ms or more in the trace, within 10 % of its CPU time.
        let (mut within, mut counted) = (0u64, 0u64);
        for (pid, &t) in &trace.cpu_ns_by_pid {
            if t >= 1_000_000 {
                let r = run.cpu_ns_by_pid.get(pid).copied().unwrap_or(0);
                counted += 1;
                within += within_pct(r, t, 10) as u64;
            }
        }
        checks.push(Check {
            name: "tasks' CPU time ±10 %".into(),
            trace: counted as f64,
            rerun: within as f64,
            tolerance: "all".into(),
            pass: within == counted,
            too_few: false,
        });
        checks.push(Check {
            name: "tasks finished".into(),
            trace: tasks as f64,
            rerun: tasks.saturating_sub(unfinished as usize) as f64,
            tolerance: "all".into(),
            pass: unfinished == 0,
            too_few: false,
        });
        let trustworthy = checks.iter().all(|c| c.pass || c.too_few);
        SelfFidelity {
            traced_policy: traced_policy.into(),
            checks,
            trustworthy,
        }
    }

    /// The checks that failed (of those it could judge).
    pub fn misses(&self) -> Vec<&Check> {
        self.checks
            .iter()
            .filter(|c| !c.pass && !c.too_few)
            .collect()
    }

    /// One line: "passes all 8 checks", or the checks it misses with their numbers;
    /// and the counts too small to judge, if any.
    pub fn verdict(&self) -> String {
        let misses = self.misses();
        let judged = self.checks.iter().filter(|c| !c.too_few).count();
        let mut v = if misses.is_empty() {
            format!("passes all {judged} checks")
        } else {
            let list: Vec<String> = misses
                .iter()
                .map(|c| format!("{} ({})", c.name, c.compared()))
                .collect();
            format!(
                "misses {} of {judged} checks: {}",
                misses.len(),
                list.join(", ")
            )
        };
        let few: Vec<String> = self
            .checks
            .iter()
            .filter(|c| c.too_few)
            .map(|c| format!("{} ({} in the trace)", c.name, c.trace))
            .collect();
        if !few.is_empty() {
            v += &format!("; too few to judge: {}", few.join(", "));
        }
        v
    }
}

impl Check {
    /// "pass", "miss", or "too few" for a count too small to judge.
    pub fn result(&self) -> &'static str {
        match (self.too_few, self.pass) {
            (true, _) => "too few",
            (false, true) => "pass",
            (false, false) => "miss",
        }
    }

    /// The re-run against the trace, as printed: a ratio, a difference in points, or a
    /// count of tasks.
    pub fn compared(&self) -> String {
        match self.tolerance.as_str() {
            "all" => format!("{} of {}", self.rerun, self.trace),
            t if t.ends_with("points") => format!("{:+.1} points", self.rerun - self.trace),
            _ if self.trace == 0.0 => format!("{} against 0", self.rerun),
            _ => format!("x{:.2}", self.rerun / self.trace),
        }
    }
}

/// One policy's re-run of the trace.
#[derive(Debug, Clone, Serialize)]
pub struct RerunArm {
    /// The policy spec.
    pub policy: String,
    /// What the simulator measured.
    pub result: SimResult,
    /// The statistics of the re-run's events, as of the trace's.
    pub stats: RunStats,
    /// How close the re-run came to the trace.
    pub against_trace: Agreement,
    /// The re-run's bundle; None without an output directory.
    pub bundle: Option<PathBuf>,
}

/// A bundle re-run in closed loop under each policy, with the trace's own statistics and
/// the self-fidelity gate.
#[derive(Debug, Clone, Serialize)]
pub struct Rerun {
    /// The bundle re-run.
    pub bundle: PathBuf,
    /// The policy the traced kernel ran: its re-run is the fidelity measure.
    pub traced_policy: String,
    /// What the trace became as a task model.
    pub model: TracedShape,
    /// The trace's own statistics.
    pub trace: RunStats,
    /// One per policy, the traced kernel's first.
    pub runs: Vec<RerunArm>,
    /// The re-run under the traced policy against the trace: whether the other
    /// policies' re-runs are to be believed.
    pub self_fidelity: SelfFidelity,
    /// The fair scheduler the re-runs ran.
    pub scheduler: Scheduler,
    /// The wakee flips the traced tasks were given as they first appeared.
    pub flips_before_trace: BeforeTrace,
    /// How they were fitted to the trace, when they were.
    pub flips_fit: Option<crate::replay::flips_fit::FlipsFit>,
    /// Where the re-runs' newidle balance costs were asked to come from.
    pub newidle_cost: NewidleCostSource,
}

/// What `sisreplay simulate` re-runs and where it writes.
pub struct RerunOptions {
    /// The captured bundle to re-run.
    pub bundle: PathBuf,
    /// The policies to re-run it under (the traced kernel's is added first).
    pub policies: Vec<crate::policy::PolicySpec>,
    /// Bundles of the re-runs go here, one per policy; None writes none.
    pub out_dir: Option<PathBuf>,
    /// Re-runs at once, one per thread.
    pub jobs: usize,
    /// The fair scheduler; None takes the one of the bundle's kernel release.
    pub scheduler: Option<Scheduler>,
    /// wakee_flips for the traced tasks as they first appear: a value assumed, or
    /// None to fit it to the trace (see replay::flips_fit).
    pub flips_before_trace: Option<BeforeTrace>,
    /// Seeds the re-runs' draws (traced delays, run-time variation): the same seed
    /// gives the same re-runs.
    pub seed: u64,
    /// Where the newidle balance costs come from.
    pub newidle_cost: NewidleCostSource,
}

/// Where a re-run's newidle balance costs come from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum NewidleCostSource {
    /// The kernel's max_newidle_lb_cost, where the capture recorded it; else the model's.
    #[default]
    Recorded,
    /// The model's estimate (a few microseconds, as on current servers).
    Model,
}

/// Fewer samples than this of a latency in the trace leave the model's default.
const MIN_SAMPLES: u64 = 50;

/// Why a bundle could not be re-run.
#[derive(Debug, thiserror::Error)]
pub enum SimulateError {
    /// The bundle cannot be opened.
    #[error(transparent)]
    Bundle(#[from] crate::bundle::BundleError),
    /// Its events cannot be read.
    #[error(transparent)]
    Trace(#[from] crate::trace::TraceError),
    /// A policy or the machine cannot be simulated.
    #[error(transparent)]
    Sim(#[from] crate::sim::SimError),
    /// A re-run's bundle cannot be written.
    #[error(transparent)]
    Output(#[from] crate::synth::steps::SynthError),
    /// The replay that fits the flips before the trace failed.
    #[error("fitting the wakee flips before the trace: {0}")]
    FlipsFit(#[from] crate::replay::ReplayError),
}

/// Re-runs the bundle's tasks under each policy (the traced kernel's added first).
pub fn run(o: &RerunOptions) -> Result<Rerun, SimulateError> {
    let mut b = Bundle::open(&o.bundle)?;
    let traced_policy = crate::replay::traced_policy_of(&b.meta).to_string();
    let topology = b.meta.topology.clone();
    let nr_cpus = b.meta.nr_cpus;
    let mut events = Vec::with_capacity(b.meta.events as usize);
    while let Some(e) = b.next_event()? {
        events.push(e);
    }
    let topo = Topo::new(&topology, nr_cpus);
    let name = o
        .bundle
        .file_name()
        .map_or_else(|| "trace".into(), |n| n.to_string_lossy().into_owned());
    let (workload, mut model) = traced::build(&name, &events, topo.nr_cpus);
    let (flips_before_trace, flips_fit) = match o.flips_before_trace {
        Some(n) => (n, None),
        None => {
            let info = crate::trace::EventSource::info(&b).clone();
            use crate::replay::flips_fit;
            let window = &events[..events.len().min(flips_fit::MAX_EVENTS)];
            let settings = crate::replay::ReplayOptions {
                fit_jobs: Some(o.jobs),
                ..Default::default()
            };
            let f = flips_fit::fit(window, &info, Some(&b.meta), &settings, &traced_policy)?;
            (f.fitted, Some(f))
        }
    };
    let (trace, traced_delays) = RunStats::with_delays(&events, &topo);
    let preempted_runs = crate::sim::PreemptedRuns::of(&events, topo.nr_cpus);
    let traced_delays = traced_delays.with_wakeups(std::mem::take(&mut model.wake_delays));
    drop(events);
    let mut policies = vec![traced_policy.clone()];
    policies.extend(
        o.policies
            .iter()
            .map(|p| p.to_string())
            .filter(|p| *p != traced_policy),
    );
    // Measured, not assumed: this machine's idle CPUs take this long to start a task.
    let wake_ipi_ns = match trace.remote_idle_latency.p50 {
        0 => crate::sim::DEFAULT_WAKE_IPI_NS,
        ns => ns,
    };
    // Likewise how long a wakee that preempts its waker waits for the CPU, where the
    // trace shows enough of them.
    let preempt_delay_ns = match (trace.local_preempts, trace.local_preempt_latency.p50) {
        (n, ns) if n >= MIN_SAMPLES && ns > 0 => ns,
        _ => crate::sim::DEFAULT_PREEMPT_DELAY_NS,
    };
    let scheduler = o
        .scheduler
        .unwrap_or_else(|| Scheduler::of_release(b.meta.kernel_release.as_deref()));
    let newidle_costs = match o.newidle_cost {
        NewidleCostSource::Recorded => (b.meta.provenance.capture())
            .map(|c| c.newidle_costs.clone())
            .unwrap_or_default(),
        NewidleCostSource::Model => Vec::new(),
    };
    // Room for a slower re-run; the run ends earlier when every task has.
    let cap = trace.span_ns.saturating_mul(4) + 100_000_000;
    let sims = parallel::map(&policies, o.jobs, |policy| -> Result<_, SimulateError> {
        let sim = Sim::new(
            workload.clone(),
            SimOptions {
                wake_ipi_ns,
                preempt_delay_ns,
                record: true,
                scheduler,
                util_est: util_est::Rules::of_release(b.meta.kernel_release.as_deref()),
                new_task_util: crate::state::pelt::NewTaskUtil::of_release(
                    b.meta.kernel_release.as_deref(),
                ),
                traced_delays: traced_delays.clone(),
                flips_before_trace,
                seed: o.seed,
                preempted_runs: preempted_runs.clone(),
                newidle_costs: newidle_costs.clone(),
                ..SimOptions::with_defaults(topology.clone(), policy, 0, cap)
            },
        )?;
        let (result, events) = sim.run();
        let stats = RunStats::of(&events, &topo);
        let events = o.out_dir.is_some().then_some(events);
        Ok((policy.clone(), result, stats, events))
    });
    let sims: Vec<_> = sims.into_iter().collect::<Result<_, _>>()?;
    let (_, own_result, own_stats, _) = &sims[0];
    let self_fidelity = SelfFidelity::of(
        &traced_policy,
        own_stats,
        &trace,
        own_result.unfinished_tasks,
        model.tasks,
    );
    let mut runs = Vec::new();
    for (policy, result, stats, events) in sims {
        let against_trace = Agreement::of(&stats, &trace);
        let bundle = match (&o.out_dir, events) {
            (Some(dir), Some(events)) => {
                let dest = dir.join(format!("sim-{name}-{}", policy.replace([':', '='], "_")));
                let provenance = Provenance::Simulate(SimulateRecord {
                    bundle: o.bundle.clone(),
                    policy: policy.clone(),
                    modelled_release: b.meta.kernel_release.clone(),
                });
                // results/sim.json: the run's result and the gate its trace passed.
                let mut json = serde_json::to_value(&result).expect("serialises");
                json["self_fidelity"] = serde_json::to_value(&self_fidelity).expect("serialises");
                // A replay of the re-run gives back its decisions with the same flips.
                json["flips_before_trace"] =
                    serde_json::to_value(flips_before_trace).expect("serialises");
                crate::synth::steps::write_bundle(
                    &dest, &topology, events, provenance, &policy, &json,
                )?;
                Some(dest)
            }
            _ => None,
        };
        runs.push(RerunArm {
            policy,
            result,
            stats,
            against_trace,
            bundle,
        });
    }
    Ok(Rerun {
        bundle: o.bundle.clone(),
        traced_policy,
        model,
        trace,
        runs,
        self_fidelity,
        scheduler,
        flips_before_trace,
        flips_fit,
        newidle_cost: o.newidle_cost,
    })
}

/// The email-ready table: the trace, then each re-run, then the fidelity line.
pub fn render(r: &Rerun) -> String {
    let mut out = String::new();
    render_runs(&mut out, r);
    render_fidelity(&mut out, r);
    render_gate(&mut out, r);
    render_trust(&mut out, r);
    out
}

/// The model's shape, then one row of statistics for the trace and each re-run, then
/// the re-runs that left tasks waiting.
fn render_runs(out: &mut String, r: &Rerun) {
    let m = &r.model;
    let _ = writeln!(
        out,
        "{}: {} tasks, {} wakeups between tasks, {} by timers or interrupts ({} of them \
         charged by the trace to the task they interrupted; {} with probed wake flags); \
         traced policy {}; scheduler {}",
        short(&r.bundle),
        m.tasks,
        m.task_wakeups,
        m.timer_wakeups,
        m.interrupted_wakings,
        m.probed_sync,
        r.traced_policy,
        r.scheduler.describe()
    );
    match &r.flips_fit {
        Some(f) => {
            if let Some(line) = f.describe() {
                let _ = writeln!(out, "{line}");
            }
        }
        None if r.flips_before_trace != BeforeTrace::default() => {
            let _ = writeln!(
                out,
                "wakee flips before the trace: {}, assumed (--flips-before-trace)",
                r.flips_before_trace.label()
            );
        }
        None => {}
    }
    let x = &m.exchanges;
    if x.pairs > 0 {
        let _ = writeln!(
            out,
            "{} request-response pairs: {} writes and {} reads the trace did not show were \
             put back",
            x.pairs, x.writes_added, x.reads_added
        );
    }
    let _ = writeln!(
        out,
        "{:<14} {:>9} {:>9} {:>8} {:>7} {:>6} {:>8} {:>8} {:>9} {:>6}",
        "run",
        "span ms",
        "CPU ms",
        "wakeups",
        "moved",
        "xLLC",
        "p50 us",
        "p99 us",
        "p99.9 us",
        "busy%"
    );
    let row = |out: &mut String, label: &str, s: &RunStats| {
        let _ = writeln!(
            out,
            "{:<14} {:>9.1} {:>9.1} {:>8} {:>7} {:>6} {:>8.1} {:>8.1} {:>9.1} {:>6.1}",
            label.chars().take(14).collect::<String>(),
            s.span_ns as f64 / 1e6,
            s.cpu_ns as f64 / 1e6,
            s.wakeups,
            s.moved(),
            s.cross_llc(),
            s.latency.p50 as f64 / 1e3,
            s.latency.p99 as f64 / 1e3,
            s.latency.p99_9 as f64 / 1e3,
            s.busy_pct
        );
    };
    row(out, "trace", &r.trace);
    for a in &r.runs {
        row(out, &format!("sim {}", a.policy), &a.stats);
    }
    if m.unended_sleeps > 0 {
        let _ = writeln!(
            out,
            "model: {} sleeps no order of its steps could end (wakes lost in building it) \
             were taken out",
            m.unended_sleeps
        );
    }
    if !m.stuck_tasks.is_empty() {
        const SHOWN: usize = 5;
        let more = match m.stuck_tasks.len().saturating_sub(SHOWN) {
            0 => String::new(),
            n => format!(" and {n} more"),
        };
        let _ = writeln!(
            out,
            "model: {} of {} tasks wait for a wakeup no order of the model's steps gives them \
             (the model holds a dependency the trace did not have): {}{more}",
            m.stuck_tasks.len(),
            m.tasks,
            m.stuck_tasks[..m.stuck_tasks.len().min(SHOWN)].join(", ")
        );
    }
    for a in r.runs.iter().filter(|a| a.result.unfinished_tasks > 0) {
        let lost = (a.result.unfinished_tasks as usize).saturating_sub(m.stuck_tasks.len());
        let _ = writeln!(
            out,
            "sim {}: {} of {} tasks did not finish ({} of them waiting for a wakeup their \
             re-run order never produced, or with work left at the end)",
            a.policy, a.result.unfinished_tasks, m.tasks, lost
        );
    }
}

/// How the re-run under the traced policy compares with the trace, in one paragraph.
fn render_fidelity(out: &mut String, r: &Rerun) {
    if let Some(own) = r.runs.iter().find(|a| a.policy == r.traced_policy) {
        let f = &own.against_trace;
        let _ = writeln!(
            out,
            "\nFidelity, re-run under {} against the trace: CPU time per task off by {:.1} % \
             ({:.0} % of tasks within 10 %); span x{:.2}, wakeups x{:.2}, migrations x{:.2} \
             (cross-LLC x{:.2}), latency p50 x{:.2}, p99 x{:.2}",
            own.policy,
            f.runtime_error_pct,
            f.tasks_within_10pct,
            f.span_ratio,
            f.wakeups_ratio,
            f.migrations_ratio,
            f.cross_llc_ratio,
            f.latency_p50_ratio,
            f.latency_p99_ratio
        );
        let share = |s: &RunStats| {
            let local = s.local_preempts + s.local_after_block;
            (local > 0).then(|| 100.0 * s.local_preempts as f64 / local as f64)
        };
        if let (Some(run), Some(trace)) = (share(&own.stats), share(&r.trace)) {
            let _ = writeln!(
                out,
                "Wakees on their waker's CPU preempted it in {run:.0} % of the re-run's local \
                 wakeups, {trace:.0} % of the trace's (the rest waited for the waker to block)"
            );
        }
        let res = &own.result;
        let _ = writeln!(
            out,
            "Wakeup delays (IPI and idle exit, preemption) of the re-run: {} as the traced \
             wakeup that ended the same sleep, {} drawn from the trace's of their kind, {} \
             the model's constants",
            res.delays_traced, res.delays_drawn, res.delays_fixed
        );
        if r.trace.stalled_ns > 0 || own.stats.stalled_ns > 0 {
            // As % of the CPU time there was, which busy_pct gives with cpu_ns.
            let pct = |s: &RunStats| match s.cpu_ns {
                0 => 0.0,
                cpu => s.busy_pct * s.stalled_ns as f64 / cpu as f64,
            };
            let cpu_time = |ns: u64| match ns {
                ns if ns < 1_000_000_000 => format!("{:.1} ms", ns as f64 / 1e6),
                ns => format!("{:.2} s", ns as f64 / 1e9),
            };
            let _ = writeln!(
                out,
                "CPUs stalled (a task put on one idle waited 1 ms or more for it): {} of CPU \
                 time in the trace ({:.1} % of it), {} in the re-run ({:.1} %)",
                cpu_time(r.trace.stalled_ns),
                pct(&r.trace),
                cpu_time(own.stats.stalled_ns),
                pct(&own.stats)
            );
        }
        if res.hidden_writes > 0 {
            let _ = writeln!(
                out,
                "Sleeps of readers fed by several writers ended by a write the trace hid: {} \
                 (of {} wakeups)",
                res.hidden_writes, own.stats.wakeups
            );
        }
        if res.runs_stretched > 0 {
            let _ = writeln!(
                out,
                "Runs the tick would have ended that went on as long as the trace's \
                 preempted runs did (a CPU that stalls takes no tick): {}",
                res.runs_stretched
            );
        }
        let late = &r.model.late_timers;
        if late.sleeps > 0 {
            let _ = writeln!(
                out,
                "Timed sleeps the trace ended in an interrupt that had already woken a task \
                 on their CPU (a late interrupt): {}; the re-run ended {} of them at an \
                 earlier timer interrupt or wakeup IPI of their CPU, the rest at their \
                 traced length",
                late.sleeps, res.late_timers_bunched
            );
        }
        let levels: Vec<String> = (res.newidle_cost_ns.iter())
            .map(|&(least, most)| match least == most {
                true => format_ns(least),
                false => format!("{}-{}", format_ns(least), format_ns(most)),
            })
            .collect();
        let source = match (r.newidle_cost, res.newidle_costs_recorded) {
            (NewidleCostSource::Model, _) => "the model's estimates (--newidle-cost model)".into(),
            (_, 0) => "the model's estimates (the capture recorded none for these domains)".into(),
            (_, n) => format!("the kernel's, as the capture recorded them on {n} CPUs"),
        };
        let _ = writeln!(
            out,
            "Newidle balance costs by domain level, lowest first: {}; {source}",
            levels.join(", ")
        );
    }
}

/// `ns` as us or ms, three significant figures at most.
fn format_ns(ns: u64) -> String {
    if ns >= 1_000_000 {
        format!("{:.1} ms", ns as f64 / 1e6)
    } else {
        format!("{:.1} us", ns as f64 / 1e3)
    }
}

/// The self-fidelity gate: its verdict, then each check.
fn render_gate(out: &mut String, r: &Rerun) {
    let g = &r.self_fidelity;
    let _ = writeln!(
        out,
        "\nSelf-fidelity gate, re-run under {} against the trace: {}",
        g.traced_policy,
        g.verdict()
    );
    let _ = writeln!(
        out,
        "{:<24} {:>12} {:>12} {:>10} {:>14}  result",
        "check", "trace", "re-run", "tolerance", "re-run/trace"
    );
    for c in &g.checks {
        let num = |x: f64| {
            if c.tolerance.ends_with("points") {
                format!("{x:.1}")
            } else {
                format!("{x:.0}")
            }
        };
        let _ = writeln!(
            out,
            "{:<24} {:>12} {:>12} {:>10} {:>14}  {}",
            c.name,
            num(c.trace),
            num(c.rerun),
            c.tolerance,
            c.compared(),
            c.result()
        );
    }
}

/// Whether each counterfactual re-run is to be believed, and the bundles written.
fn render_trust(out: &mut String, r: &Rerun) {
    let g = &r.self_fidelity;
    for a in r.runs.iter().filter(|a| a.policy != r.traced_policy) {
        let _ = writeln!(
            out,
            "sim {}: counterfactual {}",
            a.policy,
            if g.trustworthy {
                "trustworthy (the traced policy's re-run passes the gate)"
            } else {
                "UNTRUSTWORTHY (the traced policy's re-run misses the gate)"
            }
        );
    }
    for a in &r.runs {
        if let Some(b) = &a.bundle {
            let _ = writeln!(out, "wrote {}", b.display());
        }
    }
}

fn short(p: &Path) -> String {
    p.file_name().map_or_else(
        || p.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn a_cpus_overlapping_stalls_count_once_and_other_cpus_apart() {
        let mut waits = vec![
            (1, 5 * MS, 9 * MS),
            (1, MS, 3 * MS),
            (0, 2 * MS, 4 * MS),
            (1, 2 * MS, 4 * MS),
            // Within the one before on CPU 1.
            (1, 6 * MS, 7 * MS),
        ];
        // CPU 0: 2 ms; CPU 1: 1-4 ms and 5-9 ms, 7 ms.
        assert_eq!(stalled_ns(&mut waits), 9 * MS);
        assert_eq!(stalled_ns(&mut []), 0);
    }

    /// A stall is a wait of 1 ms or more while the CPU it ended on sat idle: task 5 waits
    /// 3 ms behind task 6 on CPU 1 and is pulled to CPU 0 once that idles (1 ms of it
    /// idle); task 6 waits 2.5 ms for CPU 1, idle all along. 3.5 ms in all, not 5.5.
    #[test]
    fn a_stall_counts_only_the_idle_time_of_its_cpu() {
        use crate::trace::event::build::{migrate, switch, wakeup, waking};
        let us = |n: u64| n * 1_000;
        let events = [
            switch(0, 0, 0, 0, 7),
            switch(0, 1, 0, 0, 5),
            switch(us(500), 1, 5, 1, 6),
            waking(MS, 0, 7, 5, 1),
            wakeup(MS, 0, 7, 5, 1),
            switch(3 * MS, 0, 7, 1, 0),
            migrate(us(3_500), 0, 5, 1, 0),
            switch(4 * MS, 0, 0, 0, 5),
            switch(5 * MS, 1, 6, 1, 0),
            waking(6 * MS, 0, 5, 6, 1),
            wakeup(6 * MS, 0, 5, 6, 1),
            switch(us(8_500), 1, 0, 0, 6),
            switch(9 * MS, 1, 6, 1, 0),
        ];
        let topo = Topo::new(&crate::topology::Topology::flat(2), 2);
        assert_eq!(RunStats::of(&events, &topo).stalled_ns, us(3_500));
    }

    fn stats(
        wakeups: u64,
        same_llc: u64,
        cross_llc: u64,
        busy_pct: f64,
        p50: u64,
        p99: u64,
        cpu_ms: &[(i32, f64)],
    ) -> RunStats {
        RunStats {
            wakeups,
            wakeup_moves: Placements {
                same_cpu: 0,
                same_llc,
                cross_llc,
                cross_numa: 0,
            },
            busy_pct,
            latency: Percentiles {
                p50,
                p99,
                ..Percentiles::default()
            },
            cpu_ns_by_pid: cpu_ms
                .iter()
                .map(|&(pid, ms)| (pid, (ms * MS as f64) as u64))
                .collect(),
            ..RunStats::default()
        }
    }

    /// The trace of the derived pass's tests (see there), first event at 5, last at 80:
    /// a CPU's first slice counts from the first event (task 1: 10 - 5), a slice after a
    /// missing switch not at all (4's second), the idle task never. Latencies 10, 10 and
    /// 8 ns; none onto an idle CPU from another, none a preempted waker's.
    #[test]
    fn statistics_of_a_short_trace() {
        let topo = Topo::new(&crate::topology::Topology::flat(2), 2);
        let mut s = RunStats::of(&crate::derived::tests::events(), &topo);
        let mut by_pid: Vec<(i32, u64)> = s.cpu_ns_by_pid.drain().collect();
        by_pid.sort();
        assert_eq!(by_pid, [(1, 5), (2, 15), (3, 20), (4, 25), (5, 30), (6, 0)]);
        assert_eq!((s.span_ns, s.cpu_ns, s.wakeups), (75, 95, 3));
        assert_eq!((s.latency.p50, s.latency.max), (10, 10));
        assert_eq!(s.remote_idle_latency, Percentiles::default());
        assert_eq!(s.local_preempts, 0);
        assert_eq!((s.migrations.same_llc, s.wakeup_moves.same_llc), (2, 1));
        assert!((s.busy_pct - 100.0 * 95.0 / 150.0).abs() < 1e-9);
    }

    #[test]
    fn tolerances_hold_at_their_bounds() {
        assert!(within_pct(1100, 1000, 10) && within_pct(900, 1000, 10));
        assert!(!within_pct(1101, 1000, 10) && !within_pct(899, 1000, 10));
        assert!(within_pct(0, 0, 10) && !within_pct(1, 0, 15));
        // x1.5 either way: 15 against 10 passes, 6.6 (below 10 / 1.5) does not.
        assert!(within_x1_5(15, 10) && within_x1_5(10, 15));
        assert!(!within_x1_5(16, 10) && !within_x1_5(66, 100));
        assert!(within_x1_5(67, 100) && within_x1_5(0, 0) && !within_x1_5(5, 0));
    }

    /// A trace of 1000 wakeups (80 moved within the LLC, 60 across), 50 % busy,
    /// latency p50 10 us and p99 100 us, tasks of 10, 20 and 0.5 ms; a re-run of
    /// 1100 wakeups (+10 %), 106 + 51 = 157 moved (+12 %), 51 across (−15 %), 53 %
    /// busy (+3 points), p50 15 us (x1.5), p99 66 us (below x1/1.5), tasks of 11
    /// (+10 %), 17.9 (−10.5 %) and 0.1 ms (under 1 ms in the trace: not checked).
    /// Everything at its bound passes; the p99 and the second task miss.
    #[test]
    fn the_gate_passes_at_the_bounds_and_names_what_misses() {
        let trace = stats(
            1000,
            80,
            60,
            50.0,
            10_000,
            100_000,
            &[(1, 10.0), (2, 20.0), (3, 0.5)],
        );
        let run = stats(
            1100,
            106,
            51,
            53.0,
            15_000,
            66_000,
            &[(1, 11.0), (2, 17.9), (3, 0.1)],
        );
        let g = SelfFidelity::of("sis_util", &run, &trace, 0, 3);
        let verdicts: Vec<(&str, bool)> =
            g.checks.iter().map(|c| (c.name.as_str(), c.pass)).collect();
        assert_eq!(
            verdicts,
            [
                ("wakeups", true),
                ("moved off prev", true),
                ("cross-LLC", true),
                ("busy %", true),
                ("latency p50 ns", true),
                ("latency p99 ns", false),
                ("tasks' CPU time ±10 %", false),
                ("tasks finished", true),
            ]
        );
        assert!(!g.trustworthy);
        assert_eq!(
            g.verdict(),
            "misses 2 of 8 checks: latency p99 ns (x0.66), tasks' CPU time ±10 % (1 of 2)"
        );
        // The same run with p99 at 67 us and the task at 18 ms passes all...
        let run = stats(1100, 106, 51, 53.0, 15_000, 67_000, &[(1, 11.0), (2, 18.0)]);
        let g = SelfFidelity::of("sis_util", &run, &trace, 0, 3);
        assert!(g.trustworthy, "{}", g.verdict());
        assert_eq!(g.verdict(), "passes all 8 checks");
        // ... unless a task is left waiting, or the busy share is 3.1 points off.
        assert!(!SelfFidelity::of("sis_util", &run, &trace, 1, 3).trustworthy);
        let busier = RunStats {
            busy_pct: 53.1,
            ..run.clone()
        };
        let g = SelfFidelity::of("sis_util", &busier, &trace, 0, 3);
        assert_eq!(g.verdict(), "misses 1 of 8 checks: busy % (+3.1 points)");
    }

    /// Two counts differing by at most twice √(their sum) cannot be told apart.
    #[test]
    fn a_count_outside_its_tolerance_is_judged_only_beyond_its_noise() {
        // 5 against 2: 3² = 9 ≤ 4·7; 5 against 200: 195² far above 4·205; 100 against
        // 80: 400 ≤ 720; 400 against 320: 6,400 > 2,880.
        assert!(too_few_to_judge(2, 5) && !too_few_to_judge(200, 5));
        assert!(too_few_to_judge(80, 100) && !too_few_to_judge(320, 400));
        assert!(too_few_to_judge(0, 0) && !too_few_to_judge(10_000, 0));
        // 5 cross-LLC placements in the trace, 2 in the re-run: shown, not judged; the
        // rest passes, so the counterfactuals are trusted and the verdict says why.
        let trace = stats(1000, 80, 5, 50.0, 10_000, 100_000, &[(1, 10.0)]);
        let run = stats(1000, 83, 2, 50.0, 10_000, 100_000, &[(1, 10.0)]);
        let g = SelfFidelity::of("sis_util", &run, &trace, 0, 1);
        let cross = g.checks.iter().find(|c| c.name == "cross-LLC").unwrap();
        assert!(!cross.pass && cross.too_few);
        assert_eq!(cross.result(), "too few");
        assert!(g.trustworthy);
        assert_eq!(
            g.verdict(),
            "passes all 7 checks; too few to judge: cross-LLC (5 in the trace)"
        );
        // 200 in the re-run against the same 5 is a miss, however few the trace's.
        let run = stats(1000, 80, 200, 50.0, 10_000, 100_000, &[(1, 10.0)]);
        let g = SelfFidelity::of("sis_util", &run, &trace, 0, 1);
        let cross = g.checks.iter().find(|c| c.name == "cross-LLC").unwrap();
        assert!(!cross.pass && !cross.too_few && !g.trustworthy);
        // Within its tolerance a check passes, not "too few": 5 against 5.
        let g = SelfFidelity::of("sis_util", &trace, &trace, 0, 1);
        assert!(g.checks.iter().all(|c| c.pass && !c.too_few));
    }
}
