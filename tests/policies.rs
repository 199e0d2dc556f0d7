//! `sisreplay policies`: the registry and the budget curves, checked against the seed's
//! own numbers.

use std::process::Command;

fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_sisreplay"))
        .args(args)
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn curve(spec: &str, llc: &str) -> Vec<(u64, u64)> {
    let (code, out, err) = run(&["policies", spec, "--budget", "--llc-size", llc, "--json"]);
    assert_eq!(code, Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["util_pct"].as_u64().unwrap(),
                p["nr_scan"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn sis_util_v3_budget_is_the_seed_table() {
    let c = curve("sis_util_v3", "112");
    assert_eq!(c.len(), 21);
    let seed = [
        (0, 112),
        (5, 112),
        (15, 108),
        (25, 103),
        (35, 92),
        (45, 80),
        (55, 64),
        (65, 47),
        (75, 24),
        (85, 0),
    ];
    for (u, n) in seed {
        assert!(c.contains(&(u, n)), "{u}%: {c:?}");
    }
}

#[test]
fn pct_parameter_moves_the_merged_curve() {
    // With pct = 100 the scan reaches 0 only at 100 %: x = 1024·u, nr = 112·(1 − u²).
    let c = curve("sis_util:pct=100", "112");
    assert_eq!(c[10], (50, 84)); // ⌊(1024 − 256)·112/1024⌋
    assert_eq!(c[20], (100, 0));
    let d = curve("sis_util", "112");
    assert_eq!(d[17], (85, 1));
    assert_eq!(d[18], (90, 0));
}

#[test]
fn no_limit_and_small_llc_scan_everything() {
    assert!(curve("no_limit", "112").iter().all(|&(_, n)| n == 112));
    assert!(curve("sis_util_small_llc", "16")
        .iter()
        .all(|&(_, n)| n == 16));
    assert_eq!(curve("sis_util_small_llc", "32")[20], (100, 0));
}

#[test]
fn registry_lists_every_policy_and_rejects_bad_names() {
    let (_, out, _) = run(&["policies", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let names: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "sis_prop",
            "sis_util",
            "sis_util_v3",
            "no_limit",
            "cas",
            "cas_static",
            "sis_util_idle_hint",
            "sis_util_small_llc",
            "newidle_llc"
        ]
    );
    let (code, _, err) = run(&["policies", "sis_utill"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("unknown policy \"sis_utill\""), "{err}");
    let (code, _, err) = run(&["policies", "sis_util:pct=99"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("must be within 100..=200"), "{err}");
}
