//! `sisreplay simulate`: a captured trace re-run in closed loop reproduces the trace
//! under the traced kernel's own policy, and its re-runs are bundles like any other.

mod common;

use std::path::Path;

/// The host's ping-pong capture (2 pairs of sched-pipe tasks on 2 CPUs, SIS_UTIL):
/// re-run under SIS_UTIL, every task gets the CPU time it had (measured 1.6 % off in
/// total), the work takes as long (x0.99), and no task is left waiting.
#[test]
fn the_pingpong_capture_rerun_matches_its_trace() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sims");
    let bundle = Path::new(env!("CARGO_MANIFEST_DIR")).join("traces/host/pingpong-2pairs");
    let (code, stdout, stderr) = common::run_cli(&[
        "simulate",
        bundle.to_str().unwrap(),
        "--policy",
        "sis_prop",
        "-o",
        out.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    let r: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(r["traced_policy"], "sis_util");
    let runs = r["runs"].as_array().unwrap();
    let names: Vec<&str> = runs.iter().map(|a| a["policy"].as_str().unwrap()).collect();
    assert_eq!(names, ["sis_util", "sis_prop"]);
    let own = &runs[0];
    let f = &own["against_trace"];
    let err = f["runtime_error_pct"].as_f64().unwrap();
    assert!(err < 5.0, "CPU time per task off by {err} %");
    let span = f["span_ratio"].as_f64().unwrap();
    assert!((0.9..1.1).contains(&span), "span x{span}");
    assert_eq!(own["result"]["unfinished_tasks"], 0);
    // The model: 4 sched-pipe tasks and their wakeups of each other; the trace's own
    // sched_waking count bounds the dependencies.
    let m = &r["model"];
    let deps = m["task_wakeups"].as_u64().unwrap();
    assert!((100_000..=113_970).contains(&deps), "{deps}");
    // Each re-run is a bundle: replayed with its own policy, every simulated decision
    // comes back (per-CPU kernel threads get no selection in either).
    for p in ["sis_util", "sis_prop"] {
        let b = out.join(format!("sim-pingpong-2pairs-{p}"));
        assert!(b.join("results/sim.json").is_file(), "{}", b.display());
        let (code, text, err) = common::run_cli(&["fidelity", b.to_str().unwrap(), "--json"]);
        assert_eq!(code, Some(0), "{err}");
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let f = &v[0]["fidelity"];
        let (agree, all) = (
            f["agree"].as_u64().unwrap(),
            f["decisions"].as_u64().unwrap(),
        );
        assert!(all > 40_000, "{p}: {all}");
        assert_eq!(agree, all, "{p}");
    }
}

#[test]
fn simulate_names_what_is_not_a_bundle() {
    let (code, _, err) = common::run_cli(&["simulate", "/nonexistent/trace"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("/nonexistent/trace: not a bundle"), "{err}");
    let bundle = Path::new(env!("CARGO_MANIFEST_DIR")).join("traces/host/pingpong-2pairs");
    let (code, _, err) =
        common::run_cli(&["simulate", bundle.to_str().unwrap(), "--policy", "nope"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("nope"), "{err}");
}
