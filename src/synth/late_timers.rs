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
//! A sleep's own expiry is not in the trace. Its earliest is taken as the larger of its
//! task's shortest timer sleep that ran first in its interrupt (the sleep it asks for,
//! as a timer never fires early) and its traced length less the lateness of nine in ten
//! first-in-interrupt sleeps (their length less their task's shortest): where interrupts
//! come on time that leaves the sleep as traced.

use super::{Step, TaskSpec};

/// What settling the late timers found, for the shape of a traced workload.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct LateTimers {
    /// Timed sleeps that ran in an interrupt that had already woken a task.
    pub sleeps: u64,
    /// The lateness of nine in ten first-in-interrupt sleeps (ns).
    pub lateness_p90_ns: u64,
}

/// Sets each [`Step::SleepLate`]'s `due_ns` from its `by_ns` and the workload's other
/// timed sleeps.
pub fn settle(tasks: &mut [TaskSpec]) -> LateTimers {
    let floors: Vec<Option<u64>> = tasks
        .iter()
        .map(|t| {
            t.steps
                .iter()
                .filter_map(|s| match s {
                    Step::SleepFor(ns) => Some(*ns),
                    _ => None,
                })
                .min()
        })
        .collect();
    let mut lateness: Vec<u64> = tasks
        .iter()
        .zip(&floors)
        .filter_map(|(t, f)| f.map(|f| (t, f)))
        .flat_map(|(t, f)| {
            t.steps.iter().filter_map(move |s| match s {
                Step::SleepFor(ns) => Some(ns - f),
                _ => None,
            })
        })
        .collect();
    lateness.sort_unstable();
    let p90 = lateness
        .get(lateness.len().saturating_mul(9) / 10)
        .copied()
        .unwrap_or(0);
    let mut sleeps = 0;
    for (t, floor) in tasks.iter_mut().zip(&floors) {
        for s in &mut t.steps {
            if let Step::SleepLate { due_ns, by_ns } = s {
                *due_ns = by_ns
                    .saturating_sub(p90)
                    .max(floor.unwrap_or(0))
                    .clamp(1, (*by_ns).max(1));
                sleeps += 1;
            }
        }
    }
    LateTimers {
        sleeps,
        lateness_p90_ns: p90,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn task(steps: Vec<Step>) -> TaskSpec {
        TaskSpec::looping("t".into(), steps)
    }

    fn late(by_ns: u64) -> Step {
        Step::SleepLate {
            due_ns: by_ns,
            by_ns,
        }
    }

    #[test]
    fn a_late_sleep_is_due_from_its_tasks_shortest_sleep_or_its_length_less_the_lateness() {
        // Task 0 asks for 2 ms and its first-in-interrupt sleeps came 0, 1, 3 and 8 ms
        // late; task 1 asks for 10 ms and came on time.
        let mut tasks = vec![
            task(vec![
                Step::SleepFor(2 * MS),
                Step::SleepFor(3 * MS),
                Step::SleepFor(5 * MS),
                Step::SleepFor(10 * MS),
                late(12 * MS),
                late(40 * MS),
            ]),
            task(vec![
                Step::SleepFor(10 * MS),
                Step::SleepFor(10 * MS),
                Step::SleepFor(10 * MS),
                Step::SleepFor(10 * MS),
                Step::SleepFor(10 * MS),
                Step::SleepFor(10 * MS),
                late(10 * MS + 500),
            ]),
            // No first-in-interrupt sleep to tell what it asks for.
            task(vec![late(30 * MS)]),
        ];
        let found = settle(&mut tasks);
        // The ten lateness samples sorted: seven 0s, 1, 3 and 8 ms; the 9th of ten
        // (index 9) is 8 ms.
        assert_eq!(found.lateness_p90_ns, 8 * MS);
        assert_eq!(found.sleeps, 4);
        // 12 − 8 = 4 ms, above task 0's 2 ms; 40 − 8 = 32 ms.
        assert_eq!(
            tasks[0].steps[4],
            Step::SleepLate {
                due_ns: 4 * MS,
                by_ns: 12 * MS
            }
        );
        assert_eq!(
            tasks[0].steps[5],
            Step::SleepLate {
                due_ns: 32 * MS,
                by_ns: 40 * MS
            }
        );
        // 10.0005 − 8 ms is below what task 1 asks for: 10 ms.
        assert_eq!(
            tasks[1].steps[6],
            Step::SleepLate {
                due_ns: 10 * MS,
                by_ns: 10 * MS + 500
            }
        );
        assert_eq!(
            tasks[2].steps[0],
            Step::SleepLate {
                due_ns: 22 * MS,
                by_ns: 30 * MS
            }
        );
    }

    #[test]
    fn without_late_interrupts_a_late_sleep_keeps_its_length() {
        let mut tasks = vec![task(vec![
            Step::SleepFor(MS),
            Step::SleepFor(MS),
            late(MS + 7),
        ])];
        settle(&mut tasks);
        assert_eq!(
            tasks[0].steps[2],
            Step::SleepLate {
                due_ns: MS + 7,
                by_ns: MS + 7
            }
        );
    }
}
