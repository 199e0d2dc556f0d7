//! Decision replay: at every wakeup in a trace, every selected policy decides from the
//! recorded machine state, and the decision is counted. The state is the trace's, not the
//! policy's (open loop), so the policy matching the traced kernel should pick the CPU the
//! kernel picked: that agreement is the model's fidelity.
//!
//! Events are read with a lookahead window so that each sched_waking knows its outcome
//! (the sched_wakeup that follows, possibly later and on the target CPU when it went
//! through the IPI wakelist) and a wakeup queued by IPI can mark its target busy.

pub mod dataset;
pub mod flips_fit;
pub mod lookahead;
pub mod observer;
pub mod replayer;
pub mod results;
pub mod slices;
pub mod text;

use serde::Serialize;

use crate::bundle::{Meta, Provenance};
use crate::metrics::calibration::Fit;
use crate::metrics::observed::Observed;
use crate::metrics::PolicyMetrics;
use crate::policy::{PolicyError, PolicySpec};
use crate::state::flips::BeforeTrace;
use crate::state::{util_est, Topo};
use crate::topology::Topology;
use crate::trace::{EventSource, TraceError};
use crate::wakeup::sis::TimeModel;
pub use observer::DecisionsOut;
use observer::{CsvDecisions, DecisionObserver, Explainer, ParquetDecisions};
use replayer::{Replayer, Setup};

/// What a decision replay runs and what it writes besides its result.
pub struct ReplayOptions {
    /// The policies replayed, e.g. `sis_util:pct=117`.
    pub policies: Vec<PolicySpec>,
    /// The modelled search cost (entry and per-runqueue ns) search times are counted in.
    pub time: TimeModel,
    /// An rq lock held this long collides with the next acquisition of it.
    pub lock_hold_ns: u64,
    /// Time windows for variation.
    pub windows: u32,
    /// The policy whose choices are compared with the kernel's; default from the kernel.
    pub as_kernel: Option<String>,
    /// Writes one row per wakeup and policy, as CSV or Parquet.
    pub decisions: Option<DecisionsOut>,
    /// Explains the decisions of the wakeup at this timestamp.
    pub explain_ts: Option<u64>,
    /// Kernels with DELAY_DEQUEUE (v6.12+) keep a task that blocked with negative lag
    /// queued, and its next wakeup selects nothing. Traces do not show the lag; a
    /// wakeup this soon after the task blocked is taken as such a one. None: off.
    pub delayed_dequeue_ns: Option<u64>,
    /// The wakee_flips assumed for tasks alive before the trace, which the tasks they
    /// fork inherit, and when they were last halved (default: none, halved as first
    /// seen). The trace cannot show them, yet a workload started by such a task carries
    /// them in every task that seldom wakes others, and wake_wide turns on them (see
    /// Machine::flips_before_trace).
    pub flips_before_trace: BeforeTrace,
    /// Replay the kernel's own policy too when it is not among `policies`.
    pub add_kernel_policy: bool,
    /// Threads the flips fit replays its candidates on; None: the pool it runs in.
    pub fit_jobs: Option<usize>,
}

impl Default for ReplayOptions {
    fn default() -> ReplayOptions {
        ReplayOptions {
            policies: ["sis_prop", "sis_util"]
                .map(|s| PolicySpec::parse(s).expect("registered"))
                .to_vec(),
            time: TimeModel::default(),
            lock_hold_ns: 300,
            windows: 10,
            as_kernel: None,
            decisions: None,
            explain_ts: None,
            delayed_dequeue_ns: None,
            flips_before_trace: BeforeTrace::default(),
            add_kernel_policy: true,
            fit_jobs: None,
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

/// One trace replayed through every policy: what was replayed, what was skipped and why,
/// and each policy's counts. Written to the bundle's `results/` as JSON.
#[derive(Debug, Clone, Serialize)]
pub struct ReplayResult {
    /// uname -r of the traced kernel, when the bundle or the trace recorded it.
    pub kernel_release: Option<String>,
    /// The policy taken as the traced kernel's, whose choices fidelity compares.
    pub as_kernel: String,
    /// CPUs of the replayed machine.
    pub nr_cpus: u32,
    /// LLCs of the replayed machine.
    pub llcs: usize,
    /// No topology was recorded: the CPUs were taken as one flat LLC.
    pub topology_assumed: bool,
    /// sched_waking events seen.
    pub wakings: u64,
    /// Wakings replayed through the policies: `wakings` less those in `skipped`.
    pub replayed: u64,
    /// Recorded wakeups that went through the IPI wakelist.
    pub ipi_wakeups: u64,
    /// Wakings not replayed, by reason.
    pub skipped: Skipped,
    /// The search cost model the times were counted with.
    pub time_model: TimeModel,
    /// How long an rq lock is taken as held (ns), for rq-lock collisions.
    pub lock_hold_ns: u64,
    /// Trace clock of the first event.
    pub first_ts_ns: u64,
    /// Trace time from the first event to the last (ns).
    pub duration_ns: u64,
    /// Each policy's counts, in the order given (the traced kernel's added last when it was
    /// not given).
    pub policies: Vec<PolicyMetrics>,
    /// What the trace itself recorded, policy-independent.
    pub observed: Observed,
    /// Each explained wakeup: policy → steps.
    pub explained: Vec<(String, Vec<String>)>,
    /// With --explain at a time no wakeup was replayed at: the nearest replayed
    /// sched_waking times before and after it.
    #[serde(skip)]
    pub explain_nearest: (Option<u64>, Option<u64>),
    /// Whether the trace carries the select_task_rq_fair probes: then which wakings
    /// selected and their sync flag are known, not guessed.
    pub probed_selections: u64,
    /// The search-time model fitted to the probes' durations (see metrics::calibration).
    pub search_fit: Option<Fit>,
    /// The wakee flips taken for the tasks alive before the trace.
    pub flips_before_trace: BeforeTrace,
    /// How they were fitted to the trace, when they were (see flips_fit).
    pub flips_fit: Option<flips_fit::FlipsFit>,
}

/// Why a replay stopped.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The trace could not be read.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// The bundle could not be read.
    #[error(transparent)]
    Bundle(#[from] crate::bundle::BundleError),
    /// A policy spec was not valid, or names a policy decision replay cannot run.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// The decisions file (CSV or Parquet) could not be written.
    #[error("decisions file: {0}")]
    Io(#[from] std::io::Error),
    /// The trace does not fit the machine, e.g. an event on a CPU beyond `nr_cpus`.
    #[error("{0}")]
    Machine(String),
}

/// Replays on `jobs` threads: the trace cut into time slices when it is long enough for
/// each thread's slice to span [`slices::MIN_WARMUPS_PER_SLICE`] warm-ups, else in one
/// pass (see [`slices`]). `open` makes the source. --explain needs one pass.
pub fn replay_parallel(
    open: &(dyn Fn() -> Result<Box<dyn EventSource>, ReplayError> + Sync),
    meta: Option<&Meta>,
    opts: ReplayOptions,
    jobs: usize,
) -> Result<ReplayResult, ReplayError> {
    let jobs = jobs.max(1);
    if jobs == 1 || opts.explain_ts.is_some() {
        return replay(open()?.as_mut(), meta, opts);
    }
    slices::replay_sliced(open()?.as_mut(), meta, opts, jobs, slices::WARMUP_NS)
}

impl ReplayOptions {
    /// The plain settings, without the output sinks.
    pub(crate) fn clone_settings(&self) -> ReplayOptions {
        ReplayOptions {
            policies: self.policies.clone(),
            time: self.time,
            lock_hold_ns: self.lock_hold_ns,
            windows: self.windows,
            as_kernel: self.as_kernel.clone(),
            decisions: None,
            explain_ts: None,
            delayed_dequeue_ns: self.delayed_dequeue_ns,
            flips_before_trace: self.flips_before_trace,
            add_kernel_policy: self.add_kernel_policy,
            fit_jobs: self.fit_jobs,
        }
    }
}

/// The sched features a capture recorded, when it could read them.
fn features(meta: Option<&Meta>) -> Option<&str> {
    meta?.sched_features.as_deref()
}

/// The policy the traced kernel ran: from its sched features when the capture could read
/// them (`SIS_UTIL`, `NO_SIS_UTIL`, `SIS_PROP`, `NO_SIS_PROP` in debugfs
/// sched/features), else the release's default; on a rig kernel built with a policy's
/// patch, that patch's model (`kernel_sis::patched_policy`).
pub fn traced_policy(release: Option<&str>, features: Option<&str>) -> &'static str {
    let by_features = features
        .and_then(crate::policy::from_features)
        .map_or_else(|| kernel_policy(release), |info| info.name);
    crate::metrics::kernel_sis::patched_policy(release, by_features)
}

/// The policy the kernel of a bundle ran.
pub fn traced_policy_of(meta: &Meta) -> &'static str {
    traced_policy(meta.kernel_release.as_deref(), features(Some(meta)))
}

/// The policy a kernel release runs by default: SIS_UTIL from v6.0, SIS_PROP before.
pub fn kernel_policy(release: Option<&str>) -> &'static str {
    let version = release.and_then(crate::abi::kernel_version);
    match version {
        Some((major, _)) if major >= 6 => "sis_util",
        Some(_) => "sis_prop",
        None => "sis_util",
    }
}

/// Replays a whole trace on one thread.
pub fn replay(
    src: &mut dyn EventSource,
    meta: Option<&Meta>,
    mut opts: ReplayOptions,
) -> Result<ReplayResult, ReplayError> {
    let setup = setup(src, meta, &opts)?;
    let nr_cpus = setup.topo.nr_cpus;
    let flips_before_trace = opts.flips_before_trace;
    let (mut csv, mut parquet, mut other) = (None, None, None);
    match opts.decisions.take() {
        Some(DecisionsOut::Csv(out)) => csv = Some(CsvDecisions::new(out)),
        Some(DecisionsOut::Parquet(out)) => parquet = Some(ParquetDecisions::new(out)?),
        Some(DecisionsOut::Observer(o)) => other = Some(o),
        None => {}
    }
    let mut explainer = opts.explain_ts.map(Explainer::at);
    let mut observers: Vec<&mut dyn DecisionObserver> = Vec::new();
    if let Some(c) = csv.as_mut() {
        observers.push(c);
    }
    if let Some(p) = parquet.as_mut() {
        observers.push(p);
    }
    if let Some(o) = other.as_mut() {
        observers.push(o.as_mut());
    }
    if let Some(x) = explainer.as_mut() {
        observers.push(x);
    }
    let mut replayer = Replayer::new(setup, &opts, observers)?;
    let mut batch = Vec::with_capacity(4096);
    loop {
        batch.clear();
        if src.next_batch(&mut batch, 4096)? == 0 {
            break;
        }
        check_cpus(&batch, src, meta, nr_cpus)?;
        replayer.push(batch.drain(..))?;
    }
    let mut result = replayer.finish(src.stats().ties)?;
    result.flips_before_trace = flips_before_trace;
    if let Some(x) = explainer {
        result.explained = x.explained;
        result.explain_nearest = x.nearest;
    }
    Ok(result)
}

/// A machine smaller than the trace would replay some CPUs' wakeups wrongly.
fn check_cpus(
    batch: &[crate::trace::Event],
    src: &dyn EventSource,
    meta: Option<&Meta>,
    nr_cpus: u32,
) -> Result<(), ReplayError> {
    let Some(e) = batch.iter().find(|e| e.cpu >= nr_cpus) else {
        return Ok(());
    };
    Err(ReplayError::Machine(format!(
        "{}: an event at {} ns is on CPU {}, but the machine has {} CPUs{}",
        src.info().format,
        e.ts,
        e.cpu,
        nr_cpus,
        if meta.is_none() && src.info().nr_cpus.is_none() {
            " (the trace does not say how many it had: import it first, \
             `sisreplay import`, which counts them)"
        } else {
            ""
        }
    )))
}

/// The policy whose choices a replay compares with the kernel's: as asked, else the
/// traced kernel's, from the bundle or what the trace's reader found.
pub fn kernel_arm(src: &dyn EventSource, meta: Option<&Meta>, opts: &ReplayOptions) -> String {
    let release = meta
        .and_then(|m| m.kernel_release.as_deref())
        .or(src.info().kernel_release.as_deref());
    opts.as_kernel
        .clone()
        .unwrap_or_else(|| traced_policy(release, features(meta)).to_string())
}

/// The machine, the traced kernel and the policies of a replay, from the bundle's
/// metadata or, for a plain trace file, from what its reader found.
fn setup(
    src: &dyn EventSource,
    meta: Option<&Meta>,
    opts: &ReplayOptions,
) -> Result<Setup, PolicyError> {
    let nr_cpus = meta.map_or(src.info().nr_cpus.unwrap_or(1), |m| m.nr_cpus);
    let topology = meta.map_or_else(|| Topology::flat(nr_cpus), |m| m.topology.clone());
    let kernel_release = meta
        .and_then(|m| m.kernel_release.clone())
        .or_else(|| src.info().kernel_release.clone());
    let as_kernel = kernel_arm(src, meta, opts);
    // A re-run of a trace names the kernel it modelled in its provenance, not as its own.
    let modelled = meta.and_then(|m| match &m.provenance {
        Provenance::Simulate(s) => s.modelled_release.as_deref(),
        _ => None,
    });
    let release = kernel_release.as_deref().or(modelled);
    let util_est = util_est::Rules::of_release(release);
    let new_task_util = crate::state::pelt::NewTaskUtil::of_release(release);
    let mut specs = opts.policies.clone();
    if opts.add_kernel_policy && !specs.iter().any(|s| s.is(&as_kernel)) {
        specs.push(PolicySpec::parse(&as_kernel)?);
    }
    Ok(Setup {
        topo: Topo::new(&topology, nr_cpus),
        kernel_release,
        as_kernel,
        specs,
        topology_assumed: meta.is_none_or(|m| m.topology_assumed),
        probes: meta.is_some_and(|m| m.counts.contains_key("select_task_rq_enter")),
        idle_scan_probes: meta.is_some_and(|m| m.counts.contains_key("select_idle_cpu_enter")),
        irq_pressure: meta.and_then(|m| m.irq_time_accounting) != Some(false),
        util_est,
        new_task_util,
    })
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
