//! Bundles: the events come back exactly as read, the Parquet file opens in Python polars
//! with the documented columns, and meta.json agrees with the events.

mod common;
use common::*;

use std::path::{Path, PathBuf};
use std::process::Command;

use sisreplay::bundle::{self, Bundle, ImportOptions};
use sisreplay::trace;

fn import(src: &Path, dir: &Path) -> (PathBuf, bundle::Meta) {
    let dest = dir.join("b");
    let mut s = trace::open(src).unwrap();
    let meta = bundle::write_bundle(
        s.as_mut(),
        &dest,
        ImportOptions {
            topology: None,
            source_path: src,
            capture: None,
            progress: None,
        },
    )
    .unwrap();
    (dest, meta)
}

/// The README's column list, in order.
const COLUMNS: &[&str] = &[
    "ts_ns",
    "cpu",
    "event",
    "common_pid",
    "comm",
    "pid",
    "prio",
    "target_cpu",
    "prev_comm",
    "prev_pid",
    "prev_prio",
    "prev_state",
    "next_comm",
    "next_pid",
    "next_prio",
    "orig_cpu",
    "dest_cpu",
    "parent_comm",
    "parent_pid",
    "child_comm",
    "child_pid",
    "group_dead",
    "irq",
    "name",
    "ret",
    "vec",
    "prev_cpu",
    "wake_flags",
];

#[test]
fn bundle_round_trips_every_event() {
    for f in ["hackbench-v7-zstd.dat", "hackbench-perf.data"] {
        let dir = tempfile::tempdir().unwrap();
        let (dest, meta) = import(&sample(f), dir.path());
        let original = read_all(trace::open(&sample(f)).unwrap().as_mut());
        let back = read_all(&mut Bundle::open(&dest).unwrap());
        assert_eq!(back, original, "{f}");
        assert_eq!(meta.events, original.len() as u64);
        assert_eq!(meta.first_ts_ns, original.first().map(|e| e.ts));
        let switches = original
            .iter()
            .filter(|e| matches!(e.kind, trace::EventKind::Switch { .. }))
            .count() as u64;
        assert_eq!(meta.counts["sched_switch"], switches);
        assert!(meta.topology_assumed);
        assert_eq!(meta.topology.cpus.len() as u32, meta.nr_cpus);
        // Only the finished bundle is there: no temporary directory.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("b")]);
    }
}

#[test]
fn parquet_opens_in_python_polars_with_the_documented_columns() {
    let dir = tempfile::tempdir().unwrap();
    let (dest, meta) = import(&sample("hackbench-v6.dat"), dir.path());
    let script = r#"
import json, sys, polars as pl
d = sys.argv[1]
df = pl.read_parquet(d + "/events.parquet")
meta = json.load(open(d + "/meta.json"))
print(json.dumps({
    "columns": df.columns,
    "rows": df.height,
    "switches": df.filter(pl.col("event") == "sched_switch").height,
    "first_ts": int(df["ts_ns"][0]),
    "sorted": bool(df["ts_ns"].is_sorted()),
    "meta_events": meta["events"],
}))
"#;
    let out = Command::new("python3")
        .args(["-c", script, dest.to_str().unwrap()])
        .output()
        .expect("python3 with polars is needed (.ci/run installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let cols: Vec<&str> = v["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert_eq!(cols, COLUMNS);
    assert_eq!(v["rows"], meta.events);
    assert_eq!(v["meta_events"], meta.events);
    assert_eq!(v["switches"], meta.counts["sched_switch"]);
    assert_eq!(v["first_ts"], meta.first_ts_ns.unwrap());
    assert_eq!(v["sorted"], true);
}

#[test]
fn schema_matches_the_documented_columns() {
    let s = bundle::columns::schema();
    let names: Vec<&str> = s.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(names, COLUMNS);
}

/// A `global`-clock tie as tracefs prints it: at one stamp, CPU 0 pulls task 10 and
/// switches it in while CPU 1 switches it out, merged lower CPU first. Import puts the
/// group in causal order (the switch-out first, CPU 0's own order kept), meta.json
/// records it, and `info` shows it for the file and for the bundle.
#[test]
fn equal_timestamps_are_imported_in_causal_order() {
    let text = "\
# tracer: nop
#
            bash-10      [001] d..2.   100.000050: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=t next_pid=10 next_prio=120
            bash-12      [000] d..2.   100.000060: sched_switch: prev_comm=t prev_pid=12 prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120
          <idle>-0       [000] d..2.   100.000100: sched_migrate_task: comm=t pid=10 prio=120 orig_cpu=1 dest_cpu=0
          <idle>-0       [000] d..2.   100.000100: sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=t next_pid=10 next_prio=120
               t-10      [001] d..2.   100.000100: sched_switch: prev_comm=t prev_pid=10 prev_prio=120 prev_state=R+ ==> next_comm=t next_pid=11 next_prio=120
               t-11      [001] d..2.   100.000200: sched_switch: prev_comm=t prev_pid=11 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
";
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("tie.txt");
    std::fs::write(&src, text).unwrap();
    let (dest, meta) = import(&src, dir.path());
    let ties = meta.ties.expect("recorded at import");
    assert_eq!(
        (ties.groups, ties.reordered, ties.inconsistent_left),
        (1, 1, 0)
    );
    let events = read_all(&mut Bundle::open(&dest).unwrap());
    let order: Vec<(u64, u32)> = events.iter().map(|e| (e.ts / 1000, e.cpu)).collect();
    assert_eq!(
        order,
        vec![
            (100_000_050, 1),
            (100_000_060, 0),
            (100_000_100, 1),
            (100_000_100, 0),
            (100_000_100, 0),
            (100_000_200, 1)
        ]
    );
    for input in [src.to_str().unwrap(), dest.to_str().unwrap()] {
        let (code, out, err) = run_cli(&["info", input]);
        assert_eq!(code, Some(0), "{err}");
        assert!(
            out.contains("ties       1 same-stamp groups across CPUs: 1 re-ordered, 0 events left"),
            "{out}"
        );
        assert!(out.contains("order      0 events out of"), "{out}");
    }
}
