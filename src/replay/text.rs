//! The replay result as text, within 80 columns.

use std::fmt::Write;
use std::path::Path;

use super::ReplayResult;

/// The replay of `input` as text: wakings replayed and skipped, probe measurements, per
/// policy the SIS statistics, search time, placements and rq locks, what the kernel
/// recorded, and the fidelity of the traced kernel's model.
pub fn summary(input: &Path, r: &ReplayResult) -> String {
    let mut o = String::new();
    header(&mut o, input, r);
    let _ = writeln!(o);
    efficiency_table(&mut o, r);
    let _ = writeln!(o);
    placements_table(&mut o, r);
    fidelity(&mut o, r);
    for (policy, steps) in &r.explained {
        let _ = writeln!(o, "\n{policy}:");
        for s in steps {
            let _ = writeln!(o, "  {s}");
        }
    }
    o
}

/// Several traces' replays, a block per trace within 80 columns: per policy the
/// wakeups replayed, se_eff and success (%), runqueues scanned, modelled search time
/// (ms), cross-LLC placements, and for the traced kernel's own policy its agreement.
pub fn fleet(results: &[(std::path::PathBuf, ReplayResult)]) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{:<20} {:>9} {:>7} {:>8} {:>9} {:>8} {:>7} {:>6}",
        "trace / policy",
        "replayed",
        "se_eff%",
        "success%",
        "scanned",
        "search ms",
        "xLLC",
        "agree%"
    );
    for (input, r) in results {
        let _ = writeln!(o, "{}", input.display());
        for p in &r.policies {
            let agree = p
                .fidelity
                .as_ref()
                .map_or(String::new(), |f| format!("{:.2}", f.agreement_pct()));
            let _ = writeln!(
                o,
                "  {:<18} {:>9} {:>7.2} {:>8.2} {:>9} {:>8.1} {:>7} {:>6}",
                p.policy,
                r.replayed,
                p.derived.se_eff,
                p.derived.success_rate,
                p.counters.scanned,
                p.search_ns_total as f64 / 1e6,
                p.placements.cross_llc,
                agree
            );
        }
    }
    o
}

/// The trace, its kernel and machine, what was replayed of its wakings, and the
/// select_task_rq_fair probes' measurements where the trace has them.
fn header(o: &mut String, input: &Path, r: &ReplayResult) {
    let _ = writeln!(o, "{}", input.display());
    let _ = writeln!(
        o,
        "kernel {} ({} as kernel), {} CPUs in {} LLC{}{}",
        r.kernel_release.as_deref().unwrap_or("unknown"),
        r.as_kernel,
        r.nr_cpus,
        r.llcs,
        if r.llcs == 1 { "" } else { "s" },
        if r.topology_assumed {
            " (topology assumed)"
        } else {
            ""
        }
    );
    let _ = writeln!(
        o,
        "wakings {}: replayed {}, skipped {} on_rq, {} pinned, {} delayed dequeue, {} \
         unmatched; {} IPI",
        r.wakings,
        r.replayed,
        r.skipped.on_rq + r.skipped.no_selection,
        r.skipped.pinned,
        r.skipped.delayed_dequeue,
        r.skipped.no_wakeup,
        r.ipi_wakeups
    );
    if r.probed_selections > 0 {
        probes(o, r);
    }
}

/// What the select_task_rq_fair probes measured, and the time model fitted to it.
fn probes(o: &mut String, r: &ReplayResult) {
    let sl = &r.observed.search_latency;
    let _ = writeln!(
        o,
        "select_task_rq_fair probes: {} selections (sync from wake_flags), {} wakings \
         without one",
        r.probed_selections, r.skipped.no_selection,
    );
    if !r.observed.search_latency_us.buckets.is_empty() {
        let _ = writeln!(
            o,
            "  measured select_task_rq_fair us: p50 {:.1}  p90 {:.1}  p99 {:.1}",
            sl.p50 as f64 / 1e3,
            sl.p90 as f64 / 1e3,
            sl.p99 as f64 / 1e3
        );
    }
    if let Some(s) = crate::report::search_time::idle_scan_sentence(r) {
        let _ = writeln!(o, "{}", crate::report::text::fit(&format!("  {s}")));
    }
    if let Some(f) = &r.search_fit {
        let _ = writeln!(
            o,
            "{}",
            crate::report::text::fit(&format!(
                "  the measured time over agreeing wakeups {}",
                crate::report::search_time::fit_sentence(f)
            ))
        );
    }
}

/// Per policy: the SIS efficiencies, runqueues scanned and modelled search time.
fn efficiency_table(o: &mut String, r: &ReplayResult) {
    let _ = writeln!(
        o,
        "{:<20} {:>8} {:>8} {:>8} {:>8} {:>9} {:>9}",
        "policy", "se_eff%", "dom_eff%", "fast%", "success%", "scanned", "search_us"
    );
    for p in &r.policies {
        let _ = writeln!(
            o,
            "{:<20} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>9} {:>9.0}",
            truncate(&p.policy, 20),
            p.derived.se_eff,
            p.derived.dom_eff,
            p.derived.fast_rate,
            p.derived.success_rate,
            p.counters.scanned,
            p.search_ns_total as f64 / 1000.0
        );
    }
}

/// Per policy, then as the kernel recorded them: where the wakeups went, with the
/// recorded waking-to-running latency.
fn placements_table(o: &mut String, r: &ReplayResult) {
    let _ = writeln!(
        o,
        "{:<20} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "placements", "same_cpu", "same_llc", "cross_llc", "stacked", "rq_locks"
    );
    for p in &r.policies {
        let _ = writeln!(
            o,
            "{:<20} {:>9} {:>9} {:>9} {:>9} {:>9}",
            truncate(&p.policy, 20),
            p.placements.same_cpu,
            p.placements.same_llc,
            p.placements.cross_llc + p.placements.cross_numa,
            p.stacked_with_idle,
            p.remote_rq_locks
        );
    }
    let ob = &r.observed;
    let _ = writeln!(
        o,
        "{:<20} {:>9} {:>9} {:>9}",
        "recorded (kernel)",
        ob.placements.same_cpu,
        ob.placements.same_llc,
        ob.placements.cross_llc + ob.placements.cross_numa
    );
    let _ = writeln!(
        o,
        "recorded waking->running latency, us: p50 {:.1}  p90 {:.1}  p99 {:.1}  p99.9 {:.1}",
        ob.latency.p50 as f64 / 1e3,
        ob.latency.p90 as f64 / 1e3,
        ob.latency.p99 as f64 / 1e3,
        ob.latency.p99_9 as f64 / 1e3
    );
}

/// For the policy compared with the kernel: how often it picked the kernel's CPU, by
/// path, via IPI, and by LLC.
fn fidelity(o: &mut String, r: &ReplayResult) {
    for p in &r.policies {
        if let Some(f) = &p.fidelity {
            let _ = writeln!(o);
            let _ = writeln!(
                o,
                "fidelity of {}: {:.2}% of {} replayed wakeups on the kernel's CPU",
                p.policy,
                f.agreement_pct(),
                f.decisions
            );
            for (path, (n, a)) in &f.by_path {
                let _ = writeln!(
                    o,
                    "  path {:<8} {:>8} decisions  {:>7.2}% agree",
                    path,
                    n,
                    100.0 * *a as f64 / (*n).max(1) as f64
                );
            }
            let _ = writeln!(
                o,
                "  via IPI  {:>8} decisions  {:>7.2}% agree",
                f.ipi.0,
                100.0 * f.ipi.1 as f64 / f.ipi.0.max(1) as f64
            );
            let _ = writeln!(
                o,
                "  same LLC as the kernel's choice {:.2}%; cross-LLC recorded {}, predicted {}",
                100.0 * f.same_llc_agree as f64 / f.decisions.max(1) as f64,
                f.recorded_cross_llc,
                f.predicted_cross_llc
            );
            if let Some(s) = f.busy_by_trace_sentence() {
                let _ = writeln!(o, "{}", crate::report::text::fit(&format!("  {s}")));
            }
        }
    }
    if let Some(s) = super::flips_fit::sentence(r) {
        let _ = writeln!(o, "{}", crate::report::text::fit(&format!("  {s}")));
    }
}

fn truncate(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}
