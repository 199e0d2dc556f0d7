//! The wakee flips a trace's tasks had before it began, fitted to the trace.
//!
//! wake_wide reads each task's wakee_flips, which a task forked inherits from its parent;
//! a trace that starts after the workload's ancestors ran shows none of them, and a
//! replay or re-run that takes them as 0 turns wake_wide off where the kernel had it on
//! (the rig's hackbench captures: 72–74 % agreement with 0, 94–98 % with the right
//! value). The value is found as one finds it by hand: the trace replayed under the
//! traced kernel's own policy with each candidate, the agreement with the kernel's
//! choices compared. The fewest flips within one standard error of the best agreement
//! are taken: one value stands for the whole trace, and a slightly better fit of part of
//! it is no reason to assume more (fitted to its first half alone, a 6.12 capture took 6
//! for 0.5 points there and lost 40 points on the second half).
//!
//! The count is not all: record_wakee halves a waker's flips once a second, and when
//! the launcher of a workload last did so before the trace decides which of the tasks
//! it forks inherit the count before a halving and which after. So the age of the last
//! halving is fitted next, for the count found (none unless another age is better by
//! more than a standard error), and the count once more at that age. A rig capture on
//! a kernel with CAS agrees 85.4 % whatever the count, 96.1 % with the age fitted.
//! Searched one after the other from the count best as first seen, the two can stop
//! where neither alone improves, so the same descent runs again from the count best
//! over a coarse grid of ages, and the better end is taken.

use crate::bundle::Meta;
use crate::policy::PolicySpec;
use crate::state::flips::BeforeTrace;
use crate::trace::stream::SliceSource;
use crate::trace::{Event, EventSource, SourceInfo};

use super::{replay, ReplayError, ReplayOptions};

/// The most events a fit holds: it keeps them in memory and replays them once per
/// candidate, so a longer trace is fitted on its first this many (about 100,000
/// wakeups; the rig's captures fit whole).
pub const MAX_EVENTS: usize = 500_000;

/// The values tried, from none to well past what wake_wide's threshold needs on an
/// LLC of 16 (it compares the flips with the LLC size); a larger LLC adds its half, its
/// size, and one and a half and twice its size.
pub const CANDIDATES: &[u32] = &[0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32];

/// The candidates for a machine whose largest LLC has `llc` CPUs, in increasing order.
pub fn candidates(llc: u32) -> Vec<u32> {
    let mut c = CANDIDATES.to_vec();
    c.extend(
        [llc / 2, llc, llc * 3 / 2, llc * 2]
            .into_iter()
            .filter(|&v| v > 32),
    );
    c.sort_unstable();
    c.dedup();
    c
}

/// The most counts tried on each side of a coarse candidate: every one between it and
/// its neighbour on a small LLC, evenly spaced past that.
const MAX_BETWEEN: u32 = 8;

/// The counts between `flips`'s neighbours in `coarse` (increasing, holding `flips`),
/// none of them in `coarse`: wake_wide compares a wakee's flips with the waker's over the
/// LLC size, so one flip decides the wakeups of a whole trace near that edge (the rig's
/// 2x4 SIS_UTIL hackbench: 95.96 % agreement with 16, 97.52 % with 19, 93.83 % with 24).
pub fn between(flips: u32, coarse: &[u32]) -> Vec<u32> {
    let Some(i) = coarse.iter().position(|&c| c == flips) else {
        return Vec::new();
    };
    let lo = if i == 0 { flips } else { coarse[i - 1] };
    let hi = coarse.get(i + 1).copied().unwrap_or(flips);
    let spaced = |from: u32, to: u32| {
        let step = ((to - from) / MAX_BETWEEN).max(1) as usize;
        (from + 1..to).step_by(step)
    };
    spaced(lo, flips)
        .chain(spaced(flips, hi))
        .filter(|v| !coarse.contains(v))
        .collect()
}

/// The ages tried for the last halving (ns before a task is first seen): every 50 ms
/// of record_wakee's one-second period, and finer where the halving falls in the first
/// 40 ms after the task is first seen. Where a halving falls against the launcher's
/// forks moves the flips of every task forked between; on the rig's captures the
/// agreement steps at single ages (a 6.12 capture: 88.3 % up to 700 ms, 94.0 % at 800
/// and 850 ms, 89.3 % at 900 ms). A capture process starts its threads and forks the
/// workload within a few tens of ms of its first event, so a halving there splits what
/// the workload inherits at a finer grain: a 2x4 NO_SIS_UTIL hackbench capture agrees
/// 91.2 % at every age of the 50-ms grid and 94.6 % with the halving 10–15 ms after the
/// capture process is first seen.
pub const AGES_NS: [u64; 31] = {
    const MS: u64 = 1_000_000;
    // ms after the task is first seen at which the halving falls, past the 50-ms grid.
    const SOON_MS: [u64; 11] = [40, 30, 25, 20, 15, 12, 10, 8, 6, 4, 2];
    let mut a = [0u64; 31];
    let mut i = 0;
    while i < 20 {
        a[i] = i as u64 * 50 * MS;
        i += 1;
    }
    while i < 31 {
        a[i] = (1000 - SOON_MS[i - 20]) * MS;
        i += 1;
    }
    a
};

/// The ages at which every coarse count is tried before either is fitted alone (ns
/// before a task is first seen), each also in AGES_NS.
pub const COARSE_AGES_NS: [u64; 3] = [300_000_000, 600_000_000, 900_000_000];

/// The fitted value and what each candidate gave.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FlipsFit {
    /// The flips, and the age of their last halving, taken.
    pub fitted: BeforeTrace,
    /// Each count of flips tried, halved as first seen, and its agreement (%).
    pub agreement: Vec<(u32, f64)>,
    /// Each count tried at each of COARSE_AGES_NS: (age ns, flips, agreement).
    pub age_count_agreement: Vec<(u64, u32, f64)>,
    /// Each age tried (ns) with the count fitted first, and its agreement; empty when
    /// the count made no difference.
    pub age_agreement: Vec<(u64, f64)>,
    /// Each count tried again at the age fitted, when that is not 0.
    pub aged_agreement: Vec<(u32, f64)>,
    /// The wakeups each candidate was judged on.
    pub decisions: u64,
}

impl FlipsFit {
    /// One line for a reader: the value, and how well it and none agreed with the kernel
    /// on the events it was fitted to; None when no wakeup was there to fit.
    pub fn describe(&self) -> Option<String> {
        if self.decisions == 0 {
            return None;
        }
        let age = match self.fitted.halved_ago_ns {
            0 => String::new(),
            ns => format!(
                ", last halved {} ms before each task is first seen",
                ns as f64 / 1e6
            ),
        };
        Some(format!(
            "wakee flips before the trace: {}{age}, fitted to it ({:.2} % agree with them, \
             {:.2} % with none, over {} wakeups)",
            self.fitted.flips,
            self.fitted_agreement(),
            self.agreement_at(0).unwrap_or(0.0),
            self.decisions
        ))
    }

    /// The agreement (%) of candidate `flips`, halved as first seen.
    pub fn agreement_at(&self, flips: u32) -> Option<f64> {
        find(&self.agreement, flips)
    }

    /// The agreement (%) of the value taken.
    pub fn fitted_agreement(&self) -> f64 {
        let list = match self.fitted.halved_ago_ns {
            0 => &self.agreement,
            _ => &self.aged_agreement,
        };
        find(list, self.fitted.flips).unwrap_or(0.0)
    }
}

fn find<T: PartialEq>(list: &[(T, f64)], key: T) -> Option<f64> {
    list.iter().find(|(k, _)| *k == key).map(|&(_, a)| a)
}

/// Fits the flips before the trace to what `src` reads, at most MAX_EVENTS events,
/// replayed with `settings`; `src` is left part-read when it holds more.
pub fn fit_source(
    src: &mut dyn EventSource,
    meta: Option<&Meta>,
    settings: &ReplayOptions,
    policy: &str,
) -> Result<FlipsFit, ReplayError> {
    // The machine as the replay sizes it, before reading (a text reader learns CPUs
    // as it goes).
    let info = src.info().clone();
    let mut events = Vec::new();
    while events.len() < MAX_EVENTS && src.next_batch(&mut events, 4096)? > 0 {}
    events.truncate(MAX_EVENTS);
    fit(&events, &info, meta, settings, policy)
}

/// Fits the flips before the trace to `events` (in time order, from the trace's
/// start), replayed with `settings` under `policy`, the traced kernel's.
pub fn fit(
    events: &[Event],
    info: &SourceInfo,
    meta: Option<&Meta>,
    settings: &ReplayOptions,
    policy: &str,
) -> Result<FlipsFit, ReplayError> {
    use rayon::prelude::*;
    let spec = PolicySpec::parse(policy).map_err(ReplayError::Policy)?;
    let nr_cpus = meta.map_or(info.nr_cpus.unwrap_or(1), |m| m.nr_cpus);
    let topo = match meta {
        Some(m) => crate::state::Topo::new(&m.topology, nr_cpus),
        None => crate::state::Topo::new(&crate::topology::Topology::flat(nr_cpus), nr_cpus),
    };
    let llc = topo
        .llc_cpus
        .values()
        .map(|c| c.len() as u32)
        .max()
        .unwrap_or(1);
    let candidates = candidates(llc);
    // The replay's own settings (ReplayOptions holds its output sinks, not Sync).
    let (time, lock_hold_ns, delayed_dequeue_ns) = (
        settings.time,
        settings.lock_hold_ns,
        settings.delayed_dequeue_ns,
    );
    // Each candidate's agreement and the wakeups it was judged on.
    let judge = |before: BeforeTrace| -> Result<(f64, u64), ReplayError> {
        let opts = ReplayOptions {
            policies: vec![spec.clone()],
            as_kernel: Some(policy.to_string()),
            flips_before_trace: before,
            windows: 1,
            time,
            lock_hold_ns,
            delayed_dequeue_ns,
            ..ReplayOptions::default()
        };
        let mut src = SliceSource::new(info.clone(), events);
        let r = replay(&mut src, meta, opts)?;
        let f = r.policies.iter().find_map(|p| p.fidelity.as_ref());
        Ok((
            f.map_or(0.0, |f| f.agreement_pct()),
            f.map_or(0, |f| f.decisions),
        ))
    };
    let judged_on = std::cell::Cell::new(0);
    let fit_jobs = settings.fit_jobs;
    let run = |tried: &[BeforeTrace]| -> Result<Vec<f64>, ReplayError> {
        let judge_all = || -> Result<Vec<(f64, u64)>, ReplayError> {
            tried.par_iter().map(|&b| judge(b)).collect()
        };
        let judged = match fit_jobs {
            Some(jobs) => crate::parallel::install(jobs, judge_all),
            None => judge_all(),
        }?;
        if let Some(j) = judged.first() {
            judged_on.set(j.1);
        }
        Ok(judged.into_iter().map(|j| j.0).collect())
    };
    let counts_at = |age: u64| -> Vec<BeforeTrace> {
        candidates
            .iter()
            .map(|&flips| BeforeTrace {
                flips,
                halved_ago_ns: age,
            })
            .collect()
    };
    let pair = |tried: Vec<BeforeTrace>, got: Vec<f64>| -> Vec<(u32, f64)> {
        tried.iter().map(|b| b.flips).zip(got).collect()
    };
    // A coarse list's agreement with the counts between `best`'s neighbours added, at
    // `age`, in increasing order.
    let refined = |mut got: Vec<(u32, f64)>, best: u32, age: u64| {
        let tried: Vec<BeforeTrace> = between(best, &candidates)
            .into_iter()
            .map(|flips| BeforeTrace {
                flips,
                halved_ago_ns: age,
            })
            .collect();
        let more = run(&tried)?;
        got.extend(pair(tried, more));
        got.sort_by_key(|&(flips, _)| flips);
        Ok::<_, ReplayError>(got)
    };
    // The extremes first: where they agree alike, no task the trace did not see start
    // reaches wake_wide, and neither other counts nor ages would matter.
    let all = counts_at(0);
    let extremes = vec![all[0], all[all.len() - 1]];
    let got = run(&extremes)?;
    if got[0] == got[1] {
        return Ok(FlipsFit {
            fitted: all[0],
            agreement: pair(extremes, got),
            age_count_agreement: Vec::new(),
            age_agreement: Vec::new(),
            aged_agreement: Vec::new(),
            decisions: judged_on.get(),
        });
    }
    let got = run(&all)?;
    let agreement = pair(all, got);
    let n = judged_on.get();
    let coarse = first_near_best(&agreement, n).unwrap_or(0);
    let agreement = refined(agreement, coarse, 0)?;
    // The age of the last halving for a count, then the count again at that age: one
    // descent from a count found at some age, giving the value and the lists it tried.
    let descend = |flips: u32| -> Result<Descent, ReplayError> {
        let ages: Vec<BeforeTrace> = AGES_NS
            .iter()
            .map(|&halved_ago_ns| BeforeTrace {
                flips,
                halved_ago_ns,
            })
            .collect();
        let at_zero = match find(&agreement, flips) {
            Some(a) => a,
            None => run(&ages[..1])?[0],
        };
        let got = run(&ages[1..])?;
        let age_agreement: Vec<(u64, f64)> = std::iter::once((0, at_zero))
            .chain(ages[1..].iter().map(|b| b.halved_ago_ns).zip(got))
            .collect();
        // None unless another age is clearly better.
        let age = first_near_best(&age_agreement, n).unwrap_or(0);
        if age == 0 {
            return Ok(Descent {
                fitted: BeforeTrace::flips(flips),
                agreement: at_zero,
                age_agreement,
                aged_agreement: Vec::new(),
            });
        }
        let aged = counts_at(age);
        let got = run(&aged)?;
        let aged_agreement = pair(aged, got);
        let coarse = first_near_best(&aged_agreement, n).unwrap_or(0);
        let aged_agreement = refined(aged_agreement, coarse, age)?;
        let flips = first_near_best(&aged_agreement, n).unwrap_or(0);
        Ok(Descent {
            fitted: BeforeTrace {
                flips,
                halved_ago_ns: age,
            },
            agreement: find(&aged_agreement, flips).unwrap_or(0.0),
            age_agreement,
            aged_agreement,
        })
    };
    let from_zero = descend(first_near_best(&agreement, n).unwrap_or(0))?;
    // The same descent from the best count at a few ages: where the halving falls
    // against the launcher's forks can decide more than the count, and at the wrong age
    // no count may beat none (a 2x4 NO_SIS_UTIL capture whose launcher forked hackbench
    // 20 ms after it was first seen: 94.6 % with none, at most 94.7 % with any count
    // halved as first seen, 99.4 % with 8 halved 750 ms before). Taken when clearly
    // better: the grid costs the host's hackbench replay 1.56x (3.67 s against 2.35).
    let grid: Vec<BeforeTrace> = COARSE_AGES_NS.iter().flat_map(|&a| counts_at(a)).collect();
    let got = run(&grid)?;
    let age_count_agreement: Vec<(u64, u32, f64)> = grid
        .iter()
        .zip(got)
        .map(|(b, a)| (b.halved_ago_ns, b.flips, a))
        .collect();
    let grid_counts: Vec<(u32, f64)> = age_count_agreement
        .iter()
        .map(|&(_, flips, a)| (flips, a))
        .collect();
    // Only a grid point clearly better than the first descent's end starts another.
    let top = grid_counts.iter().map(|&(_, a)| a).fold(f64::MIN, f64::max);
    let beats = first_near_best(&[(false, from_zero.agreement), (true, top)], n) == Some(true);
    let best = match first_near_best(&grid_counts, n) {
        Some(flips) if beats => {
            let other = descend(flips)?;
            let pick = [(false, from_zero.agreement), (true, other.agreement)];
            match first_near_best(&pick, n) {
                Some(true) => other,
                _ => from_zero,
            }
        }
        _ => from_zero,
    };
    Ok(FlipsFit {
        fitted: best.fitted,
        agreement,
        age_count_agreement,
        age_agreement: best.age_agreement,
        aged_agreement: best.aged_agreement,
        decisions: n,
    })
}

/// One descent of the fit: the value it reached, its agreement, and the lists it tried.
struct Descent {
    fitted: BeforeTrace,
    agreement: f64,
    age_agreement: Vec<(u64, f64)>,
    aged_agreement: Vec<(u32, f64)>,
}

/// The first candidate (the one to prefer) whose agreement is within one binomial
/// standard error of the best one's, over `n` wakeups.
fn first_near_best<T: Copy>(agreement: &[(T, f64)], n: u64) -> Option<T> {
    let best = agreement.iter().map(|&(_, a)| a).fold(f64::MIN, f64::max);
    let p = best / 100.0;
    let se = 100.0 * (p * (1.0 - p) / n.max(1) as f64).sqrt();
    agreement
        .iter()
        .find(|&&(_, a)| a >= best - se)
        .map(|&(k, _)| k)
}

/// The line saying which flips a replay took, None for the default of none assumed.
pub fn sentence(r: &super::ReplayResult) -> Option<String> {
    match &r.flips_fit {
        Some(f) => f.describe(),
        None if r.flips_before_trace != BeforeTrace::default() => Some(format!(
            "wakee flips before the trace: {}, assumed (--flips-before-trace)",
            r.flips_before_trace.label()
        )),
        None => None,
    }
}

/// Fits the flips for a replay of the trace `open` makes, with `opts`, and sets them in
/// `opts`: the trace is opened once more for the fit, which reads only its window.
pub fn fit_into(
    open: &dyn Fn() -> Result<Box<dyn EventSource>, ReplayError>,
    meta: Option<&Meta>,
    opts: &mut ReplayOptions,
) -> Result<FlipsFit, ReplayError> {
    let mut src = open()?;
    let policy = super::kernel_arm(src.as_ref(), meta, opts);
    let f = fit_source(src.as_mut(), meta, opts, &policy)?;
    opts.flips_before_trace = f.fitted;
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fewest_flips_within_a_standard_error_of_the_best() {
        // 3000 wakeups at 91 % agreement: one standard error is 0.52 points.
        let a = [(0, 90.7), (1, 90.7), (6, 91.2), (16, 89.0)];
        assert_eq!(first_near_best(&a, 3000), Some(0));
        // Ten times the wakeups narrow it to 0.17 points: 6 is clearly better.
        assert_eq!(first_near_best(&a, 30_000), Some(6));
        let far = [(0, 80.3), (4, 85.0), (16, 91.0), (32, 90.9)];
        assert_eq!(first_near_best(&far, 10_000), Some(16));
        assert_eq!(first_near_best::<u32>(&[], 10), None);
    }

    /// wake_wide compares the smaller flips with the LLC size: on a 112-CPU LLC the
    /// candidates reach past it, on a small one they stay the fixed list.
    #[test]
    fn candidates_reach_past_a_large_llc() {
        assert_eq!(candidates(4), CANDIDATES);
        let big = candidates(112);
        assert_eq!(&big[..CANDIDATES.len()], CANDIDATES);
        assert_eq!(&big[CANDIDATES.len()..], [56, 112, 168, 224]);
    }

    /// Every count between a candidate's neighbours on a small LLC; at most eight on
    /// each side, evenly spaced, where the neighbours lie far apart.
    #[test]
    fn counts_between_a_candidates_neighbours() {
        assert_eq!(
            between(16, CANDIDATES),
            [13, 14, 15, 17, 18, 19, 20, 21, 22, 23]
        );
        assert_eq!(between(0, CANDIDATES), Vec::<u32>::new());
        assert_eq!(between(3, CANDIDATES), Vec::<u32>::new());
        assert_eq!(between(32, CANDIDATES), [25, 26, 27, 28, 29, 30, 31]);
        let big = candidates(112);
        // 32..56 in steps of 3, 56..112 in steps of 7.
        assert_eq!(
            between(56, &big),
            [33, 36, 39, 42, 45, 48, 51, 54, 57, 64, 71, 78, 85, 92, 99, 106]
        );
        assert_eq!(between(7, CANDIDATES), Vec::<u32>::new());
    }
}
