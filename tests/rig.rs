//! Fidelity on the committed rig bundles: Debian's 6.1 kernel under QEMU with two LLCs
//! (2x4) and two NUMA nodes with SMT (2x4x2-numa), captured with select_task_rq_fair
//! probes under SIS_UTIL, NO_SIS_UTIL and SIS_PROP. Each is replayed with the policy of
//! its own feature setting, read from the capture's sched features.

mod common;

use std::path::{Path, PathBuf};

use sisreplay::replay::{replay, ReplayOptions, ReplayResult};

fn rig(topology: &str, name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("traces/rig")
        .join(topology)
        .join(name)
}

fn replay_bundle(p: &Path, policies: &[&str]) -> ReplayResult {
    let sisreplay::input::Input {
        source: mut src,
        meta,
    } = sisreplay::input::open(p).unwrap();
    let meta = meta.unwrap();
    replay(
        src.as_mut(),
        Some(&meta),
        ReplayOptions {
            policies: policies.iter().map(|s| s.parse().unwrap()).collect(),
            ..Default::default()
        },
    )
    .unwrap()
}

fn kernel_fidelity(r: &ReplayResult) -> &sisreplay::metrics::Fidelity {
    r.policies
        .iter()
        .find(|p| p.policy == r.as_kernel)
        .and_then(|p| p.fidelity.as_ref())
        .unwrap()
}

/// The SIS counters of the traced kernel's own policy on its trace.
fn kernel_counters(r: &ReplayResult) -> &sisreplay::wakeup::sis::SisCounters {
    &r.policies
        .iter()
        .find(|p| p.policy == r.as_kernel)
        .unwrap()
        .counters
}

/// The model's searches within `tol` (a fraction) of the kernel's own count.
fn assert_searches_close(
    name: &str,
    model: &sisreplay::wakeup::sis::SisCounters,
    kernel: &sisreplay::wakeup::sis::SisCounters,
    tol: f64,
) {
    let off = (model.search as f64 - kernel.search as f64).abs() / kernel.search as f64;
    assert!(
        off < tol,
        "{name}: {} searches modelled, {} measured",
        model.search,
        kernel.search
    );
}

/// Minimum agreement per topology and workload, a little under what was measured:
/// ping-pong pairs 96.9-99.0 % (perf backend 94.1 %), hackbench 93.6-95.5 % on the NUMA
/// guest (since load moved at wakeup migration stays on the old CPU until its next
/// update, as in the kernel) and 72.0-73.7 % on 2x4, where wake_wide turns on wakee flips
/// the workload inherited before the trace began (the README's rig section says more).
#[test]
fn each_feature_setting_is_replayed_with_its_own_policy() {
    for topology in ["2x4", "2x4x2-numa"] {
        for (workload, min_pct) in [("pingpong", 96.0), ("hackbench", 0.0)] {
            for setting in ["sis_util", "no_limit", "sis_prop"] {
                let name = format!("rig-{topology}-{workload}-{setting}-tracefs");
                let r = replay_bundle(&rig(topology, &name), &[]);
                assert_eq!(
                    r.as_kernel, setting,
                    "{name}: policy from the captured features"
                );
                assert_eq!(r.kernel_release.as_deref(), Some("6.1.0-57-amd64"));
                assert_eq!(r.llcs, 2, "{name}");
                // Every replayed wakeup had its probe: sync and selection are known.
                assert_eq!(r.probed_selections, r.replayed, "{name}");
                assert!(r.replayed > 10_000, "{name}: {}", r.replayed);
                let f = kernel_fidelity(&r);
                let min = match (workload, topology) {
                    ("hackbench", "2x4") => 71.0,
                    ("hackbench", _) => 93.0,
                    _ => min_pct,
                };
                assert!(
                    f.agreement_pct() >= min,
                    "{name}: {:.2}% < {min}",
                    f.agreement_pct()
                );
                if (workload, topology) == ("hackbench", "2x4x2-numa") {
                    // Cross-LLC placements predicted within 6 % of those recorded
                    // (measured: +0.5 .. +5.4 %), and above both baselines.
                    let (rec, pred) = (f.recorded_cross_llc, f.predicted_cross_llc);
                    assert!(rec.abs_diff(pred) * 100 <= 6 * rec, "{name}: {rec} {pred}");
                    assert!(f.agree > f.always_prev.max(f.always_waker), "{name}");
                }
                if workload == "pingpong" {
                    // Cross-LLC placements predicted within 5 of those recorded.
                    assert!(
                        f.recorded_cross_llc.abs_diff(f.predicted_cross_llc) <= 5,
                        "{name}: recorded {} predicted {}",
                        f.recorded_cross_llc,
                        f.predicted_cross_llc
                    );
                    // The idle search itself, once the target is right.
                    let (n, a) = f.by_path["prev"];
                    assert!(a as f64 >= 0.99 * n as f64, "{name}: prev path {a}/{n}");
                }
            }
        }
    }
}

#[test]
fn hackbench_probes_measure_the_search() {
    for topology in ["2x4", "2x4x2-numa"] {
        let name = format!("rig-{topology}-hackbench-sis_util-tracefs");
        let r = replay_bundle(&rig(topology, &name), &[]);
        let s = &r.observed.search_latency;
        // Every selection was timed, and a selection takes microseconds, not nothing.
        let timed: u64 = r.observed.search_latency_us.buckets.iter().sum();
        assert_eq!(timed, r.probed_selections, "{name}");
        assert!(s.p50 > 1_000 && s.p50 < s.p99, "{name}: {s:?}");
        assert!(r.search_fit.is_some(), "{name}");
    }
}

/// The 2x4 hackbench tracefs captures agree at 72.0-73.7 % with no wakee flips before
/// the trace: hackbench's tasks inherit them from the capture, a task alive before it,
/// and taken as 0 the receivers never go wide. `fidelity` fits them by default, to a
/// different value for each capture (what the capture process did before tracing), and
/// then wake_wide decides most wakeups, agreement goes over always-prev, and the
/// cross-LLC placements come within 5 % of the kernel's (4128 against 1846 with 0).
/// Under SIS_UTIL the age of the last halving counts too: 93.5 % with 16 flips halved
/// as the capture process is first seen, 96.0 % halved 300 ms before; and so does every
/// single flip near wake_wide's edge: 97.5 % with 19 (cross-LLC placements within 4 %
/// of the kernel's, 9 % under with 16).
#[test]
fn hackbench_flips_before_the_trace_are_fitted() {
    let names: Vec<String> = ["sis_util", "no_limit", "sis_prop"]
        .iter()
        .map(|s| {
            rig("2x4", &format!("rig-2x4-hackbench-{s}-tracefs"))
                .display()
                .to_string()
        })
        .collect();
    let mut args = vec!["fidelity", "--json"];
    args.extend(names.iter().map(|s| s.as_str()));
    let (code, out, err) = common::run_cli(&args);
    assert_eq!(code, Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    for (row, (flips, min)) in v
        .as_array()
        .unwrap()
        .iter()
        .zip([(19, 97.0), (7, 97.5), (4, 97.5)])
    {
        let name = row["trace"].as_str().unwrap();
        assert_eq!(row["flips_before_trace"]["flips"], flips, "{name}");
        let f = &row["fidelity"];
        let n = |k: &str| f[k].as_u64().unwrap() as f64;
        let agree = 100.0 * n("agree") / n("decisions");
        assert!(agree >= min, "{name}: {agree:.2} % < {min}");
        assert!(
            n("agree") > n("always_prev").max(n("always_waker")),
            "{name}"
        );
        assert!(f["by_affine"]["wake_wide"][0].as_u64().unwrap() * 2 > n("decisions") as u64);
        let xllc = n("predicted_cross_llc") / n("recorded_cross_llc");
        assert!(
            (0.95..=1.05).contains(&xllc),
            "{name}: cross-LLC x{xllc:.3}"
        );
        // With none assumed, the same replay stays under always-prev.
        let zero = row["flips_fit"]["agreement"][0].clone();
        assert_eq!(zero[0], 0);
        assert!(zero[1].as_f64().unwrap() < 75.0, "{name}: {zero}");
    }
    let aged = &v[0]["flips_fit"];
    assert!(
        aged["fitted"]["halved_ago_ns"].as_u64().unwrap() > 0,
        "{aged}"
    );
    let unaged = aged["agreement"].as_array().unwrap().iter();
    let best_unaged = unaged.map(|a| a[1].as_f64().unwrap()).fold(0.0, f64::max);
    assert!(best_unaged < 94.0, "{aged}");
}

/// `fidelity --json` of bundle `b`: its row, the age of the last halving fitted (ns), and
/// the agreement with the kernel (%).
fn fitted_age(b: &Path) -> (serde_json::Value, u64, f64) {
    let (code, out, err) = common::run_cli(&["fidelity", "--json", b.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let row = v[0].clone();
    let age = row["flips_before_trace"]["halved_ago_ns"].as_u64().unwrap();
    let f = &row["fidelity"];
    let agree = 100.0 * f["agree"].as_f64().unwrap() / f["decisions"].as_f64().unwrap();
    (row, age, agree)
}

/// The wakeups a fidelity row's replay placed across LLCs, over those the kernel did.
fn cross_llc_ratio(row: &serde_json::Value) -> f64 {
    let f = &row["fidelity"];
    let n = |k: &str| f[k].as_u64().unwrap() as f64;
    n("predicted_cross_llc") / n("recorded_cross_llc")
}

/// A second NO_SIS_UTIL hackbench capture of the 2x4 rig (`-heldout`, taken to check the
/// fit on a trace it had not seen) agrees at most 94.7 % with any count of flips halved
/// as each task is first seen: its capture process halved its own before the trace, at
/// a time the trace cannot show, and its children took the count from one side of it
/// or the other. With the age of that halving fitted too (0 flips, 250 ms), it agrees
/// 98.2 %, and its cross-LLC placements come within 5 % of the kernel's (1076 against
/// 1087).
#[test]
fn the_age_of_the_last_halving_is_fitted_too() {
    let (row, age, agree) = fitted_age(&rig("2x4", "rig-2x4-hackbench-no_limit-heldout-tracefs"));
    let fit = &row["flips_fit"];
    assert!((1..1_000_000_000).contains(&age), "{fit}");
    for a in fit["agreement"].as_array().unwrap() {
        assert!(
            a[1].as_f64().unwrap() < agree - 2.0,
            "halved as first seen: {a}"
        );
    }
    assert!(agree >= 97.5, "{agree:.2} %: {fit}");
    let xllc = cross_llc_ratio(&row);
    assert!((0.95..=1.05).contains(&xllc), "cross-LLC x{xllc:.3}");
}

/// A 2x4 NO_SIS_UTIL capture whose capture process forked hackbench 20 ms after its
/// first event: halved as first seen, no count of flips agrees clearly better than none
/// (94.6 %, at most 94.7 %), so a fit of the count first, then the age, stops at none.
/// Fitted together (a descent from the best count over a grid of ages), 8 flips halved
/// 750 ms before the trace agree 99.4 %, and the cross-LLC placements come within 2 % of
/// the kernel's (942 against 925; 725 with none).
#[test]
fn count_and_age_of_the_flips_are_fitted_together() {
    let (row, age, agree) = fitted_age(&rig("2x4", "rig-2x4-hackbench-no_limit-costs-tracefs"));
    let fit = &row["flips_fit"];
    let unaged: Vec<f64> = fit["agreement"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a[1].as_f64().unwrap())
        .collect();
    let none = unaged[0];
    assert!(unaged.iter().all(|&a| a <= none + 0.2), "{fit}");
    assert!(none < 95.0, "{fit}");
    assert!(
        row["flips_before_trace"]["flips"].as_u64().unwrap() > 0,
        "{fit}"
    );
    assert!((1..1_000_000_000).contains(&age), "{fit}");
    assert!(agree >= 98.5, "{agree:.2} %: {fit}");
    let xllc = cross_llc_ratio(&row);
    assert!((0.93..=1.07).contains(&xllc), "cross-LLC x{xllc:.3}");
}

/// On the kernel with CAS (run under SIS_UTIL's budget), the capture's main thread woke
/// its own threads from inside the fork of hackbench (dup_mmap's mmap-lock waiters,
/// blocked in D), before the fork's event: hackbench's tasks copy the flips from before
/// those wakings. Taken so, 2 flips halved as first seen agree 96.3 % (at most 85.4 %
/// while the children took the flips after the wakings, where only an age of 950 ms
/// brought it to 96.1 %), and its cross-LLC placements come within 6 % of the kernel's
/// (1994 against 1914).
#[test]
fn a_fork_copies_the_flips_from_before_the_wakings_inside_it() {
    let (row, age, agree) = fitted_age(&rig(
        "kernel-sis-stats+noinline+cas/2x4",
        "rig-2x4-hackbench-sis_util-tracefs",
    ));
    let fit = &row["flips_fit"];
    assert_eq!(age, 0, "{fit}");
    assert!(agree >= 96.0, "{agree:.2} %: {fit}");
    let xllc = cross_llc_ratio(&row);
    assert!((0.94..=1.06).contains(&xllc), "cross-LLC x{xllc:.3}");
}

/// The perf backend in the guest, with the same probes, gives the same structure. Its
/// capture starts its own threads inside the trace; still, the flips hackbench inherits
/// come from the capture process, alive before it: with none assumed, hackbench agrees
/// 93.0 %, under always-prev (93.2 %; 94.0 % while a fork's selection was taken for the
/// waking before it, counting a flip for the capture), and with the flips fitted, as
/// replay does by default, 98.9 %.
#[test]
fn perf_backend_rig_bundles() {
    let name = "rig-2x4-pingpong-sis_util-perf";
    let r = replay_bundle(&rig("2x4", name), &[]);
    assert_eq!(r.as_kernel, "sis_util");
    assert_eq!(r.probed_selections, r.replayed, "{name}");
    let f = kernel_fidelity(&r);
    assert!(f.agreement_pct() >= 93.5, "{name}");
    assert!(f.agree > f.always_prev.max(f.always_waker), "{name}");

    let name = "rig-2x4-hackbench-sis_util-perf";
    let r = replay_bundle(&rig("2x4", name), &[]);
    assert_eq!(r.probed_selections, r.replayed, "{name}");
    let (row, _, agree) = fitted_age(&rig("2x4", name));
    let f = &row["fidelity"];
    assert!(agree >= 98.0, "{name}: {agree:.2} %");
    assert!(
        f["agree"].as_u64() > f["always_prev"].as_u64(),
        "{name}: {f}"
    );
}

/// The 2x4 hackbench captured again once the capture started its own threads inside the
/// trace (traces/rig/2x4-own-threads): the wakee flips hackbench inherits from the
/// capture are in the trace, wake_wide decides most wakeups, and the model agrees at
/// 91.3-95.1 %, over both baselines (always prev 86.6-88.3 %). (SIS_UTIL's 91.3 % was
/// 92.1 % while searches were decided at their sched_waking rather than at the probe's
/// entry: wake_wide's flip counts then sat one apart on 110 borderline wakeups.)
#[test]
fn hackbench_captured_with_the_captures_threads_in_the_trace() {
    for setting in ["sis_util", "no_limit", "sis_prop"] {
        let name = format!("rig-2x4-hackbench-{setting}-tracefs-own-threads");
        let r = replay_bundle(&rig("2x4-own-threads", &name), &[]);
        assert_eq!(r.as_kernel, setting, "{name}");
        assert_eq!(r.probed_selections, r.replayed, "{name}");
        let f = kernel_fidelity(&r);
        assert!(
            f.agreement_pct() >= 91.0,
            "{name}: {:.2}%",
            f.agreement_pct()
        );
        assert!(f.agree > f.always_prev.max(f.always_waker), "{name}");
        assert!(f.by_affine["wake_wide"].0 * 2 > f.decisions, "{name}");
    }
}

/// The 2x4x2 NUMA machine (SMT, two nodes) under hackbench, captured with the capture's
/// threads inside the trace (traces/rig/2x4x2-numa-own-threads): the model agrees at
/// 96.4-97.8 %, far over both baselines (always prev 67-70 %, the waker's CPU 73-79 %),
/// and moves 98-102 % as many wakees across LLCs as the kernel moved.
#[test]
fn numa_hackbench_captured_with_the_captures_threads_in_the_trace() {
    for setting in ["sis_util", "no_limit", "sis_prop"] {
        let name = format!("rig-2x4x2-numa-hackbench-{setting}-tracefs-own-threads");
        let r = replay_bundle(&rig("2x4x2-numa-own-threads", &name), &[]);
        assert_eq!(r.as_kernel, setting, "{name}");
        let f = kernel_fidelity(&r);
        assert!(
            f.agreement_pct() >= 94.0,
            "{name}: {:.2}%",
            f.agreement_pct()
        );
        assert!(f.agree > f.always_prev.max(f.always_waker), "{name}");
        let (rec, pred) = (f.recorded_cross_llc as f64, f.predicted_cross_llc as f64);
        assert!(
            (pred - rec).abs() <= 0.06 * rec,
            "{name}: cross-LLC {rec} recorded, {pred} predicted"
        );
    }
}

/// SMT with two LLCs of four cores each (traces/rig/1x2x4x2, Debian's 6.1, stamped with
/// the mono trace clock): every path of the idle search runs, the idle-core walk and
/// prev's sibling among them. Overall the model agrees at 94.5-98.2 % on hackbench and
/// 98.4-99.8 % on ping-pong, above both baselines. The SMT paths agree less: the
/// idle-core walk 78-93 % and the CPU scan 65-95 % of their decisions, short of the 95 %
/// the paths that decide the idle search should reach; the floors below hold what is
/// reached.
#[test]
fn smt_topology_every_search_path() {
    let mut core = (0, 0);
    for workload in ["hackbench", "pingpong", "pingpong-2pairs"] {
        for setting in ["sis_util", "no_limit", "sis_prop"] {
            let name = format!("rig-1x2x4x2-{workload}-{setting}-tracefs");
            let r = replay_bundle(&rig("1x2x4x2", &name), &[]);
            assert_eq!(r.as_kernel, setting, "{name}");
            assert_eq!(r.probed_selections, r.replayed, "{name}");
            let f = kernel_fidelity(&r);
            let min = if workload == "hackbench" { 94.0 } else { 98.0 };
            assert!(
                f.agreement_pct() >= min,
                "{name}: {:.2}%",
                f.agreement_pct()
            );
            assert!(f.agree > f.always_prev.max(f.always_waker), "{name}");
            let (n, ok) = f.by_path.get("core").copied().unwrap_or((0, 0));
            core = (core.0 + n, core.1 + ok);
        }
    }
    // The idle-core walk decided over a thousand wakeups in all, most of them right.
    assert!(core.0 > 1000, "{core:?}");
    assert!(core.1 as f64 >= 0.85 * core.0 as f64, "{core:?}");
}

/// The counterfactual: SIS_UTIL's model replayed over the NO_SIS_UTIL capture of the
/// saturated load scans far fewer runqueues than the no-limit model there, and the real
/// SIS_UTIL capture of the same load spent less time in select_task_rq_fair than the
/// real NO_SIS_UTIL one. Decision replay keeps each wakeup's target LLC, so it predicts
/// no cross-LLC difference between the two; the captures' own difference comes from the
/// closed loop (different load spreads), which is the simulator's to model.
#[test]
fn sis_util_over_the_no_sis_util_trace() {
    for topology in ["2x4", "2x4x2-numa"] {
        let off = rig(
            topology,
            &format!("rig-{topology}-hackbench-no_limit-tracefs"),
        );
        let on = rig(
            topology,
            &format!("rig-{topology}-hackbench-sis_util-tracefs"),
        );
        let r = replay_bundle(&off, &["no_limit", "sis_util"]);
        let scanned = |p: &str| {
            let m = r.policies.iter().find(|x| x.policy == p).unwrap();
            m.counters.scanned as f64 / m.counters.search.max(1) as f64
        };
        assert!(
            scanned("sis_util") < 0.5 * scanned("no_limit"),
            "{topology}: {} vs {}",
            scanned("sis_util"),
            scanned("no_limit")
        );
        let cross = |p: &str| {
            r.policies
                .iter()
                .find(|x| x.policy == p)
                .unwrap()
                .placements
                .cross_llc
        };
        assert_eq!(cross("sis_util"), cross("no_limit"), "{topology}");
        let real_on = replay_bundle(&on, &[]);
        assert!(
            real_on.observed.search_latency.p50 < r.observed.search_latency.p50,
            "{topology}: measured p50 {} (SIS_UTIL) vs {} (NO_SIS_UTIL)",
            real_on.observed.search_latency.p50,
            r.observed.search_latency.p50
        );
    }
}

/// The rig script's --check: packages, the cached kernel and its modules, an initramfs
/// in which this build of sisreplay starts, and QEMU accepting the topology; no boot.
#[test]
#[ignore = "needs QEMU, busybox-static and cpio (.ci/run installs them and runs ignored tests: cargo test -- --include-ignored)"]
fn rig_script_check_builds_a_working_initramfs() {
    let root = env!("CARGO_MANIFEST_DIR");
    let o = std::process::Command::new("bash")
        .arg(format!("{root}/traces/rig/rig.sh"))
        .args(["--check", "--topology", "2x4x2-numa", "--bin"])
        .arg(env!("CARGO_BIN_EXE_sisreplay"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("kernel 6.1.0-"), "{err}");
    assert!(err.contains("--check: inputs are in place"), "{err}");
    // A topology QEMU is not given is refused before anything is fetched.
    let o = std::process::Command::new("bash")
        .arg(format!("{root}/traces/rig/rig.sh"))
        .args(["--check", "--topology", "3x3"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown topology 3x3"));
    // So is a workload it does not have, naming those it has.
    let o = std::process::Command::new("bash")
        .arg(format!("{root}/traces/rig/rig.sh"))
        .args(["--check", "--workloads", "pingpong-1pair,schbench"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("unknown workload schbench"), "{err}");
    assert!(
        err.contains("pingpong-1pair") && err.contains("periodic-4tasks"),
        "{err}"
    );
}

/// The kernel-build mode's --check, never the build: Debian's linux-source-6.1 and
/// linux-source-6.12 resolve, every kernel of traces/rig/kernel/kernels.txt has its patch
/// series apply in order, and olddefconfig keeps every option of the guest config on both
/// sources; every series (patches/SERIES on 6.1, patches/6.12/SERIES on 6.12) is in one
/// of those kernels; then the rig builds its initramfs for a kernel of each source with
/// the virtio drivers built in.
#[test]
#[ignore = "needs linux-source-6.1, linux-source-6.12, flex, bison, bc, libelf-dev, QEMU, busybox-static and cpio (.ci/run installs them and runs ignored tests: cargo test -- --include-ignored)"]
fn rig_script_check_of_a_kernel_built_from_source() {
    let root = env!("CARGO_MANIFEST_DIR");
    let list = std::fs::read_to_string(format!("{root}/traces/rig/kernel/kernels.txt")).unwrap();
    let names: Vec<&str> = list
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    assert!(names.contains(&"sis-stats+noinline"), "{names:?}");
    assert!(names.contains(&"6.12:sis-stats+noinline"), "{names:?}");
    // A NAME's source (6.1 unless it says `SOURCE:`) and its series.
    fn split(n: &str) -> (&str, &str) {
        n.split_once(':').unwrap_or(("6.1", n))
    }
    let in_a_kernel = |source: &str, series: &str| {
        names.iter().any(|n| {
            let (v, s) = split(n);
            v == source && s.split('+').any(|s| s == series)
        })
    };
    let patches = format!("{root}/traces/rig/patches");
    for e in std::fs::read_dir(&patches).unwrap() {
        let entry = e.unwrap().file_name().to_string_lossy().into_owned();
        // A directory named by a version holds that source's series.
        if entry.starts_with(|c: char| c.is_ascii_digit()) {
            for e in std::fs::read_dir(format!("{patches}/{entry}")).unwrap() {
                let series = e.unwrap().file_name().to_string_lossy().into_owned();
                assert!(
                    in_a_kernel(&entry, &series),
                    "series {entry}/{series} is in no kernel of kernels.txt"
                );
            }
        } else {
            assert!(
                in_a_kernel("6.1", &entry),
                "series {entry} is in no kernel of kernels.txt"
            );
        }
    }
    let o = std::process::Command::new("bash")
        .arg(format!("{root}/traces/rig/kernel/build.sh"))
        .arg("--check")
        .args(&names)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    for n in &names {
        assert!(err.contains(&format!("--check: {n}: ")), "{n}: {err}");
    }
    for source in ["6.1", "6.12"] {
        assert!(
            err.contains(&format!("--check: linux-source-{source} "))
                && err.contains("config accepted"),
            "{source}: {err}"
        );
    }
    for kernel in ["sis-stats+noinline", "6.12:sis-stats+noinline"] {
        let o = std::process::Command::new("bash")
            .arg(format!("{root}/traces/rig/rig.sh"))
            .args(["--check", "--kernel", kernel, "--topology", "2x4", "--bin"])
            .arg(env!("CARGO_BIN_EXE_sisreplay"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{kernel}: {err}");
        assert!(
            err.contains("--check: inputs are in place"),
            "{kernel}: {err}"
        );
    }
    // A series that does not exist, one not ported to the source named, and a source
    // build.sh does not know are refused before anything is unpacked.
    for name in ["no-such-series", "6.12:cas", "5.15:stock"] {
        let o = std::process::Command::new("bash")
            .arg(format!("{root}/traces/rig/kernel/build.sh"))
            .args(["--check", name])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{name}");
    }
}

/// The first kernel built from source (stock 6.1 + sis-stats + noinline) on the 2x4 guest:
/// its own SIS counters are in meta.json's schedstat snapshots, read while tracing was on,
/// and the traced policy's model, replayed over the same trace, counts the same searches
/// and runqueues scanned. Measured on these bundles: searches within 0.25 % of the
/// kernel's in all six, runqueues scanned per search within 0.05.
#[test]
fn kernel_sis_counters_beside_the_model() {
    use sisreplay::metrics::kernel_sis;
    for workload in ["hackbench", "pingpong"] {
        for setting in ["sis_util", "no_limit", "sis_prop"] {
            let name = format!("rig-2x4-{workload}-{setting}-tracefs");
            let p = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("traces/rig/kernel-sis-stats+noinline/2x4")
                .join(&name);
            let meta = sisreplay::bundle::read_meta(&p).unwrap();
            assert_eq!(
                meta.kernel_release.as_deref(),
                Some("6.1.192-rig-sis-stats+noinline")
            );
            let m = kernel_sis::measured(&meta).expect("the sis-stats fields");
            assert_eq!((m.version, m.fields, m.cpus), (18, 17, 8), "{name}");
            let r = replay_bundle(&p, &[]);
            assert_eq!(r.as_kernel, setting, "{name}");
            let k = kernel_counters(&r);
            let km = &m.counters;
            assert_searches_close(&name, k, km, 0.005);
            // No SMT on 2x4: no idle-core search.
            assert_eq!((km.core_search, k.core_search), (0, 0), "{name}");
            let per = |k: &sisreplay::wakeup::sis::SisCounters| k.scanned as f64 / k.search as f64;
            assert!(
                (per(k) - per(km)).abs() < 0.1,
                "{name}: {} vs {}",
                per(k),
                per(km)
            );
        }
    }
}

/// The same kernel under lighter loads, where the idle search itself decides: ping-pong
/// with 1-3 pairs (16-31 % busy), hackbench with one and two groups of 2 fds (30-70 %)
/// and 4-16 periodic tasks (24-67 %), each under all three settings. The traced policy's
/// model picks the kernel's CPU for 98.3-99.8 % of the ping-pong wakeups, 90.6-99.7 % of
/// the periodic ones (the least under SIS_UTIL with 12 and 16 tasks) and 89.4-96.2 % of
/// hackbench's, always over always-prev; it counts the kernel's searches to within 0.6 %
/// and scans within 0.22 runqueues per search of it (the most on hackbench's one group).
#[test]
fn lighter_loads_beside_the_kernels_counters() {
    use sisreplay::metrics::kernel_sis;
    for (workloads, min_pct) in [
        (
            &["pingpong-1pair", "pingpong-2pairs", "pingpong-3pairs"][..],
            98.0,
        ),
        (&["hackbench-g1-f2", "hackbench-g2-f2"][..], 89.0),
        (
            &[
                "periodic-4tasks",
                "periodic-8tasks",
                "periodic-12tasks",
                "periodic-16tasks",
            ][..],
            90.0,
        ),
    ] {
        for workload in workloads {
            for setting in ["sis_util", "no_limit", "sis_prop"] {
                let name = format!("rig-2x4-{workload}-{setting}-tracefs");
                let p = Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("traces/rig/kernel-sis-stats+noinline/2x4")
                    .join(&name);
                let meta = sisreplay::bundle::read_meta(&p).unwrap();
                let m = kernel_sis::measured(&meta).expect("the sis-stats fields");
                let r = replay_bundle(&p, &[]);
                assert_eq!(r.as_kernel, setting, "{name}");
                assert_eq!(r.probed_selections, r.replayed, "{name}");
                let f = kernel_fidelity(&r);
                assert!(
                    f.agreement_pct() >= min_pct,
                    "{name}: {:.2}%",
                    f.agreement_pct()
                );
                assert!(f.agree > f.always_prev, "{name}");
                let k = kernel_counters(&r);
                let km = &m.counters;
                assert_searches_close(&name, k, km, 0.01);
                let per =
                    |k: &sisreplay::wakeup::sis::SisCounters| k.scanned as f64 / k.search as f64;
                assert!(
                    (per(k) - per(km)).abs() < 0.25,
                    "{name}: {} vs {}",
                    per(k),
                    per(km)
                );
            }
        }
    }
}

/// A patched kernel is replayed with its patch's model: the SIS_UTIL captures of the
/// sis-util-v3 kernel as sis_util_v3, whose counts of searches are the kernel's to within
/// 0.5 % (measured: 0.2 %), and which picks the kernel's CPU for 95.3 % (hackbench) and
/// 97.5 % (ping-pong) of the wakeups.
#[test]
fn sis_util_v3_kernel_is_replayed_with_the_v3_model() {
    use sisreplay::metrics::kernel_sis;
    for workload in ["hackbench", "pingpong"] {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("traces/rig/kernel-sis-stats+noinline+sis-util-v3/2x4")
            .join(format!("rig-2x4-{workload}-sis_util-tracefs"));
        let meta = sisreplay::bundle::read_meta(&p).unwrap();
        let m = kernel_sis::measured(&meta).unwrap();
        let r = replay_bundle(&p, &[]);
        assert_eq!(r.as_kernel, "sis_util_v3", "{workload}");
        let k = kernel_counters(&r);
        assert_searches_close(workload, k, &m.counters, 0.005);
        assert!(kernel_fidelity(&r).agreement_pct() >= 95.0, "{workload}");
    }
}

/// The same series on Debian's 6.12 source (EEVDF, DELAY_DEQUEUE; no SIS_PROP), 2x4 guest,
/// SIS_UTIL and NO_SIS_UTIL: the kernel's counters are read while tracing is on, the
/// traced policy's model counts the kernel's searches to within 0.5 % (measured: 0.1 %)
/// and its runqueues scanned per search to within 0.1 (measured: 0.00-0.04), and picks the
/// kernel's CPU for 95.7-99.1 % of the wakeups it selected for. A quarter to a half of
/// the ping-pong wakings select nothing on 6.12 (under 1 % on 6.1, and on 6.12 with
/// DELAY_DEQUEUE off): the probes say so, and those are not replayed.
#[test]
fn kernel_6_12_sis_counters_beside_the_model() {
    use sisreplay::metrics::kernel_sis;
    for workload in ["hackbench", "pingpong"] {
        for setting in ["sis_util", "no_limit"] {
            let name = format!("rig-2x4-{workload}-{setting}-tracefs");
            let p = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("traces/rig/kernel-6.12-sis-stats+noinline/2x4")
                .join(&name);
            let meta = sisreplay::bundle::read_meta(&p).unwrap();
            assert_eq!(
                meta.kernel_release.as_deref(),
                Some("6.12.118-rig-sis-stats+noinline")
            );
            let m = kernel_sis::measured(&meta).expect("the sis-stats fields");
            assert_eq!((m.version, m.fields, m.cpus), (18, 17, 8), "{name}");
            let r = replay_bundle(&p, &[]);
            assert_eq!(r.as_kernel, setting, "{name}");
            assert_eq!(r.probed_selections, r.replayed, "{name}");
            let k = kernel_counters(&r);
            let km = &m.counters;
            assert_searches_close(&name, k, km, 0.005);
            let per = |k: &sisreplay::wakeup::sis::SisCounters| k.scanned as f64 / k.search as f64;
            assert!(
                (per(k) - per(km)).abs() < 0.1,
                "{name}: {} vs {}",
                per(k),
                per(km)
            );
            let f = kernel_fidelity(&r);
            assert!(
                f.agreement_pct() >= 95.0,
                "{name}: {:.2}%",
                f.agreement_pct()
            );
            assert!(f.agree > f.always_prev.max(f.always_waker), "{name}");
            if workload == "pingpong" {
                // DELAY_DEQUEUE's requeues in place: no selection for a fifth or more of
                // the wakings, and for under 1 % once it is off.
                let none = |r: &ReplayResult| r.skipped.no_selection as f64 / r.wakings as f64;
                let off = replay_bundle(
                    &p.with_file_name(format!("rig-2x4-{workload}-{setting}_no_delay-tracefs")),
                    &[],
                );
                assert_eq!(off.as_kernel, setting, "{name}");
                assert!(
                    none(&r) > 0.2 && none(&off) < 0.01,
                    "{name}: {} with DELAY_DEQUEUE, {} without",
                    none(&r),
                    none(&off)
                );
            }
        }
    }
}

/// From v6.8 util_est keeps its EWMA when a task's sample is below what it waited to
/// run for (runnable_avg above util_avg by the 1 % margin): a ping-pong task that waits
/// for its waker keeps a high estimate, SIS_UTIL reads a busier LLC and lets fewer CPUs
/// be scanned. On the 6.12 ping-pong without DELAY_DEQUEUE the CPU-scan path then picks
/// the kernel's CPU for 744 of 1,081 wakeups (766 of 1,410 under 6.1's rules: 642 of the
/// 644 misses found an idle CPU on the last CPU the budget allowed) and the whole
/// trace agrees 98.87 % (98.05 %).
#[test]
fn kernel_6_12_util_est_keeps_the_estimate_of_a_task_that_waited() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(
        "traces/rig/kernel-6.12-sis-stats+noinline/2x4/rig-2x4-pingpong-sis_util_no_delay-tracefs",
    );
    let r = replay_bundle(&p, &[]);
    assert_eq!(r.as_kernel, "sis_util");
    let f = kernel_fidelity(&r);
    let (n, ok) = f.by_path["cpu"];
    assert!(
        n < 1_200 && ok as f64 >= 0.65 * n as f64,
        "CPU scan: {ok} of {n}"
    );
    assert!(f.agreement_pct() >= 98.5, "{:.2}%", f.agreement_pct());
}

/// On a kernel that keeps select_idle_cpu out of line (sis-stats+noinline),
/// `--search-latency` times the kernel's own LLC scans: the probes count one call per
/// sched_domain search, the kernel's own sis_domain_search counter (schedstat, read
/// around the workload) within 0.5 %, and as many found an idle CPU as its counters say
/// (domain searches less failures) within 0.5 points; the model's calls agree too.
#[test]
fn select_idle_cpu_is_timed_on_a_noinline_kernel() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(
        "traces/rig/kernel-sis-stats+noinline/2x4/rig-2x4-hackbench-sis_util-idle-scan-tracefs",
    );
    let meta = sisreplay::bundle::read_meta(&p).unwrap();
    let capture = meta.provenance.capture().expect("a capture");
    assert!(
        capture.search_latency.idle_scan,
        "the capture says select_idle_cpu was probed"
    );
    let m = sisreplay::metrics::kernel_sis::measured(&meta)
        .unwrap()
        .counters;
    let r = replay_bundle(&p, &[]);
    let k = &r.observed.idle_scans;
    let off = (k.scans as f64 - m.domain_search as f64).abs() / m.domain_search as f64;
    assert!(
        off < 0.005,
        "{} probed calls, {} domain searches",
        k.scans,
        m.domain_search
    );
    let found_pct = 100.0 * k.found as f64 / k.scans as f64;
    let kernel_pct = 100.0 * (m.domain_search - m.failed) as f64 / m.domain_search as f64;
    assert!(
        (found_pct - kernel_pct).abs() < 0.5,
        "{found_pct} vs {kernel_pct}"
    );
    assert!(k.ns.p50 > 0 && k.ns.p99 >= k.ns.p50);
    assert_searches_close("idle-scan", kernel_counters(&r), &m, 0.005);
}

/// The 12-task periodic load on the same kernel, captured with select_idle_cpu's probes
/// (`rig.sh --probes duration`), pairs each of the kernel's calls with the wakeup it
/// served: every timed call belongs to a replayed wakeup, the kernel's successes counted
/// that way are the probes' own, and the model searches on the same wakeups. Whether each
/// search found an idle CPU agrees less than the totals do (measured: 90.1 % of the
/// paired calls, while the shares found are 21.5 and 20.9 %).
#[test]
fn select_idle_cpu_is_paired_wakeup_by_wakeup() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(
        "traces/rig/kernel-sis-stats+noinline/2x4/rig-2x4-periodic-12tasks-sis_util-idle-scan-tracefs",
    );
    let r = replay_bundle(&p, &[]);
    let probes = &r.observed.idle_scans;
    let a = kernel_fidelity(&r).idle_scan;
    assert!(probes.scans > 2000, "{probes:?}");
    assert_eq!(a.kernel_calls, probes.scans, "{a:?}");
    let paired_found = a.both_found + a.kernel_alone_found;
    let unpaired = a.kernel_calls - a.both_called;
    assert!(
        paired_found <= probes.found && probes.found <= paired_found + unpaired,
        "{a:?} {probes:?}"
    );
    assert!(
        a.both_called as f64 >= 0.99 * a.kernel_calls as f64,
        "{a:?}"
    );
    assert!(a.same_cpu <= a.both_found);
    let alike = a.both_called - a.kernel_alone_found - a.model_alone_found;
    assert!(alike as f64 >= 0.85 * a.both_called as f64, "{a:?}");
}

/// The CAS kernel on the rig: no vCPU loses capacity to RT work, and the kernel, built
/// without CONFIG_IRQ_TIME_ACCOUNTING (the bundle's meta says so), keeps no interrupt
/// pressure, so no CPU is low and the cas model places as its kernel did, as closely as
/// the plain SIS_PROP model does. Counting the trace's interrupts against capacity (as
/// for a kernel whose config is not known) makes the model turn down prev CPUs the kernel
/// took and agree less (97.2 % against 98.9 %, measured).
#[test]
fn cas_kernel_keeps_no_interrupt_pressure() {
    let b = rig(
        "kernel-sis-stats+noinline+cas/2x4",
        "rig-2x4-pingpong-sis_prop-tracefs",
    );
    let agree = |r: &ReplayResult, policy: &str| {
        let f = r
            .policies
            .iter()
            .find(|p| p.policy == policy)
            .and_then(|p| p.fidelity.as_ref())
            .unwrap();
        100.0 * f.agree as f64 / f.decisions as f64
    };
    let r = replay_bundle(&b, &["cas"]);
    assert_eq!(r.as_kernel, "cas");
    let kept = agree(&r, "cas");
    assert!(kept > 98.5, "{kept}");
    // The same trace with its config unknown: interrupts take capacity.
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(b.join("events.parquet"), dir.path().join("events.parquet")).unwrap();
    let mut meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(b.join("meta.json")).unwrap()).unwrap();
    assert_eq!(meta["irq_time_accounting"], false);
    meta.as_object_mut().unwrap().remove("irq_time_accounting");
    std::fs::write(dir.path().join("meta.json"), meta.to_string()).unwrap();
    let pressed = agree(&replay_bundle(dir.path(), &["cas"]), "cas");
    assert!(pressed < kept - 1.0, "{pressed} against {kept}");
}

/// The wakee flips the rig's tracefs hackbench captures inherited from the capture
/// process, fitted to each trace, are the values found by hand (19 under SIS_UTIL, 7
/// under NO_SIS_UTIL, each one flip past the coarse candidates' best), and they agree
/// far better than 0.
#[test]
fn flips_before_the_trace_are_fitted_to_the_trace() {
    use sisreplay::bundle::Bundle;
    use sisreplay::replay::flips_fit;
    use sisreplay::trace::EventSource;
    for (name, policy, want) in [
        ("rig-2x4-hackbench-sis_util-tracefs", "sis_util", 19),
        ("rig-2x4-hackbench-no_limit-tracefs", "no_limit", 7),
    ] {
        let mut b = Bundle::open(&rig("2x4", name)).unwrap();
        let info = b.info().clone();
        let mut events = Vec::new();
        while let Some(e) = b.next_event().unwrap() {
            events.push(e);
        }
        let f = flips_fit::fit(
            &events,
            &info,
            Some(&b.meta),
            &sisreplay::replay::ReplayOptions::default(),
            policy,
        )
        .unwrap();
        assert_eq!(f.fitted.flips, want, "{name}: {:?}", f.agreement);
        let (best, zero) = (f.agreement_at(want).unwrap(), f.agreement_at(0).unwrap());
        assert!(best > zero + 10.0, "{name}: {best} against {zero} with 0");
        // Every coarse candidate was tried, and the counts between its best's
        // neighbours, in increasing order.
        let tried: Vec<u32> = f.agreement.iter().map(|a| a.0).collect();
        assert!(flips_fit::CANDIDATES.iter().all(|c| tried.contains(c)));
        assert!(tried.len() > flips_fit::CANDIDATES.len(), "{tried:?}");
        assert!(tried.windows(2).all(|w| w[0] < w[1]), "{tried:?}");
    }
}

/// reports/kernel_state.py on one capture of traces/rig/ground-truth (with this build's
/// binary): what it prints, having checked that it succeeded.
fn kernel_state_report(capture: &str) -> String {
    let bundle = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("traces/rig/ground-truth")
        .join(capture);
    let out = std::process::Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("reports/kernel_state.py"))
        .arg(&bundle)
        .env("SISREPLAY", env!("CARGO_BIN_EXE_sisreplay"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// Against the kernel's own record: hackbench captured with the kernel's wakee flips
/// read at every select_task_rq_fair call (traces/rig/ground-truth, `rig.sh
/// --kernel-state`). With the flips before the trace fitted, on the 2x4 SIS_UTIL capture
/// replay's wakee flips are the kernel's on 98.8 % of the wakeups and wake_wide decides
/// as the kernel's inputs do on 99.1 % (98.8 % while a fork's selection counted a flip
/// for the waking before it). On the 1x2x4x2 NO_SIS_UTIL capture, 96.2 % and 99.2 %
/// (0.0 % and 90.3 % while the workload's launcher copied the flips of the wakings in
/// its own fork: the fit then took 27 flips, which kept wake_wide all but off).
#[test]
#[ignore = "needs python3 with polars (notebooks/requirements.txt) (.ci/run installs it and runs ignored tests: cargo test -- --include-ignored)"]
fn replays_wakee_flips_are_the_kernels_own() {
    for (capture, wakee, waker, alike) in [
        (
            "2x4/rig-2x4-hackbench-sis_util-kstate-tracefs",
            98.0,
            90.0,
            99.0,
        ),
        (
            "1x2x4x2/rig-1x2x4x2-hackbench-no_limit-kstate-tracefs",
            95.0,
            75.0,
            99.0,
        ),
    ] {
        let text = kernel_state_report(capture);
        let pct = |after: &str| -> f64 {
            let rest = &text[text
                .find(after)
                .unwrap_or_else(|| panic!("{after}: {text}"))
                + after.len()..];
            rest.split_whitespace().next().unwrap().parse().unwrap()
        };
        assert!(pct("wakee ") >= wakee, "{text}");
        assert!(pct("waker ") >= waker, "{text}");
        assert!(pct("decided alike: ") >= alike, "{text}");
    }
}

/// A hackbench whose 160 tasks exit across the trace, captured with the kernel's
/// nr_idle_scan read at every select_task_rq_fair call (`rig.sh --kernel-state`):
/// replay's SIS_UTIL budget is the kernel's on 94.6 % of the searches, above it on 412
/// and below on 235. Two rules of fair.c carry it: task_dead_fair takes a dead task's
/// load and utilisation off its CPU (kept as blocked load: 89.1 %, below on 860), and
/// post_init_entity_util_avg starts a new task at half its CPU's spare capacity on 6.1
/// (at 0 with the dead tasks removed: 91.5 %, above on 818). Either alone moved the
/// sis-stats kernels' runqueues scanned 3-10 % off their own counts; together they are
/// within 2 % (tests of the SIS counters, above).
#[test]
#[ignore = "needs python3 with polars (notebooks/requirements.txt) (.ci/run installs it and runs ignored tests: cargo test -- --include-ignored)"]
fn sis_utils_budget_is_the_kernels_on_a_hackbench_whose_tasks_exit() {
    let text = kernel_state_report("2x4/rig-2x4-hackbench-sis_util-kstate-exits-tracefs");
    let line = text
        .lines()
        .find(|l| l.contains("SIS_UTIL's budget the kernel's nr_idle_scan on "))
        .unwrap_or_else(|| panic!("no budget line: {text}"));
    let after = |phrase: &str| -> f64 {
        let rest = &line[line.find(phrase).unwrap() + phrase.len()..];
        rest.split([',', ' ', ';', '('])
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    assert!(after("nr_idle_scan on ") >= 93.5, "{line}");
    let (above, below) = (after("above the kernel's on "), after("below on "));
    assert!(above < 600.0 && below < 600.0, "{line}");
}

/// The woken task's util_avg as the kernel left it at each sleep, against PELT run over
/// the trace's own run and sleep times (reports/kernel_state.py): with the guest's
/// scheduler clock stable (`tsc=reliable`, the `-tsc` captures) the kernel's value follows
/// the trace's clock, within 10 on 96 % of the 12-task load's runs that were neither
/// preempted nor migrated (median difference -0.1); a wakeup migration leaves the kernel's
/// above, by the decay it skips between the old CPU's last update and the wakeup. The
/// capture without the fields gets no such line.
#[test]
#[ignore = "needs python3 with polars (notebooks/requirements.txt) (.ci/run installs it and runs ignored tests: cargo test -- --include-ignored)"]
fn the_kernels_task_util_follows_the_trace_clock_when_the_guest_keeps_a_stable_one() {
    let text = kernel_state_report("2x4/rig-2x4-periodic-12tasks-sis_util-kstate-tsc-tracefs");
    // "    CLASS: N runs, kernel minus PELT median M, within 10 on P %"
    let class = |name: &str| -> (f64, f64) {
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{name}:")))
            .unwrap_or_else(|| panic!("no {name} line: {text}"));
        let num = |after: &str| -> f64 {
            let rest = &line[line.find(after).unwrap() + after.len()..];
            rest.split([',', ' ']).next().unwrap().parse().unwrap()
        };
        (num("median "), num("within 10 on "))
    };
    let (median, within) = class("not preempted");
    assert!(median.abs() <= 1.0 && within >= 90.0, "{text}");
    let (median, _) = class("not preempted, migrated");
    assert!(median > 2.0, "{text}");
    let old = kernel_state_report("2x4/rig-2x4-periodic-12tasks-sis_util-kstate-tracefs");
    assert!(!old.contains("kernel minus PELT"), "{old}");
}

/// The kernel's own record of its periodic balances (a find_busiest_group probe beside
/// the select_task_rq_fair one, `rig.sh --kernel-state`) on the 12-task load: the LLC's
/// balances run in a SCHED softirq of the balancing CPU itself (1,167 of 1,178; 11 on
/// behalf of a tickless one) and none sooner than the interval replay takes; SIS_UTIL's
/// formula over what each balance read is the nr_idle_scan the next call sees (1,148 of
/// 1,178), so the probe reads what update_idle_cpu_scan reads. Balancing where that
/// record puts the balances, replay's budget is the kernel's on 67.2 % of the searches
/// (61.1 % while idle groups were also balanced in other CPUs' softirqs and a wakeup
/// queued in the tick's own interrupt made the CPU busy to its balance).
#[test]
#[ignore = "needs python3 with polars (notebooks/requirements.txt) (.ci/run installs it and runs ignored tests: cargo test -- --include-ignored)"]
fn the_llc_balances_run_where_the_kernels_record_puts_them() {
    let text =
        kernel_state_report("2x4/rig-2x4-periodic-12tasks-sis_util-kstate-balance-tsc-tracefs");
    let line_with = |phrase: &str| -> &str {
        text.lines()
            .find(|l| l.contains(phrase))
            .unwrap_or_else(|| panic!("no line with {phrase:?}: {text}"))
    };
    // The number right after `phrase` in `line`, and the one right before it.
    let after = |line: &str, phrase: &str| -> f64 {
        let rest = &line[line.find(phrase).unwrap() + phrase.len()..];
        rest.split([',', ' ', ';']).next().unwrap().parse().unwrap()
    };
    let before = |line: &str, phrase: &str| -> f64 {
        let head = line[..line.find(phrase).unwrap()].trim_end();
        head.rsplit(' ').next().unwrap().parse().unwrap()
    };
    let line = line_with("LLC balances in the trace: ");
    let balances = after(line, "in the trace: ");
    assert!(balances >= 1000.0, "{line}");
    assert!(after(line, "CPU itself (") <= 0.05 * balances, "{line}");
    assert_eq!(before(line, "% came sooner"), 0.0, "{line}");
    let (valid, checked) = (
        after(line, "nr_idle_scan on "),
        before(line, "; of the trace"),
    );
    assert!(valid >= 0.95 * checked && checked >= 1000.0, "{line}");
    let budget = line_with("SIS_UTIL's budget the kernel's nr_idle_scan on ");
    assert!(after(budget, "nr_idle_scan on ") >= 65.0, "{budget}");
}
