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
    assert!(err.contains("did you mean \"sis_util\"?"), "{err}");
    let (_, _, err) = run(&["policies", "vanila"]);
    assert!(err.contains("did you mean \"vanilla\"?"), "{err}");
    let (_, _, err) = run(&["policies", "xyz"]);
    assert!(!err.contains("did you mean"), "{err}");
    let (code, _, err) = run(&["policies", "sis_util:pct=99"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("must be within 100..=200"), "{err}");
}

/// Every line of the registry, checked from what the line itself declares: adding a
/// policy with a line that does not match its file fails here.
#[test]
fn every_registry_entry_builds_and_checks_its_declared_parameters() {
    use sisreplay::policy::{self, ParamKind, PolicySpec, REGISTRY};
    let mut names = std::collections::HashSet::new();
    for e in REGISTRY {
        let info = e.info;
        for n in std::iter::once(info.name).chain(info.aliases.iter().copied()) {
            assert!(names.insert(n), "{n} is named twice");
            assert_eq!(policy::lookup(n).unwrap().name, info.name);
        }
        // The constructor on the line builds the policy the line describes, at defaults.
        let spec = PolicySpec::parse(info.name).unwrap();
        assert_eq!(spec.build().info().name, info.name);
        for p in info.params {
            let at = |v: &str| PolicySpec::parse(&format!("{}:{}={v}", info.name, p.name));
            match p.kind {
                ParamKind::Int { default, min, max } => {
                    assert!((min..=max).contains(&default), "{}:{}", info.name, p.name);
                    for ok in [min, default, max] {
                        at(&ok.to_string()).unwrap().build();
                    }
                    if max < u64::MAX {
                        let e = at(&(max + 1).to_string()).unwrap_err().to_string();
                        assert!(e.contains(&format!("{min}..={max}")), "{e}");
                    }
                    if min > 0 {
                        assert!(at(&(min - 1).to_string()).is_err());
                    }
                    assert!(at("ten").unwrap_err().to_string().contains("not a number"));
                }
                ParamKind::Choice { default, options } => {
                    assert!(options.contains(&default));
                    for o in options {
                        at(o).unwrap().build();
                    }
                    assert!(at("bogus").is_err());
                }
            }
            assert_eq!(
                spec.params().in_force()[p.name],
                p.default_text(),
                "{}:{} in force at its default",
                info.name,
                p.name
            );
        }
        let unknown = PolicySpec::parse(&format!("{}:nosuch=1", info.name)).unwrap_err();
        assert!(
            unknown.to_string().contains("unknown parameter"),
            "{unknown}"
        );
        // A policy a stock kernel runs is recognised from those sched features, on a
        // v6.0-v6.6 kernel (both words listed) and on v6.7+ (no SIS_PROP left).
        if let Some(f) = e.features {
            assert_eq!(policy::from_features(f).unwrap().name, info.name, "{f}");
            let v67: Vec<&str> = f
                .split_whitespace()
                .filter(|w| !w.ends_with("SIS_PROP"))
                .collect();
            if !f.split_whitespace().any(|w| w == "SIS_PROP") {
                assert_eq!(
                    policy::from_features(&v67.join(" ")).unwrap().name,
                    info.name,
                    "{f} on v6.7+"
                );
            }
            assert_eq!(
                sisreplay::replay::traced_policy(Some("5.15"), Some(f)),
                info.name,
                "features decide over the release"
            );
        }
    }
    assert!(policy::from_features("TTWU_QUEUE WA_IDLE").is_none());
}
