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
    // Wakeup delays come from the trace: about half as the traced wakeup that ended the
    // same sleep, most others drawn from the trace's of their kind; the model's
    // constants only for a kind the trace shows fewer than 50 of.
    let res = &own["result"];
    let traced = res["delays_traced"].as_u64().unwrap();
    let drawn = res["delays_drawn"].as_u64().unwrap();
    let fixed = res["delays_fixed"].as_u64().unwrap();
    assert!(res["delays_from_trace"].as_bool().unwrap());
    assert!(
        traced > 10_000 && drawn > 0,
        "{traced} traced, {drawn} drawn"
    );
    assert!(fixed * 10 < traced + drawn, "{fixed} fixed");
    // The model: 4 sched-pipe tasks and their wakeups of each other; the trace's own
    // sched_waking count bounds the dependencies.
    let m = &r["model"];
    let deps = m["task_wakeups"].as_u64().unwrap();
    assert!((100_000..=113_970).contains(&deps), "{deps}");
    // The self-fidelity gate: the 8 checks of the traced policy's re-run, trusted only
    // when all pass; CPU time per task, busy share and finishing hold on this capture.
    let g = &r["self_fidelity"];
    assert_eq!(g["traced_policy"], "sis_util");
    let checks = g["checks"].as_array().unwrap();
    let pass = |name: &str| {
        checks
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("no check {name}"))["pass"]
            .as_bool()
            .unwrap()
    };
    assert_eq!(checks.len(), 8);
    assert!(pass("busy %") && pass("tasks' CPU time ±10 %") && pass("tasks finished"));
    // A count check outside its tolerance is too few to judge only where the two counts
    // differ by no more than twice √(their sum); trusted when every other check passes.
    for c in checks {
        let (t, r) = (c["trace"].as_f64().unwrap(), c["rerun"].as_f64().unwrap());
        let noise = (r - t).powi(2) <= 4.0 * (r + t);
        let count = c["tolerance"].as_str().unwrap().ends_with(" %");
        let want = count && c["pass"] == false && noise;
        assert_eq!(c["too_few"], want, "{c}");
    }
    let trusted = checks
        .iter()
        .all(|c| c["pass"] == true || c["too_few"] == true);
    assert_eq!(g["trustworthy"], trusted);
    // compare marks the counterfactual by that gate.
    let arm = |p: &str| {
        format!(
            "trace:{}",
            out.join(format!("sim-pingpong-2pairs-{p}")).display()
        )
    };
    let (code, text, err) = common::run_cli(&["compare", &arm("sis_util"), &arm("sis_prop")]);
    assert_eq!(code, Some(0), "{err}");
    // The second trace's row of the simulated table (named T2 when its name is long).
    let table = &text[text.find("simulated (closed loop)").expect("the table")..];
    let row = table
        .lines()
        .find(|l| l.starts_with("T2 ") || l.contains("pairs-sis_prop"))
        .expect("the counterfactual's row");
    let mark = if trusted { "trusted" } else { "UNTRUSTWORTHY" };
    assert!(row.ends_with(mark), "{row}");
    assert!(text.contains("self-fidelity of pingpong-2pairs"), "{text}");
    // Each re-run is a bundle: replayed with its own policy, the simulated decisions
    // come back (per-CPU kernel threads get no selection in either, nor, under the
    // 6.18 trace's EEVDF with DELAY_DEQUEUE, wakeups of delayed tasks: the re-run's
    // select_task_rq_fair probe events say which wakeups selected).
    for p in ["sis_util", "sis_prop"] {
        let b = out.join(format!("sim-pingpong-2pairs-{p}"));
        let sim: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(b.join("results/sim.json")).unwrap())
                .unwrap();
        assert_eq!(&sim["self_fidelity"], g, "{p}");
        // With the wakee flips the re-run gave the tasks as they appeared.
        let before = &sim["flips_before_trace"];
        let flips = format!(
            "{}/{}ms",
            before["flips"].as_u64().unwrap(),
            before["halved_ago_ns"].as_u64().unwrap() as f64 / 1e6
        );
        let (code, text, err) = common::run_cli(&[
            "fidelity",
            b.to_str().unwrap(),
            "--json",
            "--flips-before-trace",
            &flips,
        ]);
        assert_eq!(code, Some(0), "{err}");
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let f = &v[0]["fidelity"];
        let (agree, all) = (
            f["agree"].as_u64().unwrap(),
            f["decisions"].as_u64().unwrap(),
        );
        assert!(all > 10_000, "{p}: {all}");
        // All but a few where searches overlapped and events share an instant.
        let collisions = sim["wakeup_collisions_with_warmup"].as_u64().unwrap();
        assert!(
            all - agree <= collisions / 100 + 2,
            "{p}: {agree} of {all}, {collisions}"
        );
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

/// `--seed` seeds the re-runs' draws (the wakeup delays drawn from the trace): the same
/// seed gives the same re-run to the event, another seed another re-run of the same
/// work, which is how far the gate's figures move by chance.
#[test]
fn a_seed_gives_the_same_rerun_and_another_seed_another() {
    let bundle = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("traces/rig/kernel-sis-stats+noinline/2x4/rig-2x4-pingpong-1pair-sis_util-tracefs");
    let rerun = |seed: &str| {
        let (code, stdout, stderr) = common::run_cli(&[
            "simulate",
            bundle.to_str().unwrap(),
            "--policy",
            "sis_util",
            "--seed",
            seed,
            "--json",
        ]);
        assert_eq!(code, Some(0), "{stderr}");
        let r: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        r["runs"][0].clone()
    };
    let (a, b, c) = (rerun("1"), rerun("1"), rerun("2"));
    assert_eq!(a, b);
    assert_eq!(c["result"]["seed"], 2);
    assert_ne!(a["result"]["latency_us"], c["result"]["latency_us"]);
    // The same tasks do the same work either way.
    assert_eq!(
        a["result"]["unfinished_tasks"],
        c["result"]["unfinished_tasks"]
    );
    let cpu = |r: &serde_json::Value| r["against_trace"]["runtime_error_pct"].as_f64().unwrap();
    assert!(cpu(&a) < 5.0 && cpu(&c) < 5.0, "{} {}", cpu(&a), cpu(&c));
}
