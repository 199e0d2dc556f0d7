//! `info` of a bundle from its columns against `info` from its events, built row by row
//! as every other trace is read: the same summary, field for field, on committed bundles
//! of each kind and a simulated one; and the columnar path's errors on damaged rows.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, Int32Array, RecordBatch, StringArray};
use sisreplay::bundle::{read_meta, Bundle};
use sisreplay::info::{summarise, summarise_columns, summarise_path, Summary};

fn root(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// The summary by columns and the summary by events of the rows in file order, as text
/// and as JSON.
fn both(dir: &Path) -> (Summary, Summary) {
    let meta = read_meta(dir).unwrap();
    let columns = summarise_columns(dir, &meta, 20).unwrap();
    let mut rows = Bundle::open(dir).unwrap();
    let events = summarise(&mut rows, 20).unwrap();
    (columns, events)
}

fn assert_same(dir: &Path, a: &Summary, b: &Summary) {
    assert_eq!(a.to_text(), b.to_text(), "{}", dir.display());
    assert_eq!(
        serde_json::to_value(a).unwrap(),
        serde_json::to_value(b).unwrap(),
        "{}",
        dir.display()
    );
}

/// Host captures (switch gaps, events out of causal order), rig captures with the
/// select_task_rq and select_idle_cpu probes, a perf.data import and a NUMA rig: each
/// count, the top tasks and their names agree. Those imported with equal timestamps in
/// causal order are summarised by columns by `info` itself, and agree with `info` of
/// their events as any reader opens them.
#[test]
fn columns_and_events_give_the_same_summary_on_committed_bundles() {
    for rel in [
        "traces/host/hackbench-g4-l2000",
        "traces/host/pingpong-2pairs",
        "traces/rig/kernel-sis-stats+noinline/2x4/rig-2x4-hackbench-sis_util-idle-scan-tracefs",
        "traces/rig/kernel-6.12-sis-stats+noinline/2x4/rig-2x4-pingpong-sis_util-tracefs",
        "traces/rig/2x4/rig-2x4-hackbench-sis_util-perf",
        "traces/rig/2x4x2-numa/rig-2x4x2-numa-hackbench-sis_util-tracefs",
    ] {
        let dir = root(rel);
        let (columns, events) = both(&dir);
        assert!(
            columns.events > 10_000 && !columns.top_tasks.is_empty(),
            "{rel}"
        );
        assert_same(&dir, &columns, &events);
        if read_meta(&dir).unwrap().ties.is_some() {
            let by_path = summarise_path(&dir, 20).unwrap();
            let mut input = sisreplay::input::open(&dir).unwrap();
            let by_input = summarise(input.source.as_mut(), 20).unwrap();
            assert_same(&dir, &by_path, &by_input);
        }
    }
    // What the list covers: gaps, disorder, probes.
    let (host, _) = both(&root("traces/host/pingpong-2pairs"));
    assert!(!host.switch_gaps.is_empty() && host.causal_disorder > 0);
    let (rig, _) = both(&root(
        "traces/rig/kernel-sis-stats+noinline/2x4/rig-2x4-hackbench-sis_util-idle-scan-tracefs",
    ));
    assert!(rig.counts.contains_key("select_idle_cpu_enter"));
    assert!(rig.counts.contains_key("sched_process_fork"));
}

/// A simulated bundle (224 CPUs, wakeups migrated at placement).
#[test]
fn columns_and_events_give_the_same_summary_on_a_simulated_bundle() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("synth");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_sisreplay"))
        .args(["synth", "--machine", "spr-2s112", "--workload", "hackbench"])
        .args(["--load", "100%", "-p", "sis_util", "--duration", "3ms"])
        .arg("-o")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let dir = std::fs::read_dir(&dir)
        .map(|d| {
            d.map(|e| e.unwrap().path())
                .find(|p| p.join("meta.json").is_file())
        })
        .ok()
        .flatten()
        .unwrap_or(dir);
    let (columns, events) = both(&dir);
    assert!(columns.wakeup_migrations > 0 && columns.nr_cpus == 224);
    assert_same(&dir, &columns, &events);
}

/// A copy of a committed bundle whose events.parquet has `edit` applied to its batches'
/// columns, by name.
fn edited(tmp: &Path, edit: impl Fn(&str, ArrayRef, usize) -> ArrayRef) -> PathBuf {
    let src =
        root("traces/rig/kernel-6.12-sis-stats+noinline/2x4/rig-2x4-pingpong-sis_util-tracefs");
    let out = tmp.join("b");
    std::fs::create_dir(&out).unwrap();
    std::fs::copy(src.join("meta.json"), out.join("meta.json")).unwrap();
    let f = std::fs::File::open(src.join("events.parquet")).unwrap();
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(f)
        .unwrap()
        .build()
        .unwrap();
    let file = std::fs::File::create(out.join("events.parquet")).unwrap();
    let mut w = None;
    let mut first = 0;
    for b in reader {
        let b = b.unwrap();
        let cols: Vec<ArrayRef> = b
            .schema()
            .fields()
            .iter()
            .zip(b.columns())
            .map(|(f, c)| edit(f.name(), c.clone(), first))
            .collect();
        let w = w.get_or_insert_with(|| {
            parquet::arrow::ArrowWriter::try_new(file.try_clone().unwrap(), b.schema(), None)
                .unwrap()
        });
        w.write(&RecordBatch::try_new(b.schema(), cols).unwrap())
            .unwrap();
        first += b.num_rows();
    }
    w.unwrap().close().unwrap();
    out
}

/// The first sched_switch row of the committed bundle `edited` copies, past row 1000.
fn a_switch_row() -> usize {
    let src =
        root("traces/rig/kernel-6.12-sis-stats+noinline/2x4/rig-2x4-pingpong-sis_util-tracefs");
    let mut b = Bundle::open(&src).unwrap();
    common::read_all(&mut b)
        .iter()
        .enumerate()
        .position(|(i, e)| i > 1000 && e.kind.event_type().name() == "sched_switch")
        .unwrap()
}

/// A null field that a row's event needs, and an event name sisreplay does not know,
/// are errors naming the file and the row, from `info` as from the event reader.
#[test]
fn damaged_rows_are_named_by_the_columnar_path() {
    let row = a_switch_row();
    let tmp = tempfile::tempdir().unwrap();
    let b = edited(tmp.path(), |name, c, first| {
        if name != "next_pid" || !(first..first + c.len()).contains(&row) {
            return c;
        }
        let a = c.as_any().downcast_ref::<Int32Array>().unwrap();
        let v: Int32Array = (0..a.len())
            .map(|i| (first + i != row && a.is_valid(i)).then(|| a.value(i)))
            .collect();
        Arc::new(v)
    });
    let meta = read_meta(&b).unwrap();
    let err = summarise_columns(&b, &meta, 10).unwrap_err().to_string();
    let want = format!("events.parquet: row {row}: next_pid is null");
    assert!(err.contains(&want), "{err}");
    let err = summarise_path(&b, 10).unwrap_err().to_string();
    assert!(err.contains(&want), "{err}");

    let tmp = tempfile::tempdir().unwrap();
    let b = edited(tmp.path(), |name, c, first| {
        if name != "event" || !(first..first + c.len()).contains(&row) {
            return c;
        }
        let a = c.as_any().downcast_ref::<StringArray>().unwrap();
        let v: StringArray = (0..a.len())
            .map(|i| {
                Some(if first + i == row {
                    "sched_nonsense"
                } else {
                    a.value(i)
                })
            })
            .collect();
        Arc::new(v)
    });
    let meta = read_meta(&b).unwrap();
    let err = summarise_columns(&b, &meta, 10).unwrap_err().to_string();
    assert!(
        err.contains(&format!("row {row}: unknown event sched_nonsense")),
        "{err}"
    );
}

/// Damaged files of every sort (truncated, bytes changed in the footer, the page
/// headers or the data) give a summary or an error naming events.parquet, never a
/// panic: what the `bundle` fuzz target checks, on a committed bundle's file.
#[test]
fn damaged_files_give_a_summary_or_an_error() {
    let src =
        root("traces/rig/kernel-sis-stats+noinline/2x4/rig-2x4-hackbench-g1-f2-sis_util-tracefs");
    let good = std::fs::read(src.join("events.parquet")).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let b = tmp.path().join("b");
    std::fs::create_dir(&b).unwrap();
    std::fs::copy(src.join("meta.json"), b.join("meta.json")).unwrap();
    let meta = read_meta(&b).unwrap();
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    };
    let (mut errors, mut summaries) = (0, 0);
    for k in 0..120 {
        let mut bytes = good.clone();
        match k % 3 {
            0 => bytes.truncate(next(good.len())),
            // The footer and the page headers and data before it.
            1 => {
                let at = good.len() - 1 - next(good.len().min(4096));
                bytes[at] ^= 1 << next(8);
            }
            _ => {
                for _ in 0..4 {
                    let at = next(good.len());
                    bytes[at] = next(256) as u8;
                }
            }
        }
        std::fs::write(b.join("events.parquet"), &bytes).unwrap();
        match summarise_columns(&b, &meta, 10) {
            Ok(_) => summaries += 1,
            Err(e) => {
                assert!(e.to_string().contains("events.parquet"), "{e}");
                errors += 1;
            }
        }
    }
    assert!(errors > 40, "{errors} errors, {summaries} summaries");
}
