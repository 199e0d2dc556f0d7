//! `sisreplay capture`: records a scheduler trace on this machine into a bundle, around
//! an optional workload, and leaves tracing as it found it.

pub mod machine;
pub mod perf;
pub mod tracefs;

pub use crate::bundle::provenance::{
    Backend, CaptureRecord, CpuOutcome, SearchLatency, SearchProbe, WorkloadOutcome,
};

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crate::bundle::{self, BundleError, ImportOptions, Meta, Provenance};
use crate::topology::Topology;
use crate::trace::decode::Decoder;
use crate::trace::page::ByteOrder;
use crate::trace::stream::{CpuEvents, CpuStream, FilePages, Merge};
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

/// Why a capture could not run or complete.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// Not root (CAP_SYS_ADMIN is needed for tracefs instances and perf events).
    #[error("{0}")]
    Privilege(String),
    /// The request cannot be met: an event missing on this kernel, an output that exists.
    #[error("{0}")]
    Usage(String),
    /// A tracefs or perf_event_open operation failed, with the file or call.
    #[error("tracefs: {0}")]
    Tracefs(String),
    /// The workload command could not be started.
    #[error("{0}")]
    Workload(String),
    /// Writing the bundle failed.
    #[error(transparent)]
    Bundle(#[from] BundleError),
}

/// What `sisreplay capture` was asked to do.
pub struct CaptureOptions {
    /// How long to record; a workload that exits first ends the recording sooner.
    pub duration: Duration,
    /// The bundle to write; None writes `capture-HOST-YYYYmmdd-HHMMSS` under `traces_dir`.
    pub output: Option<PathBuf>,
    /// Where bundles go when `output` is not given.
    pub traces_dir: PathBuf,
    /// tracefs pages or perf samples.
    pub backend: Backend,
    /// The tracepoints to enable, as `system/name` ([`DEFAULT_EVENTS`] unless `--events`).
    pub events: Vec<String>,
    /// Per-CPU ring buffer size.
    pub buffer_kb: u32,
    /// The trace clock asked for; None takes the first of
    /// [`tracefs::CONSISTENT_CLOCKS`] the kernel offers (perf: CLOCK_MONOTONIC).
    pub trace_clock: Option<String>,
    /// Probes on select_task_rq_fair, if asked for.
    pub search_latency: Option<SearchProbe>,
    /// The workload to run while tracing, if any.
    pub command: Vec<String>,
    /// The command line as the user gave it, for meta.json.
    pub argv: Vec<String>,
    /// Set by the signal handler to end the recording early; events up to then are kept.
    pub stop: Arc<AtomicBool>,
    /// This program, run as `PROGRAM capture-watchdog` to clean up should the capture
    /// die without doing so itself (see [`watchdog`]); None runs without one.
    pub watchdog: Option<PathBuf>,
}

/// A separate process (its own process group, so a signal to the capture's group does
/// not reach it) that waits for its standard input to close. The capture holds the other
/// end: when it ends normally it first writes `done`; when it is SIGKILLed, or aborts, the
/// kernel closes the pipe with nothing said, and the watchdog cleans up.
struct Watchdog(Option<(std::process::Child, std::process::ChildStdin)>);

impl Watchdog {
    fn start(program: Option<&Path>, spool: &Path) -> Watchdog {
        let Some(program) = program else {
            return Watchdog(None);
        };
        let child = std::process::Command::new(program)
            .arg("capture-watchdog")
            .arg(std::process::id().to_string())
            .arg(spool)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .process_group(0)
            .spawn();
        match child {
            Ok(mut c) => {
                let stdin = c.stdin.take().expect("piped");
                Watchdog(Some((c, stdin)))
            }
            Err(e) => {
                eprintln!(
                    "sisreplay: warning: no watchdog ({}: {e}); should this capture be killed, \
                     the next one cleans up after it",
                    program.display()
                );
                Watchdog(None)
            }
        }
    }

    /// One line for the watchdog: `workload PGID` or `mounted`.
    fn tell(&mut self, line: &str) {
        use std::io::Write;
        if let Some((_, stdin)) = self.0.as_mut() {
            let _ = writeln!(stdin, "{line}").and_then(|_| stdin.flush());
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.tell("done");
        if let Some((mut child, stdin)) = self.0.take() {
            drop(stdin);
            let _ = child.wait();
        }
    }
}

/// The watchdog's side (`sisreplay capture-watchdog PID SPOOL`): waits for standard input
/// to close; unless it said `done`, capture PID died without cleaning up: once it is
/// gone, stops the workload's process group, removes the tracefs instance and probe
/// events named with PID, the spool directory, and unmounts tracefs if the capture had
/// mounted it. Says what it did on standard error.
pub fn watchdog(pid: u32, spool: &Path) {
    use std::io::Read;
    let mut said = String::new();
    let _ = std::io::stdin().read_to_string(&mut said);
    if said.lines().any(|l| l == "done") {
        return;
    }
    // The pipe closes while the process exits; wait until its files are all closed
    // (gone, or a zombie) before touching what it held open.
    for _ in 0..300 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat.rsplit_once(") ").and_then(|(_, r)| r.chars().next());
        if matches!(state, None | Some('Z') | Some('X')) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut did = Vec::new();
    for l in said.lines() {
        if let Some(pgid) = l
            .strip_prefix("workload ")
            .and_then(|p| p.parse::<i32>().ok())
        {
            if pgid > 1 && unsafe { libc::kill(-pgid, libc::SIGKILL) } == 0 {
                did.push(format!("killed the workload (process group {pgid})"));
            }
        }
    }
    let root = Path::new(tracefs::TRACEFS);
    did.extend(tracefs::remove_leftovers_of(root, pid));
    if spool.exists() && std::fs::remove_dir_all(spool).is_ok() {
        did.push(format!("removed {}", spool.display()));
    }
    if said.lines().any(|l| l == "mounted") {
        let _ = std::process::Command::new("umount").arg(root).output();
        did.push(format!("unmounted {}", root.display()));
    }
    for d in did {
        eprintln!("sisreplay capture-watchdog: capture {pid} died without cleaning up: {d}");
    }
}

/// Decides whether the idle-search duration can be recorded: needs kprobe events and a
/// traceable select_task_rq_fair. (function_graph could time it too, but it cannot
/// record the arguments and the returned CPU, which tell a selection's wake flags and
/// outcome; kprobes can.)
pub fn search_latency_support(root: &Path) -> SearchLatency {
    let tracers = std::fs::read_to_string(root.join("available_tracers")).unwrap_or_default();
    let graph = tracers.split_whitespace().any(|t| t == "function_graph");
    let kprobes = root.join("kprobe_events").exists();
    let functions = std::cell::OnceCell::new();
    let traceable = |f: &str| {
        functions
            .get_or_init(|| {
                tracefs::read_kernel_text(&root.join("available_filter_functions"))
                    .unwrap_or_default()
            })
            .lines()
            .any(|l| l.split_whitespace().next() == Some(f))
    };
    let idle_scan = kprobes && traceable(tracefs::IDLE_SCAN);
    let (available, why) = match (kprobes, graph) {
        (true, _) if traceable(tracefs::PROBED) => (
            true,
            format!(
                "kprobes on {}{} (system {})",
                tracefs::PROBED,
                if idle_scan {
                    format!(" and {}", tracefs::IDLE_SCAN)
                } else {
                    String::new()
                },
                tracefs::PROBE_GROUP
            ),
        ),
        (true, _) => (
            false,
            format!(
                "{} is not in available_filter_functions (inlined or not traceable)",
                tracefs::PROBED
            ),
        ),
        (false, true) => (
            false,
            "this kernel has function_graph but no kprobe_events; sisreplay records the \
             search with a kprobe pair, which also gives wake flags and the chosen CPU"
                .into(),
        ),
        (false, false) => (
            false,
            format!(
                "not available on this kernel: no kprobe_events and no function_graph \
                 tracer (available: {})",
                tracers.trim()
            ),
        ),
    };
    SearchLatency {
        requested: None,
        available,
        why,
        idle_scan,
    }
}

/// The spool files of a capture, read as one merged stream, counting events per CPU.
struct Spool {
    info: SourceInfo,
    merge: Merge<Box<dyn CpuStream>>,
    per_cpu: BTreeMap<u32, u64>,
}

impl EventSource for Spool {
    fn info(&self) -> &SourceInfo {
        &self.info
    }
    fn next_event(&mut self) -> crate::trace::Result<Option<Event>> {
        let e = self.merge.next_event()?;
        if let Some(e) = &e {
            *self.per_cpu.entry(e.cpu).or_default() += 1;
        }
        Ok(e)
    }
    fn next_batch(&mut self, out: &mut Vec<Event>, max: usize) -> crate::trace::Result<usize> {
        let start = out.len();
        let n = self.merge.next_batch(out, max)?;
        for e in &out[start..] {
            *self.per_cpu.entry(e.cpu).or_default() += 1;
        }
        Ok(n)
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

/// What a backend leaves once stopped: per-CPU streams over its spool files, and the
/// kernel's own per-CPU counters where it has them.
struct Stopped {
    streams: Vec<Box<dyn CpuStream>>,
    /// Per CPU: (spooled pages or bytes, kernel-counted events, overrun, dropped).
    counters: BTreeMap<u32, (u64, Option<u64>, u64, u64)>,
    clock: Option<String>,
    instance: String,
    extra: BTreeMap<String, String>,
}

/// A backend while it records.
trait Recording {
    fn set_tracing(&mut self, on: bool) -> Result<(), CaptureError>;
    /// Events and losses so far, where the backend can tell cheaply.
    fn progress(&self) -> Option<(u64, u64)>;
    fn stop(self: Box<Self>) -> Result<Stopped, CaptureError>;
}

struct TracefsRecording {
    /// Taken by stop; dropped (removed) after the readers have closed its pipes.
    inst: Option<tracefs::Instance>,
    /// Started once tracing is on, as the perf backend's are: starting a thread wakes it
    /// from this one, and those wakeups count in this thread's wakee_flips, which a
    /// workload forked from it inherits and keeps (wake_wide reads them). In the trace,
    /// the model sees them.
    readers: Vec<tracefs::Reader>,
    spool_dir: PathBuf,
    drain: Arc<AtomicBool>,
    cpus: Vec<u32>,
    layout: crate::trace::format::PageLayout,
    decoder: Arc<Decoder>,
    // Dropped after the instance (removed in stop), before the mount.
    _probes: Option<tracefs::Probes>,
    _mount: tracefs::Mount,
}

/// A recording dropped without stop (an error, or a workload that cannot start): the
/// readers are stopped first, since an instance whose pipes are open cannot be removed.
impl Drop for TracefsRecording {
    fn drop(&mut self) {
        self.drain.store(true, Ordering::Release);
        for r in self.readers.drain(..) {
            let _ = r.finish();
        }
        drop(self.inst.take());
    }
}

impl TracefsRecording {
    fn inst(&self) -> &tracefs::Instance {
        self.inst.as_ref().expect("the instance lives until stop")
    }
}

impl Recording for TracefsRecording {
    fn set_tracing(&mut self, on: bool) -> Result<(), CaptureError> {
        self.inst().set_tracing(on)?;
        if on && self.readers.is_empty() {
            for &c in &self.cpus {
                let r = tracefs::Reader::start(
                    c,
                    self.inst().pipe(c),
                    self.spool_dir.join(format!("cpu{c}.pages")),
                    self.layout.page_size(),
                    self.drain.clone(),
                )?;
                self.readers.push(r);
            }
        }
        Ok(())
    }
    fn progress(&self) -> Option<(u64, u64)> {
        let (mut events, mut lost) = (0, 0);
        for &c in &self.cpus {
            let s = self.inst().cpu_stats(c)?;
            events += tracefs::stat(&s, "read events").unwrap_or(0)
                + tracefs::stat(&s, "entries").unwrap_or(0);
            lost += tracefs::stat(&s, "overrun").unwrap_or(0)
                + tracefs::stat(&s, "dropped events").unwrap_or(0);
        }
        Some((events, lost))
    }
    fn stop(mut self: Box<Self>) -> Result<Stopped, CaptureError> {
        let inst = self.inst.take().expect("stopped once");
        inst.set_tracing(false)?;
        self.drain.store(true, Ordering::Release);
        let mut spools = Vec::new();
        let mut pages = BTreeMap::new();
        for r in std::mem::take(&mut self.readers) {
            let (cpu, spool) = (r.cpu, r.spool.clone());
            pages.insert(cpu, r.finish()?);
            spools.push((cpu, spool));
        }
        let mut counters = BTreeMap::new();
        let mut extra = BTreeMap::new();
        let me = &*self;
        for &c in &me.cpus {
            let s = inst.cpu_stats(c).unwrap_or_default();
            counters.insert(
                c,
                (
                    pages.get(&c).copied().unwrap_or(0),
                    tracefs::stat(&s, "read events"),
                    tracefs::stat(&s, "overrun").unwrap_or(0),
                    tracefs::stat(&s, "dropped events").unwrap_or(0),
                ),
            );
            extra.insert(format!("cpustat.cpu{c}"), s);
        }
        let clock = inst.clock();
        let instance = inst.dir.display().to_string();
        drop(inst);
        // The spooled pages are read by the trace.dat page decoder.
        let order = ByteOrder {
            big_endian: cfg!(target_endian = "big"),
        };
        let mut streams: Vec<Box<dyn CpuStream>> = Vec::new();
        for (cpu, path) in spools {
            let f = std::fs::File::open(&path)
                .map_err(|e| CaptureError::Tracefs(format!("{}: {e}", path.display())))?;
            let len = f.metadata().map(|m| m.len()).unwrap_or(0);
            let pages = FilePages::new(
                std::io::BufReader::with_capacity(1 << 18, f),
                &path,
                0,
                len,
                me.layout.page_size(),
            );
            streams.push(Box::new(CpuEvents::new(
                cpu,
                path.clone(),
                Box::new(pages),
                me.decoder.clone(),
                me.layout,
                order,
            )));
        }
        Ok(Stopped {
            streams,
            counters,
            clock,
            instance,
            extra,
        })
    }
}

/// Creates the search-latency probes when asked for and possible; returns them with the
/// full list of events to enable.
fn with_probes(
    opts: &CaptureOptions,
    root: &Path,
    search: &SearchLatency,
) -> Result<(Option<tracefs::Probes>, Vec<String>), CaptureError> {
    let mut events = opts.events.clone();
    let Some(what) = opts.search_latency.filter(|_| search.available) else {
        return Ok((None, events));
    };
    let duration = what == SearchProbe::Duration;
    // select_idle_cpu's own time needs its return probe: with durations only.
    let probes = tracefs::Probes::create(root, duration, duration && search.idle_scan)?;
    events.extend(probes.events());
    Ok((Some(probes), events))
}

fn start_tracefs(
    mount: tracefs::Mount,
    opts: &CaptureOptions,
    root: &Path,
    spool_dir: &Path,
    search: &SearchLatency,
) -> Result<Box<dyn Recording>, CaptureError> {
    let (probes, events) = with_probes(opts, root, search)?;
    let (layout, formats) = mount.formats(&events)?;
    let mut inst = tracefs::Instance::create(&mount, opts.buffer_kb)?;
    inst.set_clock(opts.trace_clock.as_deref())?;
    inst.enable(&events)?;
    let cpus = online_cpus();
    let rec = Box::new(TracefsRecording {
        inst: Some(inst),
        readers: Vec::new(),
        spool_dir: spool_dir.into(),
        drain: Arc::new(AtomicBool::new(false)),
        cpus,
        layout,
        decoder: Arc::new(Decoder::new(&formats, cfg!(target_endian = "big"))),
        _probes: probes,
        _mount: mount,
    });
    Ok(rec)
}

struct PerfRecording {
    /// The clock the samples are stamped with, as meta.json names it.
    clock: &'static str,
    rings: Vec<perf::CpuRing>,
    readers: Vec<perf::Reader>,
    drain: Arc<AtomicBool>,
    decoder: Arc<Decoder>,
    spool_dir: PathBuf,
    cpus: Vec<u32>,
    _probes: Option<tracefs::Probes>,
    _mount: tracefs::Mount,
}

/// A recording dropped without stop: the readers hold the rings, whose perf events
/// must close before the probes can be removed.
impl Drop for PerfRecording {
    fn drop(&mut self) {
        self.drain.store(true, Ordering::Release);
        for r in self.readers.drain(..) {
            let _ = r.finish();
        }
        self.rings.clear();
    }
}

impl Recording for PerfRecording {
    fn set_tracing(&mut self, on: bool) -> Result<(), CaptureError> {
        if on && self.readers.is_empty() {
            for r in &self.rings {
                r.enable(true)?;
            }
            for ring in self.rings.drain(..) {
                let cpu = ring.cpu;
                self.readers.push(perf::Reader::start(
                    ring,
                    self.spool_dir.join(format!("cpu{cpu}.perf")),
                    self.drain.clone(),
                )?);
            }
        }
        Ok(())
    }
    fn progress(&self) -> Option<(u64, u64)> {
        None
    }
    fn stop(mut self: Box<Self>) -> Result<Stopped, CaptureError> {
        self.drain.store(true, Ordering::Release);
        let me = &mut *self;
        let mut counters = BTreeMap::new();
        let mut streams: Vec<Box<dyn CpuStream>> = Vec::new();
        for r in std::mem::take(&mut me.readers) {
            let (cpu, spool) = (r.cpu, r.spool.clone());
            let bytes = r.finish()?;
            counters.insert(cpu, (bytes, None, 0, 0));
            streams.push(Box::new(
                perf::SpoolEvents::open(cpu, &spool, me.decoder.clone())
                    .map_err(|e| CaptureError::Tracefs(e.to_string()))?,
            ));
        }
        for &c in &me.cpus {
            counters.entry(c).or_insert((0, None, 0, 0));
        }
        Ok(Stopped {
            streams,
            counters,
            clock: Some(me.clock.into()),
            instance: "perf_event_open".into(),
            extra: BTreeMap::new(),
        })
    }
}

fn start_perf(
    mount: tracefs::Mount,
    opts: &CaptureOptions,
    root: &Path,
    spool_dir: &Path,
    search: &SearchLatency,
) -> Result<Box<dyn Recording>, CaptureError> {
    // perf stamps samples with its own clock, each CPU's sched_clock, unless asked for
    // CLOCK_MONOTONIC: the same time line on every CPU, as tracefs's `mono`.
    let clock = match opts.trace_clock.as_deref() {
        None | Some("mono") => "mono",
        Some("local" | "perf") => "perf",
        Some(other) => {
            return Err(CaptureError::Usage(format!(
                "trace clock {other}: the perf backend stamps samples with mono \
                 (CLOCK_MONOTONIC, the default) or perf (each CPU's sched_clock, also \
                 called local)"
            )))
        }
    };
    let (probes, events) = with_probes(opts, root, search)?;
    let (_, formats) = mount.formats(&events)?;
    let ids: Vec<u64> = formats.iter().map(|f| f.id as u64).collect();
    // The ring is a power of two of pages.
    let pages = ((opts.buffer_kb as usize * 1024) / 4096)
        .max(8)
        .next_power_of_two();
    let cpus = online_cpus();
    let mut rings = Vec::new();
    for &c in &cpus {
        rings.push(perf::CpuRing::open(c, &ids, pages, clock == "mono")?);
    }
    Ok(Box::new(PerfRecording {
        clock,
        rings,
        readers: Vec::new(),
        drain: Arc::new(AtomicBool::new(false)),
        decoder: Arc::new(Decoder::new(&formats, cfg!(target_endian = "big"))),
        spool_dir: spool_dir.into(),
        cpus,
        _probes: probes,
        _mount: mount,
    }))
}

/// Records a capture; returns where its bundle went, and its metadata.
pub fn capture(opts: CaptureOptions) -> Result<(PathBuf, Meta), CaptureError> {
    if unsafe { libc::geteuid() } != 0 {
        return Err(CaptureError::Privilege(
            "capture needs root: creating a tracefs instance, enabling events and opening \
             perf events on every CPU need CAP_SYS_ADMIN (run as root or with sudo)"
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
    let parent = dest
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    std::fs::create_dir_all(&parent)
        .map_err(|e| CaptureError::Usage(format!("{}: {e}", parent.display())))?;
    // Spools of captures that died (the PID in the name is not running) go first.
    crate::stale::sweep_dirs(&parent, ".spool-");
    let spool_dir = parent.join(format!(
        ".spool-{}-{}",
        dest.file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
        std::process::id()
    ));
    std::fs::create_dir_all(&spool_dir)
        .map_err(|e| CaptureError::Usage(format!("{}: {e}", spool_dir.display())))?;
    let mut watchdog = Watchdog::start(opts.watchdog.as_deref(), &spool_dir);
    let result = record(&opts, root, &spool_dir, &dest, start_utc, &mut watchdog);
    let _ = std::fs::remove_dir_all(&spool_dir);
    drop(watchdog);
    result.map(|meta| (dest, meta))
}

/// The capture proper, between the spool directory's creation and removal: set up,
/// trace around the workload, stop, write the bundle. Whatever it set up (instance,
/// probes, mount) is undone when the recording is dropped, on every way out.
fn record(
    opts: &CaptureOptions,
    root: &Path,
    spool_dir: &Path,
    dest: &Path,
    start_utc: String,
    watchdog: &mut Watchdog,
) -> Result<Meta, CaptureError> {
    let topology = Topology::from_sysfs(Path::new("/sys")).ok();
    let sched_debug = machine::sched_debug();
    let (mut rec, search) = set_up(opts, root, spool_dir, watchdog)?;
    rec.set_tracing(true)?;
    // The kernel's SIS counters are read while tracing is on, so they count the searches
    // of the traced wakeups and not those of the capture's own set-up and tear-down.
    let schedstat_before = machine::schedstat();
    let started = Instant::now();
    let tty = std::io::stderr().is_terminal();
    // The recording is dropped on this error, which removes the instance.
    let mut child = start_workload(&opts.command, watchdog)?;
    let (stopped_by, workload) = run(opts, rec.as_ref(), &mut child, started, tty);
    let schedstat_after = machine::schedstat();
    rec.set_tracing(false)?;
    let newidle_costs = machine::newidle_costs();
    let duration_s = started.elapsed().as_secs_f64();
    let workload = match child {
        Some(ch) => stop_workload(&opts.command, ch, started),
        None => workload,
    };
    let Stopped {
        streams,
        counters,
        clock,
        instance,
        extra,
    } = rec.stop()?;
    if tty {
        eprint!("\r{:70}\r", "");
    }
    let mut spool = open_spool(opts.backend, streams, counters.len() as u32, &clock, extra);
    let record = CaptureRecord {
        command_line: opts.argv.clone(),
        backend: opts.backend,
        start_utc,
        requested_duration_s: opts.duration.as_secs_f64(),
        duration_s,
        stopped_by: stopped_by.into(),
        buffer_kb_per_cpu: opts.buffer_kb,
        events: opts.events.clone(),
        instance,
        clock,
        cpus: Vec::new(),
        workload,
        search_latency: search,
        sched_debug,
        schedstat_before,
        schedstat_after,
        newidle_costs,
    };
    write_capture(&mut spool, &counters, dest, topology, record)
}

/// Mounts tracefs if need be, clears what dead captures left there, finds whether the
/// search-latency probes can be had, and opens the backend's recording (tracing still
/// off). Returns it with the probes' support as the capture record tells it.
fn set_up(
    opts: &CaptureOptions,
    root: &Path,
    spool_dir: &Path,
    watchdog: &mut Watchdog,
) -> Result<(Box<dyn Recording>, SearchLatency), CaptureError> {
    // Mounted first: what the kernel offers (kprobe_events, filter functions) is read
    // from tracefs.
    let mount = tracefs::Mount::ensure(root)?;
    if mount.mounted_here() {
        watchdog.tell("mounted");
    }
    // What captures that died left in tracefs (their PID in the name) goes first.
    tracefs::recover(root);
    let mut search = search_latency_support(root);
    search.requested = opts.search_latency;
    if opts.search_latency.is_some() && !search.available {
        eprintln!("sisreplay: --search-latency: {}", search.why);
    }
    let rec = match opts.backend {
        Backend::Tracefs => start_tracefs(mount, opts, root, spool_dir, &search)?,
        Backend::Perf => start_perf(mount, opts, root, spool_dir, &search)?,
    };
    Ok((rec, search))
}

/// Starts the workload, if there is one, and tells the watchdog its process group.
fn start_workload(
    command: &[String],
    watchdog: &mut Watchdog,
) -> Result<Option<std::process::Child>, CaptureError> {
    let Some((prog, args)) = command.split_first() else {
        return Ok(None);
    };
    // In a process group of its own, so a shell's children can be stopped with it.
    let mut cmd = std::process::Command::new(prog);
    cmd.args(args).process_group(0);
    // Killed with the capture, should the capture die first (the watchdog stops
    // its children too).
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let ch = cmd
        .spawn()
        .map_err(|e| CaptureError::Workload(format!("cannot start {prog}: {e}")))?;
    watchdog.tell(&format!("workload {}", ch.id()));
    Ok(Some(ch))
}

/// Traces until a signal, the duration, or the workload's exit (then `child` is
/// emptied and its outcome returned), showing progress on a terminal. Returns what
/// stopped it, as the capture record says it.
fn run(
    opts: &CaptureOptions,
    rec: &dyn Recording,
    child: &mut Option<std::process::Child>,
    started: Instant,
    tty: bool,
) -> (&'static str, Option<WorkloadOutcome>) {
    let mut last_progress = Instant::now();
    loop {
        if opts.stop.load(Ordering::Acquire) {
            return ("signal", None);
        }
        if started.elapsed() >= opts.duration {
            return ("duration", None);
        }
        if let Some(ch) = child.as_mut() {
            if let Ok(Some(status)) = ch.try_wait() {
                let workload = outcome(&opts.command, status, started, false);
                *child = None;
                return ("workload exit", Some(workload));
            }
        }
        if tty && last_progress.elapsed() >= Duration::from_millis(500) {
            show_progress(opts, rec, started);
            last_progress = Instant::now();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// One progress line on standard error, over the last.
fn show_progress(opts: &CaptureOptions, rec: &dyn Recording, started: Instant) {
    let el = started.elapsed().as_secs_f64();
    match rec.progress() {
        Some((events, lost)) => eprint!(
            "\r{el:6.1}/{:.0} s  {events:>10} events  {:>9.0} events/s  {lost} lost   ",
            opts.duration.as_secs_f64(),
            events as f64 / el.max(1e-3)
        ),
        None => eprint!("\r{el:6.1}/{:.0} s   ", opts.duration.as_secs_f64()),
    }
}

/// The capture ended first: stops the workload, children included, so it does not
/// outlive the trace (nor run on while the events are disabled).
fn stop_workload(
    command: &[String],
    mut ch: std::process::Child,
    started: Instant,
) -> Option<WorkloadOutcome> {
    unsafe { libc::kill(-(ch.id() as i32), libc::SIGTERM) };
    let status = ch.wait().ok()?;
    Some(outcome(command, status, started, true))
}

/// The stopped backend's spool files as one stream, equal timestamps of different CPUs
/// put in causal order as it is read.
fn open_spool(
    backend: Backend,
    streams: Vec<Box<dyn CpuStream>>,
    nr_cpus: u32,
    clock: &Option<String>,
    extra: BTreeMap<String, String>,
) -> crate::trace::causal::Ordered<Spool> {
    crate::trace::causal::Ordered::new(Spool {
        info: SourceInfo {
            format: format!(
                "{} capture",
                serde_json::to_value(backend)
                    .unwrap()
                    .as_str()
                    .unwrap_or("")
            ),
            nr_cpus: Some(nr_cpus),
            kernel_release: machine::kernel_release(),
            clock: clock.clone(),
            comms: BTreeMap::new(),
            extra,
        },
        merge: Merge::new(streams),
        per_cpu: BTreeMap::new(),
    })
}

/// Writes the bundle from the spool, then completes its meta.json with the capture
/// record and each CPU's outcome, known only once the events are decoded.
fn write_capture(
    spool: &mut crate::trace::causal::Ordered<Spool>,
    counters: &BTreeMap<u32, (u64, Option<u64>, u64, u64)>,
    dest: &Path,
    topology: Option<Topology>,
    mut record: CaptureRecord,
) -> Result<Meta, CaptureError> {
    // The per-CPU outcome needs the decoded counts, known only after the pass: write
    // the bundle with a placeholder, then complete meta.json in place.
    let mut meta = bundle::write_bundle(
        spool,
        dest,
        ImportOptions {
            topology,
            source_path: Path::new(tracefs::TRACEFS),
            provenance: Provenance::Import,
            sched_features: None,
            progress: None,
        },
    )?;
    let lost = spool.stats();
    record.cpus = counters
        .iter()
        .map(
            |(&cpu, &(spooled, kernel_events, overrun, dropped))| CpuOutcome {
                cpu,
                spooled,
                events: spool.inner().per_cpu.get(&cpu).copied().unwrap_or(0),
                kernel_events,
                overrun,
                dropped,
                lost_records: lost
                    .lost
                    .iter()
                    .filter(|w| w.cpu == cpu)
                    .map(|w| w.count.unwrap_or(0))
                    .sum(),
            },
        )
        .collect();
    // The kernel counts what it overwrote or dropped (per_cpu stats), which the page
    // headers' loss counts can fall short of: the larger is the CPU's loss.
    for c in &record.cpus {
        let kernel = c.overrun + c.dropped;
        if kernel > c.lost_records {
            meta.lost.entry(c.cpu).or_default().events += kernel - c.lost_records;
        }
    }
    meta.sched_features = record.sched_debug.features.value().map(str::to_string);
    meta.irq_time_accounting = machine::irq_time_accounting(meta.kernel_release.as_deref());
    if let Some(c) = machine::clocksource() {
        meta.extra.insert("clocksource".into(), c);
    }
    meta.provenance = Provenance::Capture(Box::new(record));
    bundle::rewrite_meta(dest, &meta)?;
    Ok(meta)
}

fn outcome(
    command: &[String],
    status: std::process::ExitStatus,
    started: Instant,
    stopped: bool,
) -> WorkloadOutcome {
    use std::os::unix::process::ExitStatusExt;
    WorkloadOutcome {
        command: command.to_vec(),
        exit_code: status.code(),
        signal: status.signal(),
        wall_s: started.elapsed().as_secs_f64(),
        stopped_by_capture: stopped,
    }
}

#[cfg(test)]
mod support_tests {
    use super::*;

    /// What `--search-latency` can probe, from a stand-in tracefs: select_task_rq_fair
    /// alone on a stock kernel (select_idle_cpu inlined), both where select_idle_cpu is
    /// out of line, nothing without kprobe_events.
    #[test]
    fn select_idle_cpu_is_probed_only_where_it_is_a_function() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        std::fs::write(r.join("kprobe_events"), "").unwrap();
        let funcs = |f: &str| std::fs::write(r.join("available_filter_functions"), f).unwrap();
        funcs("select_task_rq_fair\nselect_idle_core.isra.0\n");
        let s = search_latency_support(r);
        assert!(s.available && !s.idle_scan, "{s:?}");
        funcs("select_task_rq_fair\nselect_idle_cpu\n");
        let s = search_latency_support(r);
        assert!(s.available && s.idle_scan, "{s:?}");
        assert!(s.why.contains("select_idle_cpu"), "{}", s.why);
        std::fs::remove_file(r.join("kprobe_events")).unwrap();
        let s = search_latency_support(r);
        assert!(!s.available && !s.idle_scan, "{s:?}");
    }
}
