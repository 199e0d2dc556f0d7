//! A workload model built from a captured trace, for `sisreplay simulate`: every traced
//! task becomes a run-once list of steps. Its CPU time between sleeps becomes run bursts;
//! a wakeup it issued while running becomes a Wake step at that point of its own CPU time
//! (a dependency: if the waker runs later under another policy, so does the wakee); a
//! sleep that ended by an interrupt or timer (the waking came from the idle task or from
//! IRQ context) becomes a timed sleep of the traced length. Preemption is not a sleep:
//! the burst continues when the task runs again.
//!
//! What a trace cannot tell is inferred or left out: a waking inside an interrupt that
//! the capture did not record (no irq events, or an hrtimer's, which has none) is taken
//! for the interrupted task's own, unless its wakee's wakings show the timer's pattern
//! (see [`super::interrupted`]); run bursts
//! keep the time the traced kernel spent searching and refilling caches, which the
//! simulator then charges again by its own model.

use std::collections::{HashMap, HashSet};

use super::{Start, Step, TaskSpec, Workload};
use crate::abi::WF_SYNC;
use crate::derived::{SliceEnd, Slices};
use crate::sim::delays::{DelayKind, TracedWakeup};
use crate::state::machine::TaskState;
use crate::trace::{Comm, Event, EventKind, Wake};

/// What the builder read, besides the tasks.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct TracedShape {
    /// First event, ns on the trace's clock.
    pub first_ns: u64,
    /// Last event, ns on the trace's clock.
    pub last_ns: u64,
    /// Traced tasks that became tasks of the model (the idle task excluded).
    pub tasks: usize,
    /// Wakeups that became dependencies between tasks (Wake steps).
    pub task_wakeups: u64,
    /// Wakeups from an interrupt or the idle task, which became timed sleeps.
    pub timer_wakeups: u64,
    /// Of those, wakings the trace charges to a task that were its interrupt's: a
    /// timer's on the sleeper's own CPU (see [`super::interrupted`]).
    pub interrupted_wakings: u64,
    /// Wakings of tasks that had not gone to sleep (no step: nothing to wait for).
    pub ignored_wakings: u64,
    /// Wake flags came from the select_task_rq_fair probe for this many task wakeups;
    /// the others are taken as sync, as replay guesses.
    pub probed_sync: u64,
    /// Request-response pairs, with the writes and reads the trace could not show.
    pub exchanges: super::exchange::Exchanges,
    /// Timed sleeps whose timer ran in an interrupt that had already woken a task on
    /// its CPU (see [`super::late_timers`]).
    pub late_timers: super::late_timers::LateTimers,
    /// Sleeps no order of the model's steps could end (a wake the model lost), taken
    /// out.
    pub unended_sleeps: u64,
    /// Tasks the model leaves waiting for a wakeup under every order of its steps
    /// (see [`super::feasible`]): a dependency the trace did not have. Each as
    /// `comm/pid at step k of n`; empty for a consistent model.
    pub stuck_tasks: Vec<String>,
    /// Each task's traced wakeups by pid, each as the index of the sleep step it ended
    /// and how long and in what way the task waited from its waking to running.
    #[serde(skip)]
    pub wake_delays: HashMap<i32, Vec<(usize, TracedWakeup)>>,
}

#[derive(Default)]
struct Building {
    pid: i32,
    comm: String,
    steps: Vec<Step>,
    start: Option<Start>,
    /// Running since (ns), when on a CPU.
    on_cpu_since: Option<u64>,
    /// CPU time since the last step boundary.
    ran: u64,
    /// Asleep since (ns) and the index of its Sleep step, when asleep.
    asleep: Option<(u64, Option<usize>)>,
    /// Woken from its sleep step, not yet running: the step, and when, where and by
    /// whom the waking was.
    woken: Option<(usize, u64, u32, i32)>,
    /// Its wakeups' delays: the sleep step each ended, and the wait.
    delays: Vec<(usize, TracedWakeup)>,
    exited: bool,
    /// Woken while still on its CPU: the kernel dequeues a blocking task before the
    /// switch is traced, so a waking can come first. The sleep that follows is then
    /// already satisfied; if no sleep follows, the wake did nothing.
    early: Option<Early>,
    /// Its shortest timed sleep so far whose timer ran first in its interrupt.
    shortest_timer_sleep: Option<u64>,
}

#[derive(Clone, Copy)]
enum Early {
    /// By a task: its Wake step, to undo if the wakee does not sleep.
    Task {
        waker: usize,
        step: usize,
    },
    Timer,
}

/// A step that does nothing: what a provisional Wake becomes when it woke no one.
const NOTHING: Step = Step::Run(0);

/// Two timer wakings of one CPU this close, with no switch between, ran in one
/// interrupt.
const SAME_IRQ_NS: u64 = 200_000;

/// Undoes a provisional early wake that found its task not going to sleep; it is no
/// longer counted as a dependency or a timer wakeup but as a waking that did nothing.
fn cancel_early(tasks: &mut [Building], i: usize, shape: &mut TracedShape) {
    match tasks[i].early.take() {
        Some(Early::Task { waker, step }) => {
            tasks[waker].steps[step] = NOTHING;
            shape.task_wakeups -= 1;
            shape.ignored_wakings += 1;
        }
        Some(Early::Timer) => {
            shape.timer_wakeups -= 1;
            shape.ignored_wakings += 1;
        }
        None => {}
    }
}

impl Building {
    /// Takes the task's latest name: a task that execs (a shell starting the benchmark)
    /// is known in the re-run by what it became.
    fn rename(&mut self, comm: &Comm) {
        if self.comm.as_bytes() != comm.as_bytes() {
            self.comm = comm.to_str_lossy().into_owned();
        }
    }

    /// Sets how the task enters the run, the first time it is seen; whether this was it.
    fn begin(&mut self, start: Start) -> bool {
        let first = self.start.is_none();
        if first {
            self.start = Some(start);
        }
        first
    }

    fn flush_run(&mut self, now: u64) {
        if let Some(since) = self.on_cpu_since {
            self.ran += now.saturating_sub(since);
            self.on_cpu_since = Some(now);
        }
        if self.ran > 0 {
            self.steps.push(Step::Run(self.ran));
            self.ran = 0;
        }
    }

    /// The task as the simulator runs it: begun where it was first seen; a per-CPU
    /// kernel thread kept on its CPU.
    fn into_spec(self) -> TaskSpec {
        let start = self.start.unwrap_or(Start::Asleep { cpu: 0 });
        let pinned = TaskState::comm_is_percpu_kthread(self.comm.as_bytes())
            .then(|| start.cpu().unwrap_or(0));
        TaskSpec {
            comm: self.comm,
            pid: Some(self.pid),
            steps: self.steps,
            looping: false,
            start,
            pinned,
        }
    }
}

/// Builds the model from a trace's events (in time order). `name` names the workload.
pub fn build(name: &str, events: &[Event], nr_cpus: u32) -> (Workload, TracedShape) {
    let mut builder = Builder::new(nr_cpus, super::interrupted::timer_woken(events));
    for e in events {
        builder.add(e);
    }
    builder.finish(name)
}

/// The model as it is built, one event at a time.
struct Builder {
    nr_cpus: u32,
    index: HashMap<i32, usize>,
    tasks: Vec<Building>,
    slices: Slices,
    /// Per CPU, until its first switch: the waker taken to have been running there since
    /// the trace began (who runs there is known only from what it does).
    guessed: Vec<Option<i32>>,
    irq_depth: Vec<u32>,
    /// The Wake step a CPU's waker just added, for the probe that follows the waking.
    last_wake: Vec<Option<(usize, usize)>>,
    shape: TracedShape,
    first: Option<u64>,
    /// Tasks whose wakings by the task running on their CPU are their timers'.
    timer_woken: HashSet<i32>,
    /// Per CPU, the interrupt that last woke a task there, if no switch came since: a
    /// timer waking soon after ran in the same interrupt.
    irq_woke: Vec<Option<Interrupt>>,
}

/// An interrupt's timer wakings so far.
#[derive(Clone, Copy)]
struct Interrupt {
    /// Its latest waking (ns).
    last: u64,
    /// How late its first timer ran: that sleep less its task's shortest so far. The
    /// interrupt runs its timers in the order they expired, so the ones after it were
    /// late by no more. None where the first waking ended no traced sleep.
    lateness: Option<u64>,
}

impl Builder {
    fn new(nr_cpus: u32, timer_woken: HashSet<i32>) -> Builder {
        let n = nr_cpus.max(1) as usize;
        Builder {
            nr_cpus,
            index: HashMap::new(),
            tasks: Vec::new(),
            slices: Slices::default(),
            guessed: vec![None; n],
            irq_depth: vec![0; n],
            last_wake: vec![None; n],
            shape: TracedShape::default(),
            first: None,
            timer_woken,
            irq_woke: vec![None; n],
        }
    }

    /// The task of a pid, added when first seen.
    fn slot(&mut self, pid: i32, comm: impl FnOnce() -> String) -> usize {
        *self.index.entry(pid).or_insert_with(|| {
            self.tasks.push(Building {
                pid,
                comm: comm(),
                ..Building::default()
            });
            self.tasks.len() - 1
        })
    }

    /// The task running on `cpu`: from its last switch, or before the first from its
    /// wakings; 0 when not known.
    fn running(&self, cpu: u32) -> i32 {
        match self.slices.running(cpu) {
            Some((pid, _)) => pid,
            None => self.guessed[cpu as usize].unwrap_or(0),
        }
    }

    fn add(&mut self, e: &Event) {
        let t0 = *self.first.get_or_insert(e.ts);
        self.shape.last_ns = e.ts;
        let cpu = e.cpu as usize;
        if cpu >= self.guessed.len() {
            return;
        }
        match &e.kind {
            EventKind::Switch { .. } => self.on_switch(e, t0),
            EventKind::WakeupNew(w) => {
                let i = self.slot(w.pid, || w.comm.to_str_lossy().into());
                self.tasks[i].begin(Start::At {
                    at_ns: e.ts - t0,
                    cpu: w.target_cpu.max(0) as u32,
                });
            }
            EventKind::Waking(w) => self.on_waking(e, w, t0),
            EventKind::SelectEnter { wake_flags, .. } => {
                if let Some((wi, k)) = self.last_wake[cpu].take() {
                    if let Step::Wake { task, .. } = self.tasks[wi].steps[k] {
                        self.tasks[wi].steps[k] = Step::Wake {
                            task,
                            sync: wake_flags & WF_SYNC != 0,
                        };
                        self.shape.probed_sync += 1;
                    }
                }
            }
            EventKind::IrqEntry { .. } | EventKind::SoftirqEntry { .. } => self.irq_depth[cpu] += 1,
            EventKind::IrqExit { .. } | EventKind::SoftirqExit { .. } => {
                self.irq_depth[cpu] = self.irq_depth[cpu].saturating_sub(1)
            }
            _ => {}
        }
    }

    /// A sched_switch: the task the CPU's last switch (or a guess) put on, if another
    /// than the one leaving, loses its time there; the leaving task's burst ends as its
    /// slice did; the next task runs.
    fn on_switch(&mut self, e: &Event, t0: u64) {
        let EventKind::Switch {
            prev_pid,
            prev_comm,
            prev_state,
            next_pid,
            next_comm,
            ..
        } = &e.kind
        else {
            return;
        };
        self.irq_woke[e.cpu as usize] = None;
        let guess = self.guessed[e.cpu as usize].take();
        let ends = self
            .slices
            .switch(e.cpu, e.ts, *prev_pid, *prev_state, *next_pid);
        let replaced = match ends.unrecorded {
            Some(s) => Some(s.pid),
            None => guess.filter(|g| g != prev_pid),
        };
        if let Some(pid) = replaced.filter(|&p| p != 0) {
            // A switch the kernel did not record (or a task guessed from its wakings):
            // when the task left the CPU is unknown, so its time there is not counted.
            if let Some(&i) = self.index.get(&pid) {
                self.tasks[i].on_cpu_since = None;
            }
        }
        if *prev_pid != 0 {
            let i = self.slot(*prev_pid, || prev_comm.to_str_lossy().into());
            self.tasks[i].rename(prev_comm);
            self.switch_out(i, ends.prev.end, e, t0);
        }
        if *next_pid != 0 {
            let i = self.slot(*next_pid, || next_comm.to_str_lossy().into());
            let b = &mut self.tasks[i];
            b.rename(next_comm);
            b.begin(Start::At {
                at_ns: e.ts - t0,
                cpu: e.cpu,
            });
            b.on_cpu_since = Some(e.ts);
            if let Some((k, waking_ns, waking_cpu, waker)) = b.woken.take() {
                let kind = if *prev_pid == 0 {
                    if waking_cpu == e.cpu {
                        DelayKind::LocalIdle
                    } else {
                        DelayKind::RemoteIdle
                    }
                } else if waking_cpu == e.cpu
                    && *prev_pid == waker
                    && ends.prev.end == SliceEnd::Preempted
                {
                    DelayKind::Preempt
                } else {
                    DelayKind::Other
                };
                let ns = e.ts.saturating_sub(waking_ns).min(u32::MAX as u64) as u32;
                b.delays.push((k, TracedWakeup { kind, ns }));
            }
            if let Some((since, Some(k))) = b.asleep.take() {
                // Running again without a recorded waking (lost, or not traced): the
                // sleep ends by itself.
                b.steps[k] = Step::SleepFor(e.ts.saturating_sub(since).max(1));
            }
        }
    }

    /// Task `i` leaves its CPU at switch `e`: a preemption continues its burst; a sleep
    /// or an exit ends it.
    fn switch_out(&mut self, i: usize, left: SliceEnd, e: &Event, t0: u64) {
        let now = e.ts;
        let b = &mut self.tasks[i];
        // Woken and leaving again with no switch in recorded: how long its wakeup took
        // is not known.
        b.woken = None;
        if b.begin(Start::Runnable { cpu: Some(e.cpu) }) {
            // Running when the trace began.
            b.on_cpu_since = Some(t0);
        }
        if let Some(since) = b.on_cpu_since.take() {
            b.ran += now.saturating_sub(since);
        }
        if left == SliceEnd::Preempted {
            cancel_early(&mut self.tasks, i, &mut self.shape);
            return;
        }
        if b.exited {
            return;
        }
        b.flush_run(now);
        b.steps.push(Step::Count);
        if left == SliceEnd::Dead {
            b.exited = true;
            cancel_early(&mut self.tasks, i, &mut self.shape);
            return;
        }
        match b.early.take() {
            // Its wakeup came first: a sleep its waker ends.
            Some(Early::Task { .. }) => b.steps.push(Step::Sleep),
            // An interrupt already ended it: no sleep to model.
            Some(Early::Timer) => {}
            None => {
                b.steps.push(Step::Sleep);
                b.asleep = Some((now, Some(b.steps.len() - 1)));
            }
        }
    }

    /// A sched_waking: a dependency on the waker when a task on this CPU woke it, else
    /// a timed sleep; nothing when the wakee was not going to sleep.
    fn on_waking(&mut self, e: &Event, w: &Wake, t0: u64) {
        let (now, cpu) = (e.ts, e.cpu as usize);
        let i = self.slot(w.pid, || w.comm.to_str_lossy().into());
        let prev = (w.target_cpu.max(0) as u32).min(self.nr_cpus.max(1) - 1);
        if self.tasks[i].begin(Start::Asleep { cpu: prev }) {
            // Asleep when the trace began.
            self.tasks[i].asleep = Some((t0, None));
        }
        let waker = e.common_pid;
        let wakee = &mut self.tasks[i];
        let asleep = wakee.asleep.take();
        // On its CPU still (blocking), not queued after a preemption. A task woken from
        // its last sleep and not seen running since ran all the same, its switch in not
        // recorded (a waking is traced only for a task that set a sleeping state).
        let on_cpu = wakee.on_cpu_since.is_some() || wakee.woken.is_some();
        let blocking = asleep.is_none() && on_cpu && wakee.early.is_none();
        if asleep.is_none() && !blocking {
            self.shape.ignored_wakings += 1;
            return;
        }
        wakee.woken = None;
        if let Some((_, Some(k))) = asleep {
            wakee.woken = Some((k, now, e.cpu, waker));
        }
        if waker != 0 && waker != w.pid {
            self.guess_waker(e.cpu, waker, t0);
        }
        let by_task = waker != 0
            && waker != w.pid
            && self.running(e.cpu) == waker
            && self.irq_depth[cpu] == 0
            && self.index.contains_key(&waker);
        // A timer's waking charged to the task it interrupted (see super::interrupted).
        let timer = by_task
            && self.timer_woken.contains(&w.pid)
            && i64::from(e.cpu) == i64::from(w.target_cpu);
        self.shape.interrupted_wakings += timer as u64;
        let by_task = by_task && !timer;
        if by_task {
            let wi = self.index[&waker];
            let wb = &mut self.tasks[wi];
            wb.flush_run(now);
            wb.steps.push(Step::Wake {
                task: i,
                sync: true,
            });
            let step = wb.steps.len() - 1;
            self.last_wake[cpu] = Some((wi, step));
            self.shape.task_wakeups += 1;
            if blocking {
                self.tasks[i].early = Some(Early::Task { waker: wi, step });
            }
            return;
        }
        self.last_wake[cpu] = None;
        self.shape.timer_wakeups += 1;
        let interrupt =
            self.irq_woke[cpu].filter(|irq| now.saturating_sub(irq.last) <= SAME_IRQ_NS);
        self.irq_woke[cpu] = Some(Interrupt {
            last: now,
            lateness: interrupt.and_then(|irq| irq.lateness),
        });
        if blocking {
            self.tasks[i].early = Some(Early::Timer);
            return;
        }
        let (since, sleep_step) = asleep.expect("asleep or blocking");
        let ns = now.saturating_sub(since).max(1);
        let b = &mut self.tasks[i];
        match (sleep_step, interrupt) {
            // Due no earlier than the interrupt's first timer was late; its task's
            // shortest first-in-interrupt sleep is known once the trace is read.
            (Some(k), Some(irq)) => {
                b.steps[k] = Step::SleepLate {
                    due_ns: irq.lateness.map_or(ns, |l| ns.saturating_sub(l)),
                    by_ns: ns,
                }
            }
            (Some(k), None) => {
                b.steps[k] = Step::SleepFor(ns);
                let shortest = b.shortest_timer_sleep.map_or(ns, |s| s.min(ns));
                b.shortest_timer_sleep = Some(shortest);
                self.irq_woke[cpu] = Some(Interrupt {
                    last: now,
                    lateness: Some(ns - shortest),
                });
            }
            (None, _) => {
                b.start = Some(Start::At {
                    at_ns: now - t0,
                    cpu: prev,
                })
            }
        }
    }

    /// A waking by `waker` on a CPU not yet switched, with nothing guessed there yet:
    /// the waker has been running there since before the trace began.
    fn guess_waker(&mut self, cpu: u32, waker: i32, t0: u64) {
        if self.slices.switched(cpu) || self.guessed[cpu as usize].is_some() {
            return;
        }
        let wi = self.slot(waker, || format!("pid {waker}"));
        let wb = &mut self.tasks[wi];
        if wb.begin(Start::Runnable { cpu: Some(cpu) }) {
            wb.on_cpu_since = Some(t0);
        }
        self.guessed[cpu as usize] = Some(waker);
    }

    /// What ran up to the end of the trace is the task's last burst; a sleep no one in
    /// the trace ended is dropped; every task becomes a spec.
    fn finish(mut self, name: &str) -> (Workload, TracedShape) {
        let end = self.shape.last_ns;
        for i in 0..self.tasks.len() {
            cancel_early(&mut self.tasks, i, &mut self.shape);
        }
        for b in &mut self.tasks {
            b.flush_run(end);
            if let Some((_, Some(k))) = b.asleep {
                if k + 1 == b.steps.len() {
                    // Asleep at the end, woken by no one in the trace.
                    b.steps.pop();
                }
            }
        }
        let mut steps: Vec<Vec<Step>> = self
            .tasks
            .iter_mut()
            .map(|b| std::mem::take(&mut b.steps))
            .collect();
        let mut moved = std::collections::BTreeMap::new();
        self.shape.exchanges = super::exchange::complete(&mut steps, &mut moved);
        for (i, (b, s)) in self.tasks.iter_mut().zip(steps).enumerate() {
            b.steps = s;
            let mut delays = std::mem::take(&mut b.delays);
            if let Some(new_index) = moved.get(&i) {
                for (k, _) in &mut delays {
                    *k = new_index[*k];
                }
            }
            if !delays.is_empty() {
                self.shape.wake_delays.insert(b.pid, delays);
            }
        }
        self.shape.first_ns = self.first.unwrap_or(0);
        self.shape.tasks = self.tasks.len();
        let mut specs: Vec<_> = self.tasks.into_iter().map(Building::into_spec).collect();
        self.shape.late_timers = super::late_timers::settle(&mut specs);
        let mut workload = Workload {
            name: name.into(),
            unit: "run bursts",
            tasks: specs,
            wakes_counted: true,
        };
        // A sleep no order of the steps can end waits for a wake the model lost: one
        // side of an exchange shows a turn the other's list cannot (at the ends of the
        // trace), or an interrupt's wakeup was charged to a task that, in the model, waits
        // for the woken one. The trace shows every sleep ended; so does the model, those
        // sleeps taken out (counted), so that a re-run that leaves tasks waiting has
        // lost a wakeup itself.
        let (stuck, unended) = super::feasible::drop_unended_sleeps(&workload, |_, _| true);
        for &(i, k) in &unended {
            workload.tasks[i].steps[k] = NOTHING;
        }
        self.shape.unended_sleeps = unended.len() as u64;
        self.shape.stuck_tasks = stuck
            .iter()
            .map(|s| {
                let t = &workload.tasks[s.task];
                let pid = t.pid.map_or_else(|| "?".into(), |p| p.to_string());
                format!("{}/{pid} at step {} of {}", t.comm, s.step, t.steps.len())
            })
            .collect();
        (workload, self.shape)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::Wake;

    const US: u64 = 1_000;

    fn switch(ts: u64, cpu: u32, prev: i32, state: i64, next: i32) -> Event {
        Event {
            ts,
            cpu,
            common_pid: prev,
            kind: EventKind::Switch {
                prev_comm: Comm::from_bytes(format!("t{prev}").as_bytes()),
                prev_pid: prev,
                prev_prio: 120,
                prev_state: state,
                next_comm: Comm::from_bytes(format!("t{next}").as_bytes()),
                next_pid: next,
                next_prio: 120,
            },
        }
    }

    fn waking(ts: u64, cpu: u32, by: i32, pid: i32) -> Event {
        Event {
            ts,
            cpu,
            common_pid: by,
            kind: EventKind::Waking(Wake {
                comm: Comm::from_bytes(format!("t{pid}").as_bytes()),
                pid,
                prio: 120,
                target_cpu: cpu as i32,
            }),
        }
    }

    /// Task 10 sleeps 400 us on CPU 0, woken first in its interrupt: on time, the sleep it
    /// asks for. It sleeps again at 430 us and 20 at 440 us; an interrupt at 1,420 us
    /// wakes 10 (990 us: 590 us late) and, 30 us later with no switch between, 20: 20's
    /// timer ran in that interrupt, after 10's, so it was late by no more than 590 us:
    /// due 1,010 − 590 = 420 us into its sleep at the earliest.
    #[test]
    fn a_timer_that_ran_in_an_interrupt_that_had_woken_a_task_is_late() {
        let events = vec![
            switch(0, 0, 0, 0, 10),
            switch(10 * US, 0, 10, 1, 0),
            waking(410 * US, 0, 0, 10),
            switch(420 * US, 0, 0, 0, 10),
            switch(430 * US, 0, 10, 1, 20),
            switch(440 * US, 0, 20, 1, 0),
            waking(1_420 * US, 0, 0, 10),
            waking(1_450 * US, 0, 0, 20),
            switch(1_460 * US, 0, 0, 0, 10),
        ];
        let (w, shape) = build("t", &events, 1);
        let sleeps = |t: &TaskSpec| -> Vec<Step> {
            t.steps
                .iter()
                .copied()
                .filter(|s| matches!(s, Step::SleepFor(_) | Step::SleepLate { .. }))
                .collect()
        };
        assert_eq!(
            sleeps(&w.tasks[0]),
            vec![Step::SleepFor(400 * US), Step::SleepFor(990 * US)]
        );
        assert_eq!(
            sleeps(&w.tasks[1]),
            vec![Step::SleepLate {
                due_ns: 420 * US,
                by_ns: 1_010 * US
            }]
        );
        assert_eq!(shape.late_timers.sleeps, 1);
    }

    /// A shell that execs the benchmark is known by the benchmark's name.
    #[test]
    fn a_task_takes_the_name_it_had_last() {
        let mut first = switch(0, 0, 0, 0, 30);
        let mut later = switch(10 * US, 0, 30, 1, 0);
        if let EventKind::Switch { next_comm, .. } = &mut first.kind {
            *next_comm = Comm::from_bytes(b"sh");
        }
        if let EventKind::Switch { prev_comm, .. } = &mut later.kind {
            *prev_comm = Comm::from_bytes(b"sched-pipe");
        }
        let (w, _) = build("t", &[first, later], 1);
        assert_eq!(w.tasks[0].comm, "sched-pipe");
    }

    /// Task 10 runs 10 us, wakes 20, runs 5 us more and sleeps; 20 runs 30 us and
    /// sleeps until a timer 100 us later, runs 4 us and wakes 10, which preempts it after
    /// 3 us more. 10 runs 4 us, wakes 20 while 20 is queued (a wakeup that does nothing),
    /// is preempted by 20, moves to CPU 1, and after 7 us wakes 20 while 20 is still on
    /// CPU 0 about to sleep (blocked before its switch is traced: the wakeup ends that
    /// sleep). 20 sleeps after 9 us; 10 sleeps 5 us later, until the end.
    #[test]
    fn bursts_dependencies_timers_and_early_wakeups() {
        let events = vec![
            switch(0, 0, 0, 0, 10),
            waking(10 * US, 0, 10, 20),
            switch(15 * US, 0, 10, 1, 20),
            switch(45 * US, 0, 20, 1, 0),
            waking(145 * US, 0, 0, 20),
            switch(146 * US, 0, 0, 0, 20),
            waking(150 * US, 0, 20, 10),
            switch(153 * US, 0, 20, 0x100, 10),
            waking(155 * US, 0, 10, 20),
            switch(157 * US, 0, 10, 0x100, 20),
            switch(158 * US, 1, 0, 0, 10),
            waking(165 * US, 1, 10, 20),
            switch(166 * US, 0, 20, 1, 0),
            switch(171 * US, 1, 10, 1, 0),
        ];
        let (w, shape) = build("t", &events, 2);
        let (t10, t20) = (&w.tasks[0], &w.tasks[1]);
        assert_eq!((t10.pid, t20.pid), (Some(10), Some(20)));
        assert_eq!(t10.start, Start::At { at_ns: 0, cpu: 0 });
        assert_eq!(t20.start, Start::Asleep { cpu: 0 });
        let wake = |task| Step::Wake { task, sync: true };
        assert_eq!(
            t10.steps,
            vec![
                Step::Run(10 * US),
                wake(1),
                Step::Run(5 * US),
                Step::Count,
                Step::Sleep,
                Step::Run(11 * US),
                wake(1),
                Step::Run(6 * US),
                Step::Count,
            ]
        );
        assert_eq!(
            t20.steps,
            vec![
                Step::Run(30 * US),
                Step::Count,
                Step::SleepFor(100 * US),
                Step::Run(4 * US),
                wake(0),
                Step::Run(12 * US),
                Step::Count,
                Step::Sleep,
            ]
        );
        assert_eq!(
            (
                shape.task_wakeups,
                shape.timer_wakeups,
                shape.ignored_wakings
            ),
            (3, 1, 1)
        );
        // The waits of the wakeups that ended a sleep step: 20's timer on its idle CPU
        // (1 us), 10's wakeup that preempted its waker (3 us). 20's first wakeup ended
        // no step (asleep since before the trace), its last came before it slept.
        let d = |kind, ns| TracedWakeup { kind, ns };
        assert_eq!(
            shape.wake_delays[&20],
            [(2, d(DelayKind::LocalIdle, 1_000))]
        );
        assert_eq!(shape.wake_delays[&10], [(4, d(DelayKind::Preempt, 3_000))]);
    }

    /// A trace that lost a switch in (a CPU leaving idle for a task it woke): 10 is woken
    /// from its sleep and next seen leaving its CPU again, in between woken once more
    /// (before that second sleep was traced). The second waking ends the second sleep,
    /// as if the switch in had been seen: each sleep is paired with a wake, and the
    /// model finishes under every order.
    #[test]
    fn a_waking_after_a_lost_switch_in_ends_the_next_sleep() {
        let events = vec![
            switch(0, 0, 0, 0, 10),
            switch(0, 1, 0, 0, 20),
            switch(10 * US, 0, 10, 1, 0),
            waking(12 * US, 1, 20, 10),
            // 10's switch in on CPU 0 is missing here.
            waking(20 * US, 1, 20, 10),
            switch(22 * US, 0, 10, 1, 0),
            switch(25 * US, 1, 20, 1, 0),
        ];
        let (w, shape) = build("t", &events, 2);
        let sleeps = w.tasks[0]
            .steps
            .iter()
            .filter(|s| **s == Step::Sleep)
            .count();
        let wakes = w.tasks[1]
            .steps
            .iter()
            .filter(|s| matches!(s, Step::Wake { task: 0, .. }))
            .count();
        assert_eq!((sleeps, wakes, shape.ignored_wakings), (2, 2, 0));
        assert_eq!(super::super::feasible::stuck_tasks(&w), vec![]);
    }

    /// 7 sleeps on CPU 0 twelve times and is woken there each time by whichever of three
    /// tasks runs on CPU 0 (its timer, in an interrupt the trace does not show): its
    /// sleeps become timed sleeps of their traced length, and no task wakes it.
    #[test]
    fn a_timer_charged_to_whoever_runs_on_the_sleepers_cpu_stays_a_timer() {
        let mut events = vec![switch(0, 0, 0, 0, 7)];
        for k in 0..12u64 {
            let t = k * 100 * US;
            let by = 100 + (k % 3) as i32;
            events.push(switch(t + 10 * US, 0, 7, 1, by));
            events.push(waking(t + 50 * US, 0, by, 7));
            events.push(switch(t + 60 * US, 0, by, 0x100, 7));
        }
        let (w, shape) = build("t", &events, 1);
        assert_eq!(w.tasks[0].pid, Some(7));
        let timed = w.tasks[0]
            .steps
            .iter()
            .filter(|s| **s == Step::SleepFor(40 * US))
            .count();
        let wakes = w
            .tasks
            .iter()
            .flat_map(|t| &t.steps)
            .filter(|s| matches!(s, Step::Wake { .. }))
            .count();
        assert_eq!((timed, wakes, shape.interrupted_wakings), (12, 0, 12));
    }

    /// A waking of a task still on its CPU that then is preempted, not put to sleep, woke
    /// nothing (ttwu found it runnable): the waker's provisional Wake step does nothing.
    #[test]
    fn an_early_wakeup_without_a_sleep_is_undone() {
        let events = vec![
            switch(0, 0, 0, 0, 10),
            switch(0, 1, 0, 0, 20),
            waking(5 * US, 1, 20, 10),
            switch(8 * US, 0, 10, 0x100, 30),
            switch(9 * US, 1, 20, 1, 0),
        ];
        let (w, shape) = build("t", &events, 2);
        assert_eq!(
            w.tasks[1].steps,
            vec![Step::Run(5 * US), NOTHING, Step::Run(4 * US), Step::Count]
        );
        assert_eq!(w.tasks[0].steps, vec![Step::Run(8 * US)]);
        assert_eq!((shape.task_wakeups, shape.ignored_wakings), (0, 1));
    }
}
