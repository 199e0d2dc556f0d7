//! Decision replay: at every wakeup in a trace, every selected policy decides from the
//! recorded machine state, and the decision is counted. The state is the trace's, not the
//! policy's (open loop), so the policy matching the traced kernel should pick the CPU the
//! kernel picked: that agreement is the model's fidelity.
//!
//! Events are read with a lookahead window so that each sched_waking knows its outcome
//! (the sched_wakeup that follows, possibly later and on the target CPU when it went
//! through the IPI wakelist) and a wakeup queued by IPI can mark its target busy.

pub mod balance;
pub mod results;
pub mod select;
pub mod text;

use std::collections::{HashMap, VecDeque};
use std::io::Write;

use serde::Serialize;

use crate::bundle::Meta;
use crate::metrics::calibration::{Fit, Samples};
use crate::metrics::observed::Observed;
use crate::metrics::{
    Decision, Derived, Distance, Fidelity, Placements, PolicyMetrics, StateRepairs, Window,
};
use crate::policy::sis::{select_idle_sibling, TimeModel};
use crate::policy::{self, Policy, PolicyError};
use crate::state::{Change, Machine, Topo};
use crate::topology::Topology;
use crate::trace::{Event, EventKind, EventSource, TraceError};

pub struct ReplayOptions {
    /// Policy specs, e.g. `sis_util:pct=117`.
    pub policies: Vec<String>,
    pub time: TimeModel,
    /// How far ahead a sched_waking looks for its sched_wakeup.
    pub lookahead_ns: u64,
    /// An rq lock held this long collides with the next acquisition of it.
    pub lock_hold_ns: u64,
    /// Time windows for variation.
    pub windows: u32,
    /// The policy whose choices are compared with the kernel's; default from the kernel.
    pub as_kernel: Option<String>,
    /// Writes one CSV row per wakeup and policy.
    pub decisions: Option<Box<dyn Write + Send>>,
    /// Explains the decisions of the wakeup at this timestamp.
    pub explain_ts: Option<u64>,
    /// Kernels with DELAY_DEQUEUE (v6.12+) keep a task that blocked with negative lag
    /// queued, and its next wakeup selects nothing. Traces do not show the lag; a
    /// wakeup this soon after the task blocked is taken as such a one. None: off.
    pub delayed_dequeue_ns: Option<u64>,
    /// Replay the kernel's own policy too when it is not among `policies`.
    pub add_kernel_policy: bool,
}

impl Default for ReplayOptions {
    fn default() -> ReplayOptions {
        ReplayOptions {
            policies: vec!["sis_prop".into(), "sis_util".into()],
            time: TimeModel::default(),
            lookahead_ns: 20_000_000,
            lock_hold_ns: 300,
            windows: 10,
            as_kernel: None,
            decisions: None,
            explain_ts: None,
            delayed_dequeue_ns: None,
            add_kernel_policy: true,
        }
    }
}

/// Why a recorded wakeup was not replayed.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Skipped {
    /// The wakee was running or still queued: ttwu_runnable, no selection.
    pub on_rq: u64,
    /// No sched_wakeup followed within the lookahead (lost, or past the end).
    pub no_wakeup: u64,
    /// Taken as a delayed-dequeue wakeup (see ReplayOptions::delayed_dequeue_ns).
    pub delayed_dequeue: u64,
    /// The trace has select_task_rq_fair probes and none fired for this waking: the
    /// kernel selected nothing (on_rq, delayed, or a task allowed on one CPU only).
    pub no_selection: u64,
    /// The wakee is a per-CPU kernel thread, allowed on one CPU: select_task_rq does not
    /// call the class's selection for it.
    pub pinned: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ReplayResult {
    pub kernel_release: Option<String>,
    pub as_kernel: String,
    pub nr_cpus: u32,
    pub llcs: usize,
    pub topology_assumed: bool,
    pub wakings: u64,
    pub replayed: u64,
    /// Recorded wakeups that went through the IPI wakelist.
    pub ipi_wakeups: u64,
    pub skipped: Skipped,
    pub time_model: TimeModel,
    pub lock_hold_ns: u64,
    /// Trace clock of the first event.
    pub first_ts_ns: u64,
    pub duration_ns: u64,
    pub policies: Vec<PolicyMetrics>,
    /// What the trace itself recorded, policy-independent.
    pub observed: Observed,
    /// Each explained wakeup: policy → steps.
    pub explained: Vec<(String, Vec<String>)>,
    /// Whether the trace carries the select_task_rq_fair probes: then which wakings
    /// selected and their sync flag are known, not guessed.
    pub probed_selections: u64,
    /// The search-time model fitted to the probes' durations (see metrics::calibration).
    pub search_fit: Option<Fit>,
}

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error(transparent)]
    Trace(#[from] TraceError),
    #[error(transparent)]
    Bundle(#[from] crate::bundle::BundleError),
    #[error(transparent)]
    Policy(#[from] PolicyError),
    #[error("decisions file: {0}")]
    Io(#[from] std::io::Error),
}

/// Replays with the policies split over `jobs` threads, each reading the trace anew
/// (`open` makes a source) and rebuilding the machine state itself. The state and reading
/// are most of the cost of one pass, so this pays off only with several policies per
/// thread; `cargo bench --bench replay` measures it. Decisions files and --explain need
/// one job.
pub fn replay_parallel(
    open: &(dyn Fn() -> Result<Box<dyn EventSource>, ReplayError> + Sync),
    meta: Option<&Meta>,
    opts: ReplayOptions,
    jobs: usize,
) -> Result<ReplayResult, ReplayError> {
    let jobs = jobs.max(1);
    if jobs == 1 || opts.decisions.is_some() || opts.explain_ts.is_some() {
        return replay(open()?.as_mut(), meta, opts);
    }
    let release = meta.and_then(|m| m.kernel_release.clone());
    let as_kernel = opts
        .as_kernel
        .clone()
        .unwrap_or_else(|| traced_policy(release.as_deref(), features(meta)).to_string());
    let mut specs = opts.policies.clone();
    if !specs.iter().any(|s| s == &as_kernel) {
        specs.push(as_kernel.clone());
    }
    let n = jobs.min(specs.len());
    let mut groups: Vec<Vec<String>> = vec![Vec::new(); n];
    for (i, s) in specs.iter().enumerate() {
        groups[i % n].push(s.clone());
    }
    let results: Vec<Result<ReplayResult, ReplayError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = groups
            .into_iter()
            .map(|g| {
                let o = ReplayOptions {
                    policies: g,
                    as_kernel: Some(as_kernel.clone()),
                    add_kernel_policy: false,
                    decisions: None,
                    explain_ts: None,
                    ..opts.clone_settings()
                };
                scope.spawn(move || replay(open()?.as_mut(), meta, o))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("replay thread panicked"))
            .collect()
    });
    let mut parts = Vec::new();
    for r in results {
        parts.push(r?);
    }
    let mut merged = parts.remove(0);
    for p in parts {
        merged.policies.extend(p.policies);
    }
    let order = |name: &str| specs.iter().position(|s| s == name).unwrap_or(usize::MAX);
    merged.policies.sort_by_key(|p| order(&p.policy));
    Ok(merged)
}

impl ReplayOptions {
    /// The plain settings, without the output sinks.
    fn clone_settings(&self) -> ReplayOptions {
        ReplayOptions {
            policies: self.policies.clone(),
            time: self.time,
            lookahead_ns: self.lookahead_ns,
            lock_hold_ns: self.lock_hold_ns,
            windows: self.windows,
            as_kernel: self.as_kernel.clone(),
            decisions: None,
            explain_ts: None,
            delayed_dequeue_ns: self.delayed_dequeue_ns,
            add_kernel_policy: self.add_kernel_policy,
        }
    }
}

/// The sched features a capture recorded, when it could read them.
fn features(meta: Option<&Meta>) -> Option<&str> {
    meta?
        .capture
        .as_ref()?
        .get("sched_debug")?
        .get("features")?
        .as_str()
        .filter(|f| !f.starts_with("unreadable") && *f != "absent")
}

/// Fine windows of `fine_ns` each are doubled whenever there would be more than this many.
const MAX_FINE: usize = 4096;

/// The fine window `now` falls in, doubling the window length (and merging what every
/// series holds so far) until it fits.
fn window_index(
    now: u64,
    t0: u64,
    fine_ns: &mut u64,
    running: &mut [Running],
    observed: &mut Observed,
) -> usize {
    let mut win = (now.saturating_sub(t0) / *fine_ns) as usize;
    while win >= MAX_FINE {
        for r in running.iter_mut() {
            halve_windows(&mut r.metrics.windows);
        }
        halve_windows(&mut observed.windows);
        *fine_ns *= 2;
        win = (now.saturating_sub(t0) / *fine_ns) as usize;
    }
    win
}

/// Window `i` of a series, created (with its start) if the series is shorter.
fn window_at(w: &mut Vec<Window>, i: usize, start_ns: u64) -> &mut Window {
    if w.len() <= i {
        w.resize_with(i + 1, Window::default);
    }
    let wd = &mut w[i];
    wd.start_ns = start_ns;
    wd
}

/// Counts a move from `from` to `to` by its distance.
pub(crate) fn place(p: &mut Placements, topo: &Topo, from: u32, to: u32) {
    *match Distance::between(topo, from, to) {
        Distance::SameCpu => &mut p.same_cpu,
        Distance::SameLlc => &mut p.same_llc,
        Distance::CrossLlc => &mut p.cross_llc,
        Distance::CrossNuma => &mut p.cross_numa,
    } += 1;
}

/// Merges neighbouring windows pairwise.
fn halve_windows(w: &mut Vec<Window>) {
    let merged = w
        .chunks(2)
        .map(|pair| {
            let mut m = pair[0].clone();
            if let Some(b) = pair.get(1) {
                m.merge(b);
            }
            m
        })
        .collect();
    *w = merged;
}

/// Groups fine windows into `n` windows of equal length (the last may be shorter).
fn regroup(fine: Vec<Window>, n: usize) -> Vec<Window> {
    if fine.len() <= n {
        return fine;
    }
    let per = fine.len().div_ceil(n);
    fine.chunks(per)
        .map(|c| {
            let mut m = c[0].clone();
            for w in &c[1..] {
                m.merge(w);
            }
            m
        })
        .collect()
}

/// The policy the traced kernel ran: from its sched features when the capture could read
/// them (`SIS_UTIL`, `NO_SIS_UTIL`, `SIS_PROP`, `NO_SIS_PROP` in debugfs
/// sched/features), else the release's default.
pub fn traced_policy(release: Option<&str>, features: Option<&str>) -> &'static str {
    if let Some(f) = features {
        let has = |name: &str| f.split_whitespace().any(|t| t == name);
        if has("SIS_UTIL") {
            return "sis_util";
        }
        if has("SIS_PROP") {
            return "sis_prop";
        }
        if has("NO_SIS_UTIL") {
            return "no_limit";
        }
    }
    kernel_policy(release)
}

/// The policy the kernel of a bundle ran.
pub fn traced_policy_of(meta: &Meta) -> &'static str {
    traced_policy(meta.kernel_release.as_deref(), features(Some(meta)))
}

/// The policy a kernel release runs by default: SIS_UTIL from v6.0, SIS_PROP before.
pub fn kernel_policy(release: Option<&str>) -> &'static str {
    let version = release.and_then(|r| {
        let mut it = r
            .split(|c: char| !c.is_ascii_digit())
            .filter(|s| !s.is_empty());
        Some((
            it.next()?.parse::<u32>().ok()?,
            it.next()?.parse::<u32>().ok()?,
        ))
    });
    match version {
        Some((major, _)) if major >= 6 => "sis_util",
        Some(_) => "sis_prop",
        None => "sis_util",
    }
}

struct Running {
    spec: String,
    policy: Box<dyn Policy>,
    metrics: PolicyMetrics,
    last_lock: HashMap<u32, u64>,
}

/// The outcome the trace recorded for one sched_waking.
struct Outcome {
    chosen: u32,
    /// CPU whose buffer holds the sched_wakeup.
    recorded_on: u32,
}

/// wake_flags bits (kernel/sched/sched.h, unchanged since v5.13).
const WF_SYNC: u32 = 0x10;

/// What the select_task_rq_fair probes recorded for one waking.
struct Selection {
    wake_flags: u32,
    /// From the return probe, when the capture had one.
    duration_ns: Option<u64>,
}

/// The probes that follow a sched_waking on its CPU: select_task_rq runs in
/// try_to_wake_up right after the tracepoint, with interrupts off, so nothing else of
/// that CPU comes between the entry and the return. Another waking or switch on the CPU
/// before an entry means this waking selected nothing.
fn find_selection(ahead: &VecDeque<Event>, cpu: u32) -> Option<Selection> {
    let mut found: Option<(u64, u32)> = None;
    for e in ahead.iter().skip(1).filter(|e| e.cpu == cpu) {
        match (&e.kind, found) {
            (EventKind::SelectEnter { wake_flags, .. }, None) => found = Some((e.ts, *wake_flags)),
            (EventKind::SelectExit { .. }, Some((t0, wake_flags))) => {
                return Some(Selection {
                    wake_flags,
                    duration_ns: Some(e.ts.saturating_sub(t0)),
                })
            }
            (
                EventKind::Waking(_) | EventKind::Switch { .. } | EventKind::SelectExit { .. },
                None,
            ) => return None,
            // No return probe: the entry alone.
            (
                EventKind::Waking(_) | EventKind::Switch { .. } | EventKind::SelectEnter { .. },
                Some((_, wake_flags)),
            ) => {
                return Some(Selection {
                    wake_flags,
                    duration_ns: None,
                })
            }
            _ => {}
        }
    }
    found.map(|(_, wake_flags)| Selection {
        wake_flags,
        duration_ns: None,
    })
}

fn find_outcome(ahead: &VecDeque<Event>, pid: i32) -> Option<Outcome> {
    for e in ahead.iter().skip(1) {
        match &e.kind {
            EventKind::Wakeup(w) if w.pid == pid => {
                return Some(Outcome {
                    chosen: w.target_cpu.max(0) as u32,
                    recorded_on: e.cpu,
                })
            }
            EventKind::Waking(w) if w.pid == pid => return None,
            _ => {}
        }
    }
    None
}

pub fn replay(
    src: &mut dyn EventSource,
    meta: Option<&Meta>,
    mut opts: ReplayOptions,
) -> Result<ReplayResult, ReplayError> {
    let nr_cpus = meta.map_or(src.info().nr_cpus.unwrap_or(1), |m| m.nr_cpus);
    let topology = meta.map_or_else(|| Topology::flat(nr_cpus), |m| m.topology.clone());
    let topo = Topo::new(&topology, nr_cpus);
    let release = meta
        .and_then(|m| m.kernel_release.clone())
        .or_else(|| src.info().kernel_release.clone());
    let as_kernel = opts
        .as_kernel
        .clone()
        .unwrap_or_else(|| traced_policy(release.as_deref(), features(meta)).to_string());
    let mut specs = opts.policies.clone();
    if opts.add_kernel_policy
        && !specs
            .iter()
            .any(|s| s == &as_kernel || s.split(':').next() == Some(&as_kernel))
    {
        specs.push(as_kernel.clone());
    }
    let mut running = Vec::new();
    for s in &specs {
        let policy = policy::build(s)?;
        if !policy.info().replayable {
            return Err(PolicyError::NotReplayable(s.clone()).into());
        }
        let mut metrics = PolicyMetrics::new(s);
        if *s == as_kernel {
            metrics.fidelity = Some(Fidelity::default());
        }
        running.push(Running {
            spec: s.clone(),
            policy,
            metrics,
            last_lock: HashMap::new(),
        });
    }
    // Fine windows of fine_ns, doubled whenever there would be more than MAX_FINE of
    // them, are regrouped into opts.windows equal windows at the end: the trace's length
    // need not be known in advance.
    let mut fine_ns: u64 = 1_000_000;
    if let Some(w) = opts.decisions.as_mut() {
        writeln!(
            w,
            "ts_ns,pid,waker_cpu,prev_cpu,recorded_cpu,policy,cpu,path,probed,search_ns"
        )?;
    }

    let mut m = Machine::new(topo);
    let mut balancer = balance::Balancer::new(&m);
    let mut ahead: VecDeque<Event> = VecDeque::new();
    let mut batch = Vec::with_capacity(4096);
    let mut done = false;
    let mut result = ReplayResult {
        kernel_release: release,
        as_kernel: as_kernel.clone(),
        nr_cpus: m.topo.nr_cpus,
        llcs: m.topo.llc_cpus.len(),
        topology_assumed: meta.is_none_or(|m| m.topology_assumed),
        wakings: 0,
        replayed: 0,
        ipi_wakeups: 0,
        skipped: Skipped::default(),
        time_model: opts.time,
        lock_hold_ns: opts.lock_hold_ns,
        first_ts_ns: 0,
        duration_ns: 0,
        policies: Vec::new(),
        observed: Observed::default(),
        explained: Vec::new(),
        probed_selections: 0,
        search_fit: None,
    };
    let mut fit = Samples::default();
    // Set once a probe event is seen: from then on a waking without one selected nothing.
    let mut probes = meta.is_some_and(|m| m.counts.contains_key("select_task_rq_enter"));
    // Replayed wakeups whose task has not run since: pid → sched_waking time.
    let mut woken_at: HashMap<i32, u64> = HashMap::new();
    let mut first_seen = None;
    let mut last_seen = 0;
    loop {
        // Keep the window filled: its back must be lookahead past its front.
        while !done
            && ahead
                .front()
                .zip(ahead.back())
                .is_none_or(|(f, b)| b.ts.saturating_sub(f.ts) < opts.lookahead_ns)
        {
            batch.clear();
            if src.next_batch(&mut batch, 4096)? == 0 {
                done = true;
            }
            probes = probes
                || batch
                    .iter()
                    .any(|e| matches!(e.kind, EventKind::SelectEnter { .. }));
            ahead.extend(batch.drain(..));
        }
        let Some(e) = ahead.front() else { break };
        let now = e.ts;
        first_seen.get_or_insert(now);
        last_seen = now;
        if balancer.due(now) {
            balancer.tick(
                &mut m,
                running.iter_mut().map(|r| &mut r.policy).collect(),
                now,
            );
        }
        if let EventKind::Waking(w) = &e.kind {
            result.wakings += 1;
            let waker_cpu = e.cpu;
            let pid = w.pid;
            let queued = m
                .tasks
                .get(&pid)
                .is_some_and(|t| t.on_rq() || t.running_on.is_some());
            let delayed = opts.delayed_dequeue_ns.is_some_and(|d| {
                m.tasks
                    .get(&pid)
                    .and_then(|t| t.blocked_at)
                    .is_some_and(|b| now.saturating_sub(b) < d)
            });
            let selection = if probes {
                find_selection(&ahead, waker_cpu)
            } else {
                None
            };
            // With probes, whether the kernel selected is known; without, it is inferred
            // from the reconstructed state.
            let (queued, delayed) = match (probes, &selection) {
                (true, Some(_)) => (false, false),
                (true, None) => (true, false),
                (false, _) => (queued, delayed),
            };
            let pinned = !probes
                && crate::state::machine::TaskState::comm_is_percpu_kthread(&w.comm.to_str_lossy());
            match (queued, find_outcome(&ahead, pid)) {
                (true, _) if probes => result.skipped.no_selection += 1,
                (false, Some(_)) if pinned => result.skipped.pinned += 1,
                (true, _) => result.skipped.on_rq += 1,
                (false, Some(_)) if delayed => result.skipped.delayed_dequeue += 1,
                (false, None) => result.skipped.no_wakeup += 1,
                (false, Some(out)) => {
                    result.replayed += 1;
                    if let Some(sel) = &selection {
                        result.probed_selections += 1;
                        if let Some(ns) = sel.duration_ns {
                            result.observed.note_search(ns);
                        }
                    }
                    let prev = w.target_cpu.max(0) as u32;
                    let waker = e.common_pid;
                    let in_task = waker != 0
                        && m.cpus
                            .get(waker_cpu as usize)
                            .is_some_and(|c| c.irq_depth == 0);
                    // The sync flag is in no tracepoint: the probe records it; without one, a
                    // task waking from task context is taken as a sync wakeup (the pipe and
                    // socket paths of these loads).
                    let sync = selection
                        .as_ref()
                        .map_or(in_task, |s| s.wake_flags & WF_SYNC != 0);
                    let explain = opts.explain_ts == Some(now);
                    let chosen = select::choose_target(
                        &mut m,
                        &select::Waking {
                            now,
                            waker_cpu,
                            waker,
                            wakee: pid,
                            prev,
                            sync,
                            in_task,
                        },
                        explain,
                    );
                    let (wakee, affine_stage, affine_steps) =
                        (chosen.wakee, chosen.stage, chosen.steps);
                    let target = wakee.target;
                    let ipi = out.recorded_on != waker_cpu;
                    result.ipi_wakeups += ipi as u64;
                    let span_idle = m.topo.llc_span(target).iter().any(|&c| m.is_idle(c));
                    let t0 = first_seen.unwrap_or(now);
                    let win =
                        window_index(now, t0, &mut fine_ns, &mut running, &mut result.observed);
                    let obs = &mut result.observed;
                    obs.wakeups += 1;
                    place(&mut obs.placements, &m.topo, prev, out.chosen);
                    let wd = window_at(&mut obs.windows, win, t0 + win as u64 * fine_ns);
                    wd.wakeups += 1;
                    wd.cross_llc += !m.topo.share_cache(out.chosen, prev) as u64;
                    wd.moved += (out.chosen != prev) as u64;
                    if woken_at.insert(pid, now).is_some() {
                        obs.rewoken += 1;
                    }
                    for r in running.iter_mut() {
                        let d = select_idle_sibling(
                            &m,
                            r.policy.as_mut(),
                            &wakee,
                            &opts.time,
                            &balancer.caploads,
                            explain,
                        );
                        let pm = &mut r.metrics;
                        pm.counters.add(&d.counters);
                        *pm.paths.entry(d.path.name().to_string()).or_default() += 1;
                        let p = d.probed as usize;
                        if pm.probed.len() <= p {
                            pm.probed.resize(p + 1, 0);
                        }
                        pm.probed[p] += 1;
                        if d.probed > 0 {
                            pm.search_us.add(d.search_ns / 1000);
                        }
                        pm.search_ns_total += d.search_ns;
                        let topo = &m.topo;
                        let cross_llc = !topo.share_cache(d.cpu, prev);
                        place(&mut pm.placements, topo, prev, d.cpu);
                        if !m.is_idle(d.cpu) && span_idle {
                            pm.stacked_with_idle += 1;
                        }
                        if d.cpu != waker_cpu {
                            pm.remote_rq_locks += 1;
                            let last = r.last_lock.insert(d.cpu, now);
                            if last.is_some_and(|l| now.saturating_sub(l) < opts.lock_hold_ns) {
                                pm.rq_lock_collisions += 1;
                            }
                        }
                        let wd = window_at(&mut pm.windows, win, t0 + win as u64 * fine_ns);
                        wd.counters.add(&d.counters);
                        wd.search_ns += d.search_ns;
                        wd.cross_llc += cross_llc as u64;
                        wd.wakeups += 1;
                        wd.moved += (d.cpu != prev) as u64;
                        if let Some(f) = pm.fidelity.as_mut() {
                            if let (Some(ns), true) = (
                                selection.as_ref().and_then(|s| s.duration_ns),
                                d.cpu == out.chosen,
                            ) {
                                fit.add(d.probed, ns);
                            }
                            let (path, stage, predicted, recorded) =
                                (d.path, affine_stage, d.cpu, out.chosen);
                            f.note(
                                &Decision {
                                    now_ns: now,
                                    path,
                                    stage,
                                    prev,
                                    waker_cpu,
                                    predicted,
                                    recorded,
                                    ipi,
                                },
                                topo,
                            );
                        }
                        if let Some(wr) = opts.decisions.as_mut() {
                            writeln!(
                                wr,
                                "{now},{pid},{waker_cpu},{prev},{},{},{},{},{},{}",
                                out.chosen,
                                r.spec,
                                d.cpu,
                                d.path.name(),
                                d.probed,
                                d.search_ns
                            )?;
                        }
                        if explain {
                            let mut steps = vec![format!(
                                "pid {pid} woken on CPU {waker_cpu}, prev {prev}, target {target}, kernel chose {}",
                                out.chosen
                            )];
                            steps.extend(affine_steps.iter().cloned());
                            steps.extend(d.steps);
                            result.explained.push((r.spec.clone(), steps));
                        }
                    }
                    select::note_recent_used(&mut m, pid, &wakee);
                    if ipi {
                        // Queued to the target by IPI: not idle to others until activated.
                        if let Some(c) = m.cpus.get_mut(out.chosen as usize) {
                            c.pending += 1;
                        }
                    }
                }
            }
        }
        match &e.kind {
            EventKind::Switch { next_pid, .. } => {
                if let Some(woken) = woken_at.remove(next_pid) {
                    let t0 = first_seen.unwrap_or(now);
                    let win =
                        window_index(now, t0, &mut fine_ns, &mut running, &mut result.observed);
                    let obs = &mut result.observed;
                    let lat = now.saturating_sub(woken);
                    obs.note_latency(lat);
                    let wd = window_at(&mut obs.windows, win, t0 + win as u64 * fine_ns);
                    wd.latency_ns += lat;
                    wd.latencies += 1;
                }
            }
            EventKind::Migrate {
                orig_cpu, dest_cpu, ..
            } if *orig_cpu >= 0 && *dest_cpu >= 0 => {
                place(
                    &mut result.observed.migrations,
                    &m.topo,
                    *orig_cpu as u32,
                    *dest_cpu as u32,
                );
            }
            _ => {}
        }
        let e = ahead.pop_front().expect("front exists");
        if let Change::AvgIdle { cpu, avg_idle } = m.apply(&e) {
            for r in running.iter_mut() {
                r.policy.on_avg_idle(cpu, avg_idle, e.ts);
            }
        }
    }
    if let Some(w) = opts.decisions.as_mut() {
        w.flush()?;
    }
    result.first_ts_ns = first_seen.unwrap_or(0);
    result.duration_ns = last_seen.saturating_sub(result.first_ts_ns);
    result.search_fit = fit.fit();
    result.observed.finish(woken_at.len() as u64);
    result.observed.windows = regroup(
        std::mem::take(&mut result.observed.windows),
        opts.windows.max(1) as usize,
    );
    let repairs = StateRepairs {
        ties: src.stats().ties,
        runqueues: m.repairs,
    };
    for mut r in running {
        if let Some(f) = r.metrics.fidelity.as_mut() {
            f.finish(repairs);
        }
        r.metrics.derived = Derived::of(&r.metrics.counters);
        r.metrics.windows = regroup(
            std::mem::take(&mut r.metrics.windows),
            opts.windows.max(1) as usize,
        );
        result.policies.push(r.metrics);
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_of_the_traced_kernel() {
        assert_eq!(kernel_policy(Some("5.18.12")), "sis_prop");
        assert_eq!(kernel_policy(Some("6.1.0-18-amd64")), "sis_util");
        assert_eq!(kernel_policy(None), "sis_util");
        // Debian 6.1's defaults, and the rig's other two settings.
        let f = "GENTLE_FAIR_SLEEPERS START_DEBIT NO_SIS_PROP SIS_UTIL WA_IDLE";
        assert_eq!(traced_policy(Some("6.1.0"), Some(f)), "sis_util");
        assert_eq!(
            traced_policy(Some("6.1.0"), Some("SIS_PROP NO_SIS_UTIL")),
            "sis_prop"
        );
        assert_eq!(
            traced_policy(Some("6.1.0"), Some("NO_SIS_PROP NO_SIS_UTIL")),
            "no_limit"
        );
        assert_eq!(traced_policy(Some("5.18"), Some("TTWU_QUEUE")), "sis_prop");
    }
}
