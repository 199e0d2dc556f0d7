//! How long a run goes on once CFS's tick would end it, drawn from what a trace measured.
//!
//! check_preempt_tick ends a run at the first tick after its slice, but a tick needs the
//! CPU to run. The rig's emulated CPUs are threads of their host, and one the host does
//! not run takes no tick: its task's run, and the wait of everything queued behind it,
//! stretches by the stall. On the rig's 2x4 hackbench 15 % of the runs the kernel ended
//! by preemption lasted more than 8 ms, past any slice and the tick after it, where the
//! host's own hackbench had 1 such run in 16,463. That is the machine's, not the
//! scheduler's, so a re-run of a trace takes it from the trace: when the tick would
//! preempt, the run goes on to a length drawn from the trace's preempted runs that are at
//! least as long as it already is. Where ticks come on time, those are about the tick's
//! own lengths; where CPUs stall, they keep the stalls.
//!
//! Measured on the self-fidelity gate over the 119 committed captures, three seeds each
//! (reports/self-fidelity.txt): 367, 369 and 374 missed checks without it, 351, 341 and
//! 351 with it (latency p99 71 to 48); 8 captures now pass every check. Only CFS's tick
//! does this: EEVDF's deadlines (v6.6 on) stretched the same way gave 360, 345 and 355.

use std::sync::Arc;

use crate::abi::PREEMPTED;
use crate::trace::{Event, EventKind};

/// A trace needs this many runs that ended in preemption before they are drawn from.
pub const MIN_RUNS: usize = 50;

/// The lengths (ns, sorted) of a trace's runs that ended in preemption: a task switched
/// in, then switched out still runnable.
#[derive(Debug, Clone, Default)]
pub struct PreemptedRuns(Arc<[u64]>);

impl PreemptedRuns {
    /// The preempted runs of `events` (in time order) on CPUs below `nr_cpus`; none
    /// when there are fewer than [`MIN_RUNS`].
    pub fn of(events: &[Event], nr_cpus: u32) -> PreemptedRuns {
        let mut began: Vec<Option<u64>> = vec![None; nr_cpus as usize];
        let mut runs = Vec::new();
        for e in events {
            let EventKind::Switch {
                prev_pid,
                prev_state,
                next_pid,
                ..
            } = e.kind
            else {
                continue;
            };
            let Some(slot) = began.get_mut(e.cpu as usize) else {
                continue;
            };
            // A run seen from its start: the CPU's first switch began the trace's view.
            if let Some(start) = slot.take() {
                if prev_pid != 0 && (prev_state == 0 || prev_state == PREEMPTED) {
                    runs.push(e.ts.saturating_sub(start));
                }
            }
            if next_pid != 0 {
                *slot = Some(e.ts);
            }
        }
        if runs.len() < MIN_RUNS {
            return PreemptedRuns::default();
        }
        runs.sort_unstable();
        PreemptedRuns(Arc::from(runs))
    }

    /// From lengths measured elsewhere (ns, any order).
    pub fn from_lengths(mut runs: Vec<u64>) -> PreemptedRuns {
        runs.sort_unstable();
        PreemptedRuns(Arc::from(runs))
    }

    /// How many runs there are to draw from.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// No runs to draw from: the tick preempts on time.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The length a run that has gone on for `ran` ns when the tick would end it goes
    /// on to: one of the traced runs longer than that, uniformly; None (end it now)
    /// when the trace has none.
    pub fn draw_longer_than(&self, ran: u64, rng: &mut fastrand::Rng) -> Option<u64> {
        let from = self.0.partition_point(|&len| len <= ran);
        (from < self.0.len()).then(|| self.0[from + rng.usize(..self.0.len() - from)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::event::build::switch;

    /// On CPU 0, task 1 runs 3 ms and is preempted by task 2 (0 is R), which runs 12 ms
    /// and blocks (1 is S); on CPU 1, task 3 runs 7 ms and is preempted (the simulator's
    /// own R). The first switch of each CPU only starts a run. Repeated 25 times, the
    /// runs that ended in preemption are the 3 and 7 ms ones, 50 of them.
    #[test]
    fn the_runs_that_ended_in_preemption_are_kept() {
        let mut events = Vec::new();
        for k in 0..25u64 {
            let t = k * 100_000_000;
            events.push(switch(t, 0, 0, 0, 1));
            events.push(switch(t + 1_000, 1, 0, 0, 3));
            events.push(switch(t + 3_000_000, 0, 1, 0, 2));
            events.push(switch(t + 7_001_000, 1, 3, PREEMPTED, 0));
            events.push(switch(t + 15_000_000, 0, 2, 1, 0));
        }
        let runs = PreemptedRuns::of(&events, 2);
        assert_eq!(runs.len(), 50);
        assert!(runs.0[..25].iter().all(|&ns| ns == 3_000_000));
        assert!(runs.0[25..].iter().all(|&ns| ns == 7_000_000));
        // One CPU fewer: CPU 1's runs are not counted, and 25 are too few.
        assert!(PreemptedRuns::of(&events, 1).is_empty());
    }

    /// Runs of 1, 5, 5, 9 and 30 ms: one that has gone on 5 ms goes on to 9 or 30 ms,
    /// about as often each; one of 30 ms or more ends now.
    #[test]
    fn a_run_goes_on_to_a_longer_traced_one() {
        let ms = 1_000_000;
        let runs = PreemptedRuns::from_lengths(vec![30 * ms, 5 * ms, ms, 9 * ms, 5 * ms]);
        let mut rng = fastrand::Rng::with_seed(3);
        let drawn: Vec<u64> = (0..10_000)
            .map(|_| runs.draw_longer_than(5 * ms, &mut rng).unwrap())
            .collect();
        assert!(drawn.iter().all(|&ns| ns == 9 * ms || ns == 30 * ms));
        let long = drawn.iter().filter(|&&ns| ns == 30 * ms).count();
        assert!((4_700..5_300).contains(&long), "{long} of 10,000");
        assert_eq!(runs.draw_longer_than(30 * ms, &mut rng), None);
        assert_eq!(PreemptedRuns::default().draw_longer_than(0, &mut rng), None);
    }
}
