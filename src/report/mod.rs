//! `sisreplay report`: one comparison of policies (and captured bundles) over one or
//! more traces, gathered with everything a reviewer needs to judge it: the verdict per
//! metric, the seed-style tables, histograms, placements, the machine, a busy/idle
//! strip, the model's fidelity and how to reproduce it. Rendered as self-contained HTML
//! (`html`), mail-ready text (`text`) or JSON (this module's types).

pub mod fidelity;
pub mod glossary;
pub mod html;
pub mod plots;
pub mod search_time;
pub mod text;
pub mod timeline;
pub mod trace_id;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use crate::bundle::provenance::Readable;
use crate::bundle::{self, Meta};
use crate::compare::{self, Arm, CompareError, Comparison, Metric};
use crate::metrics::Fidelity;
use crate::policy::{self, params::Params};
use crate::replay::ReplayResult;
use crate::topology::Topology;

pub use search_time::SearchTime;
pub use timeline::Timeline;

/// What `sisreplay report` is asked for besides the arms and traces.
pub struct ReportOptions {
    /// Time windows each trace is split into for the std and the tests.
    pub windows: u32,
    /// Length of the busy/idle strip, taken from the middle of each trace.
    pub timeline_ns: u64,
    /// The command line, for the reproduction section.
    pub command_line: Vec<String>,
    /// The command line named no trace: the traces were resolved (a default bundle or
    /// the sample), and the reproduction names them.
    pub traces_implicit: bool,
    /// The wakee flips of the tasks alive before each trace, None to fit them to it.
    pub flips_before_trace: Option<crate::state::flips::BeforeTrace>,
}

/// For one metric, one compared arm on one trace: better or worse than the baseline, by
/// how much, and whether the difference is beyond the window-to-window noise. Where the
/// trace and the arm have two or more runs each, the means, change, interval and test
/// are those across runs, and `runs` holds each run's value and the pooled windows' test.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    /// The metric judged.
    pub metric: Metric,
    /// The trace's name, as in the comparison's rows.
    pub trace: String,
    /// The arm compared: a policy spec or a bundle's name.
    pub arm: String,
    /// The first arm, which the others are compared with.
    pub baseline: String,
    /// The baseline's mean over the windows, in the metric's unit.
    pub base_mean: f64,
    /// The arm's mean over the windows, in the metric's unit.
    pub mean: f64,
    /// (mean − base_mean) / base_mean, percent.
    pub change_pct: f64,
    /// The change goes the metric's good way (whether or not it is beyond the noise).
    pub better: bool,
    /// The t-test rejects equal means at 5 %.
    pub beyond_noise: bool,
    /// The change's 95 % confidence interval, percent of the baseline.
    pub change_interval_pct: Option<(f64, f64)>,
    /// The smallest change the metric counts as worth attention, percent.
    pub practical_pct: f64,
    /// identical, within noise, negligible, better or worse.
    pub word: &'static str,
    /// How often the model of the traced kernel picked the kernel's CPU on this trace,
    /// percent: the evidence behind every modelled number of it.
    pub fidelity_pct: Option<f64>,
    /// strong (≥ 95 %), moderate (≥ 90 %), weak (below) or unknown.
    pub trust: &'static str,
    /// Where the trace or the arm has several runs: each run's value and the windows'
    /// own test.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runs: Option<RunsVerdict>,
}

/// The runs behind a verdict across runs, and the within-trace test over their pooled
/// windows.
#[derive(Debug, Clone, Serialize)]
pub struct RunsVerdict {
    /// The baseline's value in each run, in the metric's unit.
    pub base_values: Vec<f64>,
    /// The arm's value in each run.
    pub values: Vec<f64>,
    /// The baseline's spread across runs: sample std, % of its mean.
    pub base_std_pct: f64,
    /// The arm's spread across runs.
    pub std_pct: f64,
    /// The test across runs: "paired" (both replayed the same runs) or "welch".
    pub test: &'static str,
    /// The change of the pooled windows' means, percent.
    pub windows_change_pct: f64,
    /// The windows' t-test (paired or Welch's, as for one run) rejects equal means.
    pub windows_beyond_noise: bool,
    /// The windows' 95 % interval of the change, percent of the baseline.
    pub windows_interval_pct: Option<(f64, f64)>,
}

/// The word for a change: beyond the windows' noise and at least the metric's practical
/// threshold to count as better or worse.
fn verdict_word(v: &Verdict) -> &'static str {
    if v.mean == v.base_mean {
        "identical"
    } else if !v.beyond_noise {
        "within noise"
    } else if v.change_pct.abs() < v.practical_pct {
        "negligible"
    } else if v.better {
        "better"
    } else {
        "worse"
    }
}

/// A verdict's runs in words: each side's values and spread, the test across them, and
/// the pooled windows' change and interval (`*` beyond their noise).
pub fn runs_line(r: &RunsVerdict) -> String {
    let values = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.3}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let interval = r
        .windows_interval_pct
        .map_or(String::new(), |(lo, hi)| format!(" [{lo:+.1}, {hi:+.1}]"));
    format!(
        "{} vs {} runs ({}): {} (std {:.2}%) -> {} (std {:.2}%); pooled windows {:+.2}%{interval}{}",
        r.base_values.len(),
        r.values.len(),
        if r.test == "paired" { "paired" } else { "Welch" },
        values(&r.base_values),
        r.base_std_pct,
        values(&r.values),
        r.std_pct,
        r.windows_change_pct,
        if r.windows_beyond_noise { " *" } else { "" }
    )
}

/// The label of a trace in the verdict: T1, T2, ... in the report's order; a trace of
/// several runs by the span of its runs' labels, T1-T3.
pub fn trace_label(r: &Report, trace: &str) -> String {
    if let Some(i) = r.traces.iter().position(|t| t.name == trace) {
        return format!("T{}", i + 1);
    }
    let runs = runs_of(r, trace);
    match (runs.first(), runs.last()) {
        (Some(a), Some(b)) => format!("T{}-T{}", a + 1, b + 1),
        _ => trace.to_string(),
    }
}

/// The indices in `r.traces` of the runs of a row of several runs.
fn runs_of(r: &Report, trace: &str) -> Vec<usize> {
    let prefix = format!("{trace}#");
    r.traces
        .iter()
        .enumerate()
        .filter(|(_, t)| {
            t.name
                .strip_prefix(&prefix)
                .is_some_and(|k| k.parse::<u32>().is_ok())
        })
        .map(|(i, _)| i)
        .collect()
}

/// Under the verdict: per arm, the metrics it left identical, and the arms that cannot
/// differ from the baseline on a trace at all.
pub fn unchanged_notes(r: &Report) -> Vec<String> {
    let c = &r.comparison;
    let mut notes = Vec::new();
    for arm in &c.arms[1..] {
        let same: Vec<String> = r
            .verdicts
            .iter()
            .filter(|v| &v.arm == arm && v.word == "identical")
            .map(|v| format!("{} {}", trace_label(r, &v.trace), v.metric.short()))
            .collect();
        if !same.is_empty() {
            notes.push(format!("{arm} identical: {}", same.join(", ")));
        }
    }
    let rows = c.tables.first().map_or(&[][..], |t| t.rows.as_slice());
    for row in rows {
        for arm in arms_that_cannot_differ(r, &row.trace) {
            notes.push(format!(
                "{arm} cannot differ from {} on {} (identical in every metric)",
                c.arms[0],
                trace_label(r, &row.trace)
            ));
        }
    }
    notes
}

/// The arms that decided exactly as the baseline in every metric of `trace` (as
/// no_limit and SIS_PROP do on an LLC too small for their budgets to differ).
pub fn arms_that_cannot_differ<'a>(r: &'a Report, trace: &str) -> Vec<&'a str> {
    r.comparison.arms[1..]
        .iter()
        .filter(|arm| {
            let mut of_arm = r
                .verdicts
                .iter()
                .filter(|v| v.trace == trace && &v.arm == *arm)
                .peekable();
            of_arm.peek().is_some() && of_arm.all(|v| v.word == "identical")
        })
        .map(String::as_str)
        .collect()
}

/// How far a model's agreement with the kernel's choices lets its numbers be trusted:
/// strong at 95 % or more, moderate at 90 %, weak below. A model that agrees no more
/// often than keeping every task on its previous CPU would is at most moderate: where
/// the kernel seldom moved a task, a high agreement shows nothing of how the model
/// moves them.
pub fn trust_of(fidelity: Option<&Fidelity>) -> &'static str {
    let Some(f) = fidelity else {
        return "unknown";
    };
    match f.agreement_pct() {
        a if a >= 95.0 && !no_better_than_prev(f) => "strong",
        a if a >= 90.0 => "moderate",
        _ => "weak",
    }
}

/// The model agreed with the kernel no more often than always choosing prev_cpu would.
pub fn no_better_than_prev(f: &Fidelity) -> bool {
    f.decisions > 0 && f.agree <= f.always_prev
}

/// The baseline beside a model's agreement: how often keeping each task on its previous
/// CPU would have agreed, and whether the model did better; `percent` is how the output
/// writes the sign ("%" in text for mail, " %" in HTML).
pub fn baseline_words(f: &Fidelity, percent: &str) -> String {
    let prev = 100.0 * f.always_prev as f64 / f.decisions.max(1) as f64;
    let better = if no_better_than_prev(f) {
        ", as good or better"
    } else {
        ""
    };
    format!("always keeping the task on its previous CPU: {prev:.2}{percent}{better}")
}

/// The least trusted of `words` (as [`trust_of`] gives them), "unknown" for none.
fn least_trusted<'a>(words: impl Iterator<Item = &'a str>) -> &'a str {
    let rank = |w: &str| {
        ["weak", "unknown", "moderate", "strong"]
            .iter()
            .position(|&x| x == w)
    };
    words.min_by_key(|w| rank(w)).unwrap_or("unknown")
}

/// What the report says about one trace beside the comparison.
#[derive(Debug, Clone, Serialize)]
pub struct TraceReport {
    /// The trace's name, as in the comparison's rows (T1, T2, ... in the verdict).
    pub name: String,
    /// The bundle or trace file.
    pub path: PathBuf,
    /// A hash of its content: which trace this was, whatever its path.
    pub content_hash: trace_id::ContentHash,
    /// uname -r of the traced kernel, when known.
    pub kernel_release: Option<String>,
    /// The sched features the capture read, when it could.
    pub features: Option<String>,
    /// The trace clock the capture used, when the bundle recorded it.
    pub clock: Option<String>,
    /// The format the bundle was imported from; None for a plain trace file.
    pub source_format: Option<String>,
    /// CPUs of the replayed machine.
    pub nr_cpus: u32,
    /// Events in the bundle; None for a plain trace file.
    pub events: Option<u64>,
    /// Events the tracer reported lost, in total; None for a plain trace file.
    pub lost_events: Option<u64>,
    /// The machine's topology (one flat LLC when none was recorded).
    pub topology: Topology,
    /// No topology was recorded: the CPUs were taken as one flat LLC.
    pub topology_assumed: bool,
    /// The trace's decision replay with every policy arm and the traced kernel's.
    pub replay: ReplayResult,
    /// Modelled and measured time per search, ns in log2 buckets.
    pub search_time: SearchTime,
    /// The busy/idle strip: `timeline_ns` from the middle of the trace.
    pub timeline: Timeline,
    /// Names of the tasks the latency tables list (from the bundle's pid table).
    pub task_names: BTreeMap<i32, String>,
}

/// A policy of the report with the parameter values it ran with.
#[derive(Debug, Clone, Serialize)]
pub struct PolicyParams {
    /// The spec as given, e.g. `sis_util:pct=117`.
    pub spec: String,
    /// The kernel release or patch the model follows.
    pub follows: String,
    /// Every parameter in force, defaults included: name → value.
    pub values: BTreeMap<String, String>,
}

/// Everything `sisreplay report` renders; its JSON form is this struct.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The version of sisreplay that made it.
    pub sisreplay_version: String,
    /// The command line, for the reproduction section.
    pub command_line: Vec<String>,
    /// The command that makes this report again: the command line, with a `--trace` for
    /// each trace when it named none and the report resolved them.
    pub reproduce: Vec<String>,
    /// The tables: every metric, trace and arm.
    pub comparison: Comparison,
    /// One per metric, non-baseline arm and trace where both sides have a value.
    pub verdicts: Vec<Verdict>,
    /// Each row trace, in the comparison's order.
    pub traces: Vec<TraceReport>,
    /// Each policy arm, then each traced kernel's policy not among them.
    pub policies: Vec<PolicyParams>,
}

/// Why a report could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The comparison failed.
    #[error(transparent)]
    Compare(#[from] CompareError),
    /// A bundle could not be read.
    #[error(transparent)]
    Bundle(#[from] bundle::BundleError),
    /// A trace could not be read for the timeline.
    #[error(transparent)]
    Trace(#[from] crate::trace::TraceError),
    /// A policy spec that is not registered or whose parameters do not parse.
    #[error("{0}")]
    Policy(String),
    /// A trace could not be read for its content hash.
    #[error("{}: {source}", path.display())]
    Hash {
        /// The file hashed.
        path: PathBuf,
        /// Why it could not be read.
        source: std::io::Error,
    },
}

/// One verdict per metric, arm and trace where both sides have a value.
fn verdicts(c: &Comparison, traces: &[TraceReport]) -> Vec<Verdict> {
    // A row of several runs is as trustworthy as its least faithful run.
    let fidelities = |trace: &str| {
        let prefix = format!("{trace}#");
        traces
            .iter()
            .filter(|t| {
                t.name == trace
                    || t.name
                        .strip_prefix(&prefix)
                        .is_some_and(|k| k.parse::<u32>().is_ok())
            })
            .filter_map(|t| t.replay.policies.iter().find_map(|p| p.fidelity.as_ref()))
            .collect::<Vec<_>>()
    };
    let fidelity = |trace: &str| {
        let f = fidelities(trace);
        let pct = f.iter().map(|f| f.agreement_pct()).reduce(f64::min);
        (pct, least_trusted(f.iter().map(|f| trust_of(Some(f)))))
    };
    let mut out = Vec::new();
    for t in &c.tables {
        for row in &t.rows {
            let Some(Some(base)) = row.cells.first() else {
                continue;
            };
            for (i, cell) in row.cells.iter().enumerate().skip(1) {
                let Some(cell) = cell else { continue };
                let Some(change) = cell.compare_pct else {
                    continue;
                };
                let better = if t.metric.higher_is_better() {
                    cell.mean > base.mean
                } else {
                    cell.mean < base.mean
                };
                let (fidelity_pct, trust) = fidelity(&row.trace);
                // Across runs where both sides have two or more (else no test across
                // them exists, and the windows' verdict stands): the runs' means and
                // test, with the pooled windows' beside them.
                let across = match (&base.runs, &cell.runs) {
                    (Some(b), Some(a)) if b.values.len() < 2 || a.values.len() < 2 => None,
                    (Some(b), Some(a)) => a
                        .compare_pct
                        .zip(a.test)
                        .map(|(pct, test)| (b, a, pct, test)),
                    _ => None,
                };
                if let Some((b, a, pct, test)) = across {
                    let better = if t.metric.higher_is_better() {
                        a.mean > b.mean
                    } else {
                        a.mean < b.mean
                    };
                    let mut v = Verdict {
                        metric: t.metric,
                        trace: row.trace.clone(),
                        arm: c.arms[i].clone(),
                        baseline: c.arms[0].clone(),
                        base_mean: b.mean,
                        mean: a.mean,
                        change_pct: pct,
                        better,
                        beyond_noise: a.beyond_noise,
                        change_interval_pct: a.change_interval_pct,
                        practical_pct: t.metric.practical_pct(),
                        word: "",
                        fidelity_pct,
                        trust,
                        runs: Some(RunsVerdict {
                            base_values: b.values.clone(),
                            values: a.values.clone(),
                            base_std_pct: b.std_pct,
                            std_pct: a.std_pct,
                            test,
                            windows_change_pct: change,
                            windows_beyond_noise: cell.beyond_noise,
                            windows_interval_pct: cell.change_interval_pct,
                        }),
                    };
                    v.word = verdict_word(&v);
                    out.push(v);
                    continue;
                }
                let mut v = Verdict {
                    metric: t.metric,
                    trace: row.trace.clone(),
                    arm: c.arms[i].clone(),
                    baseline: c.arms[0].clone(),
                    base_mean: base.mean,
                    mean: cell.mean,
                    change_pct: change,
                    better,
                    beyond_noise: cell.beyond_noise,
                    change_interval_pct: cell.change_interval_pct,
                    practical_pct: t.metric.practical_pct(),
                    word: "",
                    fidelity_pct,
                    trust,
                    runs: None,
                };
                v.word = verdict_word(&v);
                out.push(v);
            }
        }
    }
    out
}

/// The sched features as the capture recorded them (or why it could not), else as the
/// bundle knows them.
fn features(meta: &Meta) -> Option<String> {
    match meta.provenance.capture() {
        Some(c) => match &c.sched_debug.features {
            Readable::Value(v) | Readable::Not(v) => Some(v.clone()),
        },
        None => meta.sched_features.clone(),
    }
}

/// Runs the comparison and gathers the rest of the report.
pub fn build(
    arms: &[Arm],
    traces: &[Vec<PathBuf>],
    opts: &ReportOptions,
) -> Result<Report, ReportError> {
    let mut comparison = compare::compare(arms, traces, opts.windows, opts.flips_before_trace)?;
    let mut reports = Vec::new();
    for s in comparison.traces.iter_mut() {
        let replay = *s
            .replay
            .take()
            .expect("compare keeps every trace's replay result");
        let meta = crate::input::meta(&s.path)?;
        let start = replay
            .first_ts_ns
            .saturating_add(replay.duration_ns / 2)
            .saturating_sub(opts.timeline_ns / 2);
        let timeline = timeline::read(&s.path, start, opts.timeline_ns, replay.nr_cpus)?;
        let content_hash = trace_id::of(&s.path).map_err(|source| ReportError::Hash {
            path: s.path.clone(),
            source,
        })?;
        reports.push(TraceReport {
            name: s.trace.clone(),
            path: s.path.clone(),
            content_hash,
            kernel_release: replay.kernel_release.clone(),
            features: meta.as_ref().and_then(features),
            clock: meta.as_ref().and_then(|m| m.clock.clone()),
            source_format: meta.as_ref().map(|m| m.source.format.clone()),
            nr_cpus: replay.nr_cpus,
            events: meta.as_ref().map(|m| m.events),
            lost_events: meta.as_ref().map(Meta::lost_total),
            topology: meta
                .as_ref()
                .map_or_else(|| Topology::flat(replay.nr_cpus), |m| m.topology.clone()),
            topology_assumed: replay.topology_assumed,
            task_names: {
                let o = &replay.observed;
                let pids = o
                    .per_task
                    .iter()
                    .map(|t| t.pid)
                    .chain(o.worst.iter().map(|w| w.pid));
                pids.filter_map(|p| Some((p, meta.as_ref()?.tasks.get(&p)?.clone())))
                    .collect()
            },
            search_time: SearchTime::of(&replay, &comparison.arms),
            replay,
            timeline,
        });
    }
    let mut policies = Vec::new();
    let mut specs: Vec<String> = arms
        .iter()
        .filter_map(|a| match a {
            Arm::Policy(s) => Some(s.clone()),
            Arm::Trace { .. } => None,
        })
        .collect();
    // The traced kernel's policy, unless an arm is it already (under an alias too).
    for r in &reports {
        let given = specs
            .iter()
            .any(|s| policy::PolicySpec::parse(s).is_ok_and(|p| p.is(&r.replay.as_kernel)));
        if !given {
            specs.push(r.replay.as_kernel.clone());
        }
    }
    for spec in specs {
        let (name, rest) = spec.split_once(':').unwrap_or((&spec, ""));
        let info = policy::lookup(name).ok_or_else(|| ReportError::Policy(spec.clone()))?;
        let p = Params::parse(info, rest).map_err(|e| ReportError::Policy(e.to_string()))?;
        policies.push(PolicyParams {
            spec: spec.clone(),
            follows: info.follows.to_string(),
            values: p
                .in_force()
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        });
    }
    let mut reproduce = opts.command_line.clone();
    if opts.traces_implicit {
        // One --trace per row, its runs comma-separated.
        for row in traces {
            let runs: Vec<String> = row.iter().map(|t| t.display().to_string()).collect();
            reproduce.push("--trace".into());
            reproduce.push(runs.join(","));
        }
    }
    Ok(Report {
        sisreplay_version: env!("CARGO_PKG_VERSION").to_string(),
        command_line: opts.command_line.clone(),
        reproduce,
        verdicts: verdicts(&comparison, &reports),
        comparison,
        traces: reports,
        policies,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fidelity(decisions: u64, agree: u64, always_prev: u64) -> Fidelity {
        let mut f = Fidelity::default();
        (f.decisions, f.agree, f.always_prev) = (decisions, agree, always_prev);
        f
    }

    #[test]
    fn trust_needs_agreement_and_a_model_better_than_keeping_tasks_on_prev() {
        assert_eq!(trust_of(None), "unknown");
        // 96 % agreement where keeping every task on prev would give 80 %.
        assert_eq!(trust_of(Some(&fidelity(1000, 960, 800))), "strong");
        assert_eq!(trust_of(Some(&fidelity(1000, 950, 800))), "strong");
        assert_eq!(trust_of(Some(&fidelity(1000, 949, 800))), "moderate");
        assert_eq!(trust_of(Some(&fidelity(1000, 899, 800))), "weak");
        // 98.7 % where always prev gives 98.9 %, and a tie: the trace shows nothing of
        // how the model moves tasks.
        assert_eq!(trust_of(Some(&fidelity(1000, 987, 989))), "moderate");
        assert_eq!(trust_of(Some(&fidelity(1000, 989, 989))), "moderate");
        assert_eq!(trust_of(Some(&fidelity(1000, 990, 989))), "strong");
        // Below 90 % it is weak whatever the baseline.
        assert_eq!(trust_of(Some(&fidelity(1000, 800, 900))), "weak");
        let words = |f: &Fidelity| baseline_words(f, " %");
        assert!(words(&fidelity(1000, 987, 989)).ends_with("98.90 %, as good or better"));
        assert!(words(&fidelity(1000, 990, 989)).ends_with("98.90 %"));
    }

    #[test]
    fn several_runs_are_as_trusted_as_the_least_trusted() {
        let w = ["strong", "moderate", "strong"];
        assert_eq!(least_trusted(w.iter().copied()), "moderate");
        assert_eq!(least_trusted(["strong", "weak"].iter().copied()), "weak");
        assert_eq!(least_trusted(std::iter::empty()), "unknown");
    }
}
