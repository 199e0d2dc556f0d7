//! `sisreplay compare`: seed-style tables that fit a mail, JSON with every cell, and clear
//! refusals.

use std::path::Path;
use std::process::Command;

fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_sisreplay"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn sample(f: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("traces/samples")
        .join(f)
        .display()
        .to_string()
}

#[test]
fn two_policy_text_fits_80_columns() {
    let t = sample("hackbench-v6.dat");
    let (code, out, err) = run(&[
        "compare",
        "vanilla",
        "sis_util",
        "--trace",
        &t,
        "--trace",
        &sample("hackbench-perf.data"),
    ]);
    assert_eq!(code, Some(0), "{err}");
    for l in out.lines() {
        assert!(
            l.chars().count() <= 80,
            "{} columns: {l}",
            l.chars().count()
        );
    }
    assert_eq!(
        out.matches("(higher is better)").count() + out.matches("(lower is better)").count(),
        5
    );
    let rows: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("hackbench-v6"))
        .collect();
    assert_eq!(rows.len(), 5);
    assert!(rows.iter().all(|r| r.contains("1.00 (")), "{rows:?}");
}

#[test]
fn json_has_every_arm_and_the_baseline_at_zero() {
    let (code, out, err) = run(&[
        "compare",
        "sis_prop",
        "sis_util",
        "no_limit",
        "--trace",
        &sample("hackbench-v6.dat"),
        "--json",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v["arms"],
        serde_json::json!(["sis_prop", "sis_util", "no_limit"])
    );
    for t in v["tables"].as_array().unwrap() {
        let cells = t["rows"][0]["cells"].as_array().unwrap();
        assert_eq!(cells.len(), 3);
        assert_eq!(cells[0]["compare_pct"], 0.0);
        // On one LLC of 2 CPUs, no_limit and SIS_PROP's minimum budget scan the same.
        assert_eq!(cells[2]["compare_pct"], 0.0, "{}", t["metric"]);
    }
}

#[test]
fn unknown_arms_are_refused() {
    let (code, _, err) = run(&[
        "compare",
        "vanilla",
        "sis_utll",
        "--trace",
        &sample("hackbench-v6.dat"),
    ]);
    assert_eq!(code, Some(2));
    assert!(err.contains("neither a policy"), "{err}");
}
