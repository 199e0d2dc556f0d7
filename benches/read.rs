//! Read throughput: events/s of sisreplay's readers over traces of at least 2 million
//! events, against the tool that wrote each format reading the same file in the same run
//! (`trace-cmd report > /dev/null` for trace.dat, `perf script > /dev/null` for
//! perf.data), and each reader's peak memory (which must not grow with the trace length).
//!
//! The traces are captured once by `benches/make-big-trace.sh` (root, trace-cmd,
//! hackbench) and `benches/make-big-perf.sh` (root, perf, hackbench) into
//! target/bench-data/ and reused. `cargo bench --bench read -- perf` (or `tracedat`)
//! runs one format only.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use sisreplay::trace;

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-data")
}

/// `data_dir()/file`, made by `script` with `args` when missing.
fn ensure(file: &str, script: &str, args: &[&str], needs: &str) -> PathBuf {
    let dir = data_dir();
    let path = dir.join(file);
    if !path.exists() {
        let script = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("benches")
            .join(script);
        let ok = Command::new("bash")
            .arg(script)
            .arg(&dir)
            .args(args)
            .status()
            .expect("bash");
        assert!(
            ok.success() && path.exists(),
            "could not capture the benchmark trace {file} (needs {needs})"
        );
    }
    path
}

/// Peak resident set of this process since the last reset, in KiB (VmHWM).
fn peak_rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Resets VmHWM to the present RSS (proc(5), clear_refs "5"), so each reader's own peak
/// is measured.
fn reset_peak_rss() {
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
}

/// Reads every event; returns (events, seconds). Best of `runs`.
fn read(path: &Path, runs: usize) -> (u64, f64) {
    read_with(path, runs, |p| trace::open(p).unwrap())
}

/// Reads every event of the source `open` makes; returns (events, seconds). Best of
/// `runs`.
fn read_with(
    path: &Path,
    runs: usize,
    open: impl Fn(&Path) -> Box<dyn trace::EventSource>,
) -> (u64, f64) {
    let mut best = f64::MAX;
    let mut n = 0;
    for _ in 0..runs {
        let t = Instant::now();
        let mut src = open(path);
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

/// Seconds `cmd` takes with its output to /dev/null.
fn reference(cmd: &[&str], path: &Path) -> f64 {
    let t = Instant::now();
    let ok = Command::new(cmd[0])
        .args(&cmd[1..])
        .arg(path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap_or_else(|e| panic!("{} is needed for the reference run: {e}", cmd[0]));
    assert!(ok.success(), "{cmd:?} {} failed", path.display());
    t.elapsed().as_secs_f64()
}

fn trace_dat() {
    let v6 = ensure(
        "big-v6.dat",
        "make-big-trace.sh",
        &["8", "30000"],
        "root, trace-cmd, hackbench",
    );
    let v7 = data_dir().join("big-v7.dat");
    // Peak memory after reading the small committed sample, then after the big trace:
    // a streaming reader's peak does not depend on how many events the file holds.
    let small = Path::new(env!("CARGO_MANIFEST_DIR")).join("traces/samples/hackbench-v6.dat");
    let (n_small, _) = read(&small, 1);
    let rss0 = peak_rss_kib();
    let (n, t6) = read(&v6, 3);
    let rss1 = peak_rss_kib();
    let (_, t7) = read(&v7, 3);
    let tref = reference(&["trace-cmd", "report"], &v6);
    let tref7 = reference(&["trace-cmd", "report"], &v7);
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

/// `perf script` printing every field it prints by default for tracepoints, and with
/// only the time, CPU, event name and payload, which is what sisreplay reads (less the
/// pid and comm of the sample, which the payload's common_pid stands for): the fairer
/// reference, since it formats less.
const PERF_SCRIPT: &[&str] = &["perf", "script", "-i"];
const PERF_SCRIPT_FIELDS: &[&str] = &["perf", "script", "-F", "trace:time,cpu,event,trace", "-i"];

fn perf_data() {
    let plain = ensure(
        "big.perf.data",
        "make-big-perf.sh",
        &["8", "8000"],
        "root, perf, hackbench",
    );
    let z = data_dir().join("big-z.perf.data");
    for (name, path) in [("perf.data", &plain), ("perf.data -z", &z)] {
        reset_peak_rss();
        let (n, t) = read(path, 3);
        let rss = peak_rss_kib();
        // The perf.data reader alone, without the causal ordering of equal timestamps
        // that trace::open puts every reader through.
        let (_, t_alone) = read_with(path, 3, |p| {
            Box::new(trace::perfdata::PerfData::open(p).unwrap())
        });
        let tref = reference(PERF_SCRIPT, path);
        let tfields = reference(PERF_SCRIPT_FIELDS, path);
        println!(
            "{name:<13} {n} events: {:>6.2} M events/s ({t:.3} s; the reader alone {:.2} M/s); \
             perf script {:.3} s ({:.2} M/s), with -F time,cpu,event,trace {:.3} s ({:.2} M/s); \
             ratio {:.1}x, {:.1}x (fields); peak RSS {rss} KiB",
            n as f64 / t / 1e6,
            n as f64 / t_alone / 1e6,
            tref,
            n as f64 / tref / 1e6,
            tfields,
            n as f64 / tfields / 1e6,
            tref / t,
            tfields / t,
        );
    }
}

fn main() {
    // `cargo bench` passes --bench; any other argument picks a format.
    let pick: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wants = |f: &str| pick.is_empty() || pick.iter().any(|p| p == f);
    if wants("tracedat") {
        trace_dat();
    }
    if wants("perf") {
        perf_data();
    }
}
