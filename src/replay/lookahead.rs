//! The events after the one being replayed. A sched_waking learns its outcome from what
//! follows it: the sched_wakeup that names the CPU the kernel chose (later, and on the
//! target's buffer, when the wakeup went through the IPI wakelist), and the
//! select_task_rq_fair probes of a `--search-latency` capture. The window holds at least
//! the horizon past its front, and whatever else of the last batch read: a sched_wakeup
//! further away (an IPI wakeup under a slow emulator can take longer than 20 ms) is still
//! found when it was read with that batch.

use std::collections::VecDeque;

use crate::trace::{Event, EventKind};

/// The outcome the trace recorded for one sched_waking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// The CPU the kernel chose.
    pub chosen: u32,
    /// CPU whose buffer holds the sched_wakeup.
    pub recorded_on: u32,
}

/// What the select_task_rq_fair probes recorded for one waking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Selection {
    pub wake_flags: u32,
    /// From the return probe, when the capture had one.
    pub duration_ns: Option<u64>,
}

/// A window of events in time order: the next event to replay and those that follow it
/// within `horizon_ns`.
pub struct Lookahead {
    events: VecDeque<Event>,
    horizon_ns: u64,
}

impl Lookahead {
    pub fn new(horizon_ns: u64) -> Lookahead {
        Lookahead {
            events: VecDeque::new(),
            horizon_ns,
        }
    }

    pub fn push(&mut self, e: Event) {
        self.events.push_back(e);
    }

    /// The front event's horizon is covered: every event that can tell its outcome is in.
    pub fn ready(&self) -> bool {
        self.events
            .front()
            .zip(self.events.back())
            .is_some_and(|(f, b)| b.ts.saturating_sub(f.ts) >= self.horizon_ns)
    }

    /// Takes the front event; the lookups below then look at what follows it.
    pub fn pop(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// The sched_wakeup of `pid` that follows its sched_waking (just popped), unless another
    /// waking of it comes first.
    pub fn outcome(&self, pid: i32) -> Option<Outcome> {
        for e in &self.events {
            match &e.kind {
                EventKind::Wakeup(w) if w.pid == pid => {
                    return Some(Outcome {
                        chosen: w.target_cpu.max(0) as u32,
                        recorded_on: e.cpu,
                    })
                }
                EventKind::Waking(w) if w.pid == pid => return None,
                _ => {}
            }
        }
        None
    }

    /// The probes that follow a sched_waking (just popped) on `cpu`: select_task_rq runs in
    /// try_to_wake_up right after the tracepoint, with interrupts off, so nothing else of
    /// that CPU comes between the entry and the return. Another waking or switch on the
    /// CPU before an entry means this waking selected nothing.
    pub fn selection(&self, cpu: u32) -> Option<Selection> {
        let mut found: Option<(u64, u32)> = None;
        for e in self.events.iter().filter(|e| e.cpu == cpu) {
            match (&e.kind, found) {
                (EventKind::SelectEnter { wake_flags, .. }, None) => {
                    found = Some((e.ts, *wake_flags))
                }
                (EventKind::SelectExit { .. }, Some((t0, wake_flags))) => {
                    return Some(Selection {
                        wake_flags,
                        duration_ns: Some(e.ts.saturating_sub(t0)),
                    })
                }
                (
                    EventKind::Waking(_) | EventKind::Switch { .. } | EventKind::SelectExit { .. },
                    None,
                ) => return None,
                // No return probe: the entry alone.
                (
                    EventKind::Waking(_) | EventKind::Switch { .. } | EventKind::SelectEnter { .. },
                    Some((_, wake_flags)),
                ) => {
                    return Some(Selection {
                        wake_flags,
                        duration_ns: None,
                    })
                }
                _ => {}
            }
        }
        found.map(|(_, wake_flags)| Selection {
            wake_flags,
            duration_ns: None,
        })
    }
}
