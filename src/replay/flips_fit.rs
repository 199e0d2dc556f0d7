//! The wakee flips a trace's tasks had before it began, fitted to the trace.
//!
//! wake_wide reads each task's wakee_flips, which a task forked inherits from its parent;
//! a trace that starts after the workload's ancestors ran shows none of them, and a
//! replay or re-run that takes them as 0 turns wake_wide off where the kernel had it on
//! (the rig's hackbench captures: 66–70 % agreement with 0, 94–98 % with the right
//! value). The value is found as a replay finds it by hand: replayed under the traced
//! kernel's own policy, the first half of the trace agrees best with the kernel's
//! choices at one value of the candidates; the second half is left to judge it.

use crate::bundle::Meta;
use crate::policy::PolicySpec;
use crate::trace::stream::VecSource;
use crate::trace::{Event, SourceInfo};

use super::{replay, ReplayError, ReplayOptions};

/// The values tried, from none to well past what wake_wide's threshold needs on an
/// LLC of 16 (it compares the flips with the LLC size).
pub const CANDIDATES: &[u32] = &[0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32];

/// The fitted value and what each candidate gave.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FlipsFit {
    /// The candidate that agreed best on the first half (the least of equals).
    pub flips: u32,
    /// Each candidate and its agreement (%) on the first half.
    pub agreement: Vec<(u32, f64)>,
}

impl FlipsFit {
    /// The agreement (%) of candidate `flips`.
    pub fn agreement_at(&self, flips: u32) -> Option<f64> {
        self.agreement
            .iter()
            .find(|(f, _)| *f == flips)
            .map(|&(_, a)| a)
    }
}

/// Fits the flips before the trace to the first half of `events` (in time order),
/// replayed under `policy`, the traced kernel's.
pub fn fit(
    events: &[Event],
    info: &SourceInfo,
    meta: &Meta,
    policy: &str,
) -> Result<FlipsFit, ReplayError> {
    let (Some(first), Some(last)) = (events.first(), events.last()) else {
        return Ok(FlipsFit {
            flips: 0,
            agreement: Vec::new(),
        });
    };
    let mid = first.ts + (last.ts - first.ts) / 2;
    let half = events.partition_point(|e| e.ts < mid);
    let spec = PolicySpec::parse(policy).map_err(ReplayError::Policy)?;
    let mut agreement = Vec::with_capacity(CANDIDATES.len());
    for &flips in CANDIDATES {
        let opts = ReplayOptions {
            policies: vec![spec.clone()],
            as_kernel: Some(policy.to_string()),
            flips_before_trace: flips,
            windows: 1,
            ..ReplayOptions::default()
        };
        let mut src = VecSource::new(info.clone(), events[..half].to_vec());
        let r = replay(&mut src, Some(meta), opts)?;
        let pct = r
            .policies
            .iter()
            .find_map(|p| p.fidelity.as_ref())
            .map_or(0.0, |f| f.agreement_pct());
        agreement.push((flips, pct));
    }
    let best = agreement
        .iter()
        .fold((0, f64::MIN), |b, &(f, a)| if a > b.1 { (f, a) } else { b });
    Ok(FlipsFit {
        flips: best.0,
        agreement,
    })
}
