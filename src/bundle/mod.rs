//! A trace on disk: a directory holding `meta.json` (what the trace is and where it came
//! from) and `events.parquet` (the events). Bundles are written under a temporary name
//! and renamed when complete, so an interrupted write never leaves a bundle behind.

pub mod columns;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::topology::Topology;
use crate::trace::{Event, EventSource, LostWindow, Position, ReadStats, SourceInfo, TraceError};

pub use columns::{EventReader, EventWriter, EVENTS_FILE};

pub const META_FILE: &str = "meta.json";
/// Events handed from a reader to a writer at a time.
const BATCH_EVENTS: usize = 1 << 14;
/// Bumped whenever meta.json or the Parquet columns change incompatibly.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SourceMeta {
    pub path: String,
    pub format: String,
}

/// Per-CPU loss totals, with the windows they happened in.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CpuLoss {
    /// Events the kernel counted as lost; windows with no count add nothing here.
    pub events: u64,
    /// Windows where the count was not recorded.
    pub uncounted_windows: u64,
    pub windows: Vec<LostWindow>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Meta {
    pub schema_version: u32,
    pub sisreplay_version: String,
    pub source: SourceMeta,
    pub kernel_release: Option<String>,
    pub nr_cpus: u32,
    pub clock: Option<String>,
    pub topology: Topology,
    /// True when no description was given and the CPUs are assumed to be one flat LLC.
    pub topology_assumed: bool,
    pub events: u64,
    pub first_ts_ns: Option<u64>,
    pub last_ts_ns: Option<u64>,
    /// Events by type name.
    pub counts: BTreeMap<String, u64>,
    /// Events outside the model, by `system:name`, skipped.
    pub unknown_events: BTreeMap<String, u64>,
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
    /// Capture settings and outcome, for bundles made by `sisreplay capture`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture: Option<serde_json::Value>,
}

impl Meta {
    pub fn lost_total(&self) -> u64 {
        self.lost.values().map(|l| l.events).sum()
    }
}

/// Collects what meta.json records about the events while they stream past.
#[derive(Debug, Default)]
pub struct Tally {
    pub events: u64,
    pub first_ts: Option<u64>,
    pub last_ts: Option<u64>,
    pub tasks: BTreeMap<i32, String>,
    pub max_cpu: Option<u32>,
    by_type: [u64; crate::trace::EventType::ALL.len()],
    /// Per CPU: the task the last sched_switch switched to.
    last_next: BTreeMap<u32, i32>,
    /// Per CPU: switches whose prev_pid is not the previous switch's next_pid.
    pub switch_gaps: BTreeMap<u32, u64>,
}

impl Tally {
    pub fn add(&mut self, e: &Event) {
        use crate::trace::EventKind::*;
        self.events += 1;
        self.first_ts.get_or_insert(e.ts);
        self.last_ts = Some(e.ts);
        self.max_cpu = Some(self.max_cpu.map_or(e.cpu, |m| m.max(e.cpu)));
        self.by_type[e.kind.event_type().index()] += 1;
        let mut name = |pid: i32, c: &crate::trace::Comm| {
            if pid != 0 {
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
    #[error(transparent)]
    Trace(#[from] TraceError),
    #[error("{}: {what}", path.display())]
    Bundle { path: PathBuf, what: String },
}

fn berr(path: &Path, what: impl Into<String>) -> BundleError {
    BundleError::Bundle {
        path: path.into(),
        what: what.into(),
    }
}

/// What the caller knows about a source beyond what it says itself.
pub struct ImportOptions<'a> {
    pub topology: Option<Topology>,
    pub source_path: &'a Path,
    pub capture: Option<serde_json::Value>,
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
    let _ = fs::remove_dir_all(&tmp);
    fs::create_dir(&tmp).map_err(|e| berr(&tmp, e.to_string()))?;
    let result = write_into(source, &tmp, &mut opts).and_then(|meta| {
        fs::rename(&tmp, dest).map_err(|e| berr(dest, e.to_string()))?;
        Ok(meta)
    });
    if result.is_err() {
        let _ = fs::remove_dir_all(&tmp);
    }
    result
}

fn write_into(
    source: &mut dyn EventSource,
    dir: &Path,
    opts: &mut ImportOptions<'_>,
) -> Result<Meta, BundleError> {
    let events_path = dir.join(EVENTS_FILE);
    let mut w = EventWriter::create(&events_path).map_err(|e| berr(&events_path, e))?;
    let mut tally = Tally::default();
    let mut batch = Vec::with_capacity(BATCH_EVENTS);
    loop {
        batch.clear();
        if source.next_batch(&mut batch, BATCH_EVENTS)? == 0 {
            break;
        }
        for e in &batch {
            tally.add(e);
            w.push(e).map_err(|m| berr(&events_path, m))?;
        }
        if let Some(p) = opts.progress.as_mut() {
            p(tally.events);
        }
    }
    w.finish().map_err(|m| berr(&events_path, m))?;
    let stats = source.stats();
    let meta = build_meta(source.info(), &stats, tally, opts);
    let meta_path = dir.join(META_FILE);
    let text = serde_json::to_string_pretty(&meta).expect("meta serialises");
    fs::write(&meta_path, text + "\n").map_err(|e| berr(&meta_path, e.to_string()))?;
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
        capture: opts.capture.take(),
    }
}

/// Replaces a finished bundle's meta.json, atomically (written beside it, then renamed),
/// so a crash leaves the old file or the new one, never half of one.
pub fn rewrite_meta(dir: &Path, meta: &Meta) -> Result<(), BundleError> {
    let p = dir.join(META_FILE);
    let tmp = dir.join(format!(".{META_FILE}.tmp"));
    let text = serde_json::to_string_pretty(meta).expect("meta serialises");
    fs::write(&tmp, text + "\n").map_err(|e| berr(&tmp, e.to_string()))?;
    fs::rename(&tmp, &p).map_err(|e| berr(&p, e.to_string()))
}

/// An existing bundle, read as an event source.
pub struct Bundle {
    pub dir: PathBuf,
    pub meta: Meta,
    info: SourceInfo,
    events: EventReader,
}

pub fn is_bundle(path: &Path) -> bool {
    path.is_dir() && path.join(META_FILE).is_file()
}

pub fn read_meta(dir: &Path) -> Result<Meta, BundleError> {
    let p = dir.join(META_FILE);
    let text = fs::read_to_string(&p).map_err(|e| berr(&p, e.to_string()))?;
    let meta: Meta = serde_json::from_str(&text).map_err(|e| {
        BundleError::Trace(TraceError::malformed(
            &p,
            Position::Line(e.line() as u64),
            format!("column {}: {e}", e.column()),
        ))
    })?;
    if meta.schema_version != SCHEMA_VERSION {
        return Err(berr(
            &p,
            format!(
                "schema version {} (this sisreplay reads {SCHEMA_VERSION}); re-import the source",
                meta.schema_version
            ),
        ));
    }
    Ok(meta)
}

impl Bundle {
    pub fn open(dir: &Path) -> Result<Bundle, BundleError> {
        let meta = read_meta(dir)?;
        let p = dir.join(EVENTS_FILE);
        let events = EventReader::open(&p).map_err(|m| berr(&p, m))?;
        let info = SourceInfo {
            format: format!("bundle of {}", meta.source.format),
            nr_cpus: Some(meta.nr_cpus),
            kernel_release: meta.kernel_release.clone(),
            clock: meta.clock.clone(),
            comms: meta.tasks.clone(),
            extra: meta.extra.clone(),
        };
        Ok(Bundle {
            dir: dir.into(),
            meta,
            info,
            events,
        })
    }
}

impl EventSource for Bundle {
    fn info(&self) -> &SourceInfo {
        &self.info
    }

    fn next_event(&mut self) -> crate::trace::Result<Option<Event>> {
        let p = self.dir.join(EVENTS_FILE);
        self.events
            .next_event()
            .map_err(|m| TraceError::malformed(p, Position::Offset(0), m))
    }

    fn stats(&self) -> ReadStats {
        ReadStats {
            lost: self
                .meta
                .lost
                .values()
                .flat_map(|l| l.windows.clone())
                .collect(),
            unknown: self.meta.unknown_events.clone(),
            ties: self.meta.ties,
        }
    }
}
