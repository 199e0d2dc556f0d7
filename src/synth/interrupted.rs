//! Wakings an interrupt did, charged to the task it interrupted.
//!
//! A timer that expires in hard interrupt context (an hrtimer: nanosleep, a poll or
//! futex timeout) wakes its task with no irq event around the waking (the local timer
//! vector is not an irq_handler_entry), so the trace shows the waking as done by
//! whatever task was running on that CPU. Replayed as that task's wake, it becomes a
//! dependency that was not there, and follows that task wherever it runs next: onto
//! another LLC, where the sleeper's timer never was.
//!
//! Such a timer fires on the CPU its task slept on (it was armed there, just before the
//! sleep), so its wakings are on the wakee's previous CPU, by whichever task happened to
//! run there: never remote, and by many tasks with none standing out. A task that some
//! other task really wakes (a pipe, a socket, a futex) is woken from wherever the waker
//! runs, so remotely too, or mostly by one partner. A task whose wakings by tasks are all
//! but never remote and spread over several wakers is taken as woken by its timers:
//! those local wakings become timer wakeups. Its rare remote ones stay task wakes.
//!
//! What cannot be told apart: tasks that run pinned with all their wakers on one CPU
//! look the same, and are taken as timer-woken; nothing there could move anyway.

use std::collections::{HashMap, HashSet};

use crate::trace::{Event, EventKind};

/// A task needs this many wakings by tasks to be judged.
const MIN_WAKINGS: u32 = 10;
/// At most this share (per cent) of its wakings by tasks may be remote.
const MAX_REMOTE_PCT: u32 = 5;
/// Its local wakings come from at least this many tasks...
const MIN_WAKERS: usize = 3;
/// ...none of which did more than this share (per cent) of them.
const MAX_ONE_WAKER_PCT: u32 = 50;

#[derive(Default)]
struct Wakings {
    remote: u32,
    local: u32,
    local_by: HashMap<i32, u32>,
}

/// The pids whose wakings by a task on their previous CPU are their timers'.
pub fn timer_woken(events: &[Event]) -> HashSet<i32> {
    let mut by_wakee: HashMap<i32, Wakings> = HashMap::new();
    for e in events {
        let EventKind::Waking(w) = &e.kind else {
            continue;
        };
        let waker = e.common_pid;
        if waker == 0 || waker == w.pid {
            continue;
        }
        let s = by_wakee.entry(w.pid).or_default();
        if i64::from(e.cpu) == i64::from(w.target_cpu) {
            s.local += 1;
            *s.local_by.entry(waker).or_default() += 1;
        } else {
            s.remote += 1;
        }
    }
    by_wakee
        .into_iter()
        .filter(|(_, s)| {
            let all = s.local + s.remote;
            let most = s.local_by.values().copied().max().unwrap_or(0);
            all >= MIN_WAKINGS
                && s.remote * 100 <= all * MAX_REMOTE_PCT
                && s.local_by.len() >= MIN_WAKERS
                && most * 100 <= s.local * MAX_ONE_WAKER_PCT
        })
        .map(|(pid, _)| pid)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{Comm, Wake};

    fn waking(cpu: u32, by: i32, pid: i32, prev_cpu: i32) -> Event {
        Event {
            ts: 0,
            cpu,
            common_pid: by,
            kind: EventKind::Waking(Wake {
                comm: Comm::from_bytes(b"t"),
                pid,
                prio: 120,
                target_cpu: prev_cpu,
            }),
        }
    }

    #[test]
    fn a_sleeper_woken_on_its_cpu_by_whoever_runs_there_is_timer_woken() {
        let mut events = Vec::new();
        for k in 0..30 {
            // 7 sleeps on CPU k % 4 and is woken there by one of five tasks.
            let cpu = k % 4;
            events.push(waking(cpu, 100 + (k as i32 % 5), 7, cpu as i32));
            // 8 is woken by 9 wherever 9 runs: often remotely.
            events.push(waking(cpu, 9, 8, ((k + 1) % 4) as i32));
            // 10 and 11 ping-pong on one CPU: always local, one waker each.
            events.push(waking(0, 11, 10, 0));
            events.push(waking(0, 10, 11, 0));
        }
        // One remote waking of 7 in 31 (3 %) is allowed.
        events.push(waking(1, 100, 7, 0));
        let found = timer_woken(&events);
        assert_eq!(found, HashSet::from([7]));
    }

    #[test]
    fn too_few_wakings_or_too_many_remote_are_not_judged_timer_woken() {
        let few: Vec<Event> = (0..9).map(|k| waking(0, 100 + k, 7, 0)).collect();
        assert!(timer_woken(&few).is_empty());
        // 2 remote in 20 (10 %).
        let mut remote: Vec<Event> = (0..18).map(|k| waking(0, 100 + k % 6, 7, 0)).collect();
        remote.extend([waking(1, 100, 7, 0), waking(1, 101, 7, 0)]);
        assert!(timer_woken(&remote).is_empty());
    }
}
