//! What several benchmarks share: the simulated bundles they read.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A bundle of hackbench at 100 % load on the 224-CPU spr-2s112 under SIS_UTIL, `ms` of
/// virtual time, simulated once into target/bench-data/NAME and reused.
pub fn hackbench_bundle(name: &str, ms: u64) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/bench-data")
        .join(name);
    if !dir.join("meta.json").exists() {
        let ok = Command::new(env!("CARGO_BIN_EXE_sisreplay"))
            .args(["synth", "--machine", "spr-2s112", "--workload", "hackbench"])
            .args(["--load", "100%", "-p", "sis_util"])
            .arg("--duration")
            .arg(format!("{ms}ms"))
            .arg("-o")
            .arg(&dir)
            .status()
            .expect("sisreplay synth runs");
        assert!(
            ok.success(),
            "could not simulate the {ms} ms benchmark bundle"
        );
    }
    dir
}
