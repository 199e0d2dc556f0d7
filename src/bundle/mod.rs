//! A trace on disk: a directory holding `meta.json` (what the trace is and where it came
//! from) and `events.parquet` (the events). Bundles are written under a temporary name
//! and renamed when complete, so an interrupted write never leaves a bundle behind.

pub mod columns;
mod decode;
pub mod error;
pub mod provenance;
mod read_ahead;
pub mod scan;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::topology::Topology;
use crate::trace::{Event, EventSource, LostWindow, Position, ReadStats, SourceInfo, TraceError};

pub use columns::{EventReader, EventWriter, EVENTS_FILE};
pub use error::EventsError;
pub use provenance::Provenance;
use read_ahead::ReadAhead;

/// The metadata file of a bundle directory.
pub const META_FILE: &str = "meta.json";
/// Events handed from a reader to a writer at a time.
const BATCH_EVENTS: usize = 1 << 14;
/// Bumped whenever meta.json or the Parquet columns change incompatibly. Version 2 put
/// a typed `provenance` and top-level `sched_features` where version 1 had an untyped
/// `capture` object; version 1 bundles are still read.
pub const SCHEMA_VERSION: u32 = 2;

/// The input a bundle was made from.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SourceMeta {
    /// The path the import or capture read, as given (`/sys/kernel/tracing` for a capture).
    pub path: String,
    /// The input's format as its reader names it (`trace.dat v7 (zstd)`, `tracefs capture`).
    pub format: String,
}

/// Per-CPU loss totals, with the windows they happened in.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CpuLoss {
    /// Events the kernel counted as lost; windows with no count add nothing here.
    pub events: u64,
    /// Windows where the count was not recorded.
    pub uncounted_windows: u64,
    /// Every loss window of the CPU, in read order.
    pub windows: Vec<LostWindow>,
}

/// A bundle's meta.json: what the trace is, where it came from, and totals over its events.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Meta {
    /// meta.json's layout version, [`SCHEMA_VERSION`] when written.
    pub schema_version: u32,
    /// The sisreplay version that wrote the bundle.
    pub sisreplay_version: String,
    /// The input the events were read from.
    pub source: SourceMeta,
    /// `uname -r` of the traced kernel, when the source recorded it.
    pub kernel_release: Option<String>,
    /// CPUs of the traced machine: the source's count, raised to one past the highest CPU an
    /// event names.
    pub nr_cpus: u32,
    /// The trace clock (`local`, `global`, ...), when the source recorded it.
    pub clock: Option<String>,
    /// The machine description; a flat one LLC of `nr_cpus` CPUs when `topology_assumed`.
    pub topology: Topology,
    /// True when no description was given and the CPUs are assumed to be one flat LLC.
    pub topology_assumed: bool,
    /// Events in events.parquet.
    pub events: u64,
    /// Timestamp of the first event, in trace clock ns; None for an empty trace.
    pub first_ts_ns: Option<u64>,
    /// Timestamp of the last event, in trace clock ns; None for an empty trace.
    pub last_ts_ns: Option<u64>,
    /// Events by type name.
    pub counts: BTreeMap<String, u64>,
    /// Events outside the model, by `system:name`, skipped.
    pub unknown_events: BTreeMap<String, u64>,
    /// Lost events by CPU; CPUs without losses are absent.
    pub lost: BTreeMap<u32, CpuLoss>,
    /// Per CPU: sched_switch events whose prev_pid is not the task the previous switch on
    /// that CPU switched to. Losses explain some; kernels also omit switches silently
    /// (seen on 6.18, also in what trace-cmd reports), and state reconstruction resyncs
    /// at each one.
    #[serde(default)]
    pub switch_gaps: BTreeMap<u32, u64>,
    /// What putting equal-timestamp groups of different CPUs in causal order did at
    /// import (trace::causal); absent from bundles written before it was done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ties: Option<crate::trace::causal::TieStats>,
    /// pid → the last comm seen for it.
    pub tasks: BTreeMap<i32, String>,
    /// Source facts worth keeping (tool versions, per-CPU buffer stats, uname).
    pub extra: BTreeMap<String, String>,
    /// How the bundle came to be: imported, captured (with the capture's settings and
    /// outcome), or simulated.
    #[serde(default)]
    pub provenance: Provenance,
    /// The traced kernel's debugfs sched/features, when they were read (captures) or are
    /// known (simulated bundles: what a kernel running the policy would show).
    #[serde(default)]
    pub sched_features: Option<String>,
    /// Whether the traced kernel keeps the time spent in interrupts as pressure on CPU
    /// capacity (CONFIG_IRQ_TIME_ACCOUNTING), from its config when the capture could
    /// read it; None when not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub irq_time_accounting: Option<bool>,
}

impl Meta {
    /// Events lost on all CPUs, as counted by the kernel (uncounted windows add nothing).
    pub fn lost_total(&self) -> u64 {
        self.lost.values().map(|l| l.events).sum()
    }

    /// What the bundle says of its source, as an event source says it.
    pub fn source_info(&self) -> SourceInfo {
        SourceInfo {
            format: format!("bundle of {}", self.source.format),
            nr_cpus: Some(self.nr_cpus),
            kernel_release: self.kernel_release.clone(),
            clock: self.clock.clone(),
            comms: self.tasks.clone(),
            extra: self.extra.clone(),
        }
    }

    /// What reading the source met (losses, unknown events, tie ordering), as recorded.
    pub fn read_stats(&self) -> ReadStats {
        ReadStats {
            lost: self.lost.values().flat_map(|l| l.windows.clone()).collect(),
            unknown: self.unknown_events.clone(),
            ties: self.ties,
        }
    }
}

type FastMap<K, V> = std::collections::HashMap<K, V, std::hash::BuildHasherDefault<ahash::AHasher>>;

/// Collects what meta.json records about the events while they stream past.
#[derive(Debug, Default)]
pub struct Tally {
    /// Events seen.
    pub events: u64,
    /// Timestamp of the first event, in trace clock ns.
    pub first_ts: Option<u64>,
    /// Timestamp of the last event, in trace clock ns.
    pub last_ts: Option<u64>,
    /// pid → the last comm seen for it in any event's fields (pid 0, the idle task, left out).
    pub tasks: BTreeMap<i32, String>,
    /// The highest CPU an event was recorded on.
    pub max_cpu: Option<u32>,
    by_type: [u64; crate::trace::EventType::ALL.len()],
    /// pid → the comm `tasks` holds for it, as the event had it: most events repeat a
    /// task's name, and comparing 16 bytes costs less than finding and comparing text.
    named: FastMap<i32, crate::trace::Comm>,
    /// Per CPU: the task the last sched_switch switched to.
    last_next: FastMap<u32, i32>,
    /// Per CPU: switches whose prev_pid is not the previous switch's next_pid.
    pub switch_gaps: BTreeMap<u32, u64>,
}

impl Tally {
    /// Counts one event.
    pub fn add(&mut self, e: &Event) {
        use crate::trace::EventKind::*;
        self.events += 1;
        self.first_ts.get_or_insert(e.ts);
        self.last_ts = Some(e.ts);
        self.max_cpu = Some(self.max_cpu.map_or(e.cpu, |m| m.max(e.cpu)));
        self.by_type[e.kind.event_type().index()] += 1;
        let mut name = |pid: i32, c: &crate::trace::Comm| {
            if pid != 0 && self.named.insert(pid, *c) != Some(*c) {
                let s = c.to_str_lossy();
                match self.tasks.get_mut(&pid) {
                    Some(old) if old.as_str() == s => {}
                    Some(old) => *old = s.into_owned(),
                    None => {
                        self.tasks.insert(pid, s.into_owned());
                    }
                }
            }
        };
        match &e.kind {
            Switch {
                prev_comm,
                prev_pid,
                next_comm,
                next_pid,
                ..
            } => {
                name(*prev_pid, prev_comm);
                name(*next_pid, next_comm);
                if let Some(last) = self.last_next.insert(e.cpu, *next_pid) {
                    if last != *prev_pid {
                        *self.switch_gaps.entry(e.cpu).or_default() += 1;
                    }
                }
            }
            Waking(w) | Wakeup(w) | WakeupNew(w) => name(w.pid, &w.comm),
            Migrate { comm, pid, .. } | Exit { comm, pid, .. } => name(*pid, comm),
            Fork {
                parent_comm,
                parent_pid,
                child_comm,
                child_pid,
            } => {
                name(*parent_pid, parent_comm);
                name(*child_pid, child_comm);
            }
            _ => {}
        }
    }

    /// Events seen, by type name, types with none left out.
    pub fn counts_by_type(&self) -> BTreeMap<String, u64> {
        crate::trace::EventType::ALL
            .into_iter()
            .filter(|t| self.by_type[t.index()] > 0)
            .map(|t| (t.name().to_string(), self.by_type[t.index()]))
            .collect()
    }
}

/// Groups loss windows by CPU.
pub fn losses(stats: &ReadStats) -> BTreeMap<u32, CpuLoss> {
    let mut out: BTreeMap<u32, CpuLoss> = BTreeMap::new();
    for w in &stats.lost {
        let l = out.entry(w.cpu).or_default();
        match w.count {
            Some(n) => l.events += n,
            None => l.uncounted_windows += 1,
        }
        l.windows.push(w.clone());
    }
    out
}

/// Why a bundle could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// A trace reader failed, or meta.json does not parse.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// events.parquet could not be written or read.
    #[error(transparent)]
    Events(#[from] EventsError),
    /// A file or directory of the bundle could not be written, read or accepted.
    #[error("{}: {what}", path.display())]
    Bundle {
        /// The file or directory concerned.
        path: PathBuf,
        /// What went wrong with it.
        what: String,
    },
}

fn berr(path: &Path, what: impl Into<String>) -> BundleError {
    BundleError::Bundle {
        path: path.into(),
        what: what.into(),
    }
}

/// What the caller knows about a source beyond what it says itself.
pub struct ImportOptions<'a> {
    /// The machine, when known; without it the bundle assumes one flat LLC.
    pub topology: Option<Topology>,
    /// The input path, recorded in meta.json's `source`.
    pub source_path: &'a Path,
    /// How the bundle came to be, recorded in meta.json.
    pub provenance: Provenance,
    /// The traced kernel's sched features, when known (debugfs sched/features).
    pub sched_features: Option<String>,
    /// Called every so many events with the count so far (progress display).
    pub progress: Option<&'a mut dyn FnMut(u64)>,
}

/// Streams a source into a new bundle at `dest`. Nothing appears at `dest` unless the
/// whole source was read and written.
pub fn write_bundle(
    source: &mut dyn EventSource,
    dest: &Path,
    mut opts: ImportOptions<'_>,
) -> Result<Meta, BundleError> {
    if dest.exists() {
        return Err(berr(
            dest,
            "already exists; a bundle is never overwritten: remove it or choose another name",
        ));
    }
    let parent = dest
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    fs::create_dir_all(parent).map_err(|e| berr(parent, e.to_string()))?;
    let leaf = dest
        .file_name()
        .ok_or_else(|| berr(dest, "not a directory name"))?;
    let tmp = parent.join(format!(
        ".tmp-{}-{}",
        leaf.to_string_lossy(),
        std::process::id()
    ));
    // Those of processes that died mid-write (SIGKILL, an abort) go first.
    crate::stale::sweep_dirs(parent, ".tmp-");
    let _ = fs::remove_dir_all(&tmp);
    fs::create_dir(&tmp).map_err(|e| berr(&tmp, e.to_string()))?;
    // Removed on any way out but the rename, a panic included.
    struct Tmp<'a>(Option<&'a Path>);
    impl Drop for Tmp<'_> {
        fn drop(&mut self) {
            if let Some(p) = self.0 {
                let _ = fs::remove_dir_all(p);
            }
        }
    }
    let mut guard = Tmp(Some(&tmp));
    let meta = write_into(source, &tmp, &mut opts)?;
    // The files are synced (write_into); the directory's entries too, before the rename
    // makes the bundle visible, and the parent's after it, so a crash leaves no bundle
    // or a whole one.
    sync_dir(&tmp)?;
    fs::rename(&tmp, dest).map_err(|e| berr(dest, e.to_string()))?;
    guard.0 = None;
    sync_dir(parent)?;
    Ok(meta)
}

fn sync_dir(dir: &Path) -> Result<(), BundleError> {
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| berr(dir, format!("fsync: {e}")))
}

/// Writes a file and syncs it to disk.
fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), BundleError> {
    use std::io::Write;
    fs::File::create(path)
        .and_then(|mut f| {
            f.write_all(bytes)?;
            f.sync_all()
        })
        .map_err(|e| berr(path, e.to_string()))
}

fn write_into(
    source: &mut dyn EventSource,
    dir: &Path,
    opts: &mut ImportOptions<'_>,
) -> Result<Meta, BundleError> {
    let events_path = dir.join(EVENTS_FILE);
    let mut w = EventWriter::create(&events_path)?;
    let mut tally = Tally::default();
    let mut batch = Vec::with_capacity(BATCH_EVENTS);
    loop {
        batch.clear();
        if source.next_batch(&mut batch, BATCH_EVENTS)? == 0 {
            break;
        }
        for e in &batch {
            tally.add(e);
            w.push(e)?;
        }
        if let Some(p) = opts.progress.as_mut() {
            p(tally.events);
        }
    }
    w.finish()?;
    let stats = source.stats();
    let meta = build_meta(source.info(), &stats, tally, opts);
    let meta_path = dir.join(META_FILE);
    let text = serde_json::to_string_pretty(&meta).expect("meta serialises");
    write_synced(&meta_path, (text + "\n").as_bytes())?;
    Ok(meta)
}

fn build_meta(
    info: &SourceInfo,
    stats: &ReadStats,
    mut tally: Tally,
    opts: &mut ImportOptions<'_>,
) -> Meta {
    let seen_cpus = tally.max_cpu.map_or(0, |m| m + 1);
    let nr_cpus = info.nr_cpus.unwrap_or(seen_cpus).max(seen_cpus);
    let (topology, assumed) = match opts.topology.take() {
        Some(t) => (t, false),
        None => (Topology::flat(nr_cpus), true),
    };
    let counts = tally.counts_by_type();
    let switch_gaps = std::mem::take(&mut tally.switch_gaps);
    let mut tasks = info.comms.clone();
    tasks.extend(tally.tasks);
    Meta {
        schema_version: SCHEMA_VERSION,
        sisreplay_version: env!("CARGO_PKG_VERSION").into(),
        source: SourceMeta {
            path: opts.source_path.display().to_string(),
            format: info.format.clone(),
        },
        kernel_release: info.kernel_release.clone(),
        nr_cpus,
        clock: info.clock.clone(),
        topology,
        topology_assumed: assumed,
        events: tally.events,
        first_ts_ns: tally.first_ts,
        last_ts_ns: tally.last_ts,
        counts,
        unknown_events: stats.unknown.clone(),
        lost: losses(stats),
        switch_gaps,
        ties: stats.ties,
        tasks,
        extra: info.extra.clone(),
        provenance: std::mem::take(&mut opts.provenance),
        sched_features: opts.sched_features.take(),
        irq_time_accounting: None,
    }
}

/// Replaces a finished bundle's meta.json, atomically (written beside it, then renamed),
/// so a crash leaves the old file or the new one, never half of one.
pub fn rewrite_meta(dir: &Path, meta: &Meta) -> Result<(), BundleError> {
    let p = dir.join(META_FILE);
    let text = serde_json::to_string_pretty(meta).expect("meta serialises");
    crate::atomic::write(&p, (text + "\n").as_bytes())
        .map_err(|e| berr(&e.path, e.source.to_string()))
}

/// Brings a schema-1 meta.json to schema 2: its `capture` object becomes `provenance`
/// and `sched_features`.
fn upgrade_v1(v: &mut serde_json::Value) -> Result<(), serde_json::Error> {
    let Some(obj) = v.as_object_mut() else {
        return Ok(());
    };
    let (provenance, features) = Provenance::from_v1(obj.remove("capture"))?;
    obj.insert("provenance".into(), serde_json::to_value(provenance)?);
    obj.insert("sched_features".into(), serde_json::to_value(features)?);
    obj.insert("schema_version".into(), SCHEMA_VERSION.into());
    Ok(())
}

/// An existing bundle, read as an event source.
pub struct Bundle {
    /// The bundle's directory.
    pub dir: PathBuf,
    /// Its meta.json, upgraded to the current schema.
    pub meta: Meta,
    info: SourceInfo,
    /// Checked as read: rows in time order, on the bundle's CPUs. Taken by `ahead` when
    /// the first events are asked for.
    events: Option<EventReader>,
    ahead: Option<ReadAhead>,
}

/// Whether `path` is a directory holding a meta.json.
pub fn is_bundle(path: &Path) -> bool {
    path.is_dir() && path.join(META_FILE).is_file()
}

/// Reads and checks a bundle's meta.json, upgrading a schema-1 file; rejects CPU counts
/// beyond what a kernel can have and schema versions newer than this build reads.
pub fn read_meta(dir: &Path) -> Result<Meta, BundleError> {
    let p = dir.join(META_FILE);
    let text = fs::read_to_string(&p).map_err(|e| berr(&p, e.to_string()))?;
    let at_line = |e: serde_json::Error| {
        // serde_json ends its message with the position, which the error already names.
        let msg = e.to_string();
        let at = format!(" at line {} column {}", e.line(), e.column());
        let msg = msg.strip_suffix(&at).unwrap_or(&msg);
        BundleError::Trace(TraceError::malformed(
            &p,
            Position::Line(e.line() as u64),
            format!("column {}: {msg}", e.column()),
        ))
    };
    let mut value: serde_json::Value = serde_json::from_str(&text).map_err(at_line)?;
    if value.get("schema_version").and_then(|v| v.as_u64()) == Some(1) {
        upgrade_v1(&mut value).map_err(|e| berr(&p, format!("schema 1 capture record: {e}")))?;
    }
    // Positions of errors past this point are the fields', not the text's.
    let meta: Meta = serde_json::from_value(value).map_err(|e| berr(&p, e.to_string()))?;
    // Per-CPU tables are sized by these: hold them to what a kernel can have.
    crate::trace::check_cpu_count(meta.nr_cpus as u64, "nr_cpus")
        .map_err(|w| berr(&p, w.to_string()))?;
    if let Some(c) = meta
        .topology
        .cpus
        .iter()
        .find(|c| c.cpu >= crate::trace::MAX_CPUS)
    {
        return Err(berr(
            &p,
            format!(
                "topology lists CPU {}, beyond the {} CPUs a kernel can have",
                c.cpu,
                crate::trace::MAX_CPUS
            ),
        ));
    }
    if !(1..=SCHEMA_VERSION).contains(&meta.schema_version) {
        return Err(berr(
            &p,
            format!(
                "schema version {} (this sisreplay reads 1 to {SCHEMA_VERSION}); re-import the source",
                meta.schema_version
            ),
        ));
    }
    Ok(meta)
}

impl Bundle {
    /// Opens a bundle to stream its events; meta.json is read and checked first.
    pub fn open(dir: &Path) -> Result<Bundle, BundleError> {
        let meta = read_meta(dir)?;
        let p = dir.join(EVENTS_FILE);
        let events = EventReader::open(&p)?.checked(meta.nr_cpus);
        let info = meta.source_info();
        Ok(Bundle {
            dir: dir.into(),
            meta,
            info,
            events: Some(events),
            ahead: None,
        })
    }

    /// The events, read on a thread of their own from the first asked for.
    fn ahead(&mut self) -> &mut ReadAhead {
        let events = &mut self.events;
        self.ahead
            .get_or_insert_with(|| ReadAhead::start(events.take().expect("a reader")))
    }
}

impl EventSource for Bundle {
    fn info(&self) -> &SourceInfo {
        &self.info
    }

    fn next_event(&mut self) -> crate::trace::Result<Option<Event>> {
        Ok(self.ahead().next_event()?)
    }

    fn next_batch(&mut self, out: &mut Vec<Event>, max: usize) -> crate::trace::Result<usize> {
        Ok(self.ahead().next_batch(out, max)?)
    }

    fn stats(&self) -> ReadStats {
        self.meta.read_stats()
    }
}
