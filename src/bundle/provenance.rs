//! How a bundle came to be, as meta.json records it: imported from a trace file,
//! captured on a live machine (with the capture's settings and outcome), or written by
//! the simulator (`synth`, `simulate`). Typed, so consumers read fields rather than JSON
//! paths, and a renamed field fails to compile instead of reading as nothing.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Where a bundle's events come from.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Provenance {
    /// `sisreplay import` of a trace file (named in the metadata's `source`).
    #[default]
    Import,
    /// `sisreplay capture`.
    Capture(Box<CaptureRecord>),
    /// `sisreplay synth`: a workload model run in closed loop.
    Synth(SynthRecord),
    /// `sisreplay simulate`: a captured trace's tasks re-run in closed loop.
    Simulate(SimulateRecord),
}

impl Provenance {
    /// The capture record, for captured bundles.
    pub fn capture(&self) -> Option<&CaptureRecord> {
        match self {
            Provenance::Capture(c) => Some(c),
            _ => None,
        }
    }

    /// From the `capture` object of a schema-1 meta.json, which held a capture record,
    /// or `{"synth": ...}` / `{"simulate": ...}` for simulated bundles, each beside a
    /// `sched_debug`; and the sched features it recorded, when readable.
    pub fn from_v1(
        capture: Option<serde_json::Value>,
    ) -> Result<(Provenance, Option<String>), serde_json::Error> {
        let Some(c) = capture else {
            return Ok((Provenance::Import, None));
        };
        let features = c
            .pointer("/sched_debug/features")
            .and_then(|f| f.as_str())
            .filter(|f| readable(f))
            .map(str::to_string);
        let p = if let Some(s) = c.get("synth") {
            Provenance::Synth(SynthRecord::deserialize(s)?)
        } else if let Some(s) = c.get("simulate") {
            Provenance::Simulate(SimulateRecord::deserialize(s)?)
        } else {
            Provenance::Capture(Box::new(CaptureRecord::deserialize(c)?))
        };
        Ok((p, features))
    }
}

/// Whether a recorded value was read, not the reason it could not be.
fn readable(s: &str) -> bool {
    !(s == "absent" || s.starts_with("unreadable"))
}

/// What `sisreplay synth` ran.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SynthRecord {
    pub machine: String,
    pub workload: String,
    pub load: LoadStep,
    pub policy: String,
    pub warmup_ns: u64,
    pub duration_ns: u64,
}

/// One load level: its label and the workload's thread count.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadStep {
    pub label: String,
    pub threads: usize,
}

/// What `sisreplay simulate` re-ran.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SimulateRecord {
    /// The captured bundle whose tasks were re-run.
    pub bundle: PathBuf,
    pub policy: String,
}

/// What `sisreplay capture` records about a capture.
#[derive(Debug, Clone, Serialize, Deserialize)]
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
    pub sched_debug: SchedDebug,
    pub schedstat_before: Readable,
    pub schedstat_after: Readable,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    Tracefs,
    Perf,
}

/// What `--search-latency` records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum SearchProbe {
    /// A kprobe and a kretprobe: wake flags, prev and chosen CPU, and the duration.
    Duration,
    /// The kprobe alone: wake flags and which wakings selected, no duration. For
    /// kernels or emulators where return probes misbehave (a TCG guest under a
    /// ping-pong load hangs with one).
    Flags,
}

/// What `--search-latency` could do on this kernel.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SearchLatency {
    pub requested: Option<SearchProbe>,
    pub available: bool,
    pub why: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CpuOutcome {
    pub cpu: u32,
    /// Pages (tracefs) or bytes (perf) written to the spool.
    pub spooled: u64,
    /// Events decoded into the bundle.
    pub events: u64,
    /// Events the kernel says it handed out (tracefs `read events`).
    pub kernel_events: Option<u64>,
    /// Events the kernel overwrote before they were read (`overrun` in per_cpu stats).
    pub overrun: u64,
    /// Events dropped because the buffer was full (`dropped events`).
    pub dropped: u64,
    /// Events reported lost in page headers or PERF_RECORD_LOST.
    pub lost_records: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkloadOutcome {
    pub command: Vec<String>,
    /// Exit code, or None when it was stopped or killed by a signal.
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub wall_s: f64,
    /// Whether capture ended it because the duration ran out or capture was interrupted.
    pub stopped_by_capture: bool,
}

/// A value that may not be readable on this kernel or with these privileges.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Readable {
    Value(String),
    /// Why not: "unreadable: Operation not permitted", "absent".
    Not(String),
}

impl Readable {
    /// The value, when it was read.
    pub fn value(&self) -> Option<&str> {
        match self {
            Readable::Value(v) => Some(v),
            Readable::Not(_) => None,
        }
    }
}

impl<'de> Deserialize<'de> for Readable {
    /// Both forms are strings on disk: the reasons are "absent" and "unreadable: ...".
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Readable, D::Error> {
        let s = String::deserialize(d)?;
        Ok(if readable(&s) {
            Readable::Value(s)
        } else {
            Readable::Not(s)
        })
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SchedDebug {
    pub features: Readable,
    pub tunables: BTreeMap<String, Readable>,
}
