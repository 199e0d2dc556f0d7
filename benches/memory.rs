//! Memory against trace length: the peak resident set of `replay` (two policies) and of
//! `info` on simulated bundles of about 10⁶, 10⁷ and 10⁸ events, each command a process
//! of its own whose peak the kernel reports (wait4's ru_maxrss), as a ratio to the
//! smallest bundle's. Memory bounded by the machine, not the trace, shows as a ratio
//! near 1 while the events grow a hundredfold; the target is ≤ 1 GiB at 10⁸.
//!
//! The bundles (hackbench at 100 % load on the 224-CPU spr-2s112) are simulated once into
//! target/bench-data/ and reused; the largest takes some minutes and about 1 GB of disk.
//! SISREPLAY_MEMORY_SIZES lists the virtual durations in ms (default 34,670,7400, which
//! give about 10⁶, 10⁷ and 10⁸ events).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn bundle(ms: u64) -> PathBuf {
    common::hackbench_bundle(&format!("mem-{ms}"), ms)
}

fn events(bundle: &Path) -> u64 {
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(bundle.join("meta.json")).unwrap()).unwrap();
    meta["events"].as_u64().unwrap()
}

/// Runs sisreplay with `args`; its peak resident set in KiB and wall seconds. The child
/// is reaped by wait4, which gives its own rusage (Child::wait would not).
#[allow(clippy::zombie_processes)]
fn peak_kib(args: &[&str]) -> (u64, f64) {
    let start = std::time::Instant::now();
    let child = Command::new(env!("CARGO_BIN_EXE_sisreplay"))
        .args(args)
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("sisreplay runs");
    let mut status = 0;
    // SAFETY: rusage is plain data, filled by wait4 for the child just spawned.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(r, child.id() as i32, "wait4");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "sisreplay {args:?} failed"
    );
    (usage.ru_maxrss as u64, start.elapsed().as_secs_f64())
}

fn main() {
    let sizes: Vec<u64> = std::env::var("SISREPLAY_MEMORY_SIZES")
        .unwrap_or_else(|_| "34,670,7400".into())
        .split(',')
        .map(|s| s.trim().parse().expect("durations in ms"))
        .collect();
    println!(
        "{:>12} {:>10} {:>14} {:>8} {:>10} {:>12} {:>8}",
        "events", "command", "peak RSS MiB", "ratio", "B/event", "M events/s", "wall s"
    );
    let mut first: [Option<u64>; 2] = [None, None];
    for ms in sizes {
        let b = bundle(ms);
        let n = events(&b);
        let path = b.to_str().unwrap();
        for (i, (what, args)) in [
            ("replay", vec!["replay", path, "-p", "sis_prop,sis_util"]),
            ("info", vec!["info", path]),
        ]
        .into_iter()
        .enumerate()
        {
            let (kib, secs) = peak_kib(&args);
            let base = *first[i].get_or_insert(kib);
            println!(
                "{n:>12} {what:>10} {:>14.1} {:>8.2} {:>10.2} {:>12.2} {secs:>8.1}",
                kib as f64 / 1024.0,
                kib as f64 / base as f64,
                kib as f64 * 1024.0 / n as f64,
                n as f64 / secs / 1e6,
            );
        }
    }
    println!("ratio: peak RSS against the same command on the smallest bundle");
}
