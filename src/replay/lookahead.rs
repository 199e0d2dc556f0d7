//! The events after the one being replayed. A sched_waking learns its outcome from what
//! follows it: the sched_wakeup that names the CPU the kernel chose (later, and on the
//! target's buffer, when the wakeup went through the IPI wakelist), the sched_migrate_task
//! and the target's switches between the two that bound when the wakee was queued there,
//! and the select_task_rq_fair probes of a `--search-latency` capture. What is looked at depends
//! on the events' times alone, never on how the trace was read in batches: the probes
//! and the sched_wakeup of a waking within [`OUTCOME_HORIZON_NS`] of it.

use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasherDefault;

use crate::abi::WF_TTWU;
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
    /// The WF_* flags select_task_rq_fair was called with (WF_SYNC = 0x10, WF_TTWU = 0x08).
    pub wake_flags: u32,
    /// From the return probe, when the capture had one.
    pub duration_ns: Option<u64>,
    /// When select_task_rq_fair was entered: the kernel read the machine then, which
    /// can be well after the sched_waking when the wakee was still switching out on
    /// another CPU (try_to_wake_up waits for p->on_cpu to clear first).
    pub entered_ns: u64,
}

/// How far past its sched_waking a sched_wakeup is looked for. On hardware it follows
/// within microseconds; IPI wakeups on the rig's emulated machines took up to 150 ms
/// (traces/rig, 2x4x2-numa hackbench). The window holds this much only while the front
/// waking's sched_wakeup is missing (a lost event).
pub const OUTCOME_HORIZON_NS: u64 = 250_000_000;

/// A window of events in time order: the next event to replay and, when it is a
/// sched_waking, those that follow it until they tell its outcome (its sched_wakeup, and
/// its probes when the trace has them) or [`OUTCOME_HORIZON_NS`] has passed.
#[derive(Default)]
pub struct Lookahead {
    events: VecDeque<Event>,
    /// The number of events taken from the window so far: an event's sequence number
    /// less this is its index in `events`.
    popped: u64,
    /// The sequence numbers of each task's wakings and wakeups in the window, in order:
    /// a waking's outcome is the task's next one, found without walking the events
    /// between (a lost sched_wakeup keeps up to 250 ms of the trace in the window).
    marks: HashMap<i32, VecDeque<u64>, BuildHasherDefault<ahash::AHasher>>,
    /// The trace carries select_task_rq_fair probes: a waking waits for its own.
    probes: bool,
}

/// The task of a sched_waking or sched_wakeup.
fn marked_pid(e: &Event) -> Option<i32> {
    match &e.kind {
        EventKind::Waking(w) | EventKind::Wakeup(w) => Some(w.pid),
        _ => None,
    }
}

impl Lookahead {
    /// From now on, a waking waits in the window until its probes are in.
    pub fn expect_probes(&mut self) {
        self.probes = true;
    }

    /// Adds the next event of the trace.
    pub fn push(&mut self, e: Event) {
        if let Some(pid) = marked_pid(&e) {
            let seq = self.popped + self.events.len() as u64;
            self.marks.entry(pid).or_default().push_back(seq);
        }
        self.events.push_back(e);
    }

    /// The front event can be replayed: every event that can tell its outcome is in.
    /// Only a sched_waking looks ahead; the rest are ready at once.
    pub fn ready(&self) -> bool {
        let (Some(front), Some(back)) = (self.events.front(), self.events.back()) else {
            return false;
        };
        let span = back.ts.saturating_sub(front.ts);
        match &front.kind {
            EventKind::Waking(w) if span <= OUTCOME_HORIZON_NS => {
                // Every event is within the outcome horizon (and one that follows may
                // still be): the waking's outcome is told once the task has another
                // waking or wakeup after this one.
                let found = self.marks.get(&w.pid).is_some_and(|m| m.len() > 1);
                found && (!self.probes || self.find_selection(1, front.cpu, front.ts).is_ok())
            }
            _ => true,
        }
    }

    /// Trace time of the front event, the next to be taken.
    pub fn front_ts(&self) -> Option<u64> {
        self.events.front().map(|e| e.ts)
    }

    /// Takes the front event; the lookups below then look at what follows it.
    pub fn pop(&mut self) -> Option<Event> {
        let e = self.events.pop_front()?;
        self.popped += 1;
        if let Some(pid) = marked_pid(&e) {
            if let Some(marks) = self.marks.get_mut(&pid) {
                marks.pop_front();
                // Emptied: dropped, so the map holds the tasks in the window, not every
                // task the trace ever woke.
                if marks.is_empty() {
                    self.marks.remove(&pid);
                }
            }
        }
        Some(e)
    }

    /// The sched_wakeup of `pid` that follows its sched_waking at `since` (just popped)
    /// within [`OUTCOME_HORIZON_NS`], unless another waking of it comes first.
    pub fn outcome(&self, pid: i32, since: u64) -> Option<Outcome> {
        let seq = *self.marks.get(&pid)?.front()?;
        let next = &self.events[(seq - self.popped) as usize];
        match &next.kind {
            EventKind::Wakeup(w) if next.ts <= since.saturating_add(OUTCOME_HORIZON_NS) => {
                Some(Outcome {
                    chosen: w.target_cpu.max(0) as u32,
                    recorded_on: next.cpu,
                })
            }
            _ => None,
        }
    }

    /// The latest time before which the wakeup of `pid` (its waking just popped) cannot
    /// have been queued to `cpu` by IPI: its sched_migrate_task, or the last switch `cpu`
    /// made before the sched_wakeup. A CPU that leaves idle flushes its wakelist first
    /// (do_idle), so a switch out of idle that did not activate the wakee came before the
    /// queueing; an emulated waker that stalls between select_task_rq and ttwu_queue
    /// leaves that CPU idle to others' searches all the while. A switch can also follow
    /// the queueing (the wakee still switching out on its own CPU, the p->on_cpu path; a
    /// busy CPU taking the IPI late), but then the CPU ran a task until that switch and
    /// was busy to others either way.
    pub fn queued_after(&self, pid: i32, cpu: u32) -> Option<u64> {
        let seq = *self.marks.get(&pid)?.front()?;
        // The window is in time order: the last match is the latest.
        self.events
            .range(..(seq - self.popped) as usize)
            .rev()
            .find(|e| match e.kind {
                EventKind::Migrate { pid: p, .. } => p == pid,
                EventKind::Switch { .. } => e.cpu == cpu,
                _ => false,
            })
            .map(|e| e.ts)
    }

    /// The probes that follow a sched_waking (just popped) on `cpu`: select_task_rq runs in
    /// try_to_wake_up right after the tracepoint, with interrupts off, so nothing else of
    /// that CPU comes between the entry and the return. Another waking or switch on the
    /// CPU before an entry means this waking selected nothing. Probes are looked for
    /// within [`OUTCOME_HORIZON_NS`] of the waking at `since` (an emulated CPU can stall
    /// for tens of milliseconds between them).
    pub fn selection(&self, cpu: u32, since: u64) -> Option<Selection> {
        match self.find_selection(0, cpu, since) {
            Ok(found) => found,
            // The trace ended first: the entry alone, if there was one.
            Err(entry) => entry.map(|(entered_ns, wake_flags)| Selection {
                wake_flags,
                duration_ns: None,
                entered_ns,
            }),
        }
    }

    /// What select_idle_cpu returned in the selection that follows a sched_waking (just
    /// popped) on `cpu`, from the probes of a noinline kernel: Some(the idle CPU, or -1)
    /// when it was called, None when the CPU's selection ended, or it went on to another
    /// waking, selection or switch, without calling it (or its return is not in the
    /// window: a lost event, counted as no call).
    pub fn idle_scan(&self, cpu: u32, since: u64) -> Option<i32> {
        let limit = since.saturating_add(OUTCOME_HORIZON_NS);
        let (mut entered, mut selected) = (false, false);
        for e in self.events.iter().filter(|e| e.cpu == cpu) {
            if e.ts > limit {
                return None;
            }
            match e.kind {
                EventKind::IdleScanEnter { .. } => entered = true,
                EventKind::IdleScanExit { cpu } if entered => return Some(cpu),
                EventKind::Waking(_) | EventKind::Switch { .. } | EventKind::SelectExit { .. } => {
                    return None
                }
                // A second selection's entry: this one ended unseen.
                EventKind::SelectEnter { .. } if selected => return None,
                EventKind::SelectEnter { .. } => selected = true,
                _ => {}
            }
        }
        None
    }

    /// Ok with what the events from index `from` on say of the selection on `cpu` after
    /// the waking at `since`; Err with the entry's time and wake flags, if one was seen,
    /// while the window does not yet tell.
    fn find_selection(
        &self,
        from: usize,
        cpu: u32,
        since: u64,
    ) -> Result<Option<Selection>, Option<(u64, u32)>> {
        let limit = since.saturating_add(OUTCOME_HORIZON_NS);
        let mut entry: Option<(u64, u32)> = None;
        for e in self.events.range(from..) {
            if e.ts > limit {
                return Ok(entry.map(|(entered_ns, wake_flags)| Selection {
                    wake_flags,
                    duration_ns: None,
                    entered_ns,
                }));
            }
            if e.cpu != cpu {
                continue;
            }
            match (&e.kind, entry) {
                // A fork's or an exec's selection (wake_up_new_task, sched_exec): the
                // waking selected nothing (a pinned wakee, or one still queued).
                (EventKind::SelectEnter { wake_flags, .. }, None) if wake_flags & WF_TTWU == 0 => {
                    return Ok(None)
                }
                (EventKind::SelectEnter { wake_flags, .. }, None) => {
                    entry = Some((e.ts, *wake_flags))
                }
                (EventKind::SelectExit { .. }, Some((t0, wake_flags))) => {
                    return Ok(Some(Selection {
                        wake_flags,
                        duration_ns: Some(e.ts.saturating_sub(t0)),
                        entered_ns: t0,
                    }))
                }
                (
                    EventKind::Waking(_) | EventKind::Switch { .. } | EventKind::SelectExit { .. },
                    None,
                ) => return Ok(None),
                // No return probe: the entry alone.
                (
                    EventKind::Waking(_) | EventKind::Switch { .. } | EventKind::SelectEnter { .. },
                    Some((entered_ns, wake_flags)),
                ) => {
                    return Ok(Some(Selection {
                        wake_flags,
                        duration_ns: None,
                        entered_ns,
                    }))
                }
                _ => {}
            }
        }
        Err(entry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::event::build::{select_enter, switch, wakeup, waking};

    /// Pops the front event, which has to be ready.
    fn take(l: &mut Lookahead) -> Event {
        assert!(l.ready());
        l.pop().expect("an event")
    }

    /// A waking waits for its own sched_wakeup, past other tasks' wakings and wakeups;
    /// everything else is replayed at once.
    #[test]
    fn a_waking_waits_for_its_own_wakeup_only() {
        let mut l = Lookahead::default();
        l.push(switch(0, 0, 0, 0, 10));
        assert!(l.ready(), "a switch looks at nothing ahead");
        take(&mut l);
        l.push(waking(100, 0, 10, 5, 2));
        assert!(!l.ready());
        l.push(waking(110, 1, 11, 6, 1));
        l.push(wakeup(120, 1, 11, 6, 1));
        assert!(!l.ready(), "task 6's wakeup tells nothing of task 5's");
        l.push(wakeup(130, 3, 10, 5, 3));
        let w = take(&mut l);
        assert_eq!(w.ts, 100);
        assert_eq!(
            l.outcome(5, 100),
            Some(Outcome {
                chosen: 3,
                recorded_on: 3
            })
        );
        // Task 6's waking is next, and its wakeup is in.
        take(&mut l);
        assert_eq!(l.outcome(6, 110).map(|o| o.chosen), Some(1));
    }

    /// A second waking of the task before any wakeup means the first had none.
    #[test]
    fn a_later_waking_ends_the_search() {
        let mut l = Lookahead::default();
        l.push(waking(100, 0, 10, 5, 2));
        l.push(waking(200, 0, 10, 5, 2));
        take(&mut l);
        assert_eq!(l.outcome(5, 100), None);
        l.push(wakeup(300, 2, 10, 5, 2));
        take(&mut l);
        assert_eq!(l.outcome(5, 200).map(|o| o.chosen), Some(2));
    }

    /// A lost sched_wakeup: the waking is given up once the trace has gone past the
    /// outcome horizon, and a wakeup beyond it is not taken for its outcome.
    #[test]
    fn a_lost_wakeup_is_given_up_past_the_horizon() {
        let mut l = Lookahead::default();
        l.push(waking(100, 0, 10, 5, 2));
        l.push(switch(100 + OUTCOME_HORIZON_NS, 1, 0, 0, 11));
        assert!(
            !l.ready(),
            "an event at the horizon's edge may still be followed"
        );
        l.push(wakeup(101 + OUTCOME_HORIZON_NS, 2, 10, 5, 2));
        take(&mut l);
        assert_eq!(l.outcome(5, 100), None);
    }

    fn at(ts: u64, cpu: u32, kind: EventKind) -> Event {
        Event {
            ts,
            cpu,
            common_pid: 0,
            kind,
        }
    }

    /// select_idle_cpu's return is read from the waker's CPU, inside its selection;
    /// another CPU's probes and a selection that ends without a call give none.
    #[test]
    fn the_idle_scan_of_a_selection_is_read_from_its_own_cpu() {
        let mut l = Lookahead::default();
        l.push(waking(100, 0, 10, 5, 0));
        l.push(select_enter(110, 0, 0, 0x18));
        l.push(at(115, 1, EventKind::IdleScanEnter { target: 1 }));
        l.push(at(118, 1, EventKind::IdleScanExit { cpu: -1 }));
        l.push(at(120, 0, EventKind::IdleScanEnter { target: 0 }));
        l.push(at(130, 0, EventKind::IdleScanExit { cpu: 3 }));
        l.push(at(140, 0, EventKind::SelectExit { cpu: 3 }));
        l.push(wakeup(150, 3, 10, 5, 3));
        take(&mut l);
        assert_eq!(l.idle_scan(0, 100), Some(3));
        assert_eq!(l.idle_scan(2, 100), None);

        let mut l = Lookahead::default();
        l.push(waking(100, 0, 10, 5, 0));
        l.push(select_enter(110, 0, 0, 0x18));
        l.push(at(140, 0, EventKind::SelectExit { cpu: 0 }));
        // The next selection's scan is not this one's.
        l.push(at(200, 0, EventKind::IdleScanEnter { target: 0 }));
        l.push(at(210, 0, EventKind::IdleScanExit { cpu: 2 }));
        l.push(wakeup(220, 0, 10, 5, 0));
        take(&mut l);
        assert_eq!(l.idle_scan(0, 100), None);
    }

    /// On a trace with probes, a waking also waits for its selection's return on its
    /// own CPU, though its wakeup is in.
    #[test]
    fn with_probes_a_waking_waits_for_its_selection() {
        let mut l = Lookahead::default();
        l.expect_probes();
        l.push(waking(100, 0, 10, 5, 0));
        l.push(select_enter(110, 0, 0, 0x18));
        l.push(wakeup(130, 2, 10, 5, 2));
        assert!(!l.ready(), "the selection's return is not in");
        l.push(at(140, 1, EventKind::SelectExit { cpu: 1 }));
        assert!(!l.ready(), "another CPU's return is not this selection's");
        l.push(at(150, 0, EventKind::SelectExit { cpu: 2 }));
        take(&mut l);
        let sel = l.selection(0, 100).expect("a selection");
        assert_eq!((sel.entered_ns, sel.duration_ns), (110, Some(40)));
    }

    /// A fork's selection (WF_FORK, from wake_up_new_task) that follows a waking on its
    /// CPU is not the waking's: that waking selected nothing (its wakee pinned).
    #[test]
    fn a_forks_selection_is_not_a_wakings() {
        let mut l = Lookahead::default();
        l.expect_probes();
        l.push(waking(100, 0, 10, 5, 0));
        l.push(select_enter(110, 0, 0, 0x04));
        l.push(at(120, 0, EventKind::SelectExit { cpu: 3 }));
        l.push(wakeup(130, 0, 10, 5, 0));
        take(&mut l);
        assert!(l.selection(0, 100).is_none());
    }
}
