//! What a command is pointed at: a bundle directory or a trace file in any supported
//! format, opened as one event stream together with what is known about it. Readers of
//! trace files (`trace/`) know nothing of bundles; this is where the two meet.

use std::path::Path;

use crate::bundle::{self, Bundle, BundleError, Meta};
use crate::trace::causal::Ordered;
use crate::trace::{self, EventSource};

/// An opened input: its events, and its metadata when it is a bundle.
pub struct Input {
    /// The events in time order; equal timestamps of different CPUs in causal order.
    pub source: Box<dyn EventSource>,
    /// The bundle's meta.json; None for a trace file.
    pub meta: Option<Meta>,
}

/// Opens a bundle, or a trace file by its first bytes (trace.dat, perf.data, text).
pub fn open(path: &Path) -> Result<Input, BundleError> {
    if bundle::is_bundle(path) {
        let b = Bundle::open(path)?;
        let meta = Some(b.meta.clone());
        // A bundle imported before equal timestamps were put in causal order gets that
        // as it is read.
        let source: Box<dyn EventSource> = if b.meta.ties.is_none() {
            Box::new(Ordered::new(b))
        } else {
            Box::new(b)
        };
        return Ok(Input { source, meta });
    }
    Ok(Input {
        source: trace::open(path)?,
        meta: None,
    })
}

/// The metadata of a bundle; None for a trace file.
pub fn meta(path: &Path) -> Result<Option<Meta>, BundleError> {
    if bundle::is_bundle(path) {
        Ok(Some(bundle::read_meta(path)?))
    } else {
        Ok(None)
    }
}
