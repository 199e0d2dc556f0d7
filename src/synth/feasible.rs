//! Whether a run-once workload can finish at all, whatever the timing.
//!
//! With counted wakes, a task's Sleep takes one wake given to it (waiting until there is
//! one) and nothing else ever blocks: a Wake only adds, a timed sleep ends by itself.
//! Running a step never lowers what another task can do, so every order of the steps
//! ends in the same place: if tasks are left waiting when no task can move, they wait
//! under every schedule, the simulator's included. A trace's own order is one such
//! schedule, so a model built from a trace that leaves tasks waiting here holds a
//! dependency the trace did not have; one that finishes here but not in the simulator
//! lost a wake in the simulator.

use super::{Start, Step, Workload};

/// A task that cannot finish under any order of the steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stuck {
    /// Its index in the workload's tasks.
    pub task: usize,
    /// The step it waits at (a Sleep, or the start of a task that starts asleep).
    pub step: usize,
    /// Steps it still has from there.
    pub left: usize,
}

/// The tasks of a run-once, counted-wake workload that wait for ever under any order of
/// their steps; empty when every task can finish.
pub fn stuck_tasks(w: &Workload) -> Vec<Stuck> {
    walk(w, |_, _| false).0
}

/// As [`stuck_tasks`], but where no task can move and one waits at a Sleep that
/// `droppable(task, step)` allows, that Sleep is taken out (it is returned, as task and
/// step) and the walk goes on. Sleeps are taken out only when nothing else moves, one
/// at a time, so none is taken out that some order of the steps would end.
pub fn drop_unended_sleeps(
    w: &Workload,
    droppable: impl Fn(usize, usize) -> bool,
) -> (Vec<Stuck>, Vec<(usize, usize)>) {
    walk(w, droppable)
}

fn walk(
    w: &Workload,
    droppable: impl Fn(usize, usize) -> bool,
) -> (Vec<Stuck>, Vec<(usize, usize)>) {
    let n = w.tasks.len();
    // Next step of each task, and the wakes given to it and not yet taken.
    let mut at = vec![0usize; n];
    let mut tokens = vec![0u64; n];
    // A task that starts asleep takes a wake before its first step, as a Sleep does.
    let mut asleep_at_start: Vec<bool> = w
        .tasks
        .iter()
        .map(|t| matches!(t.start, Start::Asleep { .. }))
        .collect();
    let mut waiting = vec![false; n];
    let mut ready: Vec<usize> = (0..n).rev().collect();
    // Tasks that stopped at a Sleep that may be taken out, latest last.
    let mut at_droppable = Vec::new();
    let mut dropped = Vec::new();
    loop {
        let Some(i) = ready.pop() else {
            // Nothing moves: take out one droppable Sleep still waited at.
            match at_droppable.pop() {
                Some((i, k)) if waiting[i] && at[i] == k => {
                    dropped.push((i, k));
                    at[i] += 1;
                    ready.push(i);
                    continue;
                }
                Some(_) => continue,
                None => break,
            }
        };
        waiting[i] = false;
        if asleep_at_start[i] {
            if tokens[i] == 0 {
                waiting[i] = true;
                continue;
            }
            tokens[i] -= 1;
            asleep_at_start[i] = false;
        }
        let steps = &w.tasks[i].steps;
        while at[i] < steps.len() {
            match steps[at[i]] {
                Step::Wake { task, .. } if task < n && task != i => {
                    tokens[task] += 1;
                    if waiting[task] {
                        waiting[task] = false;
                        ready.push(task);
                    }
                }
                Step::Sleep if tokens[i] == 0 => {
                    waiting[i] = true;
                    if droppable(i, at[i]) {
                        at_droppable.push((i, at[i]));
                    }
                    break;
                }
                Step::Sleep => tokens[i] -= 1,
                _ => {}
            }
            at[i] += 1;
        }
    }
    let stuck = (0..n)
        .filter(|&i| waiting[i])
        .map(|i| Stuck {
            task: i,
            step: at[i],
            left: w.tasks[i].steps.len() - at[i],
        })
        .collect();
    (stuck, dropped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::TaskSpec;

    fn task(start: Start, steps: Vec<Step>) -> TaskSpec {
        TaskSpec {
            comm: "t".into(),
            pid: None,
            steps,
            looping: false,
            start,
            pinned: None,
        }
    }

    fn workload(tasks: Vec<TaskSpec>) -> Workload {
        Workload {
            name: "w".into(),
            unit: "unit",
            tasks,
            wakes_counted: true,
        }
    }

    const RUN: Start = Start::Runnable { cpu: Some(0) };
    fn wake(task: usize) -> Step {
        Step::Wake { task, sync: false }
    }

    #[test]
    fn ping_pong_finishes_whatever_the_order() {
        // 0 wakes 1 and sleeps; 1 (asleep at start) wakes 0 back; twice over. The
        // second round's wake of 0 may come before 0 sleeps: it is kept for that sleep.
        let w = workload(vec![
            task(RUN, vec![wake(1), Step::Sleep, wake(1), Step::Sleep]),
            task(
                Start::Asleep { cpu: 1 },
                vec![wake(0), Step::Sleep, wake(0)],
            ),
        ]);
        assert_eq!(stuck_tasks(&w), vec![]);
    }

    #[test]
    fn a_sleep_no_one_ends_is_stuck_and_so_is_who_waits_behind_it() {
        // 0 sleeps twice but is woken once; 1 is woken only by 0's last step.
        let w = workload(vec![
            task(RUN, vec![Step::Run(10), Step::Sleep, Step::Sleep, wake(1)]),
            task(Start::Asleep { cpu: 1 }, vec![Step::Run(5)]),
            task(RUN, vec![wake(0), Step::SleepFor(100), Step::Count]),
        ]);
        assert_eq!(
            stuck_tasks(&w),
            vec![
                Stuck {
                    task: 0,
                    step: 2,
                    left: 2
                },
                Stuck {
                    task: 1,
                    step: 0,
                    left: 1
                },
            ]
        );
    }

    #[test]
    fn a_cycle_of_sleeps_is_stuck_even_though_each_is_woken() {
        // Each sleeps before it wakes the other: a deadlock no schedule breaks.
        let w = workload(vec![
            task(RUN, vec![Step::Sleep, wake(1)]),
            task(RUN, vec![Step::Sleep, wake(0)]),
        ]);
        let stuck: Vec<usize> = stuck_tasks(&w).iter().map(|s| s.task).collect();
        assert_eq!(stuck, vec![0, 1]);
    }

    #[test]
    fn a_cycle_is_broken_by_taking_out_one_sleep_and_no_more() {
        // 0 and 1 each sleep before waking the other; 2 waits for 1's wake. Taking out
        // 1's sleep (the last to stop) lets 1 wake 0 and 2, and 0 then wakes 1, whose
        // second sleep that wake ends.
        let w = workload(vec![
            task(RUN, vec![Step::Sleep, wake(1)]),
            task(RUN, vec![Step::Sleep, wake(0), wake(2), Step::Sleep]),
            task(Start::Asleep { cpu: 0 }, vec![Step::Count]),
        ]);
        let (stuck, dropped) = drop_unended_sleeps(&w, |_, _| true);
        assert_eq!((stuck, dropped), (vec![], vec![(1, 0)]));
        // Only the sleeps allowed are taken out: with none, both stay stuck.
        let (stuck, dropped) = drop_unended_sleeps(&w, |i, _| i == 2);
        assert_eq!((stuck.len(), dropped), (3, vec![]));
    }

    #[test]
    fn a_workload_that_finishes_loses_no_sleep() {
        let w = workload(vec![
            task(RUN, vec![wake(1), Step::Sleep, wake(1), Step::Sleep]),
            task(
                Start::Asleep { cpu: 1 },
                vec![wake(0), Step::Sleep, wake(0)],
            ),
        ]);
        assert_eq!(drop_unended_sleeps(&w, |_, _| true), (vec![], vec![]));
    }
}
