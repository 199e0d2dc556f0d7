//! Run slices per CPU: who ran on each CPU from one sched_switch to the next, and how
//! the slice ended (the analogue of Perfetto's `sched_slice` table).
//!
//! A CPU's first switch names a task that was running when the trace began: its slice
//! starts [`SliceStart::BeforeTrace`], and each reader decides what that is worth: info
//! and the report's timeline count nothing of it, simulate's statistics and the traced
//! workload model count it from the trace's first event. A switch whose prev_pid is not the task the CPU's previous
//! switch put on it means a switch is missing between them (lost events, or a capture
//! that started mid-way): the slice of the task put on ends [`SliceEnd::Unrecorded`] at
//! this switch, an upper bound, and the leaving task's slice starts
//! [`SliceStart::Unrecorded`].

use crate::abi::{EXIT_DEAD, EXIT_ZOMBIE, PREEMPTED};
use crate::trace::{Event, EventKind};

/// How a run slice began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SliceStart {
    /// At a recorded sched_switch, ns.
    At(u64),
    /// Before the trace: the CPU's first switch names the task leaving it.
    BeforeTrace,
    /// At a switch the trace does not hold: the CPU's previous switch put another task on.
    Unrecorded,
}

/// How a run slice ended, from the sched_switch prev_state of the task leaving.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SliceEnd {
    /// Left still runnable: prev_state R (0) or R+ (the preempted bit).
    Preempted,
    /// Left to sleep (S, D, or any other state).
    Blocked,
    /// Its last switch: EXIT_DEAD or EXIT_ZOMBIE.
    Dead,
    /// At a switch the trace does not hold, somewhere before `end_ns`: the CPU's next
    /// recorded switch names another task leaving.
    Unrecorded,
    /// Still running when the pass was finished.
    TraceEnd,
}

impl SliceEnd {
    /// How a task left its CPU, from sched_switch's prev_state.
    pub fn of_prev_state(prev_state: i64) -> SliceEnd {
        if prev_state == 0 || prev_state & PREEMPTED != 0 {
            SliceEnd::Preempted
        } else if prev_state & (EXIT_DEAD | EXIT_ZOMBIE) != 0 {
            SliceEnd::Dead
        } else {
            SliceEnd::Blocked
        }
    }
}

/// One task's time on one CPU, from one switch to the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slice {
    /// The CPU it ran on.
    pub cpu: u32,
    /// The task (0 is the idle task).
    pub pid: i32,
    /// When, or how, it began.
    pub start: SliceStart,
    /// When it ended, ns: the switch out of it, or the end the pass was finished at.
    pub end_ns: u64,
    /// How it ended.
    pub end: SliceEnd,
}

impl Slice {
    /// Its length, when both ends were recorded (started at a switch, ended at a switch
    /// or at the end of the trace).
    pub fn recorded_ns(&self) -> Option<u64> {
        match (self.start, self.end) {
            (_, SliceEnd::Unrecorded) => None,
            (SliceStart::At(t), _) => Some(self.end_ns.saturating_sub(t)),
            _ => None,
        }
    }
}

/// What one sched_switch ends: the leaving task's slice, and before it, when a switch is
/// missing, the slice of the task the CPU's previous switch put on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SwitchEnds {
    /// The slice of the switch's prev_pid, ended as its prev_state says.
    pub prev: Slice,
    /// The slice the CPU's previous switch began, when that was another task: it ended
    /// at a switch the trace does not hold.
    pub unrecorded: Option<Slice>,
}

impl SwitchEnds {
    /// Both slices, the unrecorded one (which ended earlier) first.
    pub fn slices(self) -> impl Iterator<Item = Slice> {
        self.unrecorded
            .into_iter()
            .chain(std::iter::once(self.prev))
    }
}

/// The run slices of a stream of events, fed one event at a time.
#[derive(Debug, Clone, Default)]
pub struct Slices {
    /// Per CPU, once it has switched: the task on it and since when.
    on_cpu: Vec<Option<(i32, u64)>>,
}

impl Slices {
    /// Reads one event; a sched_switch ends one or two slices.
    pub fn feed(&mut self, e: &Event) -> Option<SwitchEnds> {
        let EventKind::Switch {
            prev_pid,
            prev_state,
            next_pid,
            ..
        } = &e.kind
        else {
            return None;
        };
        Some(self.switch(e.cpu, e.ts, *prev_pid, *prev_state, *next_pid))
    }

    /// A sched_switch on `cpu` at `ts`: `prev_pid` leaves in `prev_state`, `next_pid`
    /// runs from now.
    pub fn switch(
        &mut self,
        cpu: u32,
        ts: u64,
        prev_pid: i32,
        prev_state: i64,
        next_pid: i32,
    ) -> SwitchEnds {
        let c = cpu as usize;
        if c >= self.on_cpu.len() {
            self.on_cpu.resize(c + 1, None);
        }
        let slice = |pid, start, end| Slice {
            cpu,
            pid,
            start,
            end_ns: ts,
            end,
        };
        let left = SliceEnd::of_prev_state(prev_state);
        match self.on_cpu[c].replace((next_pid, ts)) {
            None => SwitchEnds {
                prev: slice(prev_pid, SliceStart::BeforeTrace, left),
                unrecorded: None,
            },
            Some((pid, since)) if pid == prev_pid => SwitchEnds {
                prev: slice(prev_pid, SliceStart::At(since), left),
                unrecorded: None,
            },
            Some((pid, since)) => SwitchEnds {
                prev: slice(prev_pid, SliceStart::Unrecorded, left),
                unrecorded: Some(slice(pid, SliceStart::At(since), SliceEnd::Unrecorded)),
            },
        }
    }

    /// Whether `cpu` has had a switch: until then, who runs there is not known.
    pub fn switched(&self, cpu: u32) -> bool {
        self.running(cpu).is_some()
    }

    /// The task on `cpu` since its last switch, and since when; None before its first.
    pub fn running(&self, cpu: u32) -> Option<(i32, u64)> {
        self.on_cpu.get(cpu as usize).copied().flatten()
    }

    /// The slices still open, ended [`SliceEnd::TraceEnd`] at `end_ns`, by CPU; the pass
    /// is then empty.
    pub fn finish(&mut self, end_ns: u64) -> impl Iterator<Item = Slice> + '_ {
        self.on_cpu
            .iter_mut()
            .enumerate()
            .filter_map(move |(cpu, on)| {
                let (pid, since) = on.take()?;
                Some(Slice {
                    cpu: cpu as u32,
                    pid,
                    start: SliceStart::At(since),
                    end_ns,
                    end: SliceEnd::TraceEnd,
                })
            })
    }
}
