//! Timers whose interrupt came late. A traced timer waking that follows another on the
//! same CPU within one interrupt (no switch between) shows only when that interrupt ran,
//! not when its own timer was due: an interrupt that comes late (a vCPU the host runs
//! late; on the rig, an idle vCPU's timer interrupt comes a median 4–10 ms after a 2 ms
//! sleep) runs every timer due by then. The re-run wakes such a sleep at the first timer
//! interrupt of its CPU from its earliest due time on, or at the first wakeup IPI that
//! brings the CPU out of idle (a vCPU its host runs again takes its due timer interrupt
//! at once) ([`Step::SleepLate`]), so that the timers of a CPU come in bunches as the
//! trace's did, and the later ones in a bunch find their CPU taken by the first and are
//! placed elsewhere.
//!
//! A sleep's own expiry is not in the trace, but two bounds are. The interrupt runs its
//! timers in the order they expired, so a later one was late by no more than the first,
//! whose lateness is its sleep less its task's shortest first-in-interrupt sleep (the
//! builder sets that bound, [`super::traced`]). And a timer does not fire early, so the
//! sleep lasted at least its own task's shortest first-in-interrupt sleep (set here,
//! once the whole trace is read). Where interrupts come on time a sleep keeps its length.

use super::{Step, TaskSpec};

/// What settling the late timers found, for the shape of a traced workload.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct LateTimers {
    /// Timed sleeps that ran in an interrupt that had already woken a task.
    pub sleeps: u64,
}

/// Raises each [`Step::SleepLate`]'s `due_ns` (the builder's bound from its interrupt's
/// first timer) to its task's shortest first-in-interrupt sleep, within its `by_ns`.
pub fn settle(tasks: &mut [TaskSpec]) -> LateTimers {
    let mut sleeps = 0;
    for t in tasks.iter_mut() {
        let shortest = t
            .steps
            .iter()
            .filter_map(|s| match s {
                Step::SleepFor(ns) => Some(*ns),
                _ => None,
            })
            .min()
            .unwrap_or(0);
        for s in &mut t.steps {
            if let Step::SleepLate { due_ns, by_ns } = s {
                *due_ns = (*due_ns).max(shortest).clamp(1, (*by_ns).max(1));
                sleeps += 1;
            }
        }
    }
    LateTimers { sleeps }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn task(steps: Vec<Step>) -> TaskSpec {
        TaskSpec::looping("t".into(), steps)
    }

    fn late(due_ns: u64, by_ns: u64) -> Step {
        Step::SleepLate { due_ns, by_ns }
    }

    /// Task 0 asks for 2 ms (its shortest first-in-interrupt sleep): a late sleep of
    /// 12 ms its interrupt bounds at 4 ms stays due at 4; one bounded at 1 ms is due at
    /// 2 ms, as its timer cannot have fired sooner. Task 1 has no sleep of its own to
    /// say what it asks for: its interrupt's bound stands. None is due after its length.
    #[test]
    fn a_late_sleep_is_due_no_sooner_than_its_interrupt_or_its_task_allow() {
        let mut tasks = vec![
            task(vec![
                Step::SleepFor(3 * MS),
                Step::SleepFor(2 * MS),
                late(4 * MS, 12 * MS),
                late(MS, 12 * MS),
                late(2 * MS, MS + 500),
            ]),
            task(vec![late(7 * MS, 30 * MS)]),
        ];
        let found = settle(&mut tasks);
        assert_eq!(found.sleeps, 4);
        assert_eq!(tasks[0].steps[2], late(4 * MS, 12 * MS));
        assert_eq!(tasks[0].steps[3], late(2 * MS, 12 * MS));
        assert_eq!(tasks[0].steps[4], late(MS + 500, MS + 500));
        assert_eq!(tasks[1].steps[0], late(7 * MS, 30 * MS));
    }
}
