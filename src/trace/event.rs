//! The event model every reader produces: one time-ordered stream of typed scheduler
//! events. Field names follow the tracepoints in include/trace/events/sched.h and irq.h.

use serde::{Deserialize, Serialize};

/// A task name as the kernel stores it: at most 16 bytes (TASK_COMM_LEN), kept inline so
/// decoding an event never allocates.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Comm {
    bytes: [u8; 16],
    len: u8,
}

impl Comm {
    /// Builds a comm from raw bytes, stopping at the first NUL; longer names are cut at 16
    /// bytes, the kernel's own limit for the fields this model carries.
    #[inline]
    pub fn from_bytes(raw: &[u8]) -> Comm {
        let mut bytes = [0u8; 16];
        let n = raw.len().min(16);
        bytes[..n].copy_from_slice(&raw[..n]);
        // The name ends at the first NUL (fixed arrays are NUL-padded).
        let len = bytes.iter().position(|&b| b == 0).unwrap_or(16);
        bytes[len..].fill(0);
        Comm {
            bytes,
            len: len as u8,
        }
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }

    /// The name as text; bytes that are not UTF-8 are replaced, as `trace-cmd report` does
    /// not promise any encoding either.
    pub fn to_str_lossy(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(self.as_bytes())
    }
}

impl std::fmt::Debug for Comm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.to_str_lossy())
    }
}

impl std::fmt::Display for Comm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_str_lossy())
    }
}

/// The payload shared by sched_waking, sched_wakeup and sched_wakeup_new.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wake {
    pub comm: Comm,
    pub pid: i32,
    pub prio: i32,
    /// task_cpu(p) when the event fired: prev CPU for waking, chosen CPU for wakeup.
    pub target_cpu: i32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventKind {
    Switch {
        prev_comm: Comm,
        prev_pid: i32,
        prev_prio: i32,
        /// TASK_REPORT encoding: 0 running, 1 S, 2 D, ..., 0x100 preempted (R+).
        prev_state: i64,
        next_comm: Comm,
        next_pid: i32,
        next_prio: i32,
    },
    Waking(Wake),
    Wakeup(Wake),
    WakeupNew(Wake),
    Migrate {
        comm: Comm,
        pid: i32,
        prio: i32,
        orig_cpu: i32,
        dest_cpu: i32,
    },
    Fork {
        parent_comm: Comm,
        parent_pid: i32,
        child_comm: Comm,
        child_pid: i32,
    },
    Exit {
        comm: Comm,
        pid: i32,
        prio: i32,
        /// Added to the tracepoint in 2025 (v6.19+); absent before.
        group_dead: Option<bool>,
    },
    IrqEntry {
        irq: i32,
        name: Box<str>,
    },
    IrqExit {
        irq: i32,
        ret: i32,
    },
    SoftirqEntry {
        vec: u32,
    },
    SoftirqExit {
        vec: u32,
    },
    /// Entry of select_task_rq_fair, from the kprobe `--search-latency` installs: the
    /// prev CPU and wake flags it was called with (WF_TTWU, WF_SYNC, WF_FORK, ...).
    SelectEnter {
        prev_cpu: i32,
        wake_flags: u32,
    },
    /// Return of select_task_rq_fair (kretprobe): the CPU it chose.
    SelectExit {
        cpu: i32,
    },
}

/// Every event kind the model knows, in a fixed order used for counts and columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventType {
    SchedSwitch,
    SchedWaking,
    SchedWakeup,
    SchedWakeupNew,
    SchedMigrateTask,
    SchedProcessFork,
    SchedProcessExit,
    IrqHandlerEntry,
    IrqHandlerExit,
    SoftirqEntry,
    SoftirqExit,
    SelectEnter,
    SelectExit,
}

impl EventType {
    pub const ALL: [EventType; 13] = [
        EventType::SchedSwitch,
        EventType::SchedWaking,
        EventType::SchedWakeup,
        EventType::SchedWakeupNew,
        EventType::SchedMigrateTask,
        EventType::SchedProcessFork,
        EventType::SchedProcessExit,
        EventType::IrqHandlerEntry,
        EventType::IrqHandlerExit,
        EventType::SoftirqEntry,
        EventType::SoftirqExit,
        EventType::SelectEnter,
        EventType::SelectExit,
    ];

    /// The tracepoint's name, without its system.
    pub fn name(self) -> &'static str {
        match self {
            EventType::SchedSwitch => "sched_switch",
            EventType::SchedWaking => "sched_waking",
            EventType::SchedWakeup => "sched_wakeup",
            EventType::SchedWakeupNew => "sched_wakeup_new",
            EventType::SchedMigrateTask => "sched_migrate_task",
            EventType::SchedProcessFork => "sched_process_fork",
            EventType::SchedProcessExit => "sched_process_exit",
            EventType::IrqHandlerEntry => "irq_handler_entry",
            EventType::IrqHandlerExit => "irq_handler_exit",
            EventType::SoftirqEntry => "softirq_entry",
            EventType::SoftirqExit => "softirq_exit",
            EventType::SelectEnter => "select_task_rq_enter",
            EventType::SelectExit => "select_task_rq_exit",
        }
    }

    /// The tracefs system the event lives in.
    pub fn system(self) -> &'static str {
        match self {
            EventType::IrqHandlerEntry
            | EventType::IrqHandlerExit
            | EventType::SoftirqEntry
            | EventType::SoftirqExit => "irq",
            // The kprobe group capture creates.
            EventType::SelectEnter | EventType::SelectExit => "sisreplay",
            _ => "sched",
        }
    }

    /// The type of a tracepoint name. The probe events capture defines carry its PID
    /// (`select_task_rq_enter_1234`), so that what a dead capture left is told apart.
    pub fn from_name(name: &str) -> Option<EventType> {
        let probe = |n: &str| -> Option<EventType> {
            let (base, pid) = n.rsplit_once('_')?;
            (!pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit())).then_some(())?;
            [EventType::SelectEnter, EventType::SelectExit]
                .into_iter()
                .find(|t| t.name() == base)
        };
        EventType::ALL
            .into_iter()
            .find(|t| t.name() == name)
            .or_else(|| probe(name))
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

impl EventKind {
    pub fn event_type(&self) -> EventType {
        match self {
            EventKind::Switch { .. } => EventType::SchedSwitch,
            EventKind::Waking(_) => EventType::SchedWaking,
            EventKind::Wakeup(_) => EventType::SchedWakeup,
            EventKind::WakeupNew(_) => EventType::SchedWakeupNew,
            EventKind::Migrate { .. } => EventType::SchedMigrateTask,
            EventKind::Fork { .. } => EventType::SchedProcessFork,
            EventKind::Exit { .. } => EventType::SchedProcessExit,
            EventKind::IrqEntry { .. } => EventType::IrqHandlerEntry,
            EventKind::IrqExit { .. } => EventType::IrqHandlerExit,
            EventKind::SoftirqEntry { .. } => EventType::SoftirqEntry,
            EventKind::SoftirqExit { .. } => EventType::SoftirqExit,
            EventKind::SelectEnter { .. } => EventType::SelectEnter,
            EventKind::SelectExit { .. } => EventType::SelectExit,
        }
    }
}

/// One event: when, where, in whose context, and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Trace clock in nanoseconds.
    pub ts: u64,
    /// The CPU whose buffer recorded the event.
    pub cpu: u32,
    /// common_pid: the task running when the event fired (0 is the idle task).
    pub common_pid: i32,
    pub kind: EventKind,
}

/// Hand-built events for the unit tests of the code that reads them.
#[cfg(test)]
pub(crate) mod build {
    use super::{Comm, Event, EventKind, Wake};

    fn comm() -> Comm {
        Comm::from_bytes(b"t")
    }

    /// sched_switch on `cpu`: `prev` leaves in `prev_state` (0 R, 1 S, 0x100 R+).
    pub fn switch(ts: u64, cpu: u32, prev: i32, prev_state: i64, next: i32) -> Event {
        Event {
            ts,
            cpu,
            common_pid: prev,
            kind: EventKind::Switch {
                prev_comm: comm(),
                prev_pid: prev,
                prev_prio: 120,
                prev_state,
                next_comm: comm(),
                next_pid: next,
                next_prio: 120,
            },
        }
    }

    fn wake(pid: i32, target: u32) -> Wake {
        Wake {
            comm: comm(),
            pid,
            prio: 120,
            target_cpu: target as i32,
        }
    }

    /// sched_waking of `pid` by `waker`, recorded on `cpu`; `prev` is task_cpu(p).
    pub fn waking(ts: u64, cpu: u32, waker: i32, pid: i32, prev: u32) -> Event {
        Event {
            ts,
            cpu,
            common_pid: waker,
            kind: EventKind::Waking(wake(pid, prev)),
        }
    }

    /// sched_wakeup of `pid` onto `target`, recorded on `cpu`.
    pub fn wakeup(ts: u64, cpu: u32, waker: i32, pid: i32, target: u32) -> Event {
        Event {
            ts,
            cpu,
            common_pid: waker,
            kind: EventKind::Wakeup(wake(pid, target)),
        }
    }

    /// sched_migrate_task of `pid` from `orig` to `dest`, recorded on `cpu`.
    pub fn migrate(ts: u64, cpu: u32, pid: i32, orig: u32, dest: u32) -> Event {
        Event {
            ts,
            cpu,
            common_pid: 0,
            kind: EventKind::Migrate {
                comm: comm(),
                pid,
                prio: 120,
                orig_cpu: orig as i32,
                dest_cpu: dest as i32,
            },
        }
    }
}
