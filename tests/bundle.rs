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
