//! Read throughput: events/s of sisreplay's readers over a trace of at least 2 million
//! events, against `trace-cmd report > /dev/null` on the same file in the same run, and
//! peak memory while reading (which must not grow with the trace length).
//!
//! The trace is captured once by `benches/make-big-trace.sh` (root, trace-cmd,
//! hackbench) into target/bench-data/ and reused.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use sisreplay::trace;

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-data")
}

fn ensure_trace() -> PathBuf {
    let dir = data_dir();
    let v6 = dir.join("big-v6.dat");
    if !v6.exists() {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/make-big-trace.sh");
        let ok = Command::new("bash")
            .arg(script)
            .arg(&dir)
            .args(["8", "30000"])
            .status()
            .expect("bash");
        assert!(
            ok.success(),
            "could not capture the benchmark trace (needs root, trace-cmd, hackbench)"
        );
    }
    v6
}

/// Peak resident set of this process so far, in KiB (VmHWM).
fn peak_rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Reads every event; returns (events, seconds). Best of `runs`.
fn read(path: &Path, runs: usize) -> (u64, f64) {
    let mut best = f64::MAX;
    let mut n = 0;
    for _ in 0..runs {
        let t = Instant::now();
        let mut src = trace::open(path).unwrap();
        let mut batch = Vec::with_capacity(4096);
        n = 0;
        loop {
            batch.clear();
            let k = src.next_batch(&mut batch, 4096).unwrap();
            if k == 0 {
                break;
            }
            std::hint::black_box(&batch);
            n += k as u64;
        }
        best = best.min(t.elapsed().as_secs_f64());
    }
    (n, best)
}

fn trace_cmd_report(path: &Path) -> f64 {
    let t = Instant::now();
    let ok = Command::new("trace-cmd")
        .arg("report")
        .arg(path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("trace-cmd is needed for the reference run");
    assert!(ok.success());
    t.elapsed().as_secs_f64()
}

fn main() {
    let v6 = ensure_trace();
    let v7 = data_dir().join("big-v7.dat");
    // Peak memory after reading the small committed sample, then after the big trace:
    // a streaming reader's peak does not depend on how many events the file holds.
    let small = Path::new(env!("CARGO_MANIFEST_DIR")).join("traces/samples/hackbench-v6.dat");
    let (n_small, _) = read(&small, 1);
    let rss0 = peak_rss_kib();
    let (n, t6) = read(&v6, 3);
    let rss1 = peak_rss_kib();
    let (_, t7) = read(&v7, 3);
    let tref = trace_cmd_report(&v6);
    let tref7 = trace_cmd_report(&v7);
    println!("events: {n}");
    println!(
        "trace.dat v6:      {:>8.2} M events/s  ({t6:.3} s)",
        n as f64 / t6 / 1e6
    );
    println!(
        "trace.dat v7 zstd: {:>8.2} M events/s  ({t7:.3} s)",
        n as f64 / t7 / 1e6
    );
    println!("trace-cmd report v6: {:.3} s; v7: {:.3} s", tref, tref7);
    println!("ratio vs trace-cmd report (v6): {:.1}x", tref / t6);
    println!("ratio vs trace-cmd report (v7): {:.1}x", tref7 / t7);
    println!(
        "peak RSS: {rss0} KiB after {n_small} events, {rss1} KiB after {n} more \
         (ratio {:.2} for {:.0}x the events)",
        rss1 as f64 / rss0 as f64,
        n as f64 / n_small as f64
    );
}
