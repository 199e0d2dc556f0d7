//! `sisreplay capture`: records a scheduler trace on this machine into a bundle, around
//! an optional workload, and leaves tracing as it found it.

pub mod machine;
pub mod tracefs;

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;

use crate::bundle::{self, BundleError, ImportOptions, Meta};
use crate::topology::Topology;
use crate::trace::decode::Decoder;
use crate::trace::page::ByteOrder;
use crate::trace::stream::{CpuEvents, FilePages, Merge};
use crate::trace::{Event, EventSource, ReadStats, SourceInfo};

/// The events captured unless `--events` says otherwise.
pub const DEFAULT_EVENTS: &[&str] = &[
    "sched/sched_switch",
    "sched/sched_waking",
    "sched/sched_wakeup",
    "sched/sched_wakeup_new",
    "sched/sched_migrate_task",
    "sched/sched_process_fork",
    "sched/sched_process_exit",
    "irq/irq_handler_entry",
    "irq/irq_handler_exit",
    "irq/softirq_entry",
    "irq/softirq_exit",
];

#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    #[error("{0}")]
    Privilege(String),
    #[error("{0}")]
    Usage(String),
    #[error("tracefs: {0}")]
    Tracefs(String),
    #[error("{0}")]
    Workload(String),
    #[error(transparent)]
    Bundle(#[from] BundleError),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    Tracefs,
    Perf,
}

pub struct CaptureOptions {
    pub duration: Duration,
    pub output: Option<PathBuf>,
    pub traces_dir: PathBuf,
    pub backend: Backend,
    pub events: Vec<String>,
    /// Per-CPU ring buffer size.
    pub buffer_kb: u32,
    pub search_latency: bool,
    /// The workload to run while tracing, if any.
    pub command: Vec<String>,
    /// The command line as the user gave it, for meta.json.
    pub argv: Vec<String>,
    pub stop: Arc<AtomicBool>,
}

/// What `--search-latency` could do on this kernel.
#[derive(Debug, Clone, Serialize)]
pub struct SearchLatency {
    pub requested: bool,
    pub available: bool,
    pub why: String,
}

/// Decides whether the idle-search duration can be recorded: needs function_graph or
/// kprobe events.
pub fn search_latency_support(root: &Path) -> SearchLatency {
    let tracers = std::fs::read_to_string(root.join("available_tracers")).unwrap_or_default();
    let graph = tracers.split_whitespace().any(|t| t == "function_graph");
    let kprobes = root.join("kprobe_events").exists();
    SearchLatency {
        requested: false,
        available: false,
        why: match (graph, kprobes) {
            (false, false) => format!(
                "not available on this kernel: no function_graph tracer (available: {}) and \
                 no kprobe_events",
                tracers.trim()
            ),
            _ => "this kernel has function_graph or kprobe events, but recording the idle \
                  search duration is not implemented yet"
                .into(),
        },
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct CpuOutcome {
    pub cpu: u32,
    pub pages: u64,
    pub events: u64,
    /// Events the kernel overwrote before they were read (`overrun` in per_cpu stats).
    pub overrun: u64,
    /// Events dropped because the buffer was full (`dropped events`).
    pub dropped: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct WorkloadOutcome {
    pub command: Vec<String>,
    /// Exit code, or None when it was stopped or killed by a signal.
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub wall_s: f64,
    /// Whether capture ended it because the duration ran out or capture was interrupted.
    pub stopped_by_capture: bool,
}

/// The capture facts stored as `capture` in meta.json.
#[derive(Debug, Clone, Serialize)]
pub struct CaptureRecord {
    pub command_line: Vec<String>,
    pub backend: Backend,
    pub start_utc: String,
    pub requested_duration_s: f64,
    pub duration_s: f64,
    pub stopped_by: String,
    pub buffer_kb_per_cpu: u32,
    pub events: Vec<String>,
    pub instance: String,
    pub clock: Option<String>,
    pub cpus: Vec<CpuOutcome>,
    pub workload: Option<WorkloadOutcome>,
    pub search_latency: SearchLatency,
    pub sched_debug: machine::SchedDebug,
    pub schedstat_before: machine::Readable,
    pub schedstat_after: machine::Readable,
}

/// The spool files of a capture, read as one merged stream.
struct Spool {
    info: SourceInfo,
    merge: Merge,
}

impl EventSource for Spool {
    fn info(&self) -> &SourceInfo {
        &self.info
    }
    fn next_event(&mut self) -> crate::trace::Result<Option<Event>> {
        self.merge.next_event()
    }
    fn next_batch(&mut self, out: &mut Vec<Event>, max: usize) -> crate::trace::Result<usize> {
        self.merge.next_batch(out, max)
    }
    fn stats(&self) -> ReadStats {
        self.merge.stats()
    }
}

fn online_cpus() -> Vec<u32> {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| crate::topology::parse_cpu_list(&s))
        .unwrap_or_else(|| vec![0])
}

/// Progress on a terminal: elapsed/total, events so far, events/s, lost so far.
fn progress(inst: &tracefs::Instance, cpus: &[u32], started: Instant, total: Duration) {
    let (mut events, mut lost) = (0, 0);
    for &c in cpus {
        if let Some(s) = inst.cpu_stats(c) {
            events += tracefs::stat(&s, "read events").unwrap_or(0)
                + tracefs::stat(&s, "entries").unwrap_or(0);
            lost += tracefs::stat(&s, "overrun").unwrap_or(0)
                + tracefs::stat(&s, "dropped events").unwrap_or(0);
        }
    }
    let el = started.elapsed().as_secs_f64();
    eprint!(
        "\r{el:6.1}/{:.0} s  {events:>10} events  {:>9.0} events/s  {lost} lost   ",
        total.as_secs_f64(),
        events as f64 / el.max(1e-3)
    );
}

pub fn capture(opts: CaptureOptions) -> Result<Meta, CaptureError> {
    if opts.backend == Backend::Perf {
        return Err(CaptureError::Usage(
            "the perf backend is not implemented yet; use --backend tracefs".into(),
        ));
    }
    if unsafe { libc::geteuid() } != 0 {
        return Err(CaptureError::Privilege(
            "capture needs root: creating a tracefs instance and enabling events needs \
             CAP_SYS_ADMIN (run as root or with sudo)"
                .into(),
        ));
    }
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (start_utc, stamp) = machine::utc(now);
    let dest = opts.output.clone().unwrap_or_else(|| {
        opts.traces_dir
            .join(format!("capture-{}-{stamp}", machine::hostname()))
    });
    if dest.exists() {
        return Err(CaptureError::Usage(format!(
            "{}: already exists; choose another -o/--output",
            dest.display()
        )));
    }
    let root = Path::new(tracefs::TRACEFS);
    let topology = Topology::from_sysfs(Path::new("/sys")).ok();
    let sched_debug = machine::sched_debug();
    let schedstat_before = machine::schedstat();
    let mut search = search_latency_support(root);
    search.requested = opts.search_latency;
    if opts.search_latency && !search.available {
        eprintln!("sisreplay: --search-latency: {}", search.why);
    }

    let parent = dest
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    std::fs::create_dir_all(&parent)
        .map_err(|e| CaptureError::Usage(format!("{}: {e}", parent.display())))?;
    let spool_dir = parent.join(format!(
        ".spool-{}-{}",
        dest.file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
        std::process::id()
    ));
    std::fs::create_dir_all(&spool_dir)
        .map_err(|e| CaptureError::Usage(format!("{}: {e}", spool_dir.display())))?;
    let result = run_tracefs(
        &opts,
        root,
        &spool_dir,
        &dest,
        topology,
        CaptureContext {
            start_utc,
            search,
            sched_debug,
            schedstat_before,
        },
    );
    let _ = std::fs::remove_dir_all(&spool_dir);
    result
}

struct CaptureContext {
    start_utc: String,
    search: SearchLatency,
    sched_debug: machine::SchedDebug,
    schedstat_before: machine::Readable,
}

fn run_tracefs(
    opts: &CaptureOptions,
    root: &Path,
    spool_dir: &Path,
    dest: &Path,
    topology: Option<Topology>,
    ctx: CaptureContext,
) -> Result<Meta, CaptureError> {
    let mut inst = tracefs::Instance::create(root, opts.buffer_kb)?;
    inst.enable(&opts.events)?;
    let (layout, formats) = inst.formats()?;
    let cpus = online_cpus();
    let mut readers = Vec::new();
    let drain = Arc::new(AtomicBool::new(false));
    for &c in &cpus {
        readers.push(tracefs::Reader::start(
            c,
            inst.pipe(c),
            spool_dir.join(format!("cpu{c}.pages")),
            layout.page_size(),
            drain.clone(),
        )?);
    }
    inst.set_tracing(true)?;
    let started = Instant::now();
    let tty = std::io::stderr().is_terminal();

    let mut child = match opts.command.split_first() {
        Some((prog, args)) => Some(
            std::process::Command::new(prog)
                .args(args)
                .spawn()
                .map_err(|e| CaptureError::Workload(format!("cannot start {prog}: {e}")))?,
        ),
        None => None,
    };
    let mut workload = None;
    let mut last_progress = Instant::now();
    let stopped_by = loop {
        if opts.stop.load(Ordering::Acquire) {
            break "signal";
        }
        if started.elapsed() >= opts.duration {
            break "duration";
        }
        if let Some(ch) = child.as_mut() {
            if let Ok(Some(status)) = ch.try_wait() {
                use std::os::unix::process::ExitStatusExt;
                workload = Some(WorkloadOutcome {
                    command: opts.command.clone(),
                    exit_code: status.code(),
                    signal: status.signal(),
                    wall_s: started.elapsed().as_secs_f64(),
                    stopped_by_capture: false,
                });
                child = None;
                break "workload exit";
            }
        }
        if tty && last_progress.elapsed() >= Duration::from_millis(500) {
            progress(&inst, &cpus, started, opts.duration);
            last_progress = Instant::now();
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    inst.set_tracing(false)?;
    let duration_s = started.elapsed().as_secs_f64();
    if let Some(mut ch) = child {
        // The capture ended first: stop the workload so it does not outlive the trace.
        unsafe { libc::kill(ch.id() as i32, libc::SIGTERM) };
        let status = ch.wait().ok();
        use std::os::unix::process::ExitStatusExt;
        workload = Some(WorkloadOutcome {
            command: opts.command.clone(),
            exit_code: status.and_then(|s| s.code()),
            signal: status.and_then(|s| s.signal()),
            wall_s: started.elapsed().as_secs_f64(),
            stopped_by_capture: true,
        });
    }
    drain.store(true, Ordering::Release);
    let mut spools = Vec::new();
    let mut pages = BTreeMap::new();
    for r in readers {
        let (cpu, spool) = (r.cpu, r.spool.clone());
        pages.insert(cpu, r.finish()?);
        spools.push((cpu, spool));
    }
    if tty {
        eprint!("\r{:70}\r", "");
    }
    let stats: BTreeMap<u32, String> = cpus
        .iter()
        .filter_map(|&c| inst.cpu_stats(c).map(|s| (c, s)))
        .collect();
    let clock = inst.clock();
    let instance = inst.dir.display().to_string();
    drop(inst);

    // Decode the spooled pages with the trace.dat page decoder.
    let decoder = Arc::new(Decoder::new(&formats, cfg!(target_endian = "big")));
    let order = ByteOrder {
        big_endian: cfg!(target_endian = "big"),
    };
    let mut streams = Vec::new();
    for (cpu, path) in &spools {
        let f = std::fs::File::open(path)
            .map_err(|e| CaptureError::Tracefs(format!("{}: {e}", path.display())))?;
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        let pages = FilePages::new(
            std::io::BufReader::with_capacity(1 << 18, f),
            path,
            0,
            len,
            layout.page_size(),
        );
        streams.push(CpuEvents::new(
            *cpu,
            path.clone(),
            Box::new(pages),
            decoder.clone(),
            layout,
            order,
        ));
    }
    let mut info = SourceInfo {
        format: "tracefs capture".into(),
        nr_cpus: Some(cpus.len() as u32),
        kernel_release: machine::kernel_release(),
        clock: clock.clone(),
        comms: BTreeMap::new(),
        extra: BTreeMap::new(),
    };
    for (c, s) in &stats {
        info.extra.insert(format!("cpustat.cpu{c}"), s.clone());
    }
    let mut spool = Spool {
        info,
        merge: Merge::new(streams),
    };
    let cpu_outcomes: Vec<CpuOutcome> = cpus
        .iter()
        .map(|&c| {
            let s = stats.get(&c).map(String::as_str).unwrap_or("");
            CpuOutcome {
                cpu: c,
                pages: pages.get(&c).copied().unwrap_or(0),
                events: tracefs::stat(s, "read events").unwrap_or(0),
                overrun: tracefs::stat(s, "overrun").unwrap_or(0),
                dropped: tracefs::stat(s, "dropped events").unwrap_or(0),
            }
        })
        .collect();
    let record = CaptureRecord {
        command_line: opts.argv.clone(),
        backend: opts.backend,
        start_utc: ctx.start_utc,
        requested_duration_s: opts.duration.as_secs_f64(),
        duration_s,
        stopped_by: stopped_by.into(),
        buffer_kb_per_cpu: opts.buffer_kb,
        events: opts.events.clone(),
        instance,
        clock,
        cpus: cpu_outcomes,
        workload,
        search_latency: ctx.search,
        sched_debug: ctx.sched_debug,
        schedstat_before: ctx.schedstat_before,
        schedstat_after: machine::schedstat(),
    };
    let meta = bundle::write_bundle(
        &mut spool,
        dest,
        ImportOptions {
            topology,
            source_path: Path::new(tracefs::TRACEFS),
            capture: Some(serde_json::to_value(&record).expect("serialises")),
            progress: None,
        },
    )?;
    Ok(meta)
}
