//! Scheduler trace input: the event model, the readers of each on-disk format, and the
//! merged stream they all produce.

pub mod ahead;
pub mod bytes;
pub mod causal;
pub mod decode;
pub mod error;
pub mod event;
pub mod format;
pub mod page;
pub mod perfdata;
mod perfevents;
mod perfrecords;
mod perfrounds;
mod perfsample;
pub mod stream;
pub mod text;
pub mod tracedat;

pub use error::{Position, Result, TraceError};

/// The most CPUs a trace may claim, and one more than the largest CPU number it may name:
/// the kernel's largest NR_CPUS, 8192 on x86-64 (arch/x86/Kconfig: `NR_CPUS_RANGE_END` is
/// 8192 with `CPUMASK_OFFSTACK`, and `MAXSMP` sets `NR_CPUS_DEFAULT` to 8192). A larger
/// count in a header (perf.data's NRCPUS, `cpus=` or `#P:` of trace text, trace.dat's
/// CPU count, meta.json's `nr_cpus`) is damage, and would otherwise size per-CPU tables.
pub const MAX_CPUS: u32 = 8192;

/// Checks a CPU count a file claims against [`MAX_CPUS`]; `what` names the field.
pub fn check_cpu_count(n: u64, what: &str) -> std::result::Result<u32, BadCpuCount> {
    if n == 0 || n > MAX_CPUS as u64 {
        Err(BadCpuCount {
            field: what.to_string(),
            claimed: n,
        })
    } else {
        Ok(n as u32)
    }
}

/// A CPU count outside what a kernel can have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} says {claimed} CPUs; a kernel has 1 to {MAX_CPUS} (NR_CPUS at most)")]
pub struct BadCpuCount {
    /// The header field that claims it.
    pub field: String,
    /// The count claimed.
    pub claimed: u64,
}

pub use event::{Comm, Event, EventKind, EventType, Wake};
pub use stream::{EventSource, LostWindow, ReadStats, SourceInfo};

use std::io::Read;
use std::path::Path;

use causal::Ordered;

/// Opens a trace file by looking at its first bytes: trace.dat, perf.data, or one of
/// the text forms. (Bundles are opened by `input::open`.)
pub fn open(path: &Path) -> Result<Box<dyn EventSource>> {
    if path.is_dir() {
        return Err(TraceError::Unsupported {
            path: path.into(),
            what: "a directory without meta.json is not a bundle".into(),
        });
    }
    let mut head = [0u8; 10];
    let n = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .map_err(|e| TraceError::io(path, e))?;
    let head = &head[..n];
    if n == 0 {
        return Err(TraceError::malformed(
            path,
            Position::Offset(0),
            "empty file, expected trace.dat, perf.data or trace text",
        ));
    }
    // Every reader merges per-CPU buffers by timestamp; equal timestamps are then put in
    // causal order.
    if tracedat::MAGIC.starts_with(head) || head.starts_with(&tracedat::MAGIC[..3]) {
        return Ok(Box::new(Ordered::new(tracedat::TraceDat::open(path)?)));
    }
    if perfdata::PERF_MAGIC.starts_with(&head[..n.min(8)]) {
        return Ok(Box::new(Ordered::new(perfdata::PerfData::open(path)?)));
    }
    if head
        .iter()
        .all(|&b| b.is_ascii_graphic() || b.is_ascii_whitespace())
    {
        return Ok(Box::new(Ordered::new(text::TextTrace::open(path)?)));
    }
    Err(TraceError::malformed(
        path,
        Position::Offset(0),
        "unrecognised format: expected the trace.dat magic \\x17\\x08Dtracing, the perf.data \
         magic PERFILE2, or trace text",
    ))
}
