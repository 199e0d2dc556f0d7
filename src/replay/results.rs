//! Replay results on disk, in the bundle's `results/` folder: the whole result as JSON,
//! and the per-window counters of every policy as Parquet for notebooks, with the trace's
//! own record as the rows of policy `(observed)`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, StringArray, UInt64Array};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;

use super::ReplayResult;
use crate::atomic;
use crate::metrics::Window;

/// The policy column's value for the trace's own record.
pub const OBSERVED: &str = "(observed)";

/// Writes `results/replay.json` and `results/replay-windows.parquet` under `bundle`,
/// each through a temporary name, so a reader never sees half a file.
pub fn write(bundle: &Path, r: &ReplayResult) -> Result<PathBuf, atomic::WriteError> {
    let dir = bundle.join("results");
    let text = serde_json::to_string_pretty(r).expect("serialises");
    atomic::write(&dir.join("replay.json"), (text + "\n").as_bytes())?;

    write_batch(
        &dir.join("replay-windows.parquet"),
        &windows_batch(&window_series(r), true),
    )?;
    Ok(dir)
}

/// Writes one batch as a Parquet file, atomically.
pub fn write_batch(path: &Path, batch: &RecordBatch) -> Result<(), atomic::WriteError> {
    atomic::write_with(path, |f| {
        let mut w = ArrowWriter::try_new(f, batch.schema(), None).map_err(std::io::Error::other)?;
        w.write(batch).map_err(std::io::Error::other)?;
        w.close().map(drop).map_err(std::io::Error::other)
    })
}

/// Each policy's windows, then the trace's own record as policy [`OBSERVED`].
pub fn window_series(r: &ReplayResult) -> Vec<(&str, &Vec<Window>)> {
    r.policies
        .iter()
        .map(|p| (p.policy.as_str(), &p.windows))
        .chain([(OBSERVED, &r.observed.windows)])
        .collect()
}

/// The per-window counters of each (policy, windows) series as one batch, rows in the
/// series' order, with a first `policy` column or, for a file holding one policy's
/// windows, without.
pub fn windows_batch(series: &[(&str, &Vec<Window>)], with_policy: bool) -> RecordBatch {
    let cols: [&str; 15] = [
        "window_start_ns",
        "wakeups",
        "search",
        "domain_search",
        "scanned",
        "failed",
        "recent_hit",
        "recent_miss",
        "core_search",
        "core_failed",
        "search_ns",
        "cross_llc",
        "moved",
        "latency_ns",
        "latencies",
    ];
    let mut fields = Vec::new();
    if with_policy {
        fields.push(Field::new("policy", DataType::Utf8, false));
    }
    fields.extend(cols.iter().map(|c| Field::new(*c, DataType::UInt64, false)));
    let schema = Arc::new(Schema::new(fields));
    let mut policy = Vec::new();
    let mut values: Vec<Vec<u64>> = vec![Vec::new(); cols.len()];
    for (name, windows) in series {
        for w in windows.iter() {
            policy.push(name.to_string());
            let k = &w.counters;
            for (i, v) in [
                w.start_ns,
                w.wakeups,
                k.search,
                k.domain_search,
                k.scanned,
                k.failed,
                k.recent_hit,
                k.recent_miss,
                k.core_search,
                k.core_failed,
                w.search_ns,
                w.cross_llc,
                w.moved,
                w.latency_ns,
                w.latencies,
            ]
            .into_iter()
            .enumerate()
            {
                values[i].push(v);
            }
        }
    }
    let mut arrays: Vec<ArrayRef> = Vec::new();
    if with_policy {
        arrays.push(Arc::new(StringArray::from(policy)));
    }
    arrays.extend(
        values
            .into_iter()
            .map(|v| Arc::new(UInt64Array::from(v)) as ArrayRef),
    );
    RecordBatch::try_new(schema, arrays).expect("one array per column of the schema")
}
