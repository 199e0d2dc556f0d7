//! Wakeup latency: from the sched_waking that made a task runnable to the sched_switch
//! that put it on a CPU, with the sched_wakeup and any sched_migrate_task in between
//! (the analogue of Perfetto's wakeup-latency queries over its thread states).
//!
//! A waking opens a pending wakeup for its task; the task's next switch-in closes it.
//! A later waking before that switch-in starts it again: the kernel traces a waking only
//! of a task in a sleeping state (ttwu_state_match), which a woken task is again only
//! once it has run, so the earlier wait has ended, at a switch-in the trace lost (the
//! host's 6.18 captures miss hundreds; counted from the first waking, one of them made
//! a 108 ms "wakeup" out of a 2 us one) or without one, the first waking having found
//! the task still on its CPU. A waking of a task that is still on its CPU opens one too: it closes at the
//! task's next switch-in, whenever that is. A pending wakeup that no switch-in closes
//! before the trace ends is never reported; [`Latencies::pending`] counts them.
//! sched_wakeup_new opens none: a new task's wait is not a wakeup's.

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use super::slices::SliceEnd;
use crate::pid_table::PidTable;
use crate::trace::{Event, EventKind, Wake};

/// One wakeup, from its sched_waking to the switch that ran the task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WakeupLatency {
    /// The woken task.
    pub pid: i32,
    /// The sched_waking that made the task runnable (the last since it switched in), ns.
    pub waking_ns: u64,
    /// The CPU that waking was recorded on.
    pub waking_cpu: u32,
    /// The task that waking ran in (common_pid; 0 when the idle task or an interrupt of
    /// it woke the task).
    pub waker: i32,
    /// Wakings since the task last switched in, the last included: more than one where
    /// the trace lost a switch-in.
    pub wakings: u32,
    /// The first sched_wakeup of the task after the waking; None when the trace holds
    /// none before the switch-in.
    pub wakeup_ns: Option<u64>,
    /// sched_migrate_task of the task between the waking and the switch-in.
    pub migrations: u32,
    /// The switch that put the task on a CPU, ns.
    pub switch_in_ns: u64,
    /// The CPU it was put on.
    pub cpu: u32,
    /// The task that switch took off the CPU (0 the idle task).
    pub prev_pid: i32,
    /// How that task left.
    pub prev_end: SliceEnd,
}

impl WakeupLatency {
    /// From the waking to the switch-in, ns.
    pub fn ns(&self) -> u64 {
        self.switch_in_ns.saturating_sub(self.waking_ns)
    }
}

/// A wakeup whose switch-in has not come yet.
#[derive(Debug, Clone, Copy)]
struct Pending {
    waking_ns: u64,
    waking_cpu: u32,
    waker: i32,
    wakings: u32,
    wakeup_ns: Option<u64>,
    migrations: u32,
}

/// The wakeup latencies of a stream of events, fed one event at a time.
///
/// A reader that counts only some wakings (replay counts the ones it replays) feeds
/// every other event through [`Latencies::feed`] and notes those wakings with
/// [`Latencies::waking`].
#[derive(Debug, Clone, Default)]
pub struct Latencies {
    pending: HashMap<i32, Pending>,
    awaiting_wakeup: AwaitingWakeup,
}

/// Tasks between a sched_waking and their sched_wakeup (or sched_wakeup_new): a
/// sched_migrate_task of one of them is the wakeup's placement, not load balancing.
#[derive(Debug, Clone, Default)]
pub struct AwaitingWakeup(PidTable<bool>);

impl AwaitingWakeup {
    /// A sched_waking of `pid`.
    #[inline]
    pub fn waking(&mut self, pid: i32) {
        self.0.replace(pid, true);
    }

    /// A sched_wakeup or sched_wakeup_new of `pid`.
    #[inline]
    pub fn woken(&mut self, pid: i32) {
        self.0.replace(pid, false);
    }

    /// Whether `pid` awaits its sched_wakeup.
    #[inline]
    pub fn contains(&self, pid: i32) -> bool {
        self.0.get(pid)
    }
}

impl Latencies {
    /// Reads one event; a switch-in of a woken task closes its wakeup.
    pub fn feed(&mut self, e: &Event) -> Option<WakeupLatency> {
        match &e.kind {
            EventKind::Waking(w) => {
                self.waking(e, w);
            }
            EventKind::Wakeup(w) | EventKind::WakeupNew(w) => self.wakeup(e.ts, w.pid),
            EventKind::Migrate { pid, .. } => self.migrate(*pid),
            EventKind::Switch {
                prev_pid,
                prev_state,
                next_pid,
                ..
            } => return self.switch_in(e, *next_pid, *prev_pid, *prev_state),
            _ => {}
        }
        None
    }

    /// A sched_waking of `w.pid`; whether a wakeup of it was already pending.
    pub fn waking(&mut self, e: &Event, w: &Wake) -> bool {
        self.awaiting_wakeup.waking(w.pid);
        match self.pending.entry(w.pid) {
            Entry::Occupied(mut p) => {
                let p = p.get_mut();
                *p = Pending {
                    waking_ns: e.ts,
                    waking_cpu: e.cpu,
                    waker: e.common_pid,
                    wakings: p.wakings + 1,
                    wakeup_ns: None,
                    migrations: 0,
                };
                true
            }
            Entry::Vacant(v) => {
                v.insert(Pending {
                    waking_ns: e.ts,
                    waking_cpu: e.cpu,
                    waker: e.common_pid,
                    wakings: 1,
                    wakeup_ns: None,
                    migrations: 0,
                });
                false
            }
        }
    }

    /// A sched_wakeup or sched_wakeup_new of `pid` at `ts`.
    fn wakeup(&mut self, ts: u64, pid: i32) {
        self.awaiting_wakeup.woken(pid);
        if let Some(p) = self.pending.get_mut(&pid) {
            p.wakeup_ns.get_or_insert(ts);
        }
    }

    /// A sched_migrate_task of `pid`.
    fn migrate(&mut self, pid: i32) {
        if let Some(p) = self.pending.get_mut(&pid) {
            p.migrations += 1;
        }
    }

    /// A sched_switch `e` that puts `next_pid` on, taking `prev_pid` off.
    fn switch_in(
        &mut self,
        e: &Event,
        next_pid: i32,
        prev_pid: i32,
        prev_state: i64,
    ) -> Option<WakeupLatency> {
        let p = self.pending.remove(&next_pid)?;
        Some(WakeupLatency {
            pid: next_pid,
            waking_ns: p.waking_ns,
            waking_cpu: p.waking_cpu,
            waker: p.waker,
            wakings: p.wakings,
            wakeup_ns: p.wakeup_ns,
            migrations: p.migrations,
            switch_in_ns: e.ts,
            cpu: e.cpu,
            prev_pid,
            prev_end: SliceEnd::of_prev_state(prev_state),
        })
    }

    /// Whether `pid` is between a sched_waking and its sched_wakeup: a migration now is
    /// the wakeup's placement, not load balancing.
    pub fn awaiting_wakeup(&self, pid: i32) -> bool {
        self.awaiting_wakeup.contains(pid)
    }

    /// Wakeups whose switch-in has not come (yet, or before the trace ended).
    pub fn pending(&self) -> usize {
        self.pending.len()
    }
}
