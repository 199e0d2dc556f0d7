//! wake_wide's memory of every task (wakee_flips, wakee_flip_decay_ts, last_wakee) kept
//! over a stretch of trace without the rest of the machine state, for a replay that
//! starts partway through (a time slice, see replay::slices). The flips halve once a
//! second per task, at a time that depends on when the task was first seen: a warm-up of
//! a fraction of a second rebuilds neither the counts nor the phase of their halving,
//! while this pass over everything before costs a hash lookup per event.
//!
//! It follows Machine's rules: a task is first seen at the events that create it there
//! (sched_switch, sched_wakeup, sched_migrate_task, fork), a fork copies the parent's
//! memory, an exit forgets the last wakee, and record_wakee runs for each sched_waking
//! the replay would select a CPU for: in a trace with selection probes, those a
//! select_task_rq_fair entry follows on the waking's CPU; without, those of a wakee
//! neither running nor queued, nor a per-CPU kernel thread.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use crate::abi::{PREEMPTED, TASK_UNINTERRUPTIBLE, WF_TTWU};
use crate::state::machine::{flips_key, TaskState};
use crate::trace::{Event, EventKind};

/// One task's wake_wide memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flips {
    /// p->wakee_flips.
    pub flips: u32,
    /// p->wakee_flip_decay_ts (ns).
    pub decay_ts: u64,
    /// p->last_wakee.
    pub last_wakee: i32,
}

/// wake_wide's memory of the tasks alive before a trace, which the trace cannot show and
/// the tasks they fork inherit: every such task is taken to have `flips`, last halved
/// `halved_ago_ns` before it is first seen. record_wakee halves a waker's flips once a
/// second has passed since the last halving, so the age decides whether a workload's
/// launcher forks it before or after its next halving; as much as the count, it
/// decides which tasks wake_wide spreads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct BeforeTrace {
    /// p->wakee_flips.
    pub flips: u32,
    /// How long before a task is first seen its p->wakee_flip_decay_ts lies (ns).
    pub halved_ago_ns: u64,
}

impl BeforeTrace {
    /// `flips`, halved as the task is first seen.
    pub fn flips(flips: u32) -> BeforeTrace {
        BeforeTrace {
            flips,
            halved_ago_ns: 0,
        }
    }

    /// The memory of a task first seen at `now`, other than at its fork.
    pub fn at(self, now: u64) -> Flips {
        Flips {
            flips: self.flips,
            decay_ts: now.saturating_sub(self.halved_ago_ns),
            last_wakee: 0,
        }
    }

    /// As `--flips-before-trace` takes it: `16`, or `16/400ms` with an age.
    pub fn label(self) -> String {
        if self.halved_ago_ns == 0 {
            self.flips.to_string()
        } else {
            format!("{}/{}ms", self.flips, self.halved_ago_ns as f64 / 1e6)
        }
    }
}

/// A waking more than this after the one before it starts a new run of in-fork
/// wakings (ForkCopy): the rest of copy_process after dup_mmap takes tens of
/// microseconds (146 µs on the TCG rig, traces/rig/ground-truth).
pub const FORK_COPY_NS: u64 = 1_000_000;

/// What a fork's child copies of its parent's wake_wide memory. dup_task_struct copies
/// it as copy_process starts, but the fork's event comes after copy_process, and in
/// between the parent can wake tasks: dup_mmap holds the parent's mmap lock while it
/// copies, and its release wakes the threads that faulted meanwhile, each blocked
/// uninterruptibly. A run of wakings of uninterruptible sleepers, each within
/// FORK_COPY_NS of the one before, that the parent's fork follows within FORK_COPY_NS
/// with no switch of the parent between, is taken as those: the child gets the memory
/// from before them. (A capture's launcher is multi-threaded, so every task of the
/// workload it forks inherits this.)
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ForkCopy {
    /// The memory before the run, and the time of the run's last waking.
    before: Option<(Flips, u64)>,
}

impl ForkCopy {
    /// The task, whose memory is `own` before this waking, wakes a task whose last
    /// sleep was `uninterruptible` or not.
    pub fn waking(&mut self, own: Flips, uninterruptible: bool, now: u64) {
        self.before = match self.before {
            _ if !uninterruptible => None,
            Some((f, last)) if now.saturating_sub(last) <= FORK_COPY_NS => Some((f, now)),
            _ => Some((own, now)),
        };
    }

    /// The task is switched out: whatever it forks next, it copies after this.
    pub fn forget(&mut self) {
        self.before = None;
    }

    /// What the child of a fork at `now` copies, the parent's memory being `own`.
    pub fn copied(&mut self, own: Flips, now: u64) -> Flips {
        match self.before.take() {
            Some((f, last)) if now.saturating_sub(last) <= FORK_COPY_NS => f,
            _ => own,
        }
    }
}

/// What the pass keeps of a task.
#[derive(Debug, Clone, Copy)]
struct Seen {
    flips: Flips,
    /// Running or queued.
    runnable: bool,
    /// Its last sleep was uninterruptible (TASK_UNINTERRUPTIBLE).
    uninterruptible: bool,
    fork_copy: ForkCopy,
}

/// Every task's wake_wide memory, and whether it is runnable, from the events so far.
#[derive(Debug, Clone, Default)]
pub struct FlipsPass {
    tasks: HashMap<i32, Seen, BuildHasherDefault<ahash::AHasher>>,
    /// The trace carries selection probes.
    probes: bool,
    /// The memory of a task first seen other than at its fork (Machine::flips_before_trace).
    assumed: BeforeTrace,
    /// Per CPU, with probes: the last sched_waking (waker, wakee, time) while no entry
    /// probe or other event of that CPU has told whether it selected.
    waiting: HashMap<u32, (i32, i32, u64), BuildHasherDefault<ahash::AHasher>>,
}

impl FlipsPass {
    /// A pass over a trace known to carry selection probes, or not (then they are
    /// taken into account from the first one seen), with `assumed` flips for the tasks
    /// alive before it.
    pub fn new(probes: bool, assumed: BeforeTrace) -> FlipsPass {
        FlipsPass {
            probes,
            assumed,
            ..FlipsPass::default()
        }
    }

    /// Takes the next event of the trace.
    pub fn apply(&mut self, e: &Event) {
        let now = e.ts;
        if let EventKind::SelectEnter { wake_flags, .. } = e.kind {
            self.probes = true;
            // Only a wakeup's selection records the wakee; a fork's or an exec's on
            // this CPU means its last waking selected nothing.
            if let Some((waker, wakee, at)) = self.waiting.remove(&e.cpu) {
                if wake_flags & WF_TTWU != 0 {
                    self.record_wakee(waker, wakee, at);
                }
            }
            return;
        }
        if matches!(e.kind, EventKind::Switch { .. } | EventKind::Waking(_)) {
            // This CPU's last waking selected nothing.
            self.waiting.remove(&e.cpu);
        }
        match &e.kind {
            EventKind::Switch {
                prev_pid,
                prev_state,
                next_pid,
                ..
            } => {
                let still_queued = *prev_state == 0 || *prev_state & PREEMPTED != 0;
                if *prev_pid != 0 {
                    let prev = self.task(*prev_pid, now);
                    prev.runnable = still_queued;
                    prev.uninterruptible = !still_queued && *prev_state & TASK_UNINTERRUPTIBLE != 0;
                    prev.fork_copy.forget();
                }
                if *next_pid != 0 {
                    self.task(*next_pid, now).runnable = true;
                }
            }
            EventKind::Wakeup(w) | EventKind::WakeupNew(w) => self.task(w.pid, now).runnable = true,
            EventKind::Migrate { pid, .. } => {
                self.task(*pid, now);
            }
            EventKind::Fork {
                parent_pid,
                child_pid,
                ..
            } => {
                let inherited = self
                    .tasks
                    .get_mut(parent_pid)
                    .map(|p| p.fork_copy.copied(p.flips, now));
                let child = self.task(*child_pid, now);
                if let Some(f) = inherited {
                    child.flips = f;
                }
            }
            EventKind::Exit { pid, .. } => {
                if let Some(t) = self.tasks.get_mut(pid) {
                    t.flips.last_wakee = 0;
                }
            }
            EventKind::Waking(w) if self.probes => {
                self.waiting
                    .insert(e.cpu, (flips_key(e.common_pid, e.cpu), w.pid, now));
            }
            EventKind::Waking(w) => {
                let queued = self.tasks.get(&w.pid).is_some_and(|t| t.runnable);
                let pinned = TaskState::comm_is_percpu_kthread(w.comm.as_bytes());
                if !queued && !pinned {
                    self.record_wakee(flips_key(e.common_pid, e.cpu), w.pid, now);
                }
            }
            _ => {}
        }
    }

    /// Each task's memory.
    pub fn flips(&self) -> HashMap<i32, Flips> {
        self.tasks.iter().map(|(&pid, t)| (pid, t.flips)).collect()
    }

    fn task(&mut self, pid: i32, now: u64) -> &mut Seen {
        self.tasks.entry(pid).or_insert(Seen {
            flips: self.assumed.at(now),
            runnable: false,
            uninterruptible: false,
            fork_copy: ForkCopy::default(),
        })
    }

    /// Machine::record_wakee's rule.
    fn record_wakee(&mut self, waker: i32, wakee: i32, now: u64) {
        if waker == 0 {
            return;
        }
        // As Machine::record_wakee: a CPU's idle task counts from the assumed flips, a
        // task not seen yet does not.
        if waker > 0 && !self.tasks.contains_key(&waker) {
            return;
        }
        let uninterruptible = self.tasks.get(&wakee).is_some_and(|t| t.uninterruptible);
        let w = self.task(waker, now);
        w.fork_copy.waking(w.flips, uninterruptible, now);
        let f = &mut w.flips;
        super::machine::flip(&mut f.flips, &mut f.decay_ts, &mut f.last_wakee, wakee, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::{WF_SYNC, WF_TTWU};
    use crate::trace::event::build::{select_enter, switch, waking};

    const WF_FORK: u32 = 0x04;

    /// Task 10 runs on CPU 0 and wakes 11, 12 and 13, each followed by `flags`' probe.
    fn wakes(flags: [u32; 3]) -> FlipsPass {
        let mut f = FlipsPass::new(true, BeforeTrace::flips(0));
        f.apply(&switch(0, 0, 0, 0, 10));
        for (i, (wakee, fl)) in [11, 12, 13].into_iter().zip(flags).enumerate() {
            let t = 1_000 + i as u64 * 1_000;
            f.apply(&waking(t, 0, 10, wakee, 1));
            f.apply(&select_enter(t + 10, 0, 1, fl));
        }
        f
    }

    /// record_wakee runs in select_task_rq_fair for a wakeup only (WF_TTWU): a fork's
    /// selection (wake_up_new_task, WF_FORK) after a waking that selected nothing (a
    /// pinned wakee) is not that waking's, and counts no flip.
    #[test]
    fn only_a_wakeups_selection_counts_a_flip() {
        let all = wakes([WF_TTWU, WF_TTWU | WF_SYNC, WF_TTWU]);
        assert_eq!(all.flips()[&10].flips, 3);
        let fork = wakes([WF_TTWU, WF_FORK, WF_TTWU]);
        assert_eq!(fork.flips()[&10].flips, 2);
        assert_eq!(fork.flips()[&10].last_wakee, 13);
    }

    /// A waking from an interrupt on an idle CPU (common_pid 0) counts for that CPU's
    /// idle task, one per CPU, as the kernel's swapper/N each keep their own.
    #[test]
    fn each_cpus_idle_task_counts_its_own_flips() {
        let mut f = FlipsPass::new(true, BeforeTrace::flips(0));
        for (i, (cpu, wakee)) in [(1, 11), (1, 12), (2, 13)].into_iter().enumerate() {
            let t = 1_000 + i as u64 * 1_000;
            f.apply(&waking(t, cpu, 0, wakee, cpu));
            f.apply(&select_enter(t + 10, cpu, cpu, WF_TTWU));
        }
        let flips = f.flips();
        assert_eq!(flips[&flips_key(0, 1)].flips, 2);
        assert_eq!(flips[&flips_key(0, 2)].flips, 1);
        assert!(!flips.contains_key(&0));
    }
}
