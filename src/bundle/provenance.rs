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
    /// The machine's name: a preset, `here`, or a JSON description's file stem.
    pub machine: String,
    /// The workload model (`netperf-tcp-rr`, `hackbench`, ...).
    pub workload: String,
    /// The load level this bundle was run at.
    pub load: LoadStep,
    /// The idle-search policy simulated, as given (`sis_util`, `sis_util:param=value`).
    pub policy: String,
    /// Virtual time simulated before measuring, in ns (lets PELT and SIS_UTIL settle).
    pub warmup_ns: u64,
    /// Virtual time measured after the warm-up, in ns.
    pub duration_ns: u64,
}

/// One load level: its label and the workload's thread count.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadStep {
    /// `50%` for a share of the CPUs, or `N threads` when given as a count.
    pub label: String,
    /// Worker threads the workload runs (pairs for netperf and tbench): the share of CPUs
    /// rounded up, at least 1.
    pub threads: usize,
}

/// What `sisreplay simulate` re-ran.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SimulateRecord {
    /// The captured bundle whose tasks were re-run.
    pub bundle: PathBuf,
    /// The idle-search policy of the re-run, as given.
    pub policy: String,
    /// The release of the kernel the re-run modelled (the trace's): a replay of the
    /// re-run follows its util_est rules. Not the bundle's `kernel_release`, which would
    /// make the re-run a capture of that kernel (and of its patches' policy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modelled_release: Option<String>,
}

/// What `sisreplay capture` records about a capture.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CaptureRecord {
    /// sisreplay's own argv, as typed.
    pub command_line: Vec<String>,
    /// How the events were recorded.
    pub backend: Backend,
    /// When recording started, as `YYYY-mm-ddTHH:MM:SSZ`.
    pub start_utc: String,
    /// The `--duration` asked for, in seconds.
    pub requested_duration_s: f64,
    /// How long events were recorded, in seconds (shorter when the workload exited first or a
    /// signal stopped it).
    pub duration_s: f64,
    /// What ended the recording: `duration`, `workload exit` or `signal`.
    pub stopped_by: String,
    /// The ring buffer size per CPU, in KiB (buffer_size_kb).
    pub buffer_kb_per_cpu: u32,
    /// The tracepoints enabled, as `system/name`.
    pub events: Vec<String>,
    /// The tracefs instance directory recorded from, or `perf_event_open` for the perf
    /// backend.
    pub instance: String,
    /// The trace clock (`local`, `global`, ...), when the backend could read it.
    pub clock: Option<String>,
    /// What each CPU's buffer delivered and lost, in CPU order.
    pub cpus: Vec<CpuOutcome>,
    /// The command run under the capture and how it ended; None when none was given.
    pub workload: Option<WorkloadOutcome>,
    /// What `--search-latency` asked for and what the kernel allowed.
    pub search_latency: SearchLatency,
    /// Sched features and debugfs tunables when the capture started.
    pub sched_debug: SchedDebug,
    /// /proc/schedstat once tracing was on, before the workload started (captures
    /// before this release read it before tracing was set up).
    pub schedstat_before: Readable,
    /// /proc/schedstat with tracing still on, after the workload ended or the capture
    /// stopped it (captures before this release read it after the bundle was written).
    pub schedstat_after: Readable,
    /// Each scheduling domain's newidle balance cost as the kernel kept it after the
    /// workload (debugfs); empty where the kernel does not show them, and in captures
    /// before this release.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub newidle_costs: Vec<NewidleCost>,
}

/// One CPU's scheduling domain and what the kernel measured its newidle balance to cost:
/// sd->max_newidle_lb_cost, the longest balance of that domain lately (decayed by 1 %
/// a second), against which newidle_balance weighs the CPU's avg_idle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewidleCost {
    /// The CPU.
    pub cpu: u32,
    /// The domain's level on that CPU (domainN, 0 the lowest).
    pub domain: u32,
    /// The domain's name (`SMT`, `MC`, `DIE`, `PKG`, `NUMA`, ...).
    pub name: String,
    /// max_newidle_lb_cost, ns.
    pub max_newidle_lb_cost_ns: u64,
}

/// The kernel interface a capture records through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// A tracefs instance of its own, read from each CPU's `trace_pipe_raw` pages.
    Tracefs,
    /// perf_event_open tracepoint events, read from each CPU's perf ring buffer.
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
    /// The probes asked for; None without `--search-latency`.
    pub requested: Option<SearchProbe>,
    /// Whether kprobe_events exists and select_task_rq_fair is in available_filter_functions.
    pub available: bool,
    /// What was used, or why the search cannot be probed here.
    pub why: String,
    /// select_idle_cpu is out of line (in available_filter_functions), so its own
    /// duration can be recorded too; false for bundles from before it was looked for.
    #[serde(default)]
    pub idle_scan: bool,
}

/// What one CPU's buffer delivered and lost during a capture.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CpuOutcome {
    /// The CPU number.
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

/// How the workload run under a capture ended.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkloadOutcome {
    /// Its argv.
    pub command: Vec<String>,
    /// Exit code, or None when it was stopped or killed by a signal.
    pub exit_code: Option<i32>,
    /// The signal that ended it (SIGTERM when the capture stopped it), or None.
    pub signal: Option<i32>,
    /// Wall time from the start of recording to its exit or stop, in seconds.
    pub wall_s: f64,
    /// Whether capture ended it because the duration ran out or capture was interrupted.
    pub stopped_by_capture: bool,
}

/// A value that may not be readable on this kernel or with these privileges.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Readable {
    /// The text read, trailing whitespace removed.
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

/// What /sys/kernel/debug/sched said when the capture started.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SchedDebug {
    /// The `features` file: the sched features, NO_ prefixed where off.
    pub features: Readable,
    /// The tunables found in that directory (`base_slice_ns`, `migration_cost_ns`, ...),
    /// by file name; files the kernel lacks are left out.
    pub tunables: BTreeMap<String, Readable>,
}
