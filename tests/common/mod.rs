//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use sisreplay::trace::{Event, EventSource};

/// A committed sample trace.
pub fn sample(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("traces/samples")
        .join(name)
}

/// Every event of a source, failing the test on a read error.
pub fn read_all(src: &mut dyn EventSource) -> Vec<Event> {
    let mut v = Vec::new();
    while let Some(e) = src.next_event().unwrap() {
        v.push(e);
    }
    v
}
