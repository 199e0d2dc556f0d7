//! Several traces replayed at once into one dataset partitioned by bundle and policy: what
//! the dataset holds equals what replaying each trace alone gives.

mod common;

use std::fs::File;
use std::path::{Path, PathBuf};

use arrow_array::{Array, BooleanArray, RecordBatch, UInt64Array};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use common::run_cli;

const RIG: &str = "traces/rig/kernel-sis-stats+noinline/2x4";

/// Copies two committed rig bundles into a fleet directory of its own, so the results
/// written beside them stay out of the source tree.
fn fleet_of_two() -> (tempfile::TempDir, Vec<PathBuf>) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let d = tempfile::tempdir().unwrap();
    let mut bundles = Vec::new();
    for (sub, name) in [
        ("a", "rig-2x4-hackbench-sis_util-tracefs"),
        ("b/c", "rig-2x4-pingpong-no_limit-tracefs"),
    ] {
        let to = d.path().join("fleet").join(sub).join(name);
        std::fs::create_dir_all(&to).unwrap();
        for f in ["meta.json", "events.parquet"] {
            std::fs::copy(root.join(RIG).join(name).join(f), to.join(f)).unwrap();
        }
        bundles.push(to);
    }
    (d, bundles)
}

/// Every batch of a Parquet file, as one batch of each column's values.
fn read(path: &Path) -> RecordBatch {
    let f = File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let reader = ParquetRecordBatchReaderBuilder::try_new(f)
        .unwrap()
        .with_batch_size(1 << 20)
        .build()
        .unwrap();
    let batches: Vec<RecordBatch> = reader.map(|b| b.unwrap()).collect();
    assert_eq!(
        batches.len(),
        1,
        "{}: one batch of up to 2^20 rows",
        path.display()
    );
    batches.into_iter().next().unwrap()
}

fn u64_col(b: &RecordBatch, name: &str) -> Vec<Option<u64>> {
    let c = b
        .column_by_name(name)
        .unwrap_or_else(|| panic!("no column {name}"));
    let a = c.as_any().downcast_ref::<UInt64Array>().unwrap();
    (0..a.len())
        .map(|i| (!a.is_null(i)).then(|| a.value(i)))
        .collect()
}

fn partition(out: &Path, table: &str, bundle: &Path, policy: &str, ext: &str) -> PathBuf {
    let enc = sisreplay::replay::dataset::partition_value;
    out.join(table)
        .join(format!("bundle={}", enc(&bundle.display().to_string())))
        .join(format!("policy={}", enc(policy)))
        .join(format!("part-0.{ext}"))
}

/// The fleet directory is expanded to its two bundles, each replayed in one pass; each
/// (bundle, policy) partition holds exactly what `replay BUNDLE --json` reports for it:
/// the totals in the summary row, windows that add up to them, and one decision row
/// per replayed wakeup whose agreement with the kernel is the summary's.
#[test]
fn a_fleet_lands_as_one_partitioned_dataset_equal_to_single_replays() {
    let (d, bundles) = fleet_of_two();
    let out = d.path().join("out");
    let fleet = d.path().join("fleet");
    let (code, stdout, stderr) = run_cli(&[
        "replay",
        fleet.to_str().unwrap(),
        "-p",
        "sis_prop,sis_util",
        "--out",
        out.to_str().unwrap(),
        "--out-decisions",
        "--jobs",
        "2",
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    for b in &bundles {
        assert!(stdout.contains(&b.display().to_string()), "{stdout}");
        let (code, json, stderr) = run_cli(&[
            "replay",
            b.to_str().unwrap(),
            "-p",
            "sis_prop,sis_util",
            "--json",
        ]);
        assert_eq!(code, Some(0), "{stderr}");
        let alone: serde_json::Value = serde_json::from_str(&json).unwrap();
        for p in alone["policies"].as_array().unwrap() {
            let policy = p["policy"].as_str().unwrap();
            let s = read(&partition(&out, "summary", b, policy, "parquet"));
            assert_eq!(s.num_rows(), 1);
            assert!(s.column_by_name("policy").is_none() && s.column_by_name("bundle").is_none());
            let replayed = alone["replayed"].as_u64().unwrap();
            assert_eq!(u64_col(&s, "replayed"), vec![Some(replayed)]);
            let scanned = p["counters"]["scanned"].as_u64().unwrap();
            assert_eq!(u64_col(&s, "scanned"), vec![Some(scanned)], "{policy}");
            let as_kernel = s
                .column_by_name("as_kernel")
                .unwrap()
                .as_any()
                .downcast_ref::<BooleanArray>()
                .unwrap()
                .value(0);
            assert_eq!(as_kernel, policy == alone["as_kernel"]);
            let agree = p["fidelity"]["agree"].as_u64();
            assert_eq!(u64_col(&s, "kernel_agree"), vec![agree], "{policy}");

            let w = read(&partition(&out, "windows", b, policy, "parquet"));
            let sum: u64 = u64_col(&w, "scanned").into_iter().flatten().sum();
            assert_eq!(sum, scanned, "{policy}: windows");

            let dec = read(&partition(&out, "decisions", b, policy, "parquet"));
            assert_eq!(dec.num_rows() as u64, replayed, "{policy}: decisions");
            if let Some(agree) = agree {
                let cpu = dec.column_by_name("cpu").unwrap();
                let rec = dec.column_by_name("recorded_cpu").unwrap();
                let (cpu, rec) = (
                    cpu.as_any()
                        .downcast_ref::<arrow_array::UInt32Array>()
                        .unwrap(),
                    rec.as_any()
                        .downcast_ref::<arrow_array::UInt32Array>()
                        .unwrap(),
                );
                let same = (0..cpu.len())
                    .filter(|&i| cpu.value(i) == rec.value(i))
                    .count();
                assert_eq!(
                    same as u64, agree,
                    "{policy}: decisions against the summary"
                );
            }
        }
        // The trace's own record has its windows too.
        assert!(partition(&out, "windows", b, "(observed)", "parquet").is_file());
    }
    // Nothing half-written is left beside the partitions.
    let leftovers: Vec<_> = walk(&out)
        .into_iter()
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// A bundle that cannot be read is named and the fleet goes on: the good bundle's
/// partitions are written and the exit status says the run was not whole.
#[test]
fn a_bad_bundle_in_a_fleet_is_named_and_the_others_are_written() {
    let (d, bundles) = fleet_of_two();
    let bad = d.path().join("fleet/zz-bad");
    std::fs::create_dir_all(&bad).unwrap();
    std::fs::write(bad.join("meta.json"), "{ not json").unwrap();
    let out = d.path().join("out");
    let (code, stdout, stderr) = run_cli(&[
        "replay",
        d.path().join("fleet").to_str().unwrap(),
        "-p",
        "sis_util",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(2), "{stdout}{stderr}");
    assert!(stderr.contains("zz-bad/meta.json"), "{stderr}");
    assert!(
        stderr.contains("1 of 3 traces could not be replayed"),
        "{stderr}"
    );
    for b in &bundles {
        assert!(partition(&out, "summary", b, "sis_util", "parquet").is_file());
    }
}

/// One trace's flags that make no sense for many are refused with a usage error.
#[test]
fn decisions_and_explain_are_for_one_trace() {
    let (d, _) = fleet_of_two();
    let (code, _, stderr) = run_cli(&[
        "replay",
        d.path().join("fleet").to_str().unwrap(),
        "--decisions",
        d.path().join("d.csv").to_str().unwrap(),
    ]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("--out-decisions"), "{stderr}");
    assert!(!d.path().join("d.csv").exists());
}

/// polars and DuckDB read each kind as one table with `bundle` (the path as given) and
/// `policy` columns decoded from the partition names.
#[test]
#[ignore = "needs python3 with polars and duckdb (notebooks/requirements.txt) (.ci/run installs it and runs ignored tests: cargo test -- --include-ignored)"]
fn polars_and_duckdb_read_the_dataset_as_one_table() {
    let (d, bundles) = fleet_of_two();
    let out = d.path().join("out");
    let (code, _, stderr) = run_cli(&[
        "replay",
        d.path().join("fleet").to_str().unwrap(),
        "-p",
        "sis_prop,sis_util",
        "--out",
        out.to_str().unwrap(),
        "--out-decisions",
        "csv",
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    let script = r#"
import sys, polars as pl, duckdb
out = sys.argv[1]
s = pl.scan_parquet(out + "/summary/", hive_partitioning=True).collect()
rows = duckdb.sql(f"select bundle, policy, count(*) from read_csv('{out}/decisions/*/*/*.csv', hive_partitioning=true) group by all").fetchall()
decisions = {(b, p): n for b, p, n in rows}
for b, p, n in s.select("bundle", "policy", "replayed").rows():
    print("polars", b, p, n, decisions[(b, p)])
for row in duckdb.sql(f"select bundle, policy, sum(scanned) from read_parquet('{out}/windows/*/*/*.parquet', hive_partitioning=true) group by all order by all").fetchall():
    print("duckdb", *row)
"#;
    let o = std::process::Command::new("python3")
        .args(["-c", script, out.to_str().unwrap()])
        .output()
        .expect("python3 runs");
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for b in &bundles {
        let b = b.display().to_string();
        for p in ["sis_prop", "sis_util"] {
            // polars (summary) and DuckDB (decisions as CSV): the bundle and policy
            // columns are decoded alike, and each (bundle, policy) has one decision row
            // per replayed wakeup.
            let line = text
                .lines()
                .find(|l| l.starts_with(&format!("polars {b} {p} ")))
                .unwrap_or_else(|| panic!("{b} {p}:\n{text}"));
            let n: Vec<&str> = line.rsplitn(3, ' ').collect();
            assert_eq!(n[0], n[1], "{line}");
            assert!(text.contains(&format!("duckdb {b} {p} ")), "{text}");
        }
        assert!(text.contains(&format!("duckdb {b} (observed) 0")), "{text}");
    }
}

/// `compare --trace DIR` makes a row of each bundle below DIR.
#[test]
fn compare_takes_a_directory_as_a_row_per_bundle() {
    let (d, bundles) = fleet_of_two();
    let (code, stdout, stderr) = run_cli(&[
        "compare",
        "sis_prop",
        "sis_util",
        "--trace",
        d.path().join("fleet").to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    for (i, b) in bundles.iter().enumerate() {
        let name = b.file_name().unwrap().to_string_lossy();
        assert!(stdout.contains(&format!("T{} = {name}", i + 1)), "{stdout}");
    }
    assert!(!stdout.contains("T3 ="), "{stdout}");
}
