//! Bundle read throughput: events/s of reading a bundle's events.parquet into events,
//! and of `info` over it (from its columns, and from events as it reads any trace), each
//! as a ratio to reading the same file's columns with plain arrow/parquet (no events
//! built) in the same run; info by columns also against plain arrow/parquet decoding only
//! the columns it reads; and peak memory.
//!
//! The bundle is simulated once (`sisreplay synth`: hackbench at 100 % load on the
//! 224-CPU spr-2s112, some 7 million events) into target/bench-data/ and reused;
//! SISREPLAY_BENCH_MS sets its measured time (default 350 ms of virtual time).
//! Ratios are given by CPU time of this process (all its threads: what the reading
//! costs, which other load on the machine disturbs less) and by wall time (what a
//! command waits: bundles are decoded on a thread of their own, ahead of the consumer).

mod common;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Instant;

use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ProjectionMask;
use sisreplay::bundle::Bundle;
use sisreplay::trace::EventSource;

fn ensure_bundle() -> PathBuf {
    let ms: u64 = std::env::var("SISREPLAY_BENCH_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(350);
    common::hackbench_bundle(&format!("synth-spr-2s112-hackbench-{ms}ms"), ms)
}

/// CPU time of this process so far, in seconds.
fn cpu_seconds() -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) };
    assert_eq!(r, 0);
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

/// Peak resident set of this process so far, in KiB (VmHWM).
fn peak_rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Runs `f` (which returns how many rows or events it read); the (count, CPU seconds,
/// wall seconds) of its fastest run.
fn best(runs: usize, mut f: impl FnMut() -> u64) -> (u64, f64, f64) {
    let (mut n, mut cpu, mut wall) = (0, f64::MAX, f64::MAX);
    for _ in 0..runs {
        let (c, w) = (cpu_seconds(), Instant::now());
        n = f();
        cpu = cpu.min(cpu_seconds() - c);
        wall = wall.min(w.elapsed().as_secs_f64());
    }
    (n, cpu, wall)
}

/// The reference: every column of events.parquet decoded by arrow/parquet with its
/// defaults, no events built.
fn plain_columns(bundle: &Path) -> u64 {
    let f = File::open(bundle.join(sisreplay::bundle::EVENTS_FILE)).unwrap();
    let reader = ParquetRecordBatchReaderBuilder::try_new(f)
        .unwrap()
        .build()
        .unwrap();
    reader
        .map(|b| std::hint::black_box(b.unwrap()).num_rows() as u64)
        .sum()
}

/// The reference for info: the columns it reads (bundle::scan) decoded by arrow/parquet
/// with its defaults, nothing counted.
fn plain_task_columns(bundle: &Path) -> u64 {
    let f = File::open(bundle.join(sisreplay::bundle::EVENTS_FILE)).unwrap();
    let builder = ParquetRecordBatchReaderBuilder::try_new(f).unwrap();
    let names: Vec<&str> = sisreplay::bundle::scan::task_column_names().collect();
    let mask = ProjectionMask::columns(builder.parquet_schema(), names);
    builder
        .with_projection(mask)
        .build()
        .unwrap()
        .map(|b| std::hint::black_box(b.unwrap()).num_rows() as u64)
        .sum()
}

/// What info by columns reads, as it reads it (bundle::scan: its columns, strings as
/// dictionaries, rows checked), nothing counted: the floor under info by columns.
fn task_columns_checked(bundle: &Path) -> u64 {
    let meta = sisreplay::bundle::read_meta(bundle).unwrap();
    let path = bundle.join(sisreplay::bundle::EVENTS_FILE);
    let mut scan = sisreplay::bundle::scan::TaskScan::open(&path, meta.nr_cpus).unwrap();
    let mut n = 0;
    while let Some(b) = scan.next_batch().unwrap() {
        n += std::hint::black_box(&b).checked() as u64;
        b.end().unwrap();
    }
    n
}

/// The bundle's events, checked, as every command reads them.
fn bundle_events(bundle: &Path) -> u64 {
    let mut b = Bundle::open(bundle).unwrap();
    let mut batch = Vec::with_capacity(4096);
    let mut n = 0;
    loop {
        batch.clear();
        let k = b.next_batch(&mut batch, 4096).unwrap();
        if k == 0 {
            break;
        }
        std::hint::black_box(&batch);
        n += k as u64;
    }
    n
}

/// `sisreplay info` without its printing: from the bundle's columns.
fn info(bundle: &Path) -> u64 {
    sisreplay::info::summarise_path(bundle, 10).unwrap().events
}

/// `info` as it reads any trace: from the bundle's events, built row by row.
fn info_by_events(bundle: &Path) -> u64 {
    let mut input = sisreplay::input::open(bundle).unwrap();
    sisreplay::info::summarise(input.source.as_mut(), 10)
        .unwrap()
        .events
}

fn main() {
    let bundle = ensure_bundle();
    let rss0 = peak_rss_kib();
    let (rows, t_ref, w_ref) = best(3, || plain_columns(&bundle));
    let rss_ref = peak_rss_kib();
    let (n, t_read, w_read) = best(3, || bundle_events(&bundle));
    let rss_read = peak_rss_kib();
    let (n_rows, t_info_rows, w_info_rows) = best(3, || info_by_events(&bundle));
    let rss_info_rows = peak_rss_kib();
    let (task_rows, t_task, w_task) = best(3, || plain_task_columns(&bundle));
    let (scanned, t_scan, w_scan) = best(3, || task_columns_checked(&bundle));
    let (n_info, t_info, w_info) = best(3, || info(&bundle));
    assert_eq!(rows, n);
    assert_eq!(n, n_info);
    assert_eq!(n, n_rows);
    assert_eq!(n, task_rows);
    assert_eq!(n, scanned);
    let m = |t: f64| n as f64 / t / 1e6;
    println!("bundle: {} ({n} events)", bundle.display());
    println!("events/s by CPU time, by wall time; ratio to the plain columns by CPU, by wall");
    let line = |what: &str, (t, w): (f64, f64), (t_ref, w_ref): (f64, f64)| {
        println!(
            "{what:<32} {:>6.2} M/s CPU ({t:.3} s) {:>6.2} M/s wall ({w:.3} s)  \
             ratio {:.2} CPU {:.2} wall",
            m(t),
            m(w),
            t_ref / t,
            w_ref / w
        );
    };
    let all = (t_ref, w_ref);
    line("plain arrow/parquet columns", (t_ref, w_ref), all);
    line("bundle events (checked)", (t_read, w_read), all);
    line("info by events", (t_info_rows, w_info_rows), all);
    line("info by columns", (t_info, w_info), all);
    let task = (t_task, w_task);
    println!("ratio to plain arrow/parquet decoding only the columns info reads:");
    line("plain arrow/parquet, info's", task, task);
    line("info's columns as it reads them", (t_scan, w_scan), task);
    line("info by columns", (t_info, w_info), task);
    println!(
        "info by columns: {:.2}x info by events (CPU)",
        t_info_rows / t_info
    );
    println!(
        "peak RSS: {rss0} KiB at start, {rss_ref} KiB after the plain columns, {rss_read} KiB \
         after the bundle's events, {rss_info_rows} KiB after info by events, {} KiB after \
         info by columns",
        peak_rss_kib()
    );
}
