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

/// Runs the sisreplay binary from the project's root: exit code, stdout, stderr.
pub fn run_cli(args: &[&str]) -> (Option<i32>, String, String) {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_sisreplay"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A committed sample trace's path as a command-line argument.
pub fn sample_arg(name: &str) -> String {
    sample(name).display().to_string()
}
