//! `sisreplay compare`: replays each trace through a baseline and other policies and sets
//! them side by side the way the seeds' tables do: baseline 1.00 (std%), others as
//! compare% (std%), std over time windows of the trace, and a marker where a t-test (5 %,
//! two-sided; paired over the windows when both arms replayed the same trace, Welch's
//! against a trace arm) says the difference is beyond that variation. An arm may also be a
//! captured bundle: it reports what that trace recorded, beside the modelled arms.
//!
//! A row or a trace arm may be several runs of one workload (captures repeated under one
//! setting, as mmtests compare-kernels takes them): the windows of all runs are pooled for
//! the tables, and each run's mean is one sample of a second test across runs, paired
//! where both arms replayed the same runs, Welch's where the runs are independent
//! captures.

pub mod stats;
pub mod text;

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::bundle;
use crate::metrics::observed::Observed;
use crate::metrics::{Derived, PolicyMetrics, Window};
use crate::policy::PolicySpec;
use crate::replay::{replay, ReplayError, ReplayOptions, ReplayResult};
use crate::sim::SimResult;

/// One column of a comparison: a policy replayed over each row's trace, or a captured
/// bundle whose own recorded behaviour is reported (the same in every row).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arm {
    /// A policy spec, replayed over every row's trace.
    Policy(String),
    /// Captured bundles, reporting what their own traces recorded: one bundle, or
    /// several runs of one workload under one setting.
    Trace {
        /// The first bundle's directory name.
        name: String,
        /// The bundles, one per run.
        paths: Vec<PathBuf>,
    },
}

impl Arm {
    /// The column's heading: the policy spec, or the bundle's directory name.
    pub fn name(&self) -> &str {
        match self {
            Arm::Policy(s) => s,
            Arm::Trace { name, .. } => name,
        }
    }
}

/// The metrics compared, each computed per window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// se_eff, % (schedstat_parse.py): searches that found a CPU per runqueue scanned.
    SeEff,
    /// Searches that found an idle CPU, % of searches.
    SuccessRate,
    /// Runqueues scanned per select_idle_sibling call.
    ScannedPerSearch,
    /// Modelled search time per replayed wakeup, µs.
    SearchUsPerWakeup,
    /// Wakeups placed on another CPU than prev_cpu, %.
    MovedPct,
    /// Wakeups placed in another LLC than prev_cpu's, %.
    CrossLlcPct,
    /// Wakeup latency, sched_waking to the wakee running, µs: trace arms only (decision
    /// replay is open loop and cannot say when the wakee would have run).
    WakeupLatencyUs,
}

impl Metric {
    /// Every metric, in the order the tables are printed.
    pub const ALL: [Metric; 7] = [
        Metric::SeEff,
        Metric::SuccessRate,
        Metric::ScannedPerSearch,
        Metric::SearchUsPerWakeup,
        Metric::MovedPct,
        Metric::CrossLlcPct,
        Metric::WakeupLatencyUs,
    ];
    /// The table's heading, with its unit and which way is better.
    pub fn title(self) -> &'static str {
        match self {
            Metric::SeEff => "SIS search efficiency se_eff% (higher is better)",
            Metric::SuccessRate => "SIS success rate % (higher is better)",
            Metric::ScannedPerSearch => "runqueues scanned per search (lower is better)",
            Metric::SearchUsPerWakeup => "modelled search time per wakeup, us (lower is better)",
            Metric::MovedPct => "wakeups placed off their previous CPU, % (lower is better)",
            Metric::CrossLlcPct => "wakeups placed in another LLC than prev, % (lower is better)",
            Metric::WakeupLatencyUs => {
                "observed wakeup latency, waking to running, us (lower is better)"
            }
        }
    }
    /// A few words for verdict lines.
    pub fn short(self) -> &'static str {
        match self {
            Metric::SeEff => "se_eff%",
            Metric::SuccessRate => "success %",
            Metric::ScannedPerSearch => "scanned/search",
            Metric::SearchUsPerWakeup => "search us/wakeup",
            Metric::MovedPct => "moved %",
            Metric::CrossLlcPct => "cross-LLC %",
            Metric::WakeupLatencyUs => "latency us",
        }
    }
    /// The unit of the metric's values, for axes.
    pub fn unit(self) -> &'static str {
        match self {
            Metric::SeEff | Metric::SuccessRate | Metric::MovedPct | Metric::CrossLlcPct => "%",
            Metric::ScannedPerSearch => "runqueues",
            Metric::SearchUsPerWakeup | Metric::WakeupLatencyUs => "us",
        }
    }
    /// True for se_eff and the success rate; every other metric is better lower.
    pub fn higher_is_better(self) -> bool {
        matches!(self, Metric::SeEff | Metric::SuccessRate)
    }
    /// The smallest change, in percent of the baseline, worth a reviewer's attention: a
    /// difference beyond the noise but smaller is called negligible. Counts of scans and
    /// their time move in large steps between policies, so a few percent is little; a
    /// shift of placements or latency by 1 % is already a real effect on a machine.
    pub fn practical_pct(self) -> f64 {
        match self {
            Metric::SeEff | Metric::SuccessRate => 2.0,
            Metric::ScannedPerSearch | Metric::SearchUsPerWakeup => 5.0,
            Metric::MovedPct | Metric::CrossLlcPct | Metric::WakeupLatencyUs => 1.0,
        }
    }
    /// The value of a modelled arm in one window; None where a model says nothing.
    fn of_policy_window(self, w: &Window) -> Option<f64> {
        let d = Derived::of(&w.counters);
        match self {
            Metric::SeEff => (w.counters.scanned > 0).then_some(d.se_eff),
            Metric::SuccessRate => (w.counters.search > 0).then_some(d.success_rate),
            Metric::ScannedPerSearch => (w.counters.search > 0)
                .then(|| w.counters.scanned as f64 / w.counters.search as f64),
            Metric::SearchUsPerWakeup => {
                (w.wakeups > 0).then(|| w.search_ns as f64 / w.wakeups as f64 / 1000.0)
            }
            Metric::MovedPct | Metric::CrossLlcPct => self.placement(w),
            // Decision replay is open loop: it cannot say when the wakee would have run.
            Metric::WakeupLatencyUs => None,
        }
    }
    /// The value of an observed arm in one window: what the trace recorded.
    fn of_observed_window(self, w: &Window) -> Option<f64> {
        match self {
            Metric::MovedPct | Metric::CrossLlcPct => self.placement(w),
            Metric::WakeupLatencyUs => {
                (w.latencies > 0).then(|| w.latency_ns as f64 / w.latencies as f64 / 1000.0)
            }
            // The kernel's SIS counters are in no tracepoint or schedstat field.
            _ => None,
        }
    }
    fn placement(self, w: &Window) -> Option<f64> {
        let n = if self == Metric::MovedPct {
            w.moved
        } else {
            w.cross_llc
        };
        (w.wakeups > 0).then(|| 100.0 * n as f64 / w.wakeups as f64)
    }
}

/// One arm of one metric on one trace.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    /// Mean over the windows that have a value, in the metric's unit.
    pub mean: f64,
    /// Sample standard deviation over those windows, % of the mean (0 when the mean is 0).
    pub std_pct: f64,
    /// (mean − base mean) / base mean, in percent; 0 for the baseline, None when the
    /// baseline has no value for this metric.
    pub compare_pct: Option<f64>,
    /// The t-test against the baseline (paired over the same windows where both arms
    /// replayed the row's trace, else Welch's) rejects equal means at 5 %.
    pub beyond_noise: bool,
    /// The 95 % confidence interval of the change, in percent of the baseline's mean,
    /// from the same test; None for the baseline or too few windows.
    pub change_interval_pct: Option<(f64, f64)>,
    /// Where the row or an arm has several runs: the statistics across them, each run's
    /// mean over its windows being one sample.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runs: Option<RunStats>,
}

/// One arm of one metric across runs: each run's mean over its own windows is one sample.
#[derive(Debug, Clone, Serialize)]
pub struct RunStats {
    /// Each run's mean over its windows, in the metric's unit, in the order given.
    pub values: Vec<f64>,
    /// Mean of `values`.
    pub mean: f64,
    /// Sample standard deviation of `values`, % of their mean (0 when the mean is 0).
    pub std_pct: f64,
    /// (mean − base mean) / base mean across runs, in percent; 0 for the baseline, None
    /// when the baseline has no value.
    pub compare_pct: Option<f64>,
    /// The test across runs rejects equal means at 5 %.
    pub beyond_noise: bool,
    /// The 95 % confidence interval of the change across runs, in percent of the
    /// baseline's mean; None for the baseline or under two runs on a side.
    pub change_interval_pct: Option<(f64, f64)>,
    /// "paired" when both arms replayed the same runs (a policy against a policy), else
    /// "welch" (independent captures); None for the baseline.
    pub test: Option<&'static str>,
}

/// One trace in one metric's table.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The trace's name: the bundle's directory, or the file's stem.
    pub trace: String,
    /// Wakeups decision replay replayed on it (on all its runs).
    pub wakeups: u64,
    /// Its runs' names (`NAME#1`, `NAME#2`, ...) when it has several.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<String>,
    /// One per arm, the baseline first; None where the arm has no value for the metric.
    pub cells: Vec<Option<Cell>>,
}

/// One metric over every trace and arm.
#[derive(Debug, Clone, Serialize)]
pub struct Table {
    /// What the table compares.
    pub metric: Metric,
    /// One per row trace, in the order given.
    pub rows: Vec<Row>,
}

/// What one trace recorded, for the summary under the tables.
#[derive(Debug, Clone, Serialize)]
pub struct TraceSummary {
    /// The trace's name: the bundle's directory, or the file's stem.
    pub trace: String,
    /// Where it was read from.
    pub path: PathBuf,
    /// Trace time from the first event to the last (ns).
    pub duration_ns: u64,
    /// What the trace recorded, whatever any model says.
    pub observed: Observed,
    /// What the simulator measured, for a bundle `synth` or `simulate` wrote.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub simulated: Option<SimSummary>,
    /// The whole replay, for reports.
    #[serde(skip)]
    pub replay: Option<Box<ReplayResult>>,
}

impl TraceSummary {
    fn of(trace: String, path: &Path, r: ReplayResult) -> Result<TraceSummary, CompareError> {
        Ok(TraceSummary {
            trace,
            path: path.to_path_buf(),
            duration_ns: r.duration_ns,
            observed: r.observed.clone(),
            simulated: SimSummary::read(path)?,
            replay: Some(Box::new(r)),
        })
    }
}

/// The closed-loop measures of a simulated bundle (its results/sim.json), which no trace
/// of a real machine has: throughput, and latency with the policy's own placements.
#[derive(Debug, Clone, Serialize)]
pub struct SimSummary {
    /// The simulated workload's name: a synth workload, or the trace a re-run rebuilt.
    pub workload: String,
    /// The policy spec simulated.
    pub policy: String,
    /// What one unit of `throughput_per_s` is, e.g. "transactions".
    pub unit: String,
    /// Units of work finished per simulated second after warm-up.
    pub throughput_per_s: f64,
    /// Wakeups placed during the measured time.
    pub wakeups: u64,
    /// Median wakeup latency, waking to running (ns).
    pub latency_p50_ns: u64,
    /// 90th percentile of the wakeup latency (ns).
    pub latency_p90_ns: u64,
    /// 99th percentile of the wakeup latency (ns).
    pub latency_p99_ns: u64,
    /// se_eff over the whole run, %.
    pub se_eff: f64,
    /// Runqueues scanned per search over the whole run.
    pub scanned_per_search: f64,
    /// Wakeups placed in another LLC (or node) than prev_cpu, % of wakeups.
    pub cross_llc_pct: f64,
    /// For a re-run of a trace (`simulate -o`): how the re-run of that trace under its
    /// kernel's own policy matched it; a counterfactual of a trace that misses it is
    /// not to be believed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub self_fidelity: Option<crate::simulate::SelfFidelity>,
}

impl SimSummary {
    /// What the closed loop's self-fidelity says of this bundle, as printed: "self"
    /// for the traced policy's own re-run, "trusted" or "UNTRUSTWORTHY" for a
    /// counterfactual, "-" for a synthetic workload (no trace to check against).
    pub fn trust(&self) -> &'static str {
        match &self.self_fidelity {
            None => "-",
            Some(g) if g.traced_policy == self.policy => {
                if g.trustworthy {
                    "self: pass"
                } else {
                    "self: miss"
                }
            }
            Some(g) if g.trustworthy => "trusted",
            Some(_) => "UNTRUSTWORTHY",
        }
    }

    /// Throughput against a baseline's, as printed: "+1.23%", or "-" without one.
    pub fn throughput_vs(&self, base: &SimSummary) -> String {
        if base.throughput_per_s > 0.0 {
            let pct =
                100.0 * (self.throughput_per_s - base.throughput_per_s) / base.throughput_per_s;
            format!("{pct:+.2}%")
        } else {
            "-".into()
        }
    }

    /// The summary of a bundle's results/sim.json, read as the simulator wrote it; None
    /// when the bundle holds no simulation result, an error when it holds one that does
    /// not read.
    pub fn read(bundle: &Path) -> Result<Option<SimSummary>, CompareError> {
        let p = bundle.join("results/sim.json");
        if !crate::bundle::is_bundle(bundle) {
            return Ok(None);
        }
        let text = match std::fs::read_to_string(&p) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(CompareError::SimResultIo { path: p, source }),
        };
        let unreadable = |source| CompareError::SimResultJson {
            path: p.clone(),
            source,
        };
        let r: SimResult = serde_json::from_str(&text).map_err(unreadable)?;
        let cross = r.placements.cross_llc + r.placements.cross_numa;
        // simulate's re-runs of a trace carry the gate that trace's re-run passed.
        #[derive(serde::Deserialize)]
        struct Gate {
            self_fidelity: Option<crate::simulate::SelfFidelity>,
        }
        let gate: Gate = serde_json::from_str(&text).map_err(unreadable)?;
        Ok(Some(SimSummary {
            workload: r.workload,
            policy: r.policy,
            unit: r.unit,
            throughput_per_s: r.throughput_per_s,
            wakeups: r.wakeups,
            latency_p50_ns: r.latency.p50,
            latency_p90_ns: r.latency.p90,
            latency_p99_ns: r.latency.p99,
            se_eff: r.derived.se_eff,
            scanned_per_search: r.counters.scanned as f64 / r.counters.search.max(1) as f64,
            cross_llc_pct: 100.0 * cross as f64 / r.wakeups.max(1) as f64,
            self_fidelity: gate.self_fidelity,
        }))
    }
}

/// A whole comparison: one table per metric, rows = traces, columns = arms.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// The arms' names, the baseline first.
    pub arms: Vec<String>,
    /// "policy" or "trace", per arm.
    pub kinds: Vec<&'static str>,
    /// Time windows each trace is split into for the std and the tests.
    pub windows: u32,
    /// The significance test used, in words.
    pub test: &'static str,
    /// The test across runs, in words, when a row or an arm has several runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runs_test: Option<&'static str>,
    /// One per metric, in [`Metric::ALL`]'s order.
    pub tables: Vec<Table>,
    /// Every trace read: the rows' and the trace arms'.
    pub traces: Vec<TraceSummary>,
}

/// One arm's cell from its per-window values (None where a window has no value), against
/// the baseline's: a paired test when both were replayed over the same windows, Welch's
/// otherwise.
fn cell(values: &[Option<f64>], base: Option<(&[Option<f64>], bool)>) -> Option<Cell> {
    let present: Vec<f64> = values.iter().flatten().copied().collect();
    if present.is_empty() {
        return None;
    }
    let (m, s) = stats::mean_std(&present);
    let std_pct = if m != 0.0 { 100.0 * s / m.abs() } else { 0.0 };
    let (compare_pct, beyond_noise, change_interval_pct) = match base {
        None => (Some(0.0), false, None),
        Some((b, _)) if b.iter().all(Option::is_none) => (None, false, None),
        Some((b, paired)) => {
            let b_present: Vec<f64> = b.iter().flatten().copied().collect();
            let (bm, _) = stats::mean_std(&b_present);
            let pct = if bm != 0.0 {
                100.0 * (m - bm) / bm.abs()
            } else {
                0.0
            };
            let (significant, interval) = if paired {
                let pairs: Vec<(f64, f64)> = b
                    .iter()
                    .zip(values)
                    .filter_map(|(x, y)| Some(((*x)?, (*y)?)))
                    .collect();
                (stats::paired(&pairs).2, stats::paired_interval(&pairs))
            } else {
                (
                    stats::welch(&b_present, &present).2,
                    stats::welch_interval(&b_present, &present),
                )
            };
            let in_pct = |d: f64| if bm != 0.0 { 100.0 * d / bm.abs() } else { 0.0 };
            let interval = interval.map(|(lo, hi)| (in_pct(lo), in_pct(hi)));
            (Some(pct), significant, interval)
        }
    };
    Some(Cell {
        mean: m,
        std_pct,
        compare_pct,
        beyond_noise,
        change_interval_pct,
        runs: None,
    })
}

/// Per run, the mean of its windows that have a value.
fn run_means(runs: &[Vec<Option<f64>>]) -> Vec<Option<f64>> {
    runs.iter()
        .map(|w| {
            let present: Vec<f64> = w.iter().flatten().copied().collect();
            (!present.is_empty()).then(|| stats::mean_std(&present).0)
        })
        .collect()
}

/// One arm's statistics across runs (None where no run has a value), against the
/// baseline's runs: paired run by run when both replayed the same runs, else Welch's.
fn across_runs(
    runs: &[Vec<Option<f64>>],
    base: Option<(&[Vec<Option<f64>>], bool)>,
) -> Option<RunStats> {
    let means = run_means(runs);
    let values: Vec<f64> = means.iter().flatten().copied().collect();
    if values.is_empty() {
        return None;
    }
    let (m, s) = stats::mean_std(&values);
    let std_pct = if m != 0.0 { 100.0 * s / m.abs() } else { 0.0 };
    let (compare_pct, beyond_noise, change_interval_pct, test) = match base {
        None => (Some(0.0), false, None, None),
        Some((b, paired)) => {
            let b_means = run_means(b);
            let b_values: Vec<f64> = b_means.iter().flatten().copied().collect();
            if b_values.is_empty() {
                (None, false, None, None)
            } else {
                let (bm, _) = stats::mean_std(&b_values);
                let in_pct = |d: f64| if bm != 0.0 { 100.0 * d / bm.abs() } else { 0.0 };
                let (significant, interval, test) = if paired {
                    let pairs: Vec<(f64, f64)> = b_means
                        .iter()
                        .zip(&means)
                        .filter_map(|(x, y)| Some(((*x)?, (*y)?)))
                        .collect();
                    (
                        stats::paired(&pairs).2,
                        stats::paired_interval(&pairs),
                        "paired",
                    )
                } else {
                    (
                        stats::welch(&b_values, &values).2,
                        stats::welch_interval(&b_values, &values),
                        "welch",
                    )
                };
                (
                    Some(in_pct(m - bm)),
                    significant,
                    interval.map(|(lo, hi)| (in_pct(lo), in_pct(hi))),
                    Some(test),
                )
            }
        }
    };
    Some(RunStats {
        values,
        mean: m,
        std_pct,
        compare_pct,
        beyond_noise,
        change_interval_pct,
        test,
    })
}

/// The runs a command-line value names: a comma-separated list of traces or bundles,
/// unless the whole value is a path that exists.
pub fn split_runs(value: &str) -> Vec<&str> {
    if !value.contains(',') || Path::new(value).exists() {
        return vec![value];
    }
    value.split(',').filter(|s| !s.is_empty()).collect()
}

/// The names of a row's or a trace arm's runs: the first trace's name alone for one run,
/// else that name with `#1`, `#2`, ... so each run is told apart in the report.
fn run_names(paths: &[PathBuf]) -> (String, Vec<String>) {
    let group = paths.first().map(|p| trace_name(p)).unwrap_or_default();
    if paths.len() < 2 {
        return (group.clone(), vec![group]);
    }
    let runs = (1..=paths.len()).map(|k| format!("{group}#{k}")).collect();
    (group, runs)
}

/// The newest bundle under `traces_dir`, by modification time.
pub fn newest_bundle(traces_dir: &Path) -> Option<PathBuf> {
    std::fs::read_dir(traces_dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| bundle::is_bundle(p))
        .max_by_key(|p| {
            p.join(bundle::META_FILE)
                .metadata()
                .and_then(|m| m.modified())
                .ok()
        })
}

fn trace_name(t: &Path) -> String {
    if bundle::is_bundle(t) {
        t.file_name()
    } else {
        t.file_stem()
    }
    .map(|n| n.to_string_lossy().into_owned())
    .unwrap_or_default()
}

/// Replays `t` with `policies` (the traced kernel's added), the wakee flips before the
/// trace as given or, with None, fitted to it; with no policies, only what the trace
/// recorded is read, and nothing is fitted.
fn replay_trace(
    t: &Path,
    policies: Vec<String>,
    windows: u32,
    flips_before_trace: Option<crate::state::flips::BeforeTrace>,
) -> Result<ReplayResult, CompareError> {
    let crate::input::Input { mut source, meta } = crate::input::open(t)?;
    let add_kernel_policy = !policies.is_empty();
    let policies = policies
        .iter()
        .map(|p| PolicySpec::parse(p).map_err(ReplayError::from))
        .collect::<Result<Vec<_>, _>>()?;
    let mut opts = ReplayOptions {
        policies,
        windows,
        add_kernel_policy,
        ..Default::default()
    };
    let fit = match flips_before_trace {
        Some(n) => {
            opts.flips_before_trace = n;
            None
        }
        None if !add_kernel_policy => None,
        // Every arm replays the machine the traced kernel's own policy reproduces best.
        None => {
            let open = || -> Result<Box<dyn crate::trace::EventSource>, ReplayError> {
                Ok(crate::input::open(t)?.source)
            };
            let fit = crate::replay::flips_fit::fit_into(&open, meta.as_ref(), &mut opts).map_err(
                |e| match e {
                    // A reader's error names the file already.
                    ReplayError::Trace(_) | ReplayError::Bundle(_) => CompareError::Replay(e),
                    source => CompareError::FlipsFit {
                        path: t.to_path_buf(),
                        source,
                    },
                },
            )?;
            Some(fit)
        }
    };
    let mut r = replay(source.as_mut(), meta.as_ref(), opts)?;
    r.flips_fit = fit;
    Ok(r)
}

/// Resolves the arms of a command line (policies, bundles by name in `traces_dir` or by
/// path, `policy:NAME` / `trace:NAME` for a name that is both) and the rows, each one or
/// more runs (a comma-separated list, in a trace arm as in a `--trace`): without
/// `--trace`, policies replay over the first observed arm's bundles (the counterfactual
/// of that capture), else over the newest bundle, else `fallback`.
pub fn resolve(
    args: &[String],
    traces: Vec<PathBuf>,
    traces_dir: &Path,
    fallback: &str,
) -> Result<(Vec<Arm>, Vec<Vec<PathBuf>>), CompareError> {
    let mut resolved = Vec::new();
    for a in args {
        let (explicit, name) = match a.split_once(':') {
            Some(("policy", n)) => (Some("policy"), n),
            Some(("trace", n)) => (Some("trace"), n),
            _ => (None, a.as_str()),
        };
        let base = name.split(':').next().unwrap_or(name);
        let is_policy = crate::policy::lookup(base).is_some();
        // A bundle by name in traces/, or by path; several, comma-separated, are runs.
        let bundle = |n: &str| {
            [traces_dir.join(n), PathBuf::from(n)]
                .into_iter()
                .find(|p| bundle::is_bundle(p))
        };
        let runs = split_runs(name);
        let bundle_paths: Option<Vec<PathBuf>> = if explicit == Some("policy") && runs.len() > 1 {
            None
        } else {
            runs.iter().map(|n| bundle(n)).collect()
        };
        match (explicit, is_policy, bundle_paths) {
            (None, true, Some(_)) => {
                return Err(CompareError::Ambiguous {
                    arm: a.clone(),
                    traces_dir: traces_dir.into(),
                })
            }
            (Some("policy"), true, _) | (None, true, None) => {
                resolved.push(Arm::Policy(name.to_string()))
            }
            // Named by the first bundle's directory, however it was given.
            (Some("trace") | None, _, Some(paths)) => resolved.push(Arm::Trace {
                name: paths[0]
                    .file_name()
                    .map_or_else(|| name.to_string(), |n| n.to_string_lossy().into_owned()),
                paths,
            }),
            (Some("trace"), _, None) => {
                return Err(CompareError::NoBundle {
                    arm: a.clone(),
                    traces_dir: traces_dir.into(),
                })
            }
            _ => {
                return Err(CompareError::Unknown {
                    arm: a.clone(),
                    traces_dir: traces_dir.into(),
                })
            }
        }
    }
    let traces = if !traces.is_empty() {
        traces
            .iter()
            .map(|t| {
                let t = t.to_string_lossy();
                split_runs(&t).into_iter().map(PathBuf::from).collect()
            })
            .collect()
    } else if let Some(Arm::Trace { paths, .. }) =
        resolved.iter().find(|a| matches!(a, Arm::Trace { .. }))
    {
        vec![paths.clone()]
    } else {
        vec![vec![
            newest_bundle(traces_dir).unwrap_or_else(|| PathBuf::from(fallback))
        ]]
    };
    Ok((resolved, traces))
}

/// Replays every row's traces with the policy arms, reads each trace arm's own record,
/// and builds one table per metric. A row (or a trace arm) of several runs pools their
/// windows for its cells and adds the statistics across runs.
/// `flips_before_trace`: the wakee flips of the tasks alive before each trace, None to
/// fit them to it (see replay::flips_fit).
pub fn compare(
    arms: &[Arm],
    rows: &[Vec<PathBuf>],
    windows: u32,
    flips_before_trace: Option<crate::state::flips::BeforeTrace>,
) -> Result<Comparison, CompareError> {
    let specs: Vec<String> = arms
        .iter()
        .filter_map(|a| match a {
            Arm::Policy(s) => Some(s.clone()),
            Arm::Trace { .. } => None,
        })
        .collect();
    let mut summaries: Vec<TraceSummary> = Vec::new();
    let mut rows_in: Vec<RowIn> = Vec::new();
    // The traces replay in parallel, one per thread.
    let flat: Vec<PathBuf> = rows.iter().flatten().cloned().collect();
    let mut replays = crate::parallel::map(&flat, crate::parallel::default_jobs(), |t| {
        replay_trace(t, specs.clone(), windows, flips_before_trace)
    })
    .into_iter();
    for paths in rows {
        let (group, names) = run_names(paths);
        let mut wakeups = 0;
        let mut per_run = Vec::new();
        for (t, name) in paths.iter().zip(&names) {
            let r = replays.next().expect("one replay per trace")?;
            per_run.push(
                specs
                    .iter()
                    .filter_map(|a| r.policies.iter().find(|p| &p.policy == a).cloned())
                    .collect(),
            );
            wakeups += r.replayed;
            summaries.push(TraceSummary::of(name.clone(), t, r)?);
        }
        let runs = if names.len() > 1 { names } else { Vec::new() };
        rows_in.push(RowIn {
            name: group,
            wakeups,
            runs,
            per_run,
        });
    }
    // A trace arm's windows, read once per bundle even when it is a row too.
    let mut observed_of: Vec<Vec<usize>> = Vec::new();
    for a in arms {
        let mut of_arm = Vec::new();
        if let Arm::Trace { paths, .. } = a {
            let (_, names) = run_names(paths);
            for (path, name) in paths.iter().zip(names) {
                let i = match summaries.iter().position(|s| &s.path == path) {
                    Some(i) => i,
                    None => {
                        let r = replay_trace(path, Vec::new(), windows, flips_before_trace)?;
                        summaries.push(TraceSummary::of(name, path, r)?);
                        summaries.len() - 1
                    }
                };
                of_arm.push(i);
            }
        }
        observed_of.push(of_arm);
    }
    let several_runs = rows.iter().any(|r| r.len() > 1) || observed_of.iter().any(|o| o.len() > 1);
    let tables = Metric::ALL
        .iter()
        .map(|&metric| Table {
            metric,
            rows: rows_in
                .iter()
                .map(
                    |RowIn {
                         name,
                         wakeups,
                         runs,
                         per_run,
                     }| {
                        let mut policy_index = 0;
                        // Per arm, per run, per window.
                        let series: Vec<Vec<Vec<Option<f64>>>> = arms
                            .iter()
                            .zip(&observed_of)
                            .map(|(a, obs)| match a {
                                Arm::Trace { .. } => obs
                                    .iter()
                                    .map(|&i| {
                                        summaries[i]
                                            .observed
                                            .windows
                                            .iter()
                                            .map(|w| metric.of_observed_window(w))
                                            .collect()
                                    })
                                    .collect(),
                                Arm::Policy(_) => {
                                    let k = policy_index;
                                    policy_index += 1;
                                    per_run
                                        .iter()
                                        .map(|pols| {
                                            pols.get(k)
                                                .map(|p| {
                                                    p.windows
                                                        .iter()
                                                        .map(|w| metric.of_policy_window(w))
                                                        .collect()
                                                })
                                                .unwrap_or_default()
                                        })
                                        .collect()
                                }
                            })
                            .collect();
                        // Policies replayed over this row's traces share their windows (and
                        // runs); a trace arm's windows are its own traces'.
                        let same_windows = |i: usize| matches!(arms[i], Arm::Policy(_));
                        let with_runs = series.iter().any(|s| s.len() > 1);
                        let cells = series
                            .iter()
                            .enumerate()
                            .map(|(i, runs)| {
                                let paired = same_windows(0) && same_windows(i);
                                let pooled: Vec<Option<f64>> = runs.concat();
                                let base_pooled = series[0].concat();
                                let base = (i > 0).then_some((base_pooled.as_slice(), paired));
                                let mut c = cell(&pooled, base)?;
                                if with_runs {
                                    let base = (i > 0).then(|| (series[0].as_slice(), paired));
                                    c.runs = across_runs(runs, base);
                                }
                                Some(c)
                            })
                            .collect();
                        Row {
                            trace: name.clone(),
                            wakeups: *wakeups,
                            runs: runs.clone(),
                            cells,
                        }
                    },
                )
                .collect(),
        })
        .collect();
    Ok(Comparison {
        arms: arms.iter().map(|a| a.name().to_string()).collect(),
        kinds: arms
            .iter()
            .map(|a| match a {
                Arm::Policy(_) => "policy",
                Arm::Trace { .. } => "trace",
            })
            .collect(),
        windows,
        test: "paired t-test over windows, Welch's vs a trace arm, 5 %",
        runs_test: several_runs.then_some(RUNS_TEST),
        tables,
        traces: summaries,
    })
}

/// A row as replayed, before its tables: its name, wakeups, its runs' names (when it has
/// several) and each run's policy metrics, in the policy arms' order.
struct RowIn {
    name: String,
    wakeups: u64,
    runs: Vec<String>,
    per_run: Vec<Vec<PolicyMetrics>>,
}

/// The test across runs, in words.
pub const RUNS_TEST: &str = "Welch's t-test across independent runs, paired between policies, 5 %";

/// Why a comparison could not be made.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// A trace or bundle could not be opened.
    #[error(transparent)]
    Bundle(#[from] bundle::BundleError),
    /// A trace could not be replayed.
    #[error(transparent)]
    Replay(#[from] ReplayError),
    /// The wakee flips before a trace could not be fitted to it.
    #[error("{}: fitting the wakee flips before the trace: {source}", path.display())]
    FlipsFit {
        /// The trace.
        path: PathBuf,
        /// Why.
        source: ReplayError,
    },
    /// A bundle's results/sim.json that cannot be read.
    #[error("{}: {source}", path.display())]
    SimResultIo {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A bundle's results/sim.json that is not a simulation result.
    #[error("{}: line {line}: {source}", path.display(), line = source.line())]
    SimResultJson {
        /// The file.
        path: PathBuf,
        /// Where and why.
        source: serde_json::Error,
    },
    /// An arm that names both a policy and a bundle.
    #[error("{arm:?} is both a policy and a bundle in {}: write policy:{arm} or trace:{arm}", traces_dir.display())]
    Ambiguous {
        /// The arm as given.
        arm: String,
        /// Where bundles are looked up by name.
        traces_dir: PathBuf,
    },
    /// A `trace:NAME` arm without such a bundle.
    #[error("{arm:?}: no bundle of that name in {} nor at that path", traces_dir.display())]
    NoBundle {
        /// The arm as given.
        arm: String,
        /// Where bundles are looked up by name.
        traces_dir: PathBuf,
    },
    /// An arm that is neither a policy nor a bundle.
    #[error("{arm:?} is neither a policy (see `sisreplay policies`) nor a bundle in {}", traces_dir.display())]
    Unknown {
        /// The arm as given.
        arm: String,
        /// Where bundles are looked up by name.
        traces_dir: PathBuf,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three runs of two windows each, whose means are `means` (each run's windows at
    /// its mean ∓ 1).
    fn runs(means: [f64; 3]) -> Vec<Vec<Option<f64>>> {
        means
            .iter()
            .map(|m| vec![Some(m - 1.0), Some(m + 1.0)])
            .collect()
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6
    }

    #[test]
    fn three_independent_runs_are_compared_by_welch() {
        // Baseline runs 10, 12, 14: mean 12, variance (4 + 0 + 4)/2 = 4, std 2 = 16.67 %.
        // Arm runs 13, 15, 17: mean 15, the same spread. Difference 3 = +25 %. Welch:
        // se = √(4/3 + 4/3) = 1.63299, df = (8/3)² / (2 · (4/3)² / 2) = 4, t(4) = 2.776,
        // half-width 2.776 · 1.63299 = 4.53318: [−1.53318, 7.53318], over the baseline's
        // 12: [−12.7765 %, +62.7765 %]. t = 3 / 1.63299 = 1.84 < 2.776: within noise.
        let base = runs([10.0, 12.0, 14.0]);
        let arm = runs([13.0, 15.0, 17.0]);
        let b = across_runs(&base, None).unwrap();
        assert_eq!(b.values, [10.0, 12.0, 14.0]);
        assert!(close(b.mean, 12.0) && close(b.std_pct, 100.0 * 2.0 / 12.0));
        assert_eq!((b.compare_pct, b.test), (Some(0.0), None));
        let a = across_runs(&arm, Some((&base, false))).unwrap();
        assert_eq!(a.values, [13.0, 15.0, 17.0]);
        assert!(close(a.compare_pct.unwrap(), 25.0));
        let half = 2.776 * (8.0f64 / 3.0).sqrt();
        let (lo, hi) = a.change_interval_pct.unwrap();
        assert!(close(lo, 100.0 * (3.0 - half) / 12.0), "{lo}");
        assert!(close(hi, 100.0 * (3.0 + half) / 12.0), "{hi}");
        assert!((lo + 12.7765).abs() < 1e-3 && (hi - 62.7765).abs() < 1e-3);
        assert!(!a.beyond_noise);
        assert_eq!(a.test, Some("welch"));
    }

    #[test]
    fn runs_replayed_by_two_policies_are_paired() {
        // The same three runs replayed by both: baseline 10, 12, 14, arm 12, 15, 18.
        // Differences 2, 3, 4: mean 3 (+25 % of 12), sd 1, t = 3 / (1/√3) = 5.196 over
        // t(2) = 4.303: beyond the noise; interval 3 ± 4.303/√3 = 3 ± 2.48434, i.e.
        // [+4.297 %, +45.703 %]. Welch's, blind to the pairing, sees the runs' own spread
        // (variances 4 and 9: se = √(4/3 + 3) = 2.0817, t = 1.44) and says within noise.
        let base = runs([10.0, 12.0, 14.0]);
        let arm = runs([12.0, 15.0, 18.0]);
        let a = across_runs(&arm, Some((&base, true))).unwrap();
        assert_eq!(a.test, Some("paired"));
        assert!(a.beyond_noise);
        assert!(close(a.compare_pct.unwrap(), 25.0));
        let half = 4.303 / 3f64.sqrt();
        let (lo, hi) = a.change_interval_pct.unwrap();
        assert!(close(lo, 100.0 * (3.0 - half) / 12.0), "{lo}");
        assert!(close(hi, 100.0 * (3.0 + half) / 12.0), "{hi}");
        assert!((lo - 4.297).abs() < 1e-3 && (hi - 45.703).abs() < 1e-3);
        let w = across_runs(&arm, Some((&base, false))).unwrap();
        assert!(!w.beyond_noise);
    }

    #[test]
    fn a_run_without_a_value_is_left_out() {
        // The second run never searched: two runs are left, 10 and 14.
        let mut base = runs([10.0, 12.0, 14.0]);
        base[1] = vec![None, None];
        let b = across_runs(&base, None).unwrap();
        assert_eq!(b.values, [10.0, 14.0]);
        assert!(across_runs(&[vec![None]], None).is_none());
    }

    #[test]
    fn a_comma_separated_value_is_several_runs_unless_it_is_a_path() {
        assert_eq!(split_runs("a,b,,c"), ["a", "b", "c"]);
        assert_eq!(split_runs("a"), ["a"]);
        let dir = tempfile::tempdir().unwrap();
        let odd = dir.path().join("x,y");
        std::fs::write(&odd, "").unwrap();
        let odd = odd.to_str().unwrap();
        assert_eq!(split_runs(odd), [odd]);
        let (group, names) = run_names(&[PathBuf::from("t/a/pp"), PathBuf::from("t/b/pp")]);
        assert_eq!(
            (group.as_str(), names),
            ("pp", vec!["pp#1".into(), "pp#2".into()])
        );
        let (group, names) = run_names(&[PathBuf::from("t/a/pp")]);
        assert_eq!((group.as_str(), names), ("pp", vec!["pp".to_string()]));
    }
}
