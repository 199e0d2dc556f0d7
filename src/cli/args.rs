//! The commands' arguments as clap parses them.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::policy::PolicySpec;
use crate::state::flips::BeforeTrace;

#[derive(Parser)]
#[command(
    name = "sisreplay",
    version,
    about = "Capture Linux scheduler traces and replay them through counterfactual \
             idle-CPU search policies"
)]
pub(super) struct Cli {
    #[command(subcommand)]
    pub(super) command: Command,
}

#[derive(Subcommand)]
pub(super) enum Command {
    /// Read a trace (trace.dat v6/v7, perf.data, tracefs/trace-cmd/perf text) into a bundle
    /// under traces/NAME: meta.json plus events.parquet.
    Import(ImportArgs),
    /// Record a scheduler trace on this machine (root) into a bundle, optionally around a
    /// workload: `sisreplay capture --duration 10s -- hackbench -g 4 -l 1000`.
    Capture(CaptureArgs),
    /// Replay a trace's wakeups through idle-search policies (decision replay): SIS
    /// counters, search time, placements, rq locks, and agreement with the kernel.
    Replay(ReplayArgs),
    /// Compare policies on one or more traces, or several runs of each (comma-separated),
    /// in the seeds' table layout: baseline 1.00 (std%), others compare% (std%), * where
    /// a t-test over windows or runs says the difference is beyond the noise.
    Compare(CompareArgs),
    /// Write a report of a comparison for patch review: self-contained HTML with plots
    /// (default), mail-ready text within 80 columns, or JSON.
    Report(ReportArgs),
    /// Replay each trace with the policy of the kernel that recorded it and print how
    /// often the model picked the kernel's CPU, by path, with cross-LLC placements.
    Fidelity(FidelityArgs),
    /// Simulate a workload model on a machine (a preset, here, or a JSON description)
    /// under each policy and load level, closed loop; writes one bundle per step.
    Synth(SynthArgs),
    /// Re-run a captured trace's tasks in closed loop under each policy: run bursts, wake
    /// dependencies and timer sleeps from the trace; prints how the re-run under the
    /// traced kernel's own policy matches the trace (the model's fidelity).
    Simulate(SimulateArgs),
    /// List the machine presets (the seeds' test machines), or print one as the JSON
    /// that --machine reads.
    Machines(MachinesArgs),
    /// List the idle-search policies, or show one policy's parameters and scan budget
    /// against average LLC utilisation (`--budget --llc-size 112`).
    Policies(PoliciesArgs),
    /// Summarise a bundle or trace file: duration, CPUs, events by type, wakeups,
    /// migrations, lost events, top tasks by runtime.
    Info(InfoArgs),
    /// Print a shell completion script, e.g. `sisreplay completions bash >
    /// /etc/bash_completion.d/sisreplay`.
    Completions {
        /// The shell: bash, zsh, fish, elvish or powershell
        shell: clap_complete::Shell,
    },
    /// Print a manual page (roff): `sisreplay man > sisreplay.1`, or a command's own,
    /// `sisreplay man replay > sisreplay-replay.1`; read with `man ./sisreplay.1`.
    Man {
        /// The command whose page to print [default: the overview]
        command: Option<String>,
    },
    /// Cleans up after a capture that died (started by capture itself).
    #[command(hide = true, name = "capture-watchdog")]
    CaptureWatchdog { pid: u32, spool: PathBuf },
}

#[derive(clap::Args)]
pub(super) struct ImportArgs {
    /// The trace file [default: the committed hackbench sample]
    pub file: Option<PathBuf>,
    /// Bundle name [default: the file name without its extension]
    #[arg(long)]
    pub name: Option<String>,
    /// Machine description: `here` (this machine's sysfs), a preset (`sisreplay
    /// machines`) or a JSON file
    #[arg(long)]
    pub machine: Option<String>,
    /// Directory that holds bundles (its older name, traces, is still accepted)
    #[arg(
        long = "traces-dir",
        alias = "traces",
        value_name = "DIR",
        default_value = "traces"
    )]
    pub traces: PathBuf,
    /// Print the bundle's metadata as JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args)]
pub(super) struct CaptureArgs {
    /// How long to trace: 100s, 500ms, 2m [default: 10s]; a workload that exits first
    /// ends the capture
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub duration: std::time::Duration,
    /// Bundle directory [default: traces/capture-HOST-YYYYmmdd-HHMMSS]
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Directory that holds bundles (its older name, traces, is still accepted)
    #[arg(
        long = "traces-dir",
        alias = "traces",
        value_name = "DIR",
        default_value = "traces"
    )]
    pub traces: PathBuf,
    /// How events are read: tracefs (a private ftrace instance) or perf (perf_event_open)
    #[arg(long, value_enum, default_value = "tracefs")]
    pub backend: BackendArg,
    /// Events to enable, as system/name, comma-separated [default: the sched and irq
    /// events of the model]
    #[arg(short, long, value_delimiter = ',')]
    pub events: Option<Vec<String>>,
    /// Per-CPU ring buffer size in KiB
    #[arg(short, long, default_value_t = 16384)]
    pub buffer_kb: u32,
    /// The clock events are stamped with [default: mono where the kernel offers it, else
    /// global: one time line for every CPU]; `local` is each CPU's own sched_clock
    #[arg(long, value_name = "CLOCK")]
    pub trace_clock: Option<String>,
    /// Probe select_task_rq_fair where the kernel has kprobes: `duration` (default)
    /// records wake flags, the chosen CPU and how long each selection took; `flags`
    /// only the wake flags and which wakings selected
    #[arg(long, num_args = 0..=1, default_missing_value = "duration", value_name = "WHAT")]
    pub search_latency: Option<crate::capture::SearchProbe>,
    /// Print the bundle's metadata as JSON
    #[arg(long)]
    pub json: bool,
    /// The workload to run while tracing
    #[arg(last = true)]
    pub command: Vec<String>,
}

#[derive(clap::Args)]
pub(super) struct ReplayArgs {
    /// Bundle directories or trace files; a directory that is not a bundle stands for
    /// every bundle below it. Several are replayed at once, each in one pass; a bundle's
    /// results go to its results/ directory [default: the committed hackbench sample]
    pub inputs: Vec<PathBuf>,
    /// Policies, comma-separated, each `name[:key=value...]`
    #[arg(
        short,
        long,
        value_delimiter = ',',
        default_value = "sis_prop,sis_util"
    )]
    pub policy: Vec<PolicySpec>,
    /// The policy compared with the kernel's choices [default: from the kernel release]
    #[arg(long)]
    pub as_kernel: Option<String>,
    /// Also write one row per wakeup and policy: CSV, or Parquet for a FILE named *.parquet
    #[arg(long, value_name = "FILE")]
    pub decisions: Option<PathBuf>,
    /// Explain each policy's steps for the wakeup at this timestamp (ns)
    #[arg(long)]
    pub explain: Option<u64>,
    /// Modelled cost of each runqueue probed, ns
    #[arg(long, default_value_t = 350)]
    pub probe_ns: u64,
    /// Modelled fixed cost of entering the scan, ns
    #[arg(long, default_value_t = 500)]
    pub entry_ns: u64,
    /// Time windows for variation
    #[arg(long, default_value_t = 10)]
    pub windows: u32,
    /// Treat a wakeup within this many ns of the task blocking as a DELAY_DEQUEUE
    /// wakeup that selects nothing (kernels v6.12+; a heuristic, off by default)
    #[arg(long)]
    pub delayed_dequeue_ns: Option<u64>,
    /// wakee_flips of the tasks alive before the trace, inherited by the tasks they
    /// fork (the trace cannot show them): a number (`16`), with how long before a task
    /// is first seen they were last halved (`16/400ms`), or `auto` to fit both to the
    /// trace (its first 500,000 events) under the traced kernel's policy
    #[arg(long, default_value = "auto", value_parser = parse_flips)]
    pub flips_before_trace: FlipsArg,
    /// Threads: with several traces, how many are replayed at once [default: one per
    /// CPU]; with one, time slices of it when it is long enough (a few % of the
    /// decisions of a loaded trace then differ from one pass's) [default: 1, one exact
    /// pass]; a single trace's wakee flips fit takes as many [default: one per CPU]
    #[arg(short, long)]
    pub jobs: Option<usize>,
    /// Also write the results as one dataset for DuckDB, polars or Spark:
    /// DIR/{summary,windows}/bundle=B/policy=P/part-0.parquet; a trace replayed again
    /// replaces the partitions of the policies it replays
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// With --out, the decisions too, one row per wakeup, in DIR/decisions/bundle=B/policy=P/
    #[arg(
        long,
        value_name = "FORMAT",
        requires = "out",
        conflicts_with = "decisions",
        num_args = 0..=1,
        default_missing_value = "parquet"
    )]
    pub out_decisions: Option<crate::replay::dataset::DecisionsFormat>,
    /// Print the result as JSON instead of a table
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args)]
pub(super) struct CompareArgs {
    /// The baseline: a policy, or a captured bundle (by name in --traces-dir, or by path)
    /// whose recorded behaviour is reported; `policy:NAME` and `trace:NAME` resolve a name
    /// that is both; `trace:A,B,C` is several runs of one workload under one setting,
    /// compared across runs (Welch's t-test, the runs being independent)
    pub base: String,
    /// The arms compared with it, of the same kinds
    #[arg(required = true, value_name = "OTHER")]
    pub others: Vec<String>,
    /// A trace or bundle, one per row, or a directory of bundles, a row each; `A,B,C`
    /// makes one row of several runs of one workload, which the policies replay each, paired across runs [default: the newest
    /// bundle in traces/]
    #[arg(long = "trace", value_name = "TRACE[,...]")]
    pub traces: Vec<PathBuf>,
    /// Time windows per trace for the variation
    #[arg(long, default_value_t = 10)]
    pub windows: u32,
    /// wakee_flips of the tasks alive before each trace, for every arm's replay (the
    /// trace cannot show them): `16`, `16/400ms` (last halved 400 ms before a task
    /// is first seen), or `auto` to fit them to the trace as `replay` does
    #[arg(long, default_value = "auto", value_parser = parse_flips)]
    pub flips_before_trace: FlipsArg,
    /// Directory that holds bundles
    #[arg(long = "traces-dir", value_name = "DIR", default_value = "traces")]
    pub traces_dir: PathBuf,
    /// Print the result as JSON instead of a table
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args)]
pub(super) struct ReportArgs {
    /// The baseline, as for `compare` (`trace:A,B,C` for several runs)
    pub base: String,
    /// The arms compared with it
    #[arg(required = true, value_name = "OTHER")]
    pub others: Vec<String>,
    /// A trace or bundle, one per row (e.g. one per load level), or a directory of
    /// bundles, a row each; `A,B,C` makes one row of several runs, as for compare
    /// [default: as compare]
    #[arg(long = "trace", value_name = "TRACE[,...]")]
    pub traces: Vec<PathBuf>,
    /// Output file, its directory created if missing [default:
    /// reports/BASE-vs-OTHER.html for HTML, standard output for text and JSON]
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// html (self-contained, with plots), text (for a mail, 80 columns) or json
    #[arg(long, value_enum, default_value = "html")]
    pub format: ReportFormat,
    /// Time windows per trace for the variation
    #[arg(long, default_value_t = 10)]
    pub windows: u32,
    /// Length of the busy/idle strip, from the middle of each trace
    #[arg(long, default_value = "20ms", value_parser = parse_duration)]
    pub timeline: std::time::Duration,
    /// wakee_flips of the tasks alive before each trace, for every arm's replay (the
    /// trace cannot show them): `16`, `16/400ms` (last halved 400 ms before a task
    /// is first seen), or `auto` to fit them to the trace as `replay` does
    #[arg(long, default_value = "auto", value_parser = parse_flips)]
    pub flips_before_trace: FlipsArg,
    /// Directory that holds bundles
    #[arg(long = "traces-dir", value_name = "DIR", default_value = "traces")]
    pub traces_dir: PathBuf,
}

#[derive(clap::Args)]
pub(super) struct SynthArgs {
    /// A preset (`sisreplay machines`), `here`, or a JSON machine description
    #[arg(long, default_value = "x86-40")]
    pub machine: String,
    /// netperf-tcp-rr, netperf-udp-rr, tbench, hackbench, schbench, spin
    #[arg(long, default_value = "netperf-tcp-rr")]
    pub workload: String,
    /// Load as a share of the CPUs: 50% or a range in steps of 25%, 25%..200%
    #[arg(long, conflicts_with = "threads")]
    pub load: Option<String>,
    /// Load as a thread count (pairs for netperf and tbench)
    #[arg(long)]
    pub threads: Option<usize>,
    /// Virtual time measured per step
    #[arg(long, default_value = "100ms", value_parser = parse_duration)]
    pub duration: std::time::Duration,
    /// Virtual time simulated before measuring (PELT and SIS_UTIL settle)
    #[arg(long, default_value = "100ms", value_parser = parse_duration)]
    pub warmup: std::time::Duration,
    /// Policies, comma-separated
    #[arg(
        short,
        long,
        value_delimiter = ',',
        default_value = "sis_prop,sis_util"
    )]
    pub policy: Vec<PolicySpec>,
    /// Output directory [default: traces/]; with one load step and one policy, the bundle
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Simulate only; write no bundle
    #[arg(long)]
    pub no_bundle: bool,
    /// Seed of the run-time variation (same seed, same run)
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Threads to run the steps on [default: the CPUs available]
    #[arg(short, long)]
    pub jobs: Option<usize>,
    /// Print the result as JSON instead of a table
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args)]
pub(super) struct SimulateArgs {
    /// A bundle (a path, or a name in traces/)
    pub bundle: PathBuf,
    /// Policies besides the traced kernel's, comma-separated
    #[arg(
        short,
        long,
        value_delimiter = ',',
        default_value = "sis_prop,sis_util"
    )]
    pub policy: Vec<PolicySpec>,
    /// Write each re-run as a bundle (events, meta, results/sim.json) in this directory
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Threads to run the policies on [default: the CPUs available]
    #[arg(short, long)]
    pub jobs: Option<usize>,
    /// The fair scheduler of the re-runs: `auto` takes the bundle's kernel release's
    /// (CFS before v6.6, EEVDF from it, with DELAY_DEQUEUE from v6.12)
    #[arg(long, value_enum, default_value = "auto")]
    pub scheduler: SchedulerArg,
    /// wakee_flips for the traced tasks as they first appear, as `replay` takes it (the
    /// trace cannot show them): `16`, `16/400ms` (last halved 400 ms before a task
    /// is first seen), or `auto` to fit them to the trace as `replay` does
    #[arg(long, default_value = "auto", value_parser = parse_flips)]
    pub flips_before_trace: FlipsArg,
    /// Seed of the re-runs' draws, the delays taken from the trace among them (same
    /// seed, same re-runs); another seed shows how far the gate's figures move by chance
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Newidle balance costs: `recorded` takes the kernel's max_newidle_lb_cost where
    /// the capture recorded it (else the model's), `model` always the model's estimate
    #[arg(long, value_enum, default_value = "recorded")]
    pub newidle_cost: crate::simulate::NewidleCostSource,
    /// Print the result as JSON instead of a table
    #[arg(long)]
    pub json: bool,
}

/// `simulate --flips-before-trace`: a value, or fitted to the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum FlipsArg {
    Fixed(BeforeTrace),
    Auto,
}

impl FlipsArg {
    /// The value to use, None to fit it.
    pub(super) fn fixed(self) -> Option<BeforeTrace> {
        match self {
            FlipsArg::Fixed(n) => Some(n),
            FlipsArg::Auto => None,
        }
    }
}

/// `auto`, a count of flips (`16`), or a count and how long before each task is first
/// seen they were last halved (`16/400ms`).
fn parse_flips(s: &str) -> Result<FlipsArg, String> {
    if s == "auto" {
        return Ok(FlipsArg::Auto);
    }
    let (count, age) = match s.split_once('/') {
        Some((c, a)) => (c, Some(a)),
        None => (s, None),
    };
    let flips = count.parse().map_err(|_| {
        format!("`{s}` is neither `auto` nor a number of flips (`16`, or `16/400ms` with an age)")
    })?;
    let halved_ago_ns = match age {
        None => 0,
        // parse_duration refuses 0, which here means halved as first seen.
        Some(a)
            if a.trim_end_matches(|c: char| c.is_ascii_alphabetic())
                .parse()
                == Ok(0.0) =>
        {
            0
        }
        Some(a) => {
            let d = parse_duration(a).map_err(|e| e.to_string())?;
            if d >= std::time::Duration::from_secs(1) {
                return Err(format!(
                    "`{s}`: flips are halved once a second, so the last halving is under 1s ago"
                ));
            }
            d.as_nanos() as u64
        }
    };
    Ok(FlipsArg::Fixed(BeforeTrace {
        flips,
        halved_ago_ns,
    }))
}

/// `simulate --scheduler`.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum SchedulerArg {
    Auto,
    Cfs,
    Eevdf,
    EevdfDelayDequeue,
}

impl SchedulerArg {
    /// The scheduler asked for; None for the release's.
    pub fn scheduler(self) -> Option<crate::sim::Scheduler> {
        use crate::sim::Scheduler;
        match self {
            SchedulerArg::Auto => None,
            SchedulerArg::Cfs => Some(Scheduler::Cfs),
            SchedulerArg::Eevdf => Some(Scheduler::Eevdf),
            SchedulerArg::EevdfDelayDequeue => Some(Scheduler::EevdfDelayDequeue),
        }
    }
}

#[derive(clap::Args)]
pub(super) struct MachinesArgs {
    /// A preset, or `here` for this machine
    pub name: Option<String>,
    /// Print the result as JSON instead of a table
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args)]
pub(super) struct FidelityArgs {
    /// Bundles or trace files; a directory that is not a bundle stands for every bundle
    /// below it
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// Traces replayed at once [default: one per CPU]
    #[arg(short, long)]
    pub jobs: Option<usize>,
    /// The policy compared with the kernel's choices [default: from each trace's
    /// kernel release and sched features]
    #[arg(long)]
    pub as_kernel: Option<String>,
    /// wakee_flips of the tasks alive before each trace, inherited by the tasks they
    /// fork (the trace cannot show them): `16`, `16/400ms` (last halved 400 ms before a
    /// task is first seen), or `auto` to fit them to the trace (its first 500,000
    /// events; the agreement printed is then with the fitted value)
    #[arg(long, default_value = "auto", value_parser = parse_flips)]
    pub flips_before_trace: FlipsArg,
    /// Print the result as JSON instead of a table
    #[arg(long)]
    pub json: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum ReportFormat {
    Html,
    Text,
    Json,
}

#[derive(clap::Args)]
pub(super) struct PoliciesArgs {
    /// A policy, with parameters: `sis_util:pct=117`
    pub name: Option<String>,
    /// Print the scan budget at LLC utilisation 0..100 % in steps of 5
    #[arg(long)]
    pub budget: bool,
    /// LLC size for --budget
    #[arg(long, default_value_t = 112)]
    pub llc_size: u32,
    /// Print the result as JSON instead of a table
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args)]
pub(super) struct InfoArgs {
    /// A bundle directory or trace file [default: the committed hackbench sample]
    pub input: Option<PathBuf>,
    /// How many tasks to list
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// Print the result as JSON instead of a table
    #[arg(long)]
    pub json: bool,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub(super) enum BackendArg {
    Tracefs,
    Perf,
}

/// A duration flag's value that is not one.
#[derive(Debug, thiserror::Error)]
pub(super) enum BadDuration {
    #[error("{0:?} is not a duration like 100s or 500ms")]
    NotANumber(String),
    #[error("unknown unit {unit:?} in {given:?}: use s, ms, m or h")]
    Unit { unit: String, given: String },
    #[error("{0:?}: a capture needs a positive duration")]
    NotPositive(String),
}

/// `100s`, `500ms`, `2m`, `1h`, or plain seconds.
pub(super) fn parse_duration(s: &str) -> Result<std::time::Duration, BadDuration> {
    let (num, unit) = match s.find(|c: char| !(c.is_ascii_digit() || c == '.')) {
        Some(i) => s.split_at(i),
        None => (s, "s"),
    };
    let v: f64 = num.parse().map_err(|_| BadDuration::NotANumber(s.into()))?;
    let secs = match unit {
        "s" => v,
        "ms" => v / 1e3,
        "m" | "min" => v * 60.0,
        "h" => v * 3600.0,
        _ => {
            return Err(BadDuration::Unit {
                unit: unit.into(),
                given: s.into(),
            })
        }
    };
    if !(secs > 0.0 && secs.is_finite()) {
        return Err(BadDuration::NotPositive(s.into()));
    }
    Ok(std::time::Duration::from_secs_f64(secs))
}
