//! Causal order of events that share one timestamp.
//!
//! Each CPU's buffer is in the order its events happened, but two CPUs' events with the
//! same timestamp (frequent under a `global` trace clock, which clamps a lagging CPU to
//! the last global value) carry no order between them; the merge puts the lower CPU
//! first, as `trace-cmd report` does. That can show a task switched in on CPU 0 before
//! its switch-out on CPU 1, or woken from a CPU it has not reached yet.
//!
//! The kernel fixes the order of one task's events: a task is switched out (under its
//! rq lock) before load balance may detach it (can_migrate_task refuses a running task),
//! set_task_cpu's sched_migrate_task comes before the enqueue's sched_wakeup, and the
//! sched_wakeup is emitted under the target rq lock before that CPU can schedule the
//! task in. So each task's own sequence runs switch-out → migrate → wakeup → switch-in,
//! and a sched_waking names the CPU the task is on. [`Causal`] tracks, per task, what
//! the events seen so far imply (where it is, whether it runs, whether a waking awaits
//! its wakeup) and judges whether an event is consistent with it; [`TieOrder`]
//! re-interleaves each multi-CPU group of equal timestamps, keeping every CPU's own
//! order, so that its events are consistent, preferring the merged order, and counts what
//! it could not fix.

use serde::{Deserialize, Serialize};

use super::event::{Event, EventKind};
use super::stream::{EventSource, ReadStats, SourceInfo};
use super::Result;
use crate::abi::{EXIT_DEAD, EXIT_ZOMBIE, PREEMPTED};
use crate::pid_table::PidTable;

/// What re-ordering the equal-timestamp groups of a stream did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TieStats {
    /// Groups of events that share one timestamp and come from more than one CPU.
    pub groups: u64,
    /// Groups whose order was changed to make their tasks' sequences consistent.
    pub reordered: u64,
    /// Events of such groups still inconsistent after re-ordering (no interleaving of
    /// the CPUs' events made them consistent: a lost event, or the trace's start).
    pub inconsistent_left: u64,
}

/// One task's state as its events so far imply it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct TaskPos {
    /// task_cpu(p): the CPU it last ran on, was migrated to or woken onto.
    cpu: Option<u32>,
    /// The CPU it is running on.
    running: Option<u32>,
    /// A sched_waking was seen and its sched_wakeup not yet.
    waking: bool,
    /// Woken while not running, and not switched in since.
    woken: bool,
}

/// What the orderings read of an event: the task fields of the events they judge, none
/// of the others'. Readers that hold events as columns (bundle summaries) build it
/// without building the event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// sched_switch.
    Switch {
        /// The task leaving.
        prev_pid: i32,
        /// Its state as it left.
        prev_state: i64,
        /// The task put on.
        next_pid: i32,
    },
    /// sched_waking.
    Waking {
        /// The task it ran in (common_pid).
        waker: i32,
        /// The task woken.
        pid: i32,
        /// Its CPU as the waking names it.
        target_cpu: i32,
    },
    /// sched_migrate_task.
    Migrate {
        /// The task moved.
        pid: i32,
        /// From.
        orig_cpu: i32,
        /// To.
        dest_cpu: i32,
    },
    /// sched_wakeup, or sched_wakeup_new when `new`.
    Wakeup {
        /// The task woken.
        pid: i32,
        /// The CPU chosen.
        target_cpu: i32,
        /// sched_wakeup_new.
        new: bool,
    },
    /// Any other event: it changes nothing and breaks nothing.
    Other,
}

impl Step {
    /// What the orderings read of `e`.
    #[inline]
    pub fn of(e: &Event) -> Step {
        match &e.kind {
            EventKind::Switch {
                prev_pid,
                prev_state,
                next_pid,
                ..
            } => Step::Switch {
                prev_pid: *prev_pid,
                prev_state: *prev_state,
                next_pid: *next_pid,
            },
            EventKind::Waking(w) => Step::Waking {
                waker: e.common_pid,
                pid: w.pid,
                target_cpu: w.target_cpu,
            },
            EventKind::Migrate {
                pid,
                orig_cpu,
                dest_cpu,
                ..
            } => Step::Migrate {
                pid: *pid,
                orig_cpu: *orig_cpu,
                dest_cpu: *dest_cpu,
            },
            EventKind::Wakeup(w) | EventKind::WakeupNew(w) => Step::Wakeup {
                pid: w.pid,
                target_cpu: w.target_cpu,
                new: matches!(e.kind, EventKind::WakeupNew(_)),
            },
            _ => Step::Other,
        }
    }
}

/// One change made by [`Causal::apply`], to undo it.
#[derive(Debug, Clone, Copy)]
enum Undo {
    Task(i32, TaskPos),
    Curr(u32, Option<i32>),
}

/// The per-task and per-CPU state that decides whether an event is consistent with the
/// events before it. Only what other CPUs' events can change is judged: a switch whose
/// prev is not the CPU's previous next (a switch gap) is the CPU's own matter, which no
/// interleaving changes, and is counted elsewhere (bundle::Meta::switch_gaps).
#[derive(Debug, Default)]
pub struct Causal {
    tasks: PidTable<TaskPos>,
    curr: Vec<Option<i32>>,
}

impl Causal {
    fn task(&self, pid: i32) -> TaskPos {
        self.tasks.get(pid)
    }

    /// How many of the task orderings the kernel guarantees `e` breaks (0: consistent).
    pub fn violations(&self, e: &Event) -> u32 {
        self.step_violations(e.cpu, &Step::of(e))
    }

    /// How many orderings a step on `cpu` breaks (0: consistent).
    pub fn step_violations(&self, cpu: u32, step: &Step) -> u32 {
        let mut n = 0;
        match *step {
            Step::Switch { next_pid, .. } if next_pid != 0 => {
                let t = self.task(next_pid);
                // Still running elsewhere: its switch-out there is not seen yet.
                n += t.running.is_some_and(|r| r != cpu) as u32;
                // On another CPU and not migrated here.
                n += (t.running.is_none() && t.cpu.is_some_and(|c| c != cpu)) as u32;
                // Switched in before the sched_wakeup of its waking.
                n += t.waking as u32;
            }
            Step::Waking {
                waker,
                pid,
                target_cpu,
            } if pid != waker => {
                let t = self.task(pid);
                n += t.cpu.is_some_and(|c| c as i64 != target_cpu as i64) as u32;
                n += (t.waking || t.woken) as u32;
            }
            Step::Migrate { pid, orig_cpu, .. } => {
                let t = self.task(pid);
                n += t.cpu.is_some_and(|c| c as i64 != orig_cpu as i64) as u32;
                n += t.running.is_some() as u32;
            }
            Step::Wakeup {
                pid,
                target_cpu,
                new: false,
            } => {
                let t = self.task(pid);
                n += t.cpu.is_some_and(|c| c as i64 != target_cpu as i64) as u32;
            }
            _ => {}
        }
        n
    }

    fn set(&mut self, pid: i32, t: TaskPos, undo: &mut Option<&mut Vec<Undo>>) {
        let old = self.tasks.replace(pid, t);
        if let Some(u) = undo.as_mut() {
            u.push(Undo::Task(pid, old));
        }
    }

    /// Applies `e`; with `undo`, records how to take it back.
    fn apply_logged(&mut self, e: &Event, undo: Option<&mut Vec<Undo>>) {
        self.apply_step(e.cpu, &Step::of(e), undo)
    }

    /// Applies a step on `cpu`; with `undo`, records how to take it back.
    fn apply_step(&mut self, cpu: u32, step: &Step, mut undo: Option<&mut Vec<Undo>>) {
        let cpu_of = |c: i32| u32::try_from(c).ok();
        match *step {
            Step::Switch {
                prev_pid,
                prev_state,
                next_pid,
            } => {
                // A task switched out dead (X or Z) is gone; its pid may come back.
                if prev_pid != 0
                    && prev_state & (EXIT_DEAD | EXIT_ZOMBIE) != 0
                    && prev_state & PREEMPTED == 0
                {
                    let old = self.tasks.replace(prev_pid, TaskPos::default());
                    if let Some(u) = undo.as_mut() {
                        u.push(Undo::Task(prev_pid, old));
                    }
                } else if prev_pid != 0 {
                    let mut t = self.task(prev_pid);
                    t.running = None;
                    // It ran, even if its switch-in was not seen.
                    t.woken = false;
                    t.cpu = Some(cpu);
                    self.set(prev_pid, t, &mut undo);
                }
                let i = cpu as usize;
                if i < super::MAX_CPUS as usize {
                    if self.curr.len() <= i {
                        self.curr.resize(i + 1, None);
                    }
                    let old = self.curr[i].replace(next_pid);
                    if let Some(u) = undo.as_mut() {
                        u.push(Undo::Curr(cpu, old));
                    }
                }
                if next_pid != 0 {
                    let t = TaskPos {
                        cpu: Some(cpu),
                        running: Some(cpu),
                        waking: false,
                        woken: false,
                    };
                    self.set(next_pid, t, &mut undo);
                }
            }
            Step::Waking { waker, pid, .. } if pid != waker && pid != 0 => {
                let mut t = self.task(pid);
                t.waking = true;
                t.woken = false;
                self.set(pid, t, &mut undo);
            }
            Step::Migrate { pid, dest_cpu, .. } if pid != 0 => {
                let mut t = self.task(pid);
                t.cpu = cpu_of(dest_cpu);
                self.set(pid, t, &mut undo);
            }
            Step::Wakeup {
                pid, target_cpu, ..
            } if pid != 0 => {
                let mut t = self.task(pid);
                t.cpu = cpu_of(target_cpu);
                if t.waking && t.running.is_none() {
                    t.woken = true;
                }
                t.waking = false;
                self.set(pid, t, &mut undo);
            }
            _ => {}
        }
    }

    /// Applies `e` to the state.
    pub fn apply(&mut self, e: &Event) {
        self.apply_logged(e, None);
    }

    fn undo(&mut self, log: &mut Vec<Undo>, to: usize) {
        while log.len() > to {
            match log.pop().expect("longer than to") {
                Undo::Task(pid, t) => {
                    self.tasks.replace(pid, t);
                }
                Undo::Curr(cpu, old) => self.curr[cpu as usize] = old,
            }
        }
    }
}

/// Steps the search for a consistent interleaving may take per group before it settles
/// for the least inconsistent one it can build greedily.
const SEARCH_BUDGET: u32 = 20_000;

/// Re-orders equal-timestamp groups of a time-ordered stream (see the module comment).
/// Events go in with [`TieOrder::push`] and come out, in order, into the vector given;
/// a group is held until an event with a later timestamp (or [`TieOrder::finish`]) closes
/// it.
#[derive(Debug, Default)]
pub struct TieOrder {
    state: Causal,
    group: Vec<Event>,
    stats: TieStats,
}

impl TieOrder {
    /// What re-ordering did so far; complete once [`TieOrder::finish`] has run.
    pub fn stats(&self) -> TieStats {
        self.stats
    }

    /// Takes the next event of the merged stream; emits into `out` what is settled.
    #[inline]
    pub fn push(&mut self, e: Event, out: &mut impl Extend<Event>) {
        if self.group.first().is_some_and(|g| g.ts != e.ts) {
            self.flush(out);
        }
        self.group.push(e);
    }

    /// Emits the last group: the stream has ended.
    pub fn finish(&mut self, out: &mut impl Extend<Event>) {
        self.flush(out);
    }

    fn flush(&mut self, out: &mut impl Extend<Event>) {
        let first_cpu = match self.group.first() {
            Some(e) => e.cpu,
            None => return,
        };
        if self.group.iter().all(|e| e.cpu == first_cpu) {
            for e in self.group.drain(..) {
                self.state.apply(&e);
                out.extend(Some(e));
            }
            return;
        }
        self.stats.groups += 1;
        let group = std::mem::take(&mut self.group);
        let (order, left) = self.arrange(&group);
        if order.iter().enumerate().any(|(i, &j)| i != j) {
            self.stats.reordered += 1;
        }
        self.stats.inconsistent_left += left as u64;
        let mut slots: Vec<Option<Event>> = group.into_iter().map(Some).collect();
        for j in order {
            let e = slots[j].take().expect("each event once");
            self.state.apply(&e);
            out.extend(Some(e));
        }
    }

    /// The order (indices into `group`) to emit a multi-CPU group in, and how many of its
    /// events stay inconsistent. The state is left as it was.
    fn arrange(&mut self, group: &[Event]) -> (Vec<usize>, u32) {
        // Each CPU's events, in their own order.
        let mut queues: Vec<(u32, Vec<usize>)> = Vec::new();
        for (i, e) in group.iter().enumerate() {
            match queues.iter_mut().find(|(c, _)| *c == e.cpu) {
                Some((_, q)) => q.push(i),
                None => queues.push((e.cpu, vec![i])),
            }
        }
        let merged: Vec<usize> = (0..group.len()).collect();
        let as_merged = self.count_violations(group, &merged);
        if as_merged == 0 {
            return (merged, 0);
        }
        let mut search = Search {
            group,
            queues: &queues,
            pos: vec![0; queues.len()],
            order: Vec::with_capacity(group.len()),
            failed: std::collections::HashSet::new(),
            steps: 0,
            log: Vec::new(),
        };
        if search.dfs(&mut self.state) {
            let order = search.order;
            self.state.undo(&mut search.log, 0);
            return (order, 0);
        }
        self.state.undo(&mut search.log, 0);
        // No consistent interleaving: take, at each step, the first CPU whose next event
        // is consistent (or the earliest if none is), and keep it only if it is better.
        let greedy = self.greedy(group, &queues);
        let left = self.count_violations(group, &greedy);
        if left < as_merged {
            (greedy, left)
        } else {
            (merged, as_merged)
        }
    }

    /// Events of `group`, taken in `order`, that break an ordering; the state is restored.
    fn count_violations(&mut self, group: &[Event], order: &[usize]) -> u32 {
        let mut log = Vec::new();
        let mut n = 0;
        for &i in order {
            n += (self.state.violations(&group[i]) > 0) as u32;
            self.state.apply_logged(&group[i], Some(&mut log));
        }
        self.state.undo(&mut log, 0);
        n
    }

    fn greedy(&mut self, group: &[Event], queues: &[(u32, Vec<usize>)]) -> Vec<usize> {
        let mut pos = vec![0; queues.len()];
        let mut order = Vec::with_capacity(group.len());
        let mut log = Vec::new();
        while order.len() < group.len() {
            let heads = || {
                let mut h: Vec<(usize, usize)> = queues
                    .iter()
                    .enumerate()
                    .filter(|(q, (_, v))| pos[*q] < v.len())
                    .map(|(q, (_, v))| (v[pos[q]], q))
                    .collect();
                h.sort_unstable();
                h
            };
            let h = heads();
            let pick = h
                .iter()
                .find(|(i, _)| self.state.violations(&group[*i]) == 0)
                .unwrap_or(&h[0]);
            let (i, q) = *pick;
            self.state.apply_logged(&group[i], Some(&mut log));
            order.push(i);
            pos[q] += 1;
        }
        self.state.undo(&mut log, 0);
        order
    }
}

/// Depth-first search over interleavings of the CPUs' queues, trying at each step the
/// heads in merged order, so the first consistent interleaving found is the one closest
/// to the merge. Positions already shown to lead nowhere are remembered.
struct Search<'a> {
    group: &'a [Event],
    queues: &'a [(u32, Vec<usize>)],
    pos: Vec<usize>,
    order: Vec<usize>,
    failed: std::collections::HashSet<Vec<usize>>,
    steps: u32,
    log: Vec<Undo>,
}

impl Search<'_> {
    fn dfs(&mut self, state: &mut Causal) -> bool {
        if self.order.len() == self.group.len() {
            return true;
        }
        if self.failed.contains(&self.pos) {
            return false;
        }
        self.steps += 1;
        if self.steps > SEARCH_BUDGET {
            return false;
        }
        let mut heads: Vec<(usize, usize)> = self
            .queues
            .iter()
            .enumerate()
            .filter(|(q, (_, v))| self.pos[*q] < v.len())
            .map(|(q, (_, v))| (v[self.pos[q]], q))
            .collect();
        heads.sort_unstable();
        for (i, q) in heads {
            let e = &self.group[i];
            if state.violations(e) > 0 {
                continue;
            }
            let mark = self.log.len();
            state.apply_logged(e, Some(&mut self.log));
            self.order.push(i);
            self.pos[q] += 1;
            if self.dfs(state) {
                return true;
            }
            self.pos[q] -= 1;
            self.order.pop();
            state.undo(&mut self.log, mark);
        }
        if self.steps <= SEARCH_BUDGET {
            self.failed.insert(self.pos.clone());
        }
        false
    }
}

/// A source whose equal-timestamp groups come out in causal order (see [`TieOrder`]);
/// its `stats()` says what that did. Every reader of merged per-CPU buffers (trace.dat,
/// perf.data, trace text, a capture's spool) is read through it.
pub struct Ordered<S> {
    inner: S,
    ties: TieOrder,
    raw: Vec<Event>,
    ready: std::collections::VecDeque<Event>,
    done: bool,
}

impl<S: EventSource> Ordered<S> {
    /// Reads `inner` through the tie ordering.
    pub fn new(inner: S) -> Ordered<S> {
        Ordered {
            inner,
            ties: TieOrder::default(),
            raw: Vec::new(),
            ready: std::collections::VecDeque::new(),
            done: false,
        }
    }

    /// The source being re-ordered.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Reads until some event is settled or the source ends.
    fn refill(&mut self, batch: usize) -> Result<()> {
        while self.ready.is_empty() && !self.done {
            self.raw.clear();
            if self.inner.next_batch(&mut self.raw, batch)? == 0 {
                self.done = true;
                self.ties.finish(&mut self.ready);
            }
            for e in self.raw.drain(..) {
                self.ties.push(e, &mut self.ready);
            }
        }
        Ok(())
    }
}

impl<S: EventSource> EventSource for Ordered<S> {
    fn info(&self) -> &SourceInfo {
        self.inner.info()
    }

    fn next_event(&mut self) -> Result<Option<Event>> {
        self.refill(1024)?;
        Ok(self.ready.pop_front())
    }

    fn next_batch(&mut self, out: &mut Vec<Event>, max: usize) -> Result<usize> {
        let mut n = 0;
        while n < max {
            self.refill(max)?;
            if self.ready.is_empty() {
                break;
            }
            let k = self.ready.len().min(max - n);
            out.extend(self.ready.drain(..k));
            n += k;
        }
        Ok(n)
    }

    fn stats(&self) -> ReadStats {
        let mut s = self.inner.stats();
        s.ties = Some(self.ties.stats());
        s
    }
}

/// Counts, over a stream, the events inconsistent with their task's sequence so far and
/// the multi-CPU groups of equal timestamps: `info`'s view of a trace's causal order,
/// whatever read it.
#[derive(Debug, Default)]
pub struct CausalCheck {
    state: Causal,
    /// Events that break an ordering the kernel guarantees.
    pub inconsistent: u64,
    /// Groups of equal timestamps from more than one CPU.
    pub tie_groups: u64,
    last: Option<(u64, u32)>,
    in_tie: bool,
}

impl CausalCheck {
    /// Counts `e`, the next event of the stream.
    pub fn add(&mut self, e: &Event) {
        self.add_step(e.ts, e.cpu, &Step::of(e))
    }

    /// Counts the next event of the stream, at `ts` on `cpu`, by what the orderings read
    /// of it.
    #[inline]
    pub fn add_step(&mut self, ts: u64, cpu: u32, step: &Step) {
        match self.last {
            Some((t, c)) if t == ts && c != cpu => {
                if !self.in_tie {
                    self.tie_groups += 1;
                    self.in_tie = true;
                }
            }
            Some((t, _)) if t == ts => {}
            _ => self.in_tie = false,
        }
        self.last = Some((ts, cpu));
        self.inconsistent += (self.state.step_violations(cpu, step) > 0) as u64;
        self.state.apply_step(cpu, step, None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::event::build::{migrate, switch, waking};

    fn run(events: Vec<Event>) -> (Vec<Event>, TieStats) {
        let mut t = TieOrder::default();
        let mut out = Vec::new();
        for e in events {
            t.push(e, &mut out);
        }
        t.finish(&mut out);
        (out, t.stats())
    }

    fn keys(v: &[Event]) -> Vec<(u64, u32)> {
        v.iter().map(|e| (e.ts, e.cpu)).collect()
    }

    /// Task 10 runs on CPU 1. At t = 100 (one global-clock stamp) CPU 1 preempts it for
    /// task 11 and CPU 0, going idle, pulls it (newidle balance: detach_task needs it
    /// off the CPU, can_migrate_task refuses a running task) and switches it in. Merged
    /// lower CPU first, the migrate and the switch-in come before the switch-out; the
    /// only consistent interleaving is CPU 1's switch-out first.
    #[test]
    fn a_pull_seen_before_the_switch_out_is_put_after_it() {
        let events = vec![
            switch(50, 1, 0, 0, 10),
            switch(60, 0, 12, 1, 0),
            migrate(100, 0, 10, 1, 0),
            switch(100, 0, 0, 0, 10),
            switch(100, 1, 10, 0x100, 11),
            switch(200, 1, 11, 1, 0),
        ];
        let (out, stats) = run(events);
        assert_eq!(
            keys(&out),
            vec![(50, 1), (60, 0), (100, 1), (100, 0), (100, 0), (200, 1)]
        );
        // CPU 0's own order is kept: the migrate before the switch-in.
        assert!(matches!(out[3].kind, EventKind::Migrate { .. }));
        assert_eq!(
            stats,
            TieStats {
                groups: 1,
                reordered: 1,
                inconsistent_left: 0
            }
        );
        // The reordered stream rebuilds the machine as it was: 10 on CPU 0, 11 on 1.
        let mut m = crate::state::Machine::new(crate::state::Topo::new(
            &crate::topology::Topology::flat(2),
            2,
        ));
        for e in &out[..5] {
            m.apply(e);
        }
        assert_eq!((m.cpus[0].curr, m.cpus[1].curr), (10, 11));
        assert_eq!(m.tasks[&10].cpu, Some(0));
    }

    /// At one stamp CPU 0 wakes task 20 while CPU 1 switches it out: a waking may come
    /// while its task is still on its CPU (try_to_wake_up's on_cpu case), so the merged
    /// order, waking first, is consistent and stays.
    #[test]
    fn a_consistent_group_keeps_the_merged_order() {
        let events = vec![
            switch(10, 1, 0, 0, 20),
            switch(100, 0, 0, 0, 30),
            waking(100, 0, 30, 20, 1),
            switch(100, 1, 20, 1, 0),
        ];
        let (out, stats) = run(events.clone());
        assert_eq!(out, events);
        assert_eq!(
            stats,
            TieStats {
                groups: 1,
                reordered: 0,
                inconsistent_left: 0
            }
        );
    }

    /// A waking whose task was migrated (at the same stamp, on CPU 1) to the CPU it
    /// names: the migration must come first.
    #[test]
    fn a_waking_follows_the_migration_it_names() {
        let events = vec![
            switch(10, 2, 5, 1, 0),
            // 5 is on CPU 2, asleep. CPU 0 wakes it, naming CPU 1...
            waking(100, 0, 7, 5, 1),
            // ...where CPU 1's balance (affinity change) moved it at the same stamp.
            migrate(100, 1, 5, 2, 1),
        ];
        let (out, stats) = run(events);
        assert_eq!(keys(&out), vec![(10, 2), (100, 1), (100, 0)]);
        assert_eq!(stats.reordered, 1);
        assert_eq!(stats.inconsistent_left, 0);
    }

    /// Nothing the group's order can fix: the task is switched in on two CPUs at once
    /// (a lost switch-out). The merged order is kept and the event counted.
    #[test]
    fn what_no_order_fixes_is_counted_and_left() {
        let events = vec![
            switch(10, 0, 0, 0, 40),
            switch(100, 0, 40, 0x100, 41),
            switch(100, 1, 0, 0, 41),
        ];
        let (out, stats) = run(events.clone());
        assert_eq!(out, events);
        assert_eq!(
            stats,
            TieStats {
                groups: 1,
                reordered: 0,
                inconsistent_left: 1
            }
        );
        let mut check = CausalCheck::default();
        for e in &out {
            check.add(e);
        }
        assert_eq!((check.inconsistent, check.tie_groups), (1, 1));
    }
}
