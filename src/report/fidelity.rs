//! The fidelity table: for each trace, the traced kernel's policy replayed over it and
//! how often it chose the kernel's CPU, beside the baselines (always prev, always the
//! waker's CPU), by tenth of the trace, by path and by the step that chose the target,
//! with the cross-LLC placements recorded and predicted, what the machine state needed
//! mending and what the select_task_rq_fair probes measured.

use std::fmt::Write;

use crate::replay::ReplayResult;

/// One line per trace, then its paths, within 80 columns.
pub fn table(rows: &[(String, ReplayResult)]) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{:<28} {:>9} {:>7} {:>7} {:>7} {:>13}",
        "trace, policy as kernel", "wakeups", "agree%", "sameLLC", "IPI%", "xLLC rec/pred"
    );
    for (name, r) in rows {
        let Some(p) = r.policies.iter().find(|p| p.fidelity.is_some()) else {
            continue;
        };
        let f = p.fidelity.as_ref().expect("found above");
        let pct = |a: u64, b: u64| 100.0 * a as f64 / b.max(1) as f64;
        let _ = writeln!(o, "{name}");
        let _ = writeln!(
            o,
            "  {:<26} {:>9} {:>7.2} {:>7.2} {:>7.2} {:>13}",
            r.as_kernel,
            f.decisions,
            f.agreement_pct(),
            pct(f.same_llc_agree, f.decisions),
            pct(f.ipi.1, f.ipi.0),
            format!("{}/{}", f.recorded_cross_llc, f.predicted_cross_llc)
        );
        let _ = writeln!(
            o,
            "    baselines: always prev {:.2}%, always the waker's CPU {:.2}%",
            pct(f.always_prev, f.decisions),
            pct(f.always_waker, f.decisions)
        );
        if let Some(s) = f.busy_by_trace_sentence() {
            let _ = writeln!(o, "{}", super::text::fit(&format!("    {s}")));
        }
        // A tenth more than 3 points under the trace's agreement is marked: drift.
        let tenths: Vec<String> = f
            .by_decile
            .iter()
            .map(|&(n, a)| match n {
                0 => "-".to_string(),
                _ if pct(a, n) < f.agreement_pct() - 3.0 => format!("{:.1}!", pct(a, n)),
                _ => format!("{:.1}", pct(a, n)),
            })
            .collect();
        let _ = writeln!(
            o,
            "{}",
            super::text::fit(&format!("    by tenth: {}", tenths.join(" ")))
        );
        let paths: Vec<String> = f
            .by_path
            .iter()
            .map(|(k, (n, a))| format!("{k} {:.1}% of {n}", pct(*a, *n)))
            .collect();
        let _ = writeln!(
            o,
            "{}",
            super::text::fit(&format!("    by path: {}", paths.join(", ")))
        );
        let stages: Vec<String> = f
            .by_affine
            .iter()
            .map(|(k, (n, a))| format!("{k} {:.1}% of {n}", pct(*a, *n)))
            .collect();
        let _ = writeln!(
            o,
            "{}",
            super::text::fit(&format!("    by target step: {}", stages.join(", ")))
        );
        if let Some(s) = crate::replay::flips_fit::sentence(r) {
            let _ = writeln!(o, "{}", super::text::fit(&format!("    {s}")));
        }
        let rq = &f.repairs.runqueues;
        let ties = match &f.repairs.ties {
            Some(t) => format!(
                "{} same-stamp groups ({} re-ordered, {} events left)",
                t.groups, t.reordered, t.inconsistent_left
            ),
            None => "same-stamp groups not re-ordered".into(),
        };
        let _ = writeln!(
            o,
            "{}",
            super::text::fit(&format!(
                "    state repairs: {ties}; runqueues: {} moved, {} dropped at idle",
                rq.moved, rq.dropped_at_idle
            ))
        );
        let s = &r.skipped;
        let mut facts = format!(
            "    not replayed: {} queued/no selection, {} unmatched",
            s.on_rq + s.no_selection + s.delayed_dequeue + s.pinned,
            s.no_wakeup
        );
        if r.probed_selections > 0 {
            let _ = write!(facts, "; sync from probes");
        }
        let _ = writeln!(o, "{facts}");
        let sl = &r.observed.search_latency;
        if !r.observed.search_latency_us.buckets.is_empty() {
            let _ = writeln!(
                o,
                "    measured select_task_rq_fair: p50 {:.1} us, p99 {:.1} us",
                sl.p50 as f64 / 1e3,
                sl.p99 as f64 / 1e3
            );
        }
        if let Some(s) = super::search_time::idle_scan_sentence(r) {
            let _ = writeln!(o, "{}", super::text::fit(&format!("    {s}")));
        }
        if let Some(fit) = &r.search_fit {
            let _ = writeln!(
                o,
                "{}",
                super::text::fit(&format!(
                    "    the measured time {}",
                    super::search_time::fit_sentence(fit)
                ))
            );
        }
    }
    o
}
