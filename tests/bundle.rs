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
            provenance: bundle::Provenance::Import,
            sched_features: None,
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
#[ignore = "needs python3 with polars (notebooks/requirements.txt) (.ci/run installs it and runs ignored tests: cargo test -- --include-ignored)"]
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

/// Every event of a bundle, through the checked reader.
fn bundle_events(dir: &Path) -> Vec<trace::Event> {
    read_all(&mut Bundle::open(dir).unwrap())
}

/// The Arrow type of column `name` in a Parquet file, as a reader sees it.
fn arrow_type(file: &Path, name: &str) -> arrow_schema::DataType {
    let f = std::fs::File::open(file).unwrap();
    let b = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(f).unwrap();
    b.schema()
        .field_with_name(name)
        .unwrap()
        .data_type()
        .clone()
}

/// A notebook filters a bundle with polars and writes it back: sisreplay reads what
/// polars writes (string views or large strings, and categoricals as dictionaries).
#[test]
#[ignore = "needs python3 with polars (notebooks/requirements.txt) (.ci/run installs it and runs ignored tests: cargo test -- --include-ignored)"]
fn bundles_written_by_polars_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let (src, _) = import(&sample("hackbench-v7-zstd.dat"), dir.path());
    let script = r#"
import shutil, sys, os, polars as pl
src, out = sys.argv[1], sys.argv[2]
df = pl.read_parquet(src + "/events.parquet")
kept = df.filter(pl.col("event") != "irq_handler_entry")
strings = [c for c, t in df.schema.items() if t == pl.String]
for name, frame in [
    ("plain", kept),
    ("categorical", kept.with_columns([pl.col(c).cast(pl.Categorical) for c in strings])),
]:
    d = os.path.join(out, name)
    os.makedirs(d)
    shutil.copy(src + "/meta.json", d)
    frame.write_parquet(d + "/events.parquet")
print(kept.height)
"#;
    let out = Command::new("python3")
        .args([
            "-c",
            script,
            src.to_str().unwrap(),
            dir.path().to_str().unwrap(),
        ])
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let kept: usize = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    let all = bundle_events(&src);
    let want: Vec<&trace::Event> = all
        .iter()
        .filter(|e| e.kind.event_type() != trace::EventType::IrqHandlerEntry)
        .collect();
    assert_eq!(want.len(), kept);
    use arrow_schema::DataType;
    let plain = dir.path().join("plain");
    let t = arrow_type(&plain.join("events.parquet"), "event");
    assert!(
        matches!(t, DataType::Utf8View | DataType::LargeUtf8),
        "polars wrote {t} (the test wants the form polars writes, not Utf8)"
    );
    let cat = dir.path().join("categorical");
    let t = arrow_type(&cat.join("events.parquet"), "comm");
    assert!(matches!(t, DataType::Dictionary(..)), "polars wrote {t}");
    for d in [&plain, &cat] {
        let got = bundle_events(d);
        assert_eq!(got.len(), want.len(), "{}", d.display());
        assert!(
            got.iter().zip(&want).all(|(a, b)| a == *b),
            "{}",
            d.display()
        );
        // And the CLI replays it.
        let (code, _, err) = run_cli(&["replay", d.to_str().unwrap()]);
        assert_eq!(code, Some(0), "{err}");
    }
}

/// The same string forms written with arrow-rs, so a plain `cargo test` covers the reader
/// without polars: large strings, string views, and dictionaries of each.
#[test]
fn large_view_and_dictionary_string_columns_are_read() {
    use arrow_array::{Array, ArrayRef, RecordBatch};
    use arrow_schema::{DataType, Field, Schema};
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let (src, _) = import(&sample("hackbench-tracefs.txt"), dir.path());
    let want = bundle_events(&src);
    let f = std::fs::File::open(src.join("events.parquet")).unwrap();
    let batches: Vec<RecordBatch> =
        parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(f)
            .unwrap()
            .build()
            .unwrap()
            .map(|b| b.unwrap())
            .collect();
    type Conv = fn(&ArrayRef) -> ArrayRef;
    let forms: [(&str, Conv); 4] = [
        ("large", |a| {
            let s = a
                .as_any()
                .downcast_ref::<arrow_array::StringArray>()
                .unwrap();
            Arc::new(s.iter().collect::<arrow_array::LargeStringArray>())
        }),
        ("view", |a| {
            let s = a
                .as_any()
                .downcast_ref::<arrow_array::StringArray>()
                .unwrap();
            Arc::new(s.iter().collect::<arrow_array::StringViewArray>())
        }),
        ("dict32", |a| {
            let s = a
                .as_any()
                .downcast_ref::<arrow_array::StringArray>()
                .unwrap();
            Arc::new(
                s.iter()
                    .collect::<arrow_array::DictionaryArray<arrow_array::types::UInt32Type>>(),
            )
        }),
        ("dict8-large", |a| {
            let s = a
                .as_any()
                .downcast_ref::<arrow_array::StringArray>()
                .unwrap();
            let d: arrow_array::DictionaryArray<arrow_array::types::Int16Type> = s.iter().collect();
            let values = d
                .values()
                .as_any()
                .downcast_ref::<arrow_array::StringArray>()
                .unwrap()
                .iter()
                .collect::<arrow_array::LargeStringArray>();
            Arc::new(
                arrow_array::DictionaryArray::try_new(d.keys().clone(), Arc::new(values)).unwrap(),
            )
        }),
    ];
    for (name, conv) in forms {
        let out = dir.path().join(name);
        std::fs::create_dir(&out).unwrap();
        std::fs::copy(src.join("meta.json"), out.join("meta.json")).unwrap();
        let schema = batches[0].schema();
        let fields: Vec<Field> = schema
            .fields()
            .iter()
            .map(|f| match f.data_type() {
                DataType::Utf8 => {
                    let t =
                        conv(&(Arc::new(arrow_array::StringArray::from(vec!["x"])) as ArrayRef))
                            .data_type()
                            .clone();
                    Field::new(f.name(), t, true)
                }
                _ => f.as_ref().clone(),
            })
            .collect();
        let schema = Arc::new(Schema::new(fields));
        let file = std::fs::File::create(out.join("events.parquet")).unwrap();
        let mut w = parquet::arrow::ArrowWriter::try_new(file, schema.clone(), None).unwrap();
        for b in &batches {
            let cols: Vec<ArrayRef> = b
                .columns()
                .iter()
                .map(|c| {
                    if *c.data_type() == DataType::Utf8 {
                        conv(c)
                    } else {
                        c.clone()
                    }
                })
                .collect();
            w.write(&RecordBatch::try_new(schema.clone(), cols).unwrap())
                .unwrap();
        }
        w.close().unwrap();
        assert_ne!(
            arrow_type(&out.join("events.parquet"), "event"),
            DataType::Utf8,
            "{name}"
        );
        assert_eq!(bundle_events(&out), want, "{name}");
    }
    // Another type where a string belongs is still an error naming the column.
    let out = dir.path().join("int");
    std::fs::create_dir(&out).unwrap();
    std::fs::copy(src.join("meta.json"), out.join("meta.json")).unwrap();
    let schema = batches[0].schema();
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| {
            if f.name() == "event" {
                Field::new("event", DataType::Int32, false)
            } else {
                f.as_ref().clone()
            }
        })
        .collect();
    let schema = Arc::new(Schema::new(fields));
    let file = std::fs::File::create(out.join("events.parquet")).unwrap();
    let mut w = parquet::arrow::ArrowWriter::try_new(file, schema.clone(), None).unwrap();
    let b = &batches[0];
    let mut cols = b.columns().to_vec();
    cols[2] = Arc::new(arrow_array::Int32Array::from(vec![0; b.num_rows()]));
    w.write(&RecordBatch::try_new(schema, cols).unwrap())
        .unwrap();
    w.close().unwrap();
    use sisreplay::trace::EventSource;
    let err = Bundle::open(&out)
        .unwrap()
        .next_event()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("column event has type Int32, expected Utf8"),
        "{err}"
    );
    assert!(err.contains("row 0"), "{err}");
}

/// A column sisreplay does not know, of a type it could not read, is left unread; the
/// events, and an error at a bad row after a batch of good ones, come out as before.
#[test]
fn unknown_columns_are_not_read_and_errors_keep_their_row() {
    use arrow_array::{ArrayRef, RecordBatch};
    use arrow_schema::{DataType, Field, Schema};
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let (src, _) = import(&sample("hackbench-tracefs.txt"), dir.path());
    let want = bundle_events(&src);
    let f = std::fs::File::open(src.join("events.parquet")).unwrap();
    let batches: Vec<RecordBatch> =
        parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(f)
            .unwrap()
            .build()
            .unwrap()
            .map(|b| b.unwrap())
            .collect();
    let out = dir.path().join("extra");
    std::fs::create_dir(&out).unwrap();
    std::fs::copy(src.join("meta.json"), out.join("meta.json")).unwrap();
    let mut fields: Vec<Field> = batches[0]
        .schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    let item = Arc::new(Field::new("item", DataType::Int64, true));
    fields.push(Field::new("note", DataType::List(item), true));
    let schema = Arc::new(Schema::new(fields));
    let file = std::fs::File::create(out.join("events.parquet")).unwrap();
    let mut w = parquet::arrow::ArrowWriter::try_new(file, schema.clone(), None).unwrap();
    for b in &batches {
        let mut cols = b.columns().to_vec();
        let note: arrow_array::ListArray =
            arrow_array::ListArray::from_iter_primitive::<arrow_array::types::Int64Type, _, _>(
                (0..b.num_rows()).map(|i| Some(vec![Some(i as i64)])),
            );
        cols.push(Arc::new(note) as ArrayRef);
        w.write(&RecordBatch::try_new(schema.clone(), cols).unwrap())
            .unwrap();
    }
    w.close().unwrap();
    assert_eq!(bundle_events(&out), want);
    // Row 5000 on a CPU the bundle does not have: the 5000 events before it come first.
    let mut bad = want.clone();
    bad[5000].cpu = 7;
    let p = out.join("events.parquet");
    let mut w = bundle::EventWriter::create(&p).unwrap();
    for e in &bad {
        w.push(e).unwrap();
    }
    w.finish().unwrap();
    use sisreplay::trace::EventSource;
    let mut b = Bundle::open(&out).unwrap();
    let mut got = Vec::new();
    let err = loop {
        match b.next_batch(&mut got, 4096) {
            Ok(0) => panic!("no error"),
            Ok(_) => {}
            Err(e) => break e.to_string(),
        }
    };
    assert_eq!(got.len(), 5000);
    assert!(
        err.contains("events.parquet: row 5000: event on CPU 7"),
        "{err}"
    );
}

/// Schema-1 bundles (an untyped `capture` object) are still read: the committed rig
/// captures come back as typed capture records with their sched features, and a
/// simulated bundle's `{"synth": ...}` as a synth record; a bundle written now is schema
/// 2 and reads back the same.
#[test]
fn schema_1_metadata_is_read_as_typed_provenance() {
    use sisreplay::bundle::{read_meta, rewrite_meta, Provenance, SCHEMA_VERSION};
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let rig = root.join("traces/rig/2x4/rig-2x4-hackbench-sis_util-tracefs");
    let text = std::fs::read_to_string(rig.join("meta.json")).unwrap();
    let raw: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(raw["schema_version"], 1, "the committed bundle is schema 1");
    let meta = read_meta(&rig).unwrap();
    let cap = meta.provenance.capture().expect("a capture record");
    assert_eq!(
        cap.workload.as_ref().unwrap().command,
        raw["capture"]["workload"]["command"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    );
    assert_eq!(
        cap.cpus.len(),
        raw["capture"]["cpus"].as_array().unwrap().len()
    );
    let features = meta.sched_features.as_deref().unwrap();
    assert!(
        features.split_whitespace().any(|f| f == "SIS_UTIL"),
        "{features}"
    );
    // This machine cannot read its features: the reason is kept, not taken as features.
    let host = read_meta(&root.join("traces/host/pingpong-2pairs")).unwrap();
    assert_eq!(host.sched_features, None);
    assert!(host
        .provenance
        .capture()
        .unwrap()
        .sched_debug
        .features
        .value()
        .is_none());

    let dir = tempfile::tempdir().unwrap();
    let mut v1 = raw.clone();
    v1["capture"] = serde_json::json!({
        "synth": {"machine": "x86-40", "workload": "tbench", "load": {"label": "50%", "threads": 20},
                  "policy": "sis_util", "warmup_ns": 1, "duration_ns": 2},
        "sched_debug": {"features": "NO_SIS_PROP SIS_UTIL"},
    });
    std::fs::write(dir.path().join("meta.json"), v1.to_string()).unwrap();
    let synth = read_meta(dir.path()).unwrap();
    match &synth.provenance {
        Provenance::Synth(s) => assert_eq!((s.load.threads, s.policy.as_str()), (20, "sis_util")),
        p => panic!("{p:?}"),
    }
    assert_eq!(
        synth.sched_features.as_deref(),
        Some("NO_SIS_PROP SIS_UTIL")
    );

    // Written now: schema 2, read back equal.
    let mut meta2 = meta.clone();
    meta2.schema_version = SCHEMA_VERSION;
    rewrite_meta(dir.path(), &meta2).unwrap();
    let back = read_meta(dir.path()).unwrap();
    assert_eq!(back.schema_version, 2);
    assert_eq!(
        serde_json::to_value(&back).unwrap(),
        serde_json::to_value(&meta2).unwrap()
    );
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

/// The probe events of `capture --search-latency` survive a bundle: select_task_rq_fair's
/// and select_idle_cpu's entries and returns come back as written.
#[test]
fn probe_events_round_trip() {
    use sisreplay::trace::{Event, EventKind, SourceInfo};
    let kinds = [
        EventKind::SelectEnter {
            prev_cpu: 1,
            wake_flags: 0x18,
        },
        EventKind::IdleScanEnter { target: 1 },
        EventKind::IdleScanExit { cpu: -1 },
        EventKind::SelectExit { cpu: 1 },
        EventKind::IdleScanEnter { target: 0 },
        EventKind::IdleScanExit { cpu: 3 },
    ];
    let events: Vec<Event> = kinds
        .into_iter()
        .enumerate()
        .map(|(i, kind)| Event {
            ts: 1_000 + i as u64,
            cpu: 1,
            common_pid: 42,
            kind,
        })
        .collect();
    let info = SourceInfo {
        nr_cpus: Some(4),
        ..Default::default()
    };
    let mut src = sisreplay::trace::stream::VecSource::new(info, events.clone());
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("b");
    let meta = bundle::write_bundle(
        &mut src,
        &dest,
        ImportOptions {
            topology: None,
            source_path: Path::new("probes"),
            provenance: bundle::Provenance::Import,
            sched_features: None,
            progress: None,
        },
    )
    .unwrap();
    assert_eq!(meta.counts["select_idle_cpu_enter"], 2);
    assert_eq!(read_all(&mut Bundle::open(&dest).unwrap()), events);
}
