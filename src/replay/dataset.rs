//! The replay results of many traces as one table per kind, laid out as Hive partitions
//! (`bundle=…/policy=…/part-0.*`) that DuckDB, polars and Spark read as one table with
//! `bundle` and `policy` columns:
//!
//! ```text
//! OUT/summary/bundle=B/policy=P/part-0.parquet    one row: the policy's totals on B
//! OUT/windows/bundle=B/policy=P/part-0.parquet    its per-window counters
//! OUT/decisions/bundle=B/policy=P/part-0.parquet  one row per wakeup (or .csv)
//! ```
//!
//! The partition columns are not repeated inside the files. Values are the bundle's path
//! as given and the policy spec, percent-encoded where a path could not hold them
//! (`/` is `%2F`); the readers decode them. Every file is written under a temporary name
//! and renamed when complete, so a reader sees a bundle's old partition or its new one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{ArrayRef, BooleanArray, Float64Array, RecordBatch, StringArray, UInt64Array};
use arrow_schema::{DataType, Field, Schema};

use super::observer::{CsvDecisions, DecisionObserver, ParquetDecisions};
use super::results::{window_series, windows_batch, write_batch};
use super::ReplayResult;
use crate::atomic::{Pending, WriteError};
use crate::metrics::Replayed;
use crate::wakeup::sis::Decision;

/// A partition value as a directory name can hold it: bytes outside `A-Za-z0-9._-`
/// become `%XX`, as Hive-style readers decode them.
pub fn partition_value(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The directory of one bundle's partitions of a table (`summary`, `windows`,
/// `decisions`).
pub fn bundle_dir(out: &Path, table: &str, bundle: &str) -> PathBuf {
    out.join(table)
        .join(format!("bundle={}", partition_value(bundle)))
}

fn part(dir: &Path, policy: &str, ext: &str) -> PathBuf {
    dir.join(format!("policy={}", partition_value(policy)))
        .join(format!("part-0.{ext}"))
}

/// Writes one bundle's summary and window partitions under `out` (the decisions go
/// through [`PartitionedDecisions`] while the replay runs).
pub fn write(out: &Path, bundle: &str, r: &ReplayResult) -> Result<(), WriteError> {
    let summary = bundle_dir(out, "summary", bundle);
    for p in &r.policies {
        write_batch(&part(&summary, &p.policy, "parquet"), &summary_batch(r, p))?;
    }
    let windows = bundle_dir(out, "windows", bundle);
    for (policy, w) in window_series(r) {
        let batch = windows_batch(&[(policy, w)], false);
        write_batch(&part(&windows, policy, "parquet"), &batch)?;
    }
    Ok(())
}

/// One row: what the trace is, the policy's SIS counters and the figures derived from
/// them, its placements and locks, and, for the kernel's own policy, its agreement.
fn summary_batch(r: &ReplayResult, p: &crate::metrics::PolicyMetrics) -> RecordBatch {
    let k = &p.counters;
    let d = &p.derived;
    let fid = p.fidelity.as_ref();
    let u64s: [(&str, Option<u64>); 22] = [
        ("nr_cpus", Some(r.nr_cpus as u64)),
        ("llcs", Some(r.llcs as u64)),
        ("duration_ns", Some(r.duration_ns)),
        ("wakings", Some(r.wakings)),
        ("replayed", Some(r.replayed)),
        ("search", Some(k.search)),
        ("domain_search", Some(k.domain_search)),
        ("scanned", Some(k.scanned)),
        ("failed", Some(k.failed)),
        ("recent_hit", Some(k.recent_hit)),
        ("recent_miss", Some(k.recent_miss)),
        ("core_search", Some(k.core_search)),
        ("core_failed", Some(k.core_failed)),
        ("search_ns_total", Some(p.search_ns_total)),
        ("same_cpu", Some(p.placements.same_cpu)),
        ("same_llc", Some(p.placements.same_llc)),
        ("cross_llc", Some(p.placements.cross_llc)),
        ("stacked_with_idle", Some(p.stacked_with_idle)),
        ("rq_lock_collisions", Some(p.rq_lock_collisions)),
        ("kernel_decisions", fid.map(|f| f.decisions)),
        ("kernel_agree", fid.map(|f| f.agree)),
        ("kernel_always_prev", fid.map(|f| f.always_prev)),
    ];
    let f64s: [(&str, f64); 4] = [
        ("se_eff_pct", d.se_eff),
        ("dom_eff_pct", d.dom_eff),
        ("success_pct", d.success_rate),
        ("fast_pct", d.fast_rate),
    ];
    let mut fields = vec![
        Field::new("kernel_release", DataType::Utf8, true),
        Field::new("as_kernel", DataType::Boolean, false),
    ];
    let mut columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(vec![r.kernel_release.clone()])),
        Arc::new(BooleanArray::from(vec![p.policy == r.as_kernel])),
    ];
    for (name, v) in u64s {
        fields.push(Field::new(name, DataType::UInt64, true));
        columns.push(Arc::new(UInt64Array::from(vec![v])));
    }
    for (name, v) in f64s {
        fields.push(Field::new(name, DataType::Float64, false));
        columns.push(Arc::new(Float64Array::from(vec![v])));
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
        .expect("one array per column of the schema")
}

/// How the decision partitions are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DecisionsFormat {
    /// Typed columns, for query engines.
    Parquet,
    /// The CSV of `--decisions F.csv`, less its policy column.
    Csv,
}

enum PolicyWriter {
    Csv(CsvDecisions<std::io::BufWriter<Pending>>),
    Parquet(Box<ParquetDecisions<std::io::BufWriter<Pending>>>),
}

/// Writes each policy's decisions to its own partition of one bundle's directory,
/// opening a policy's file at its first decision and putting every file in place when
/// the replay ends.
pub struct PartitionedDecisions {
    dir: PathBuf,
    format: DecisionsFormat,
    writers: BTreeMap<String, PolicyWriter>,
}

impl PartitionedDecisions {
    /// The decisions of `bundle` under `out/decisions/`.
    pub fn new(out: &Path, bundle: &str, format: DecisionsFormat) -> PartitionedDecisions {
        PartitionedDecisions {
            dir: bundle_dir(out, "decisions", bundle),
            format,
            writers: BTreeMap::new(),
        }
    }

    fn writer(&mut self, policy: &str) -> std::io::Result<&mut PolicyWriter> {
        if !self.writers.contains_key(policy) {
            let ext = match self.format {
                DecisionsFormat::Parquet => "parquet",
                DecisionsFormat::Csv => "csv",
            };
            let file = Pending::create(&part(&self.dir, policy, ext))
                .map_err(|e| std::io::Error::new(e.source.kind(), e.to_string()))?;
            let out = std::io::BufWriter::new(file);
            let w = match self.format {
                DecisionsFormat::Parquet => {
                    PolicyWriter::Parquet(Box::new(ParquetDecisions::without_policy(out)?))
                }
                DecisionsFormat::Csv => PolicyWriter::Csv(CsvDecisions::without_policy(out)),
            };
            self.writers.insert(policy.to_string(), w);
        }
        Ok(self.writers.get_mut(policy).expect("inserted above"))
    }
}

impl DecisionObserver for PartitionedDecisions {
    fn decision(
        &mut self,
        w: &Replayed,
        policy: &str,
        d: &Decision,
        steps: &[String],
    ) -> std::io::Result<()> {
        match self.writer(policy)? {
            PolicyWriter::Csv(c) => c.decision(w, policy, d, steps),
            PolicyWriter::Parquet(p) => p.decision(w, policy, d, steps),
        }
    }

    fn finish(&mut self) -> std::io::Result<()> {
        let to_io = |e: WriteError| std::io::Error::new(e.source.kind(), e.to_string());
        for (_, w) in std::mem::take(&mut self.writers) {
            let buffered = match w {
                PolicyWriter::Csv(mut c) => {
                    c.finish()?;
                    c.into_inner()
                }
                PolicyWriter::Parquet(p) => (*p).into_inner()?,
            };
            let pending = buffered.into_inner().map_err(|e| e.into_error())?;
            pending.commit().map_err(to_io)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_values_keep_what_a_directory_name_can_hold() {
        assert_eq!(partition_value("sis_util"), "sis_util");
        assert_eq!(partition_value("(observed)"), "%28observed%29");
        assert_eq!(
            partition_value("traces/rig/kernel-x+y/a b"),
            "traces%2Frig%2Fkernel-x%2By%2Fa%20b"
        );
        assert_eq!(partition_value("sis_util:pct=117"), "sis_util%3Apct%3D117");
    }
}
