//! The event model every reader produces: one time-ordered stream of typed scheduler
//! events. Field names follow the tracepoints in include/trace/events/sched.h and irq.h.

use serde::{Deserialize, Serialize};

/// A task name as the kernel stores it: at most 16 bytes (TASK_COMM_LEN), kept inline so
/// decoding an event never allocates. The bytes after the name are zero, so the name's
/// length is where the first zero is: 16 bytes and nothing else make a copy one move.
///
/// Aligned to 8 so that it is copied in two whole words: an unaligned comm inside a
/// decoded event made its copies reload bytes stored in other widths, which stalls.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(align(8))]
pub struct Comm {
    bytes: [u8; 16],
}

/// The position of the first zero byte of `v`'s 16 (16 if none): the lowest bit of the
/// has-zero-byte test is exact.
#[inline(always)]
fn first_nul(v: u128) -> usize {
    const ONES: u128 = u128::from_le_bytes([0x01; 16]);
    const HIGHS: u128 = u128::from_le_bytes([0x80; 16]);
    (((v.wrapping_sub(ONES) & !v & HIGHS).trailing_zeros()) / 8) as usize
}

impl Comm {
    /// Builds a comm from raw bytes, stopping at the first NUL; longer names are cut at 16
    /// bytes, the kernel's own limit for the fields this model carries.
    #[inline]
    pub fn from_bytes(raw: &[u8]) -> Comm {
        let mut bytes = [0u8; 16];
        let n = raw.len().min(16);
        bytes[..n].copy_from_slice(&raw[..n]);
        // The name ends at the first NUL (fixed arrays are NUL-padded): zero what follows.
        let v = u128::from_le_bytes(bytes);
        let len = first_nul(v);
        let kept = if len == 16 {
            v
        } else {
            v & ((1u128 << (len * 8)) - 1)
        };
        Comm {
            bytes: kept.to_le_bytes(),
        }
    }

    /// The name's bytes, without the NUL padding (0 to 16 bytes).
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..first_nul(u128::from_le_bytes(self.bytes))]
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
    /// The woken task's comm.
    pub comm: Comm,
    /// The woken task's PID (the kernel's TID: one per thread).
    pub pid: i32,
    /// p->prio of the woken task: 0..=99 real-time, 100..=139 fair (120 is nice 0).
    pub prio: i32,
    /// task_cpu(p) when the event fired: prev CPU for waking, chosen CPU for wakeup.
    pub target_cpu: i32,
}

/// What happened, with the tracepoint's own fields; one variant per [`EventType`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventKind {
    /// sched_switch: `prev` leaves the CPU the event was recorded on and `next` runs on it.
    Switch {
        /// The comm of the task leaving the CPU.
        prev_comm: Comm,
        /// The PID of the task leaving the CPU (0 is the idle task).
        prev_pid: i32,
        /// p->prio of the task leaving the CPU (120 is nice 0).
        prev_prio: i32,
        /// TASK_REPORT encoding: 0 running, 1 S, 2 D, ..., 0x100 preempted (R+).
        prev_state: i64,
        /// The comm of the task taking the CPU.
        next_comm: Comm,
        /// The PID of the task taking the CPU (0 is the idle task).
        next_pid: i32,
        /// p->prio of the task taking the CPU.
        next_prio: i32,
    },
    /// sched_waking: try_to_wake_up() starts on the waker's CPU, before select_task_rq.
    Waking(Wake),
    /// sched_wakeup: the woken task is runnable on `target_cpu`, the CPU select_task_rq
    /// chose (or its own CPU when it had not left the runqueue yet).
    Wakeup(Wake),
    /// sched_wakeup_new: a new task's first enqueue, after select_task_rq with WF_FORK.
    WakeupNew(Wake),
    /// sched_migrate_task: set_task_cpu() moves a task to another CPU, at a wakeup or by
    /// load balancing.
    Migrate {
        /// The moved task's comm.
        comm: Comm,
        /// The moved task's PID.
        pid: i32,
        /// p->prio of the moved task.
        prio: i32,
        /// The CPU the task was on (task_cpu(p) before the move).
        orig_cpu: i32,
        /// The CPU the task moves to.
        dest_cpu: i32,
    },
    /// sched_process_fork: a new task is created (a thread or a process).
    Fork {
        /// The forking task's comm.
        parent_comm: Comm,
        /// The forking task's PID.
        parent_pid: i32,
        /// The child's comm (a copy of the parent's until it calls exec).
        child_comm: Comm,
        /// The child's PID.
        child_pid: i32,
    },
    /// sched_process_exit: a task exits, fired in do_exit() before its last switch out.
    Exit {
        /// The exiting task's comm.
        comm: Comm,
        /// The exiting task's PID.
        pid: i32,
        /// p->prio of the exiting task.
        prio: i32,
        /// Added to the tracepoint in 2025 (v6.19+); absent before.
        group_dead: Option<bool>,
    },
    /// irq_handler_entry: a hard interrupt handler starts on the recording CPU.
    IrqEntry {
        /// The interrupt number.
        irq: i32,
        /// The handler's action->name, as /proc/interrupts shows it.
        name: Box<str>,
    },
    /// irq_handler_exit: the handler of `irq` returned.
    IrqExit {
        /// The interrupt number.
        irq: i32,
        /// The handler's irqreturn_t: 0 IRQ_NONE, 1 IRQ_HANDLED, 2 IRQ_WAKE_THREAD.
        ret: i32,
    },
    /// softirq_entry: a softirq vector starts running on the recording CPU.
    SoftirqEntry {
        /// The softirq vector: 0 HI, 1 TIMER, 2 NET_TX, 3 NET_RX, 4 BLOCK, 5 IRQ_POLL,
        /// 6 TASKLET, 7 SCHED, 8 HRTIMER, 9 RCU.
        vec: u32,
    },
    /// softirq_exit: the softirq vector finished.
    SoftirqExit {
        /// The softirq vector, numbered as in [`EventKind::SoftirqEntry`].
        vec: u32,
    },
    /// Entry of select_task_rq_fair, from the kprobe `--search-latency` installs: the
    /// prev CPU and wake flags it was called with (WF_TTWU, WF_SYNC, WF_FORK, ...).
    SelectEnter {
        /// The task's CPU before the wakeup, the `prev_cpu` argument.
        prev_cpu: i32,
        /// The WF_* flags as the traced kernel numbers them (v6.x: WF_FORK 0x04,
        /// WF_TTWU 0x08, WF_SYNC 0x10).
        wake_flags: u32,
    },
    /// Return of select_task_rq_fair (kretprobe): the CPU it chose.
    SelectExit {
        /// The CPU select_task_rq_fair returned.
        cpu: i32,
    },
    /// Entry of select_idle_cpu, the LLC scan, from the kprobe `--search-latency`
    /// installs where the kernel has it out of line (the rig's `noinline` patch).
    IdleScanEnter {
        /// The `target` argument: where the scan starts (it walks from target + 1).
        target: i32,
    },
    /// Return of select_idle_cpu (kretprobe): the idle CPU found, or -1.
    IdleScanExit {
        /// What select_idle_cpu returned.
        cpu: i32,
    },
}

/// Every event kind the model knows, in a fixed order used for counts and columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventType {
    /// sched:sched_switch.
    SchedSwitch,
    /// sched:sched_waking.
    SchedWaking,
    /// sched:sched_wakeup.
    SchedWakeup,
    /// sched:sched_wakeup_new.
    SchedWakeupNew,
    /// sched:sched_migrate_task.
    SchedMigrateTask,
    /// sched:sched_process_fork.
    SchedProcessFork,
    /// sched:sched_process_exit.
    SchedProcessExit,
    /// irq:irq_handler_entry.
    IrqHandlerEntry,
    /// irq:irq_handler_exit.
    IrqHandlerExit,
    /// irq:softirq_entry.
    SoftirqEntry,
    /// irq:softirq_exit.
    SoftirqExit,
    /// The kprobe on select_task_rq_fair entry (`sisreplay:select_task_rq_enter_<pid>`).
    SelectEnter,
    /// The kretprobe on select_task_rq_fair return (`sisreplay:select_task_rq_exit_<pid>`).
    SelectExit,
    /// The kprobe on select_idle_cpu entry (`sisreplay:select_idle_cpu_enter_<pid>`).
    IdleScanEnter,
    /// The kretprobe on select_idle_cpu return (`sisreplay:select_idle_cpu_exit_<pid>`).
    IdleScanExit,
}

impl EventType {
    /// Every type, in declaration order: `ALL[t.index()] == t`.
    pub const ALL: [EventType; 15] = [
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
        EventType::IdleScanEnter,
        EventType::IdleScanExit,
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
            EventType::IdleScanEnter => "select_idle_cpu_enter",
            EventType::IdleScanExit => "select_idle_cpu_exit",
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
            EventType::SelectEnter
            | EventType::SelectExit
            | EventType::IdleScanEnter
            | EventType::IdleScanExit => "sisreplay",
            _ => "sched",
        }
    }

    /// The type of a tracepoint name. The probe events capture defines carry its PID
    /// (`select_task_rq_enter_1234`), so that what a dead capture left is told apart.
    pub fn from_name(name: &str) -> Option<EventType> {
        let probe = |n: &str| -> Option<EventType> {
            let (base, pid) = n.rsplit_once('_')?;
            (!pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit())).then_some(())?;
            [
                EventType::SelectEnter,
                EventType::SelectExit,
                EventType::IdleScanEnter,
                EventType::IdleScanExit,
            ]
            .into_iter()
            .find(|t| t.name() == base)
        };
        EventType::ALL
            .into_iter()
            .find(|t| t.name() == name)
            .or_else(|| probe(name))
    }

    /// The type's position in [`EventType::ALL`], for per-type arrays of counts.
    pub fn index(self) -> usize {
        self as usize
    }
}

impl EventKind {
    /// The tracepoint this event came from.
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
            EventKind::IdleScanEnter { .. } => EventType::IdleScanEnter,
            EventKind::IdleScanExit { .. } => EventType::IdleScanExit,
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
    /// The tracepoint's name and fields.
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

    /// The select_task_rq_fair entry probe on `cpu`, for a task whose CPU was `prev`.
    pub fn select_enter(ts: u64, cpu: u32, prev: u32, wake_flags: u32) -> Event {
        Event {
            ts,
            cpu,
            common_pid: 0,
            kind: EventKind::SelectEnter {
                prev_cpu: prev as i32,
                wake_flags,
            },
        }
    }

    /// sched_process_fork of `child` by `parent`, recorded on `cpu`.
    pub fn fork(ts: u64, cpu: u32, parent: i32, child: i32) -> Event {
        Event {
            ts,
            cpu,
            common_pid: parent,
            kind: EventKind::Fork {
                parent_comm: comm(),
                parent_pid: parent,
                child_comm: comm(),
                child_pid: child,
            },
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

#[cfg(test)]
mod tests {
    use super::Comm;

    /// The name is cut at the first NUL (or 16 bytes) and the rest of its bytes are zero,
    /// whatever follows: names of every length, with and without padding and junk after.
    #[test]
    fn comm_ends_at_the_first_nul() {
        let mut rng = fastrand::Rng::with_seed(3);
        for _ in 0..20_000 {
            let len = rng.usize(0..24);
            let raw: Vec<u8> = (0..len)
                .map(|_| if rng.u8(..) < 40 { 0 } else { rng.u8(..) })
                .collect();
            let c = Comm::from_bytes(&raw);
            let head = &raw[..raw.len().min(16)];
            let want = &head[..head.iter().position(|&b| b == 0).unwrap_or(head.len())];
            assert_eq!(c.as_bytes(), want, "{raw:?}");
            let mut padded = [0u8; 16];
            padded[..want.len()].copy_from_slice(want);
            assert_eq!(c.bytes, padded, "{raw:?}");
        }
    }
}
