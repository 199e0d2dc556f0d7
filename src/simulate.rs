//! `sisreplay simulate BUNDLE`: the captured trace becomes a task model (synth::traced),
//! re-run in closed loop under each policy. The same statistics are taken from the trace
//! and from every re-run, so the re-run under the traced kernel's own policy measures the
//! model's fidelity (CPU time per task, wakeups, migrations, latency, how long the work
//! took), and the other policies' re-runs say what would have happened next.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::bundle::provenance::{Provenance, SimulateRecord};
use crate::bundle::Bundle;
use crate::metrics::observed::Percentiles;
use crate::metrics::Placements;
use crate::sim::{par_map, Sim, SimOptions, SimResult};
use crate::state::Topo;
use crate::synth::traced::{self, TracedShape};
use crate::trace::{Event, EventKind, EventSource};

/// What a stream of scheduler events shows, the same for a trace and a re-run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RunStats {
    /// First to last event.
    pub span_ns: u64,
    /// CPU time of all tasks (idle excluded), ns.
    pub cpu_ns: u64,
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
    pub local_preempts: u64,
    pub busy_pct: f64,
}

impl RunStats {
    pub fn of(events: &[Event], topo: &Topo) -> RunStats {
        let mut s = RunStats::default();
        let (Some(first), Some(last)) = (events.first(), events.last()) else {
            return s;
        };
        s.span_ns = last.ts.saturating_sub(first.ts);
        let n = topo.nr_cpus as usize;
        // Per CPU: the task on it and since when.
        let mut on: Vec<Option<(i32, u64)>> = vec![None; n];
        // A waking: when, on which CPU, by whom.
        let mut woken: HashMap<i32, (u64, u32, i32)> = HashMap::new();
        let mut lat: Vec<u32> = Vec::new();
        let mut remote_idle: Vec<u32> = Vec::new();
        let mut local_preempt: Vec<u32> = Vec::new();
        for e in events {
            let cpu = e.cpu as usize;
            match &e.kind {
                EventKind::Switch {
                    prev_pid,
                    prev_state,
                    next_pid,
                    ..
                } if cpu < n => {
                    // Until a CPU's first switch, its task ran since the trace began; after
                    // a switch the kernel did not record, how long it ran is unknown.
                    let since = match on[cpu] {
                        Some((pid, t)) if pid == *prev_pid => Some(t),
                        None => Some(first.ts),
                        Some(_) => None,
                    };
                    if let (Some(since), true) = (since, *prev_pid != 0) {
                        *s.cpu_ns_by_pid.entry(*prev_pid).or_default() += e.ts - since;
                    }
                    on[cpu] = Some((*next_pid, e.ts));
                    if let Some((w, from, waker)) = woken.remove(next_pid) {
                        let ns = (e.ts - w).min(u32::MAX as u64) as u32;
                        lat.push(ns);
                        if *prev_pid == 0 && from != e.cpu {
                            remote_idle.push(ns);
                        }
                        let preempted = *prev_state == 0 || *prev_state & 0x100 != 0;
                        if from == e.cpu && *prev_pid == waker && waker != 0 && preempted {
                            local_preempt.push(ns);
                        }
                    }
                }
                EventKind::Waking(w) => {
                    woken.entry(w.pid).or_insert((e.ts, e.cpu, e.common_pid));
                }
                EventKind::Wakeup(_) => s.wakeups += 1,
                EventKind::Migrate {
                    orig_cpu, dest_cpu, ..
                } => s
                    .migrations
                    .count(topo, (*orig_cpu).max(0) as u32, (*dest_cpu).max(0) as u32),
                _ => {}
            }
        }
        for (pid, since) in on.into_iter().flatten() {
            if pid != 0 {
                *s.cpu_ns_by_pid.entry(pid).or_default() += last.ts - since;
            }
        }
        s.cpu_ns = s.cpu_ns_by_pid.values().sum();
        s.latency = Percentiles::of(&mut lat);
        s.remote_idle_latency = Percentiles::of(&mut remote_idle);
        s.local_preempts = local_preempt.len() as u64;
        s.local_preempt_latency = Percentiles::of(&mut local_preempt);
        s.busy_pct = 100.0 * s.cpu_ns as f64 / (s.span_ns.max(1) as f64 * n.max(1) as f64);
        s
    }

    /// Migrations that left the LLC.
    pub fn cross_llc(&self) -> u64 {
        self.migrations.cross_llc + self.migrations.cross_numa
    }

    pub fn moved(&self) -> u64 {
        self.migrations.same_llc + self.cross_llc()
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
    pub wakeups_ratio: f64,
    pub migrations_ratio: f64,
    pub cross_llc_ratio: f64,
    pub latency_p50_ratio: f64,
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

#[derive(Debug, Clone, Serialize)]
pub struct RerunArm {
    pub policy: String,
    pub result: SimResult,
    pub stats: RunStats,
    pub against_trace: Agreement,
    pub bundle: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Rerun {
    pub bundle: PathBuf,
    /// The policy the traced kernel ran: its re-run is the fidelity measure.
    pub traced_policy: String,
    pub model: TracedShape,
    pub trace: RunStats,
    pub runs: Vec<RerunArm>,
}

pub struct RerunOptions {
    pub bundle: PathBuf,
    pub policies: Vec<crate::policy::PolicySpec>,
    /// Bundles of the re-runs go here, one per policy; None writes none.
    pub out_dir: Option<PathBuf>,
    pub jobs: usize,
}

/// Fewer samples than this of a latency in the trace leave the model's default.
const MIN_SAMPLES: u64 = 50;

/// Re-runs the bundle's tasks under each policy (the traced kernel's added first).
pub fn run(o: &RerunOptions) -> Result<Rerun, String> {
    let mut b = Bundle::open(&o.bundle).map_err(|e| e.to_string())?;
    let traced_policy = crate::replay::traced_policy_of(&b.meta).to_string();
    let topology = b.meta.topology.clone();
    let nr_cpus = b.meta.nr_cpus;
    let mut events = Vec::with_capacity(b.meta.events as usize);
    while let Some(e) = b.next_event().map_err(|e| e.to_string())? {
        events.push(e);
    }
    let topo = Topo::new(&topology, nr_cpus);
    let name = o
        .bundle
        .file_name()
        .map_or_else(|| "trace".into(), |n| n.to_string_lossy().into_owned());
    let (workload, model) = traced::build(&name, &events, topo.nr_cpus);
    let trace = RunStats::of(&events, &topo);
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
    // Room for a slower re-run; the run ends earlier when every task has.
    let cap = trace.span_ns.saturating_mul(4) + 100_000_000;
    let runs = par_map(&policies, o.jobs, |policy| -> Result<RerunArm, String> {
        let sim = Sim::new(
            workload.clone(),
            SimOptions {
                wake_ipi_ns,
                preempt_delay_ns,
                record: true,
                ..SimOptions::with_defaults(topology.clone(), policy, 0, cap)
            },
        )
        .map_err(|e| e.to_string())?;
        let (result, events) = sim.run();
        let stats = RunStats::of(&events, &topo);
        let against_trace = Agreement::of(&stats, &trace);
        let bundle = match &o.out_dir {
            None => None,
            Some(dir) => {
                let dest = dir.join(format!("sim-{name}-{}", policy.replace([':', '='], "_")));
                let provenance = Provenance::Simulate(SimulateRecord {
                    bundle: o.bundle.clone(),
                    policy: policy.clone(),
                });
                crate::synth::steps::write_bundle(
                    &dest, &topology, events, provenance, policy, &result,
                )?;
                Some(dest)
            }
        };
        Ok(RerunArm {
            policy: policy.clone(),
            result,
            stats,
            against_trace,
            bundle,
        })
    });
    Ok(Rerun {
        bundle: o.bundle.clone(),
        traced_policy,
        model,
        trace,
        runs: runs.into_iter().collect::<Result<_, _>>()?,
    })
}

/// The email-ready table: the trace, then each re-run, then the fidelity line.
pub fn render(r: &Rerun) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let m = &r.model;
    let _ = writeln!(
        out,
        "{}: {} tasks, {} wakeups between tasks, {} by timers or interrupts ({} with probed \
         wake flags); traced policy {}",
        short(&r.bundle),
        m.tasks,
        m.task_wakeups,
        m.timer_wakeups,
        m.probed_sync,
        r.traced_policy
    );
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
    row(&mut out, "trace", &r.trace);
    for a in &r.runs {
        row(&mut out, &format!("sim {}", a.policy), &a.stats);
    }
    for a in r.runs.iter().filter(|a| a.result.unfinished_tasks > 0) {
        let _ = writeln!(
            out,
            "sim {}: {} of {} tasks did not finish (waiting for a wakeup their re-run order \
             never produced)",
            a.policy, a.result.unfinished_tasks, m.tasks
        );
    }
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
    }
    for a in &r.runs {
        if let Some(b) = &a.bundle {
            let _ = writeln!(out, "wrote {}", b.display());
        }
    }
    out
}

fn short(p: &Path) -> String {
    p.file_name().map_or_else(
        || p.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}
