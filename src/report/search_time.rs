//! Time per idle search in ns log2 buckets: each policy's modelled time and, when the
//! trace carries the `capture --search-latency` probes, select_task_rq_fair as the kernel
//! measured it. µs buckets put every search on a small LLC into [0] or [1]; ns buckets
//! tell a two-probe search from a four-probe one.

use serde::Serialize;

use crate::metrics::calibration::Fit;
use crate::metrics::{IdleScanAgreement, Log2Hist};
use crate::replay::ReplayResult;

/// A fit of the measured time to the runqueues probed explains too little below this
/// r² to be printed as the search's cost.
pub const FIT_MIN_R2: f64 = 0.5;

/// One trace's search times, ns in log2 buckets (bucket i ≥ 1 holds [2^(i−1), 2^i)).
#[derive(Debug, Clone, Default, Serialize)]
pub struct SearchTime {
    /// Per policy of the report, in the arms' order: (policy, modelled time of each
    /// search that probed a runqueue).
    pub modelled_ns: Vec<(String, Log2Hist)>,
    /// The kernel's measured select_task_rq_fair time per wakeup; None without probes.
    pub measured_ns: Option<Log2Hist>,
}

impl SearchTime {
    /// The search times of the policies named in `arms` (as given, aliases included).
    pub fn of(replay: &ReplayResult, arms: &[String]) -> SearchTime {
        let tm = &replay.time_model;
        let modelled_ns = replay
            .policies
            .iter()
            .filter(|p| arms.contains(&p.policy))
            .map(|p| {
                // The model wakeup::sis counts with: a search that probes n ≥ 1 runqueues
                // costs entry + n·probe; one that probes none is no search.
                let mut h = Log2Hist::default();
                for (n, &count) in p.probed.iter().enumerate().skip(1) {
                    if count > 0 {
                        h.add_n(tm.entry_ns + n as u64 * tm.probe_ns, count);
                    }
                }
                (p.policy.clone(), h)
            })
            .collect();
        let measured = &replay.observed.search_latency_ns;
        SearchTime {
            modelled_ns,
            measured_ns: measured
                .buckets
                .iter()
                .any(|&n| n > 0)
                .then(|| measured.clone()),
        }
    }

    /// The buckets any histogram uses, from the first non-empty to the last; None when
    /// every histogram is empty.
    pub fn bucket_range(&self) -> Option<std::ops::RangeInclusive<usize>> {
        let hists = self
            .modelled_ns
            .iter()
            .map(|(_, h)| h)
            .chain(self.measured_ns.as_ref());
        let (mut lo, mut hi) = (usize::MAX, None);
        for h in hists {
            if let Some(first) = h.buckets.iter().position(|&n| n > 0) {
                lo = lo.min(first);
            }
            if let Some(last) = h.buckets.iter().rposition(|&n| n > 0) {
                hi = hi.max(Some(last));
            }
        }
        hi.map(|hi| lo..=hi)
    }
}

/// A bucket by its lower bound, short enough for a dense axis: `0`, `1`, `512`, `1K`,
/// `2M` (bucket i ≥ 1 holds [2^(i−1), 2^i)).
pub fn bucket_floor(i: usize) -> String {
    let v: u64 = if i == 0 { 0 } else { 1 << (i - 1) };
    match v {
        v if v >= 1 << 20 => format!("{}M", v >> 20),
        v if v >= 1 << 10 => format!("{}K", v >> 10),
        v => v.to_string(),
    }
}

/// What the measured select_task_rq_fair time says about the cost per runqueue: the
/// fitted line when it explains at least half of the variance, else that the time does
/// not follow the runqueues probed.
pub fn fit_sentence(f: &Fit) -> String {
    if f.r2 >= FIT_MIN_R2 {
        format!(
            "fits {:.0} ns + {:.0} ns per runqueue probed (r² {:.2}, {} wakeups)",
            f.entry_ns, f.probe_ns, f.r2, f.samples
        )
    } else {
        format!(
            "does not follow the runqueues probed on this trace (a line through them \
             explains {:.0} % of its variance over {} wakeups), so no cost per runqueue is \
             derived from it",
            100.0 * f.r2.max(0.0),
            f.samples
        )
    }
}

/// The kernel's own LLC scans (select_idle_cpu's probes) beside the kernel policy's
/// modelled ones, in one sentence; None when the trace has no such probes. The model
/// calls select_idle_cpu once per domain search; one that probes n ≥ 1 runqueues costs
/// entry + n·probe ns, one that returns at once (SIS_UTIL's budget of 0) nothing.
pub fn idle_scan_sentence(replay: &ReplayResult) -> Option<String> {
    let k = &replay.observed.idle_scans;
    if k.is_empty() {
        return None;
    }
    let pct = |a: u64, b: u64| 100.0 * a as f64 / b.max(1) as f64;
    let mut s = format!(
        "measured select_idle_cpu: {} calls, {:.1} % found an idle CPU, p50 {} ns, p99 {} ns",
        k.scans,
        pct(k.found, k.scans),
        k.ns.p50,
        k.ns.p99
    );
    let model = replay
        .policies
        .iter()
        .find(|p| p.policy == replay.as_kernel);
    if let Some(p) = model {
        let tm = &replay.time_model;
        let calls = p.counters.domain_search;
        let scans: u64 = p.probed.iter().skip(1).sum();
        let at = |q: f64| {
            let rank = ((q * scans as f64).ceil() as u64).max(1);
            let mut seen = 0;
            for (n, &c) in p.probed.iter().enumerate().skip(1) {
                seen += c;
                if seen >= rank {
                    return tm.entry_ns + n as u64 * tm.probe_ns;
                }
            }
            0
        };
        s += &format!(
            "; {}'s model: {calls} calls, {:.1} % found one, {scans} probed a runqueue",
            p.policy,
            pct(calls.saturating_sub(p.counters.failed), calls),
        );
        if scans > 0 {
            s += &format!(" (p50 {} ns, p99 {} ns)", at(0.5), at(0.99));
        }
        if let Some(a) = p.fidelity.as_ref().map(|f| &f.idle_scan) {
            s += &per_wakeup_clause(a);
        }
    }
    Some(s)
}

/// The kernel's select_idle_cpu against the model's, wakeup by wakeup ("" when the
/// trace's wakeups could not be paired with its calls).
fn per_wakeup_clause(a: &IdleScanAgreement) -> String {
    if a.both_called == 0 {
        return String::new();
    }
    let alike = a.both_called - a.kernel_alone_found - a.model_alone_found;
    format!(
        "; wakeup by wakeup, both called it on {} of the kernel's {} calls (the model \
         called it alone on {}) and found an idle CPU alike on {:.1} % of those (the kernel alone \
         {}, the model alone {}; the same CPU on {} of the {} both found)",
        a.both_called,
        a.kernel_calls,
        a.model_calls - a.both_called,
        100.0 * alike as f64 / a.both_called as f64,
        a.kernel_alone_found,
        a.model_alone_found,
        a.same_cpu,
        a.both_found
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fit_that_explains_nothing_is_not_printed_as_a_cost() {
        let mut f = Fit {
            samples: 100,
            entry_ns: 37487.0,
            probe_ns: -10716.0,
            r2: 0.003,
        };
        let s = fit_sentence(&f);
        assert!(
            s.contains("does not follow") && !s.contains("-10716"),
            "{s}"
        );
        f.r2 = 0.8;
        assert!(fit_sentence(&f).contains("37487 ns + -10716 ns per runqueue"));
    }

    #[test]
    fn buckets_are_named_by_their_floor() {
        let names: Vec<String> = [0, 1, 2, 10, 11, 21].map(bucket_floor).to_vec();
        assert_eq!(names, ["0", "1", "2", "512", "1K", "1M"]);
    }
}
