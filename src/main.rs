//! The `sisreplay` command line: parses arguments, calls the library, prints.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use sisreplay::bundle::{self, ImportOptions};
use sisreplay::capture::{self, Backend, CaptureOptions};
use sisreplay::topology::Topology;
use sisreplay::{info, trace};

/// The sample every command falls back to when given no input.
const DEFAULT_SAMPLE: &str = "traces/samples/hackbench-v7-zstd.dat";

#[derive(Parser)]
#[command(
    name = "sisreplay",
    version,
    about = "Capture Linux scheduler traces and replay them through counterfactual \
             idle-CPU search policies"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Read a trace (trace.dat v6/v7, perf.data, tracefs/trace-cmd/perf text) into a bundle
    /// under traces/NAME: meta.json plus events.parquet.
    Import(ImportArgs),
    /// Record a scheduler trace on this machine (root) into a bundle, optionally around a
    /// workload: `sisreplay capture --duration 10s -- hackbench -g 4 -l 1000`.
    Capture(CaptureArgs),
    /// Replay a trace's wakeups through idle-search policies (decision replay): SIS
    /// counters, search time, placements, rq locks, and agreement with the kernel.
    Replay(ReplayArgs),
    /// Compare policies on one or more traces, in the seeds' table layout: baseline
    /// 1.00 (std%), others compare% (std%), * where Welch's t-test over time windows says
    /// the difference is beyond the noise.
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
    /// Cleans up after a capture that died (started by capture itself).
    #[command(hide = true, name = "capture-watchdog")]
    CaptureWatchdog { pid: u32, spool: PathBuf },
}

#[derive(clap::Args)]
struct ImportArgs {
    /// The trace file [default: the committed hackbench sample]
    pub file: Option<PathBuf>,
    /// Bundle name [default: the file name without its extension]
    #[arg(long)]
    pub name: Option<String>,
    /// Machine description: `here` (this machine's sysfs), a preset (`sisreplay
    /// machines`) or a JSON file
    #[arg(long)]
    pub machine: Option<String>,
    /// Directory that holds bundles
    #[arg(long, default_value = "traces")]
    pub traces: PathBuf,
    /// Print the bundle's metadata as JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args)]
struct CaptureArgs {
    /// How long to trace: 100s, 500ms, 2m [default: 10s]; a workload that exits first
    /// ends the capture
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub duration: std::time::Duration,
    /// Bundle directory [default: traces/capture-HOST-YYYYmmdd-HHMMSS]
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Directory that holds bundles
    #[arg(long, default_value = "traces")]
    pub traces: PathBuf,
    #[arg(long, value_enum, default_value = "tracefs")]
    pub backend: BackendArg,
    /// Events to enable, as system/name, comma-separated [default: the sched and irq
    /// events of the model]
    #[arg(long, value_delimiter = ',')]
    pub events: Option<Vec<String>>,
    /// Per-CPU ring buffer size in KiB
    #[arg(long, default_value_t = 16384)]
    pub buffer_kb: u32,
    /// Probe select_task_rq_fair where the kernel has kprobes: `duration` (default)
    /// records wake flags, the chosen CPU and how long each selection took; `flags`
    /// only the wake flags and which wakings selected
    #[arg(long, num_args = 0..=1, default_missing_value = "duration", value_name = "WHAT")]
    pub search_latency: Option<capture::SearchProbe>,
    /// Print the bundle's metadata as JSON
    #[arg(long)]
    pub json: bool,
    /// The workload to run while tracing
    #[arg(last = true)]
    pub command: Vec<String>,
}

#[derive(clap::Args)]
struct ReplayArgs {
    /// A bundle directory or trace file [default: the committed hackbench sample]
    pub input: Option<PathBuf>,
    /// Policies, comma-separated, each `name[:key=value...]`
    #[arg(long, value_delimiter = ',', default_value = "sis_prop,sis_util")]
    pub policy: Vec<String>,
    /// The policy compared with the kernel's choices [default: from the kernel release]
    #[arg(long)]
    pub as_kernel: Option<String>,
    /// Also write one CSV row per wakeup and policy
    #[arg(long)]
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
    /// Threads to split the policies over (each reads the trace itself)
    #[arg(long, default_value_t = 1)]
    pub jobs: usize,
    /// Print the result as JSON instead of a table
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args)]
struct CompareArgs {
    /// The baseline, then the others: policies, or captured bundles (by name in
    /// --traces-dir, or by path) whose recorded behaviour is reported; `policy:NAME` and
    /// `trace:NAME` resolve a name that is both
    #[arg(required = true, num_args = 2..)]
    pub arms: Vec<String>,
    /// A trace or bundle, one per row [default: the newest bundle in traces/]
    #[arg(long = "trace")]
    pub traces: Vec<PathBuf>,
    /// Time windows per trace for the variation
    #[arg(long, default_value_t = 10)]
    pub windows: u32,
    /// Directory that holds bundles
    #[arg(long = "traces-dir", default_value = "traces")]
    pub traces_dir: PathBuf,
    /// Print the result as JSON instead of a table
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args)]
struct ReportArgs {
    /// The baseline, then the others, as for `compare`
    #[arg(required = true, num_args = 2..)]
    pub arms: Vec<String>,
    /// A trace or bundle, one per row (e.g. one per load level) [default: as compare]
    #[arg(long = "trace")]
    pub traces: Vec<PathBuf>,
    /// Output file [default: reports/BASE-vs-OTHER.html for HTML, standard output for
    /// text and JSON]
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "html")]
    pub format: ReportFormat,
    /// Time windows per trace for the variation
    #[arg(long, default_value_t = 10)]
    pub windows: u32,
    /// Length of the busy/idle strip, from the middle of each trace
    #[arg(long, default_value = "20ms", value_parser = parse_duration)]
    pub timeline: std::time::Duration,
    /// Directory that holds bundles
    #[arg(long = "traces-dir", default_value = "traces")]
    pub traces_dir: PathBuf,
}

#[derive(clap::Args)]
struct SynthArgs {
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
    #[arg(long, value_delimiter = ',', default_value = "sis_prop,sis_util")]
    pub policy: Vec<String>,
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
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Print the result as JSON instead of a table
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args)]
struct SimulateArgs {
    /// A bundle (a path, or a name in traces/)
    pub bundle: PathBuf,
    /// Policies besides the traced kernel's, comma-separated
    #[arg(long, value_delimiter = ',', default_value = "sis_prop,sis_util")]
    pub policy: Vec<String>,
    /// Write each re-run as a bundle (events, meta, results/sim.json) in this directory
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Threads to run the policies on [default: the CPUs available]
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Print the result as JSON instead of a table
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args)]
struct MachinesArgs {
    /// A preset, or `here` for this machine
    pub name: Option<String>,
    /// Print the result as JSON instead of a table
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args)]
struct FidelityArgs {
    /// Bundles or trace files
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// The policy compared with the kernel's choices [default: from each trace's
    /// kernel release and sched features]
    #[arg(long)]
    pub as_kernel: Option<String>,
    /// Print the result as JSON instead of a table
    #[arg(long)]
    pub json: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ReportFormat {
    Html,
    Text,
    Json,
}

#[derive(clap::Args)]
struct PoliciesArgs {
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
struct InfoArgs {
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
enum BackendArg {
    Tracefs,
    Perf,
}

fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let (num, unit) = match s.find(|c: char| !(c.is_ascii_digit() || c == '.')) {
        Some(i) => s.split_at(i),
        None => (s, "s"),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration like 100s or 500ms"))?;
    let secs = match unit {
        "s" => v,
        "ms" => v / 1e3,
        "m" | "min" => v * 60.0,
        "h" => v * 3600.0,
        _ => return Err(format!("unknown unit {unit:?} in {s:?}: use s, ms, m or h")),
    };
    if !(secs > 0.0 && secs.is_finite()) {
        return Err(format!("{s:?}: a capture needs a positive duration"));
    }
    Ok(std::time::Duration::from_secs_f64(secs))
}

/// Exit code for bad input or usage, as documented.
const EXIT_INPUT: u8 = 2;
/// capture: the workload failed on its own (the bundle is written).
const EXIT_WORKLOAD: u8 = 1;
/// An import stopped by SIGINT, SIGTERM or SIGHUP (128 + SIGINT, as a shell reports it).
const EXIT_INTERRUPTED: u8 = 130;

fn fail(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("sisreplay: {msg}");
    ExitCode::from(EXIT_INPUT)
}

fn default_input(given: Option<PathBuf>) -> PathBuf {
    given.unwrap_or_else(|| PathBuf::from(DEFAULT_SAMPLE))
}

fn machine(spec: Option<&str>) -> Result<Option<Topology>, String> {
    match spec {
        None => Ok(None),
        Some("here") => Topology::from_sysfs(Path::new("/sys"))
            .map(Some)
            .map_err(|e| e.to_string()),
        Some(name) if sisreplay::presets::lookup(name).is_some() => {
            let p = sisreplay::presets::lookup(name).expect("checked");
            Ok(Some(p.shape.topology(p.name)))
        }
        Some(f) if Path::new(f).exists() => Topology::from_json_file(Path::new(f))
            .map(Some)
            .map_err(|e| e.to_string()),
        Some(f) => {
            let presets: Vec<&str> = sisreplay::presets::PRESETS.iter().map(|p| p.name).collect();
            Err(format!(
                "--machine {f:?}: not a preset ({}), not `here`, and no such JSON file",
                presets.join(", ")
            ))
        }
    }
}

fn import(args: ImportArgs) -> ExitCode {
    let ImportArgs {
        file,
        name,
        machine: machine_spec,
        traces,
        json,
    } = args;
    let file = default_input(file);
    let topology = match machine(machine_spec.as_deref()) {
        Ok(t) => t,
        Err(e) => return fail(e),
    };
    let name = name.unwrap_or_else(|| {
        file.file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "trace".into())
    });
    if name.is_empty() || name.contains('/') || name.starts_with('.') {
        return fail(format!(
            "--name {name:?}: a bundle name is one plain directory name"
        ));
    }
    // SIGINT, SIGTERM and SIGHUP stop the import between batches, so that it unwinds
    // and removes its temporary directory (what a SIGKILL leaves, the next import sweeps).
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = stop.clone();
    if let Err(e) =
        ctrlc::set_handler(move || flag.store(true, std::sync::atomic::Ordering::Release))
    {
        return fail(format!("cannot install the signal handler: {e}"));
    }
    let src = match trace::open(&file) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    let mut src = Interruptible {
        inner: src,
        stop: stop.clone(),
        path: file.clone(),
    };
    let tty = std::io::stderr().is_terminal();
    let mut progress = |n: u64| {
        if tty {
            eprint!("\r{n} events read");
        }
    };
    let dest = traces.join(&name);
    let result = bundle::write_bundle(
        &mut src,
        &dest,
        ImportOptions {
            topology,
            source_path: &file,
            capture: None,
            progress: Some(&mut progress),
        },
    );
    if tty {
        eprint!("\r");
    }
    match result {
        Ok(meta) => {
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&meta).expect("serialises")
                );
            } else {
                println!(
                    "{}: {} events, {} CPUs, {} lost, from {} ({})",
                    dest.display(),
                    meta.events,
                    meta.nr_cpus,
                    meta.lost_total(),
                    file.display(),
                    meta.source.format
                );
                if meta.topology_assumed {
                    println!("topology: not given; CPUs are treated as one LLC without SMT (use --machine)");
                }
            }
            ExitCode::SUCCESS
        }
        Err(_) if stop.load(std::sync::atomic::Ordering::Acquire) => {
            eprintln!(
                "sisreplay: import interrupted by a signal; {} was not written",
                dest.display()
            );
            ExitCode::from(EXIT_INTERRUPTED)
        }
        Err(e) => fail(e),
    }
}

/// A source that fails once a termination signal has arrived.
struct Interruptible {
    inner: Box<dyn trace::EventSource>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    path: PathBuf,
}

impl Interruptible {
    fn check(&self) -> trace::Result<()> {
        if self.stop.load(std::sync::atomic::Ordering::Acquire) {
            return Err(trace::TraceError::io(
                &self.path,
                std::io::Error::new(std::io::ErrorKind::Interrupted, "interrupted by a signal"),
            ));
        }
        Ok(())
    }
}

impl trace::EventSource for Interruptible {
    fn info(&self) -> &trace::SourceInfo {
        self.inner.info()
    }
    fn next_event(&mut self) -> trace::Result<Option<trace::Event>> {
        self.check()?;
        self.inner.next_event()
    }
    fn next_batch(&mut self, out: &mut Vec<trace::Event>, max: usize) -> trace::Result<usize> {
        self.check()?;
        self.inner.next_batch(out, max)
    }
    fn stats(&self) -> trace::ReadStats {
        self.inner.stats()
    }
}

fn run_capture(args: CaptureArgs) -> ExitCode {
    let CaptureArgs {
        duration,
        output,
        traces,
        backend,
        events,
        buffer_kb,
        search_latency,
        json,
        command,
    } = args;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = stop.clone();
    // SIGINT, SIGTERM and SIGHUP end the capture early; the bundle is still written and
    // tracefs restored.
    if let Err(e) =
        ctrlc::set_handler(move || flag.store(true, std::sync::atomic::Ordering::Release))
    {
        return fail(format!("cannot install the signal handler: {e}"));
    }
    let opts = CaptureOptions {
        duration,
        output,
        traces_dir: traces,
        backend: match backend {
            BackendArg::Tracefs => Backend::Tracefs,
            BackendArg::Perf => Backend::Perf,
        },
        events: events.unwrap_or_else(|| {
            capture::DEFAULT_EVENTS
                .iter()
                .map(|s| s.to_string())
                .collect()
        }),
        buffer_kb,
        search_latency,
        command,
        argv: std::env::args().collect(),
        stop,
        watchdog: std::env::current_exe().ok(),
    };
    match capture::capture(opts) {
        Ok(meta) => {
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&meta).expect("serialises")
                );
                return workload_status(&meta);
            }
            let cap = meta.capture.as_ref();
            println!(
                "{} events in {:.2} s, {} lost",
                meta.events,
                cap.and_then(|c| c["duration_s"].as_f64()).unwrap_or(0.0),
                meta.lost_total()
            );
            if let Some(cpus) = cap.and_then(|c| c["cpus"].as_array()) {
                for c in cpus {
                    println!(
                        "  CPU {:>3}: {:>10} events, {} overrun, {} dropped",
                        c["cpu"], c["events"], c["overrun"], c["dropped"]
                    );
                }
            }
            if let Some(w) = cap.and_then(|c| c.get("workload")).filter(|w| !w.is_null()) {
                println!(
                    "workload: exit {} after {:.2} s",
                    w["exit_code"],
                    w["wall_s"].as_f64().unwrap_or(0.0)
                );
            }
            workload_status(&meta)
        }
        Err(e) => fail(e),
    }
}

/// A workload that failed on its own (a non-zero exit, or a signal capture did not send)
/// is said on stderr and makes capture exit 1; the bundle is written all the same.
fn workload_status(meta: &bundle::Meta) -> ExitCode {
    let Some(w) = meta
        .capture
        .as_ref()
        .and_then(|c| c.get("workload"))
        .filter(|w| !w.is_null())
    else {
        return ExitCode::SUCCESS;
    };
    if w["stopped_by_capture"] == true || w["exit_code"] == 0 {
        return ExitCode::SUCCESS;
    }
    let cmd: Vec<&str> = w["command"]
        .as_array()
        .map(|a| a.iter().filter_map(|c| c.as_str()).collect())
        .unwrap_or_default();
    let how = match (w["exit_code"].as_i64(), w["signal"].as_i64()) {
        (Some(c), _) => format!("exited with status {c}"),
        (None, Some(s)) => format!("was killed by signal {s}"),
        _ => "failed".into(),
    };
    eprintln!(
        "sisreplay: the workload `{}` {how}; the trace is written",
        cmd.join(" ")
    );
    ExitCode::from(EXIT_WORKLOAD)
}

fn run_replay(args: ReplayArgs) -> ExitCode {
    let ReplayArgs {
        input,
        policy,
        as_kernel,
        decisions,
        explain,
        probe_ns,
        entry_ns,
        windows,
        delayed_dequeue_ns,
        jobs,
        json,
    } = args;
    use sisreplay::replay::{self, ReplayOptions};
    let input = default_input(input);
    let meta = if bundle::is_bundle(&input) {
        match bundle::read_meta(&input) {
            Ok(m) => Some(m),
            Err(e) => return fail(e),
        }
    } else {
        None
    };
    // Open before creating the decisions file, so a bad trace leaves an old one alone.
    let mut src = match trace::open(&input) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    let decisions_out: Option<Box<dyn std::io::Write + Send>> = match &decisions {
        Some(p) => match std::fs::File::create(p) {
            Ok(f) => Some(Box::new(std::io::BufWriter::new(f))),
            Err(e) => return fail(format!("{}: {e}", p.display())),
        },
        None => None,
    };
    let opts = ReplayOptions {
        policies: policy,
        time: sisreplay::policy::sis::TimeModel { entry_ns, probe_ns },
        windows,
        as_kernel,
        decisions: decisions_out,
        explain_ts: explain,
        delayed_dequeue_ns,
        ..ReplayOptions::default()
    };
    let result = if jobs <= 1 {
        replay::replay(src.as_mut(), meta.as_ref(), opts)
    } else {
        // Each thread opens the trace itself.
        drop(src);
        let open = || -> Result<Box<dyn sisreplay::trace::EventSource>, replay::ReplayError> {
            Ok(trace::open(&input)?)
        };
        replay::replay_parallel(&open, meta.as_ref(), opts, jobs)
    };
    let r = match result {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    // Results of a bundle go beside it, for compare, reports and notebooks.
    let saved = if meta.is_some() {
        match replay::results::write(&input, &r) {
            Ok(dir) => Some(dir),
            Err(e) => return fail(e),
        }
    } else {
        None
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&r).expect("serialises"));
        return ExitCode::SUCCESS;
    }
    print!("{}", replay::text::summary(&input, &r));
    if let (Some(ts), true) = (explain, r.explained.is_empty()) {
        println!("\nno replayed wakeup at {ts} ns; --decisions FILE.csv lists their timestamps");
    }
    if let Some(d) = saved {
        println!(
            "\nresults: {}/replay.json, replay-windows.parquet",
            d.display()
        );
    }
    ExitCode::SUCCESS
}

fn run_compare(args: CompareArgs) -> ExitCode {
    let CompareArgs {
        arms,
        traces,
        windows,
        traces_dir,
        json,
    } = args;
    use sisreplay::compare;
    let (resolved, traces) = match compare::resolve(&arms, traces, &traces_dir, DEFAULT_SAMPLE) {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    if windows < 2 {
        return fail("--windows must be at least 2 to measure variation");
    }
    match compare::compare(&resolved, &traces, windows) {
        Ok(c) if json => {
            println!("{}", serde_json::to_string_pretty(&c).expect("serialises"));
            ExitCode::SUCCESS
        }
        Ok(c) => {
            print!("{}", compare::text::render(&c));
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

/// Writes `text` to `path` through a temporary file beside it, so an existing report is
/// replaced whole or not at all.
fn write_atomically(path: &Path, text: &str) -> Result<(), String> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let name = path
        .file_name()
        .ok_or_else(|| format!("{}: not a file name", path.display()))?;
    let tmp = dir.join(format!(
        ".{}.tmp{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    std::fs::write(&tmp, text).map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("{}: {e}", path.display())
    })
}

fn run_report(args: ReportArgs) -> ExitCode {
    let ReportArgs {
        arms,
        traces,
        output,
        format,
        windows,
        timeline,
        traces_dir,
    } = args;
    use sisreplay::{compare, report};
    if windows < 2 {
        return fail("--windows must be at least 2 to measure variation");
    }
    let (resolved, traces) = match compare::resolve(&arms, traces, &traces_dir, DEFAULT_SAMPLE) {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    let opts = report::ReportOptions {
        windows,
        timeline_ns: timeline.as_nanos().min(u64::MAX as u128) as u64,
        command_line: std::env::args().collect(),
    };
    let r = match report::build(&resolved, &traces, &opts) {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    let text = match format {
        ReportFormat::Html => report::html::render(&r),
        ReportFormat::Text => report::text::render(&r),
        ReportFormat::Json => serde_json::to_string_pretty(&r).expect("serialises") + "\n",
    };
    let output = output.or_else(|| {
        (format == ReportFormat::Html).then(|| {
            let name: Vec<String> = arms
                .iter()
                .map(|a| a.replace(['/', ':', '='], "_"))
                .collect();
            PathBuf::from("reports").join(format!("{}.html", name.join("-vs-")))
        })
    });
    match output {
        Some(path) => match write_atomically(&path, &text) {
            Ok(()) => {
                println!("{}", path.display());
                ExitCode::SUCCESS
            }
            Err(e) => fail(e),
        },
        None => {
            print!("{text}");
            ExitCode::SUCCESS
        }
    }
}

fn run_fidelity(args: FidelityArgs) -> ExitCode {
    use sisreplay::replay::{replay, ReplayOptions};
    let mut rows = Vec::new();
    for input in &args.inputs {
        let meta = if bundle::is_bundle(input) {
            match bundle::read_meta(input) {
                Ok(m) => Some(m),
                Err(e) => return fail(e),
            }
        } else {
            None
        };
        let mut src = match trace::open(input) {
            Ok(s) => s,
            Err(e) => return fail(e),
        };
        let opts = ReplayOptions {
            policies: Vec::new(),
            as_kernel: args.as_kernel.clone(),
            ..Default::default()
        };
        match replay(src.as_mut(), meta.as_ref(), opts) {
            Ok(r) => rows.push((
                input
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                r,
            )),
            Err(e) => return fail(format!("{}: {e}", input.display())),
        }
    }
    if args.json {
        let v: Vec<_> = rows
            .iter()
            .map(|(n, r)| {
                serde_json::json!({
                    "trace": n,
                    "as_kernel": r.as_kernel,
                    "fidelity": r.policies.iter().find_map(|p| p.fidelity.as_ref()),
                    "skipped": r.skipped,
                    "search_latency": r.observed.search_latency,
                    "search_fit": r.search_fit,
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&v).expect("serialises"));
    } else {
        print!("{}", sisreplay::report::fidelity::table(&rows));
    }
    ExitCode::SUCCESS
}

/// Threads to use: as asked, else one per CPU available.
fn jobs_or_cpus(jobs: Option<usize>) -> usize {
    jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

fn run_simulate(args: SimulateArgs) -> ExitCode {
    use sisreplay::sim::rerun::{self, RerunOptions};
    if let Err(e) = args
        .policy
        .iter()
        .try_for_each(|p| sisreplay::policy::build(p).map(drop))
    {
        return fail(e);
    }
    let path = [args.bundle.clone(), Path::new("traces").join(&args.bundle)]
        .into_iter()
        .find(|p| bundle::is_bundle(p));
    let Some(path) = path else {
        return fail(format!(
            "{}: not a bundle (no meta.json there nor in traces/); make one with \
             `sisreplay import FILE` or `sisreplay capture`",
            args.bundle.display()
        ));
    };
    let o = RerunOptions {
        bundle: path,
        policies: args.policy.clone(),
        out_dir: args.output.clone(),
        jobs: jobs_or_cpus(args.jobs),
    };
    match rerun::run(&o) {
        Ok(r) if args.json => {
            println!("{}", serde_json::to_string_pretty(&r).expect("serialises"));
            ExitCode::SUCCESS
        }
        Ok(r) => {
            print!("{}", rerun::render(&r));
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

fn run_synth(args: SynthArgs) -> ExitCode {
    use sisreplay::sim::steps::{self, SynthOptions};
    let topology = match machine(Some(&args.machine)) {
        Ok(Some(t)) => t,
        Ok(None) => unreachable!("a machine was named"),
        Err(e) => return fail(e),
    };
    if let Err(e) = sisreplay::synth::build(&args.workload, 1) {
        return fail(e);
    }
    if let Err(e) = args
        .policy
        .iter()
        .try_for_each(|p| sisreplay::policy::build(p).map(drop))
    {
        return fail(e);
    }
    let cpus = topology.cpus.len() as u32;
    let load_steps = match steps::load_steps(args.load.as_deref(), args.threads, cpus) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    let single = load_steps.len() == 1 && args.policy.len() == 1;
    let out_dir = (!args.no_bundle).then(|| args.output.clone().unwrap_or_else(|| "traces".into()));
    let machine_name = Path::new(&args.machine)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| args.machine.clone());
    let o = SynthOptions {
        machine_name,
        topology,
        workload: args.workload.clone(),
        steps: load_steps,
        policies: args.policy.clone(),
        duration_ns: args.duration.as_nanos().min(u64::MAX as u128) as u64,
        warmup_ns: args.warmup.as_nanos().min(u64::MAX as u128) as u64,
        out_is_bundle: single && args.output.is_some(),
        seed: args.seed,
        out_dir,
        jobs: jobs_or_cpus(args.jobs),
    };
    let results = match steps::run(&o) {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&results).expect("serialises")
        );
        return ExitCode::SUCCESS;
    }
    println!(
        "{} on {} ({} CPUs), {} measured after {} of warmup per step",
        args.workload,
        args.machine,
        cpus,
        humantime(o.duration_ns),
        humantime(o.warmup_ns)
    );
    println!(
        "{:<8} {:>7} {:<12} {:>11} {:>8} {:>8} {:>7} {:>6} {:>7}",
        "load", "threads", "policy", "units/s", "p50 us", "p99 us", "se_eff%", "scan", "xLLC%"
    );
    for r in &results {
        let s = &r.result;
        let scan = s.counters.scanned as f64 / s.counters.search.max(1) as f64;
        let p = &s.placements;
        let cross = p.cross_llc + p.cross_numa;
        println!(
            "{:<8} {:>7} {:<12} {:>11.0} {:>8.1} {:>8.1} {:>7.2} {:>6.2} {:>7.2}",
            r.step.label,
            r.step.threads,
            s.policy.chars().take(12).collect::<String>(),
            s.throughput_per_s,
            s.latency.p50 as f64 / 1e3,
            s.latency.p99 as f64 / 1e3,
            s.derived.se_eff,
            scan,
            100.0 * cross as f64 / s.wakeups.max(1) as f64
        );
    }
    let written: Vec<String> = results
        .iter()
        .filter_map(|r| r.bundle.as_ref().map(|b| b.display().to_string()))
        .collect();
    if !written.is_empty() {
        println!("bundles: {}", written.join(" "));
    }
    ExitCode::SUCCESS
}

/// 100ms, 2s: a duration as the command line takes it.
fn humantime(ns: u64) -> String {
    if ns % 1_000_000_000 == 0 {
        format!("{}s", ns / 1_000_000_000)
    } else {
        format!("{}ms", ns / 1_000_000)
    }
}

fn show_machines(args: MachinesArgs) -> ExitCode {
    use sisreplay::presets::PRESETS;
    match args.name.as_deref() {
        None if args.json => {
            let v: Vec<_> = PRESETS
                .iter()
                .map(|p| {
                    serde_json::json!({"name": p.name, "cpus": p.shape.cpus(), "source": p.source})
                })
                .collect();
            println!("{}", serde_json::to_string_pretty(&v).expect("serialises"));
            ExitCode::SUCCESS
        }
        None => {
            for p in PRESETS {
                let s = &p.shape;
                println!(
                    "{:<12} {:>3} CPUs: {} sockets, {} NUMA nodes, {} LLCs of {} cores{}{}",
                    p.name,
                    s.cpus(),
                    s.sockets,
                    s.sockets * s.nodes_per_socket,
                    s.sockets * s.nodes_per_socket * s.llcs_per_node,
                    s.cores_per_llc,
                    if s.threads > 1 { " x SMT2" } else { "" },
                    if s.cores_per_cluster < s.cores_per_llc {
                        format!(", clusters of {}", s.cores_per_cluster)
                    } else {
                        String::new()
                    }
                );
                println!(
                    "{}",
                    sisreplay::report::text::fit(&format!("{:13}{}", "", p.source))
                );
            }
            println!("here         this machine, from sysfs");
            ExitCode::SUCCESS
        }
        Some(name) => match machine(Some(name)) {
            Ok(Some(t)) => {
                println!("{}", serde_json::to_string_pretty(&t).expect("serialises"));
                ExitCode::SUCCESS
            }
            Ok(None) => unreachable!("a name was given"),
            Err(e) => fail(e),
        },
    }
}

fn show_policies(args: PoliciesArgs) -> ExitCode {
    let PoliciesArgs {
        name,
        budget,
        llc_size,
        json,
    } = args;
    use sisreplay::policy;
    let Some(spec) = name else {
        if budget {
            return fail("--budget needs a policy name");
        }
        let all = policy::registry();
        if json {
            println!(
                "{}",
                serde_json::to_string_pretty(&all).expect("serialises")
            );
        } else {
            for p in all {
                let aliases = if p.aliases.is_empty() {
                    String::new()
                } else {
                    format!(" (alias {})", p.aliases.join(", "))
                };
                println!(
                    "{}{aliases}\n    {}\n    follows: {}",
                    p.name, p.summary, p.follows
                );
                for q in p.params {
                    println!("    {}={} : {}", q.name, q.default, q.doc);
                }
            }
        }
        return ExitCode::SUCCESS;
    };
    if let Err(e) = policy::build(&spec) {
        return fail(e);
    }
    let base = spec.split(':').next().unwrap_or("");
    let info = policy::lookup(base).expect("built above");
    if !budget {
        if json {
            println!(
                "{}",
                serde_json::to_string_pretty(info).expect("serialises")
            );
        } else {
            println!("{}: {}\nfollows: {}", info.name, info.summary, info.follows);
            for q in info.params {
                println!("  {}={} : {}", q.name, q.default, q.doc);
            }
        }
        return ExitCode::SUCCESS;
    }
    if llc_size == 0 {
        return fail("--llc-size must be at least 1");
    }
    match policy::budget_curve(&spec, llc_size) {
        Ok(curve) if json => {
            println!(
                "{}",
                serde_json::to_string_pretty(&curve).expect("serialises")
            );
            ExitCode::SUCCESS
        }
        Ok(curve) => {
            println!("{spec}: CPUs scanned in a {llc_size}-CPU LLC after a periodic balance");
            if base == "sis_prop" || base == "vanilla" || base == "cas" || base == "cas_static" {
                println!("(SIS_PROP's budget follows the waker's idle time, not utilisation: shown for the initial 1 ms avg_idle and no scan cost yet)");
            }
            let (u, n): (Vec<String>, Vec<String>) = curve
                .iter()
                .map(|p| (format!("{:>4}", p.util_pct), format!("{:>4}", p.nr_scan)))
                .unzip();
            for (a, b) in u.chunks(11).zip(n.chunks(11)) {
                println!("util%   {}", a.join(""));
                println!("nr_scan {}", b.join(""));
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

fn show_info(args: InfoArgs) -> ExitCode {
    let InfoArgs { input, top, json } = args;
    let input = default_input(input);
    let mut src = match trace::open(&input) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    match info::summarise(src.as_mut(), top) {
        Ok(s) if json => {
            println!("{}", serde_json::to_string_pretty(&s).expect("serialises"));
            ExitCode::SUCCESS
        }
        Ok(s) => {
            println!("{}", input.display());
            print!("{}", s.to_text());
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

fn main() -> ExitCode {
    // Output piped into `head` ends quietly, as with other command-line tools, instead of
    // a panic on the failed write.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let cli = Cli::parse();
    match cli.command {
        Command::Import(a) => import(a),
        Command::Capture(a) => run_capture(a),
        Command::Replay(a) => run_replay(a),
        Command::Compare(a) => run_compare(a),
        Command::Report(a) => run_report(a),
        Command::Fidelity(a) => run_fidelity(a),
        Command::Machines(a) => show_machines(a),
        Command::Synth(a) => run_synth(a),
        Command::Simulate(a) => run_simulate(a),
        Command::Policies(a) => show_policies(a),
        Command::Info(a) => show_info(a),
        Command::CaptureWatchdog { pid, spool } => {
            capture::watchdog(pid, &spool);
            ExitCode::SUCCESS
        }
    }
}
