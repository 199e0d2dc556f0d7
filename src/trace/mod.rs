//! Scheduler trace input: the event model, the readers of each on-disk format, and the
//! merged stream they all produce.

pub mod bytes;
pub mod causal;
pub mod decode;
pub mod error;
pub mod event;
pub mod format;
pub mod page;
pub mod perfdata;
pub mod stream;
pub mod text;
pub mod tracedat;

pub use error::{Position, Result, TraceError};

/// The largest CPU number a trace may name (the kernel's NR_CPUS limit is 8192); a larger
/// one is damage, and would otherwise size per-CPU tables.
pub const MAX_CPUS: u32 = 8192;
pub use event::{Comm, Event, EventKind, EventType, Wake};
pub use stream::{EventSource, LostWindow, ReadStats, SourceInfo};

use std::io::Read;
use std::path::Path;

use causal::Ordered;

/// Opens any supported input by looking at its first bytes: a bundle directory,
/// trace.dat, perf.data, or one of the text forms.
pub fn open(path: &Path) -> std::result::Result<Box<dyn EventSource>, crate::bundle::BundleError> {
    if crate::bundle::is_bundle(path) {
        let b = crate::bundle::Bundle::open(path)?;
        // A bundle imported before equal timestamps were put in causal order gets that
        // as it is read.
        return Ok(if b.meta.ties.is_none() {
            Box::new(Ordered::new(b))
        } else {
            Box::new(b)
        });
    }
    if path.is_dir() {
        return Err(TraceError::Unsupported {
            path: path.into(),
            what: "a directory without meta.json is not a bundle".into(),
        }
        .into());
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
        )
        .into());
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
    )
    .into())
}
