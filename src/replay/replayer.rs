//! Decision replay as a state machine fed one event at a time. A sched_waking waits in
//! the lookahead until what follows it tells its outcome, each event is then
//! replayed (a sched_waking: every policy decides on the machine as the trace left it),
//! and finally applied to the machine state.

use std::collections::HashMap;

use super::lookahead::{Lookahead, Outcome, Selection};
use super::observer::DecisionObserver;
use super::{ReplayError, ReplayOptions, ReplayResult, Skipped};
use crate::abi::WF_SYNC;
use crate::derived::Latencies;
use crate::metrics::calibration::Samples;
use crate::metrics::observed::Observed;
use crate::metrics::windows::{self, Slot, WindowClock};
use crate::metrics::{CpuSeen, Effects, Fidelity, PolicyMetrics, Replayed, StateRepairs, Window};
use crate::policy::{Policy, PolicyError, PolicySpec};
use crate::state::machine::{Repairs, TaskState};
use crate::state::{util_est, Change, Machine, Topo};
use crate::trace::causal::TieStats;
use crate::trace::{Event, EventKind, Wake};
use crate::wakeup::balance::Balancer;
use crate::wakeup::sis::{select_idle_sibling, TimeModel};
use crate::wakeup::target::{choose_target, note_recent_used, Waking};

/// What a replay is of: the machine, the kernel that was traced, and the policies.
#[derive(Clone)]
pub struct Setup {
    /// The replayed machine's CPUs, SMT cores, LLCs and nodes.
    pub topo: Topo,
    /// uname -r of the traced kernel, when known.
    pub kernel_release: Option<String>,
    /// The traced kernel's policy, whose choices are compared with the recorded ones.
    pub as_kernel: String,
    /// The policies replayed, the traced kernel's among them when asked for.
    pub specs: Vec<PolicySpec>,
    /// No topology was recorded: the CPUs are taken as one flat LLC.
    pub topology_assumed: bool,
    /// The trace is known to carry the select_task_rq_fair probes.
    pub probes: bool,
    /// The trace is known to carry select_idle_cpu's probes (a noinline kernel).
    pub idle_scan_probes: bool,
    /// Interrupts take CPU capacity (avg_irq), unless the kernel is known not to keep it.
    pub irq_pressure: bool,
    /// The util_est rules of the traced (or, for a re-run, the modelled) kernel.
    pub util_est: util_est::Rules,
    /// How that kernel starts a new task's utilisation.
    pub new_task_util: crate::state::pelt::NewTaskUtil,
}

/// One policy being replayed, with its counts.
struct Arm {
    spec: PolicySpec,
    policy: Box<dyn Policy>,
    metrics: PolicyMetrics,
    /// When each rq lock was last taken (rq-lock collisions).
    last_lock: HashMap<u32, u64>,
}

/// Counts of the whole replay, policy-independent.
#[derive(Default)]
pub(super) struct Tally {
    wakings: u64,
    replayed: u64,
    ipi_wakeups: u64,
    skipped: Skipped,
    probed_selections: u64,
}

impl Tally {
    /// Adds a later stretch's counts.
    pub(super) fn merge(&mut self, o: &Tally) {
        self.wakings += o.wakings;
        self.replayed += o.replayed;
        self.ipi_wakeups += o.ipi_wakeups;
        self.probed_selections += o.probed_selections;
        let (a, b) = (&mut self.skipped, &o.skipped);
        a.on_rq += b.on_rq;
        a.no_wakeup += b.no_wakeup;
        a.delayed_dequeue += b.delayed_dequeue;
        a.no_selection += b.no_selection;
        a.pinned += b.pinned;
    }
}

/// Which stretch of the trace a replay counts, when it replays one time slice of it (see
/// replay::slices): events before `count_from` only build the state (the warm-up), and
/// those from `stop_at` on are only looked ahead at.
#[derive(Debug, Clone, Copy, Default)]
pub struct Stretch {
    /// Counting starts at the first event at or after this time; None: from the start.
    pub count_from: Option<u64>,
    /// Events at or after this time are not replayed; None: to the end.
    pub stop_at: Option<u64>,
    /// The trace's first event: the origin of the time windows.
    pub t0: u64,
}

/// The time windows a slice touched, one entry per fine window and series (each policy,
/// then the observed), in time order: the time that first touched it, and its counts.
/// Replaying them in order through one clock gives the windows of one pass.
#[derive(Debug, Default)]
pub(super) struct Leaves {
    /// The fine window being filled: first touch, its slot, and the window length.
    current: Option<(u64, Slot, u64)>,
    /// Per series, the filled windows.
    pub(super) logs: Vec<Vec<(u64, Window)>>,
}

/// The counts of a replay before they are finished into a [`ReplayResult`]: what the
/// time slices of a parallel replay give back to be merged.
pub(super) struct Partial {
    pub(super) arms: Vec<PolicyMetrics>,
    pub(super) observed: Observed,
    pub(super) tally: Tally,
    pub(super) fit: Samples,
    pub(super) runqueue_repairs: Repairs,
    /// Replayed wakeups whose task had not run when the replay stopped.
    pub(super) pending: u64,
    pub(super) first_seen: Option<u64>,
    pub(super) last_seen: u64,
    pub(super) clock: WindowClock,
    /// A slice after the first: its windows as [`Leaves`], not yet in `arms` and
    /// `observed`.
    pub(super) leaves: Option<Vec<Vec<(u64, Window)>>>,
    windows: usize,
    time: TimeModel,
    lock_hold_ns: u64,
    kernel_release: Option<String>,
    as_kernel: String,
    topology_assumed: bool,
    nr_cpus: u32,
    llcs: usize,
}

/// One replayed wakeup's search, as select_task_rq_fair was called for it.
struct Search {
    /// What the search is called with; `now` is when the kernel ran it: the probe's
    /// entry, else the sched_waking.
    waking: Waking,
    /// Trace time of the sched_waking.
    waking_ns: u64,
    /// What the kernel chose.
    out: Outcome,
    /// How long the kernel's select_task_rq_fair took, from the probes.
    probe_ns: Option<u64>,
    /// What the kernel's select_idle_cpu returned, when the trace probes it: Some(None)
    /// where the kernel did not call it.
    idle_scan: Option<Option<i32>>,
    /// The sched_waking was in the counted stretch.
    counted: bool,
    /// For a wakeup queued by IPI: what the trace shows happened before the kernel
    /// queued it (see [`Lookahead::queued_after`]).
    queued_after_ns: Option<u64>,
}

/// Replays events pushed one at a time.
pub struct Replayer<'o> {
    time: TimeModel,
    lock_hold_ns: u64,
    delayed_dequeue_ns: Option<u64>,
    windows: usize,
    setup_release: Option<String>,
    as_kernel: String,
    topology_assumed: bool,
    machine: Machine,
    balancer: Balancer,
    arms: Vec<Arm>,
    lookahead: Lookahead,
    clock: WindowClock,
    observed: Observed,
    tally: Tally,
    fit: Samples,
    /// Set once a probe event is seen: from then on a waking without one selected nothing.
    probes: bool,
    /// The trace probes select_idle_cpu (known from the bundle, or set once a probe is
    /// seen): each search's return is compared.
    idle_scan_probes: bool,
    /// Replayed wakeups whose task has not run since.
    latencies: Latencies,
    first_seen: Option<u64>,
    last_seen: u64,
    observers: Vec<&'o mut dyn DecisionObserver>,
    /// The arm whose searches clear the has_idle_cores hint (see Machine::idle_cores).
    hint_arm: usize,
    /// Remote wakeups decided but not yet queued to their CPU (when, which task, which
    /// CPU): the search that chose the CPU takes the kernel policy's modelled time.
    queueing: Vec<(u64, i32, u32)>,
    /// The earliest time in `queueing` (u64::MAX when empty): most events come before
    /// it and change nothing there.
    queueing_due: u64,
    /// Searches the kernel ran after their sched_waking, still to be decided.
    searches: Vec<Search>,
    /// Per CPU, the entry of a select_idle_cpu call whose return is still to come.
    idle_scan_from: Vec<Option<u64>>,
    /// The stretch counted; the whole trace by default.
    stretch: Stretch,
    /// False during a slice's warm-up: decisions are taken but not counted or observed.
    counting: bool,
    /// The runqueue repairs made before counting started.
    repairs_before: Repairs,
    /// A slice after the first: its windows, kept as leaves.
    leaves: Option<Leaves>,
}

impl<'o> Replayer<'o> {
    /// A replay of `setup` on a machine state rebuilt from the events it will be given.
    pub fn new(
        setup: Setup,
        opts: &ReplayOptions,
        observers: Vec<&'o mut dyn DecisionObserver>,
    ) -> Result<Replayer<'o>, ReplayError> {
        let mut arms = Vec::new();
        // The first arm that is the traced kernel's policy is set against its choices.
        let mut kernel_arm = setup.specs.iter().position(|s| s.is(&setup.as_kernel));
        // The traced kernel's own search (the first arm's without one) is what clears the
        // LLC's has_idle_cores hint.
        let hint_arm = kernel_arm.unwrap_or(0);
        for s in setup.specs {
            if !s.info().replayable {
                return Err(PolicyError::NotReplayable(s.to_string()).into());
            }
            let mut metrics = PolicyMetrics::new(s.as_str());
            if kernel_arm == Some(arms.len()) {
                metrics.fidelity = Some(Fidelity::default());
                kernel_arm = None;
            }
            arms.push(Arm {
                policy: s.build(),
                spec: s,
                metrics,
                last_lock: HashMap::new(),
            });
        }
        let idle_scan_from = vec![None; setup.topo.nr_cpus as usize];
        let mut machine = Machine::new(setup.topo);
        machine.flips_before_trace = opts.flips_before_trace;
        machine.irq_pressure = setup.irq_pressure;
        machine.util_est_rules = setup.util_est;
        machine.new_task_util = setup.new_task_util;
        let mut lookahead = Lookahead::default();
        if setup.probes {
            lookahead.expect_probes();
        }
        Ok(Replayer {
            time: opts.time,
            lock_hold_ns: opts.lock_hold_ns,
            delayed_dequeue_ns: opts.delayed_dequeue_ns,
            windows: opts.windows.max(1) as usize,
            setup_release: setup.kernel_release,
            as_kernel: setup.as_kernel,
            topology_assumed: setup.topology_assumed,
            balancer: Balancer::new(&machine),
            machine,
            arms,
            lookahead,
            clock: WindowClock::default(),
            observed: Observed::default(),
            tally: Tally::default(),
            fit: Samples::default(),
            probes: setup.probes,
            idle_scan_probes: setup.idle_scan_probes,
            latencies: Latencies::default(),
            first_seen: None,
            last_seen: 0,
            observers,
            hint_arm,
            queueing: Vec::new(),
            queueing_due: u64::MAX,
            searches: Vec::new(),
            idle_scan_from,
            stretch: Stretch::default(),
            counting: true,
            repairs_before: Repairs::default(),
            leaves: None,
        })
    }

    /// Replays one time slice only (see [`Stretch`]). A slice that starts later than the
    /// trace keeps its windows as leaves and its fidelity's decision times, for merging.
    pub fn stretch(mut self, stretch: Stretch) -> Self {
        self.clock.start(stretch.t0);
        if stretch.count_from.is_some() {
            self.counting = false;
            self.leaves = Some(Leaves {
                current: None,
                logs: vec![Vec::new(); self.arms.len() + 1],
            });
        }
        self.stretch = stretch;
        self
    }

    /// wake_wide's memory of the tasks from before the first event this replay is given
    /// (see state::flips).
    pub fn earlier_flips(mut self, flips: HashMap<i32, crate::state::flips::Flips>) -> Self {
        self.machine.earlier_flips = flips;
        self
    }

    /// When each LLC group balances next, from a pass over the events before the first
    /// this replay is given (see [`Balancer::advance`]).
    pub fn balance_schedule(mut self, next: &crate::wakeup::balance::Schedule) -> Self {
        self.balancer.set_schedule(next);
        self
    }

    /// The warm-up ended: what was counted so far is dropped, the state kept.
    fn start_counting(&mut self) {
        for a in self.arms.iter_mut() {
            let fidelity = a.metrics.fidelity.is_some();
            a.metrics = PolicyMetrics::new(a.spec.as_str());
            if fidelity {
                let mut f = Fidelity::default();
                f.keep_times();
                a.metrics.fidelity = Some(f);
            }
        }
        self.observed = Observed::default();
        self.tally = Tally::default();
        self.fit = Samples::default();
        self.repairs_before = self.machine.repairs;
        if let Some(l) = self.leaves.as_mut() {
            l.current = None;
            l.logs.iter_mut().for_each(Vec::clear);
        }
        self.counting = true;
    }

    /// Moves the fine window being filled, in every series, to the leaves.
    fn flush_leaf(&mut self) {
        let Some(leaves) = self.leaves.as_mut() else {
            return;
        };
        let Some((first, _, _)) = leaves.current.take() else {
            return;
        };
        let series = self
            .arms
            .iter_mut()
            .map(|a| &mut a.metrics.windows)
            .chain([&mut self.observed.windows]);
        for (log, w) in leaves.logs.iter_mut().zip(series) {
            if let Some(window) = w.pop() {
                log.push((first, window));
            }
            w.clear();
        }
    }

    /// Takes the next events of the trace (time order), and replays those that are ready:
    /// a sched_waking once what follows tells its outcome, anything else at once.
    pub fn push(&mut self, events: impl IntoIterator<Item = Event>) -> Result<(), ReplayError> {
        for e in events {
            if !self.probes && matches!(e.kind, EventKind::SelectEnter { .. }) {
                self.probes = true;
                self.lookahead.expect_probes();
            }
            // A trace without a bundle's counts says it probes select_idle_cpu here.
            self.idle_scan_probes |= matches!(e.kind, EventKind::IdleScanEnter { .. });
            self.lookahead.push(e);
        }
        while self.lookahead.ready() {
            if !self.step()? {
                break;
            }
        }
        Ok(())
    }

    /// Replays what is left and returns the result; `ties` is what the source did to put
    /// equal timestamps in causal order, for the fidelity's account of state repairs.
    pub fn finish(self, ties: Option<TieStats>) -> Result<ReplayResult, ReplayError> {
        Ok(self.into_partial()?.finish(ties))
    }

    /// Replays what is left of the stretch and returns its counts, unfinished.
    pub(super) fn into_partial(mut self) -> Result<Partial, ReplayError> {
        while self.step()? {}
        self.decide_due(u64::MAX)?;
        for o in self.observers.iter_mut() {
            o.finish()?;
        }
        self.flush_leaf();
        let (now, before) = (self.machine.repairs, self.repairs_before);
        let topo = &self.machine.topo;
        Ok(Partial {
            arms: self.arms.into_iter().map(|a| a.metrics).collect(),
            observed: self.observed,
            tally: self.tally,
            fit: self.fit,
            runqueue_repairs: Repairs {
                moved: now.moved - before.moved,
                dropped_at_idle: now.dropped_at_idle - before.dropped_at_idle,
            },
            pending: self.latencies.pending() as u64,
            first_seen: self.first_seen,
            last_seen: self.last_seen,
            clock: self.clock,
            leaves: self.leaves.map(|l| l.logs),
            windows: self.windows,
            time: self.time,
            lock_hold_ns: self.lock_hold_ns,
            kernel_release: self.setup_release,
            as_kernel: self.as_kernel,
            topology_assumed: self.topology_assumed,
            nr_cpus: topo.nr_cpus,
            llcs: topo.llc_cpus.len(),
        })
    }

    /// Replays the front event; false when there is none, or it is past the stretch.
    fn step(&mut self) -> Result<bool, ReplayError> {
        if let (Some(stop), Some(ts)) = (self.stretch.stop_at, self.lookahead.front_ts()) {
            if ts >= stop {
                return Ok(false);
            }
        }
        let Some(e) = self.lookahead.pop() else {
            return Ok(false);
        };
        let now = e.ts;
        if !self.counting && self.stretch.count_from.is_some_and(|c| now >= c) {
            self.start_counting();
        }
        self.decide_due(now)?;
        let activated = match &e.kind {
            EventKind::Wakeup(w) => Some(w.pid),
            _ => None,
        };
        self.queue_due_wakeups(now, activated);
        self.first_seen.get_or_insert(now);
        self.clock.start(now);
        self.last_seen = now;
        if self.balancer.due(now) {
            let policies = self.arms.iter_mut().map(|a| &mut a.policy).collect();
            self.balancer.tick(&mut self.machine, policies, now);
        }
        if let EventKind::SoftirqEntry {
            vec: crate::abi::SCHED_SOFTIRQ,
        } = e.kind
        {
            // run_rebalance_domains: the periodic balance, when the trace shows it.
            let policies = self.arms.iter_mut().map(|a| &mut a.policy).collect();
            self.balancer
                .softirq(&mut self.machine, policies, e.cpu, now);
        }
        if let EventKind::Switch { next_pid, .. } = e.kind {
            self.balancer.switched(e.cpu, next_pid);
        }
        match &e.kind {
            EventKind::Waking(w) => self.on_waking(&e, w)?,
            EventKind::IdleScanEnter { .. } => {
                if let Some(from) = self.idle_scan_from.get_mut(e.cpu as usize) {
                    *from = Some(now);
                }
            }
            EventKind::IdleScanExit { cpu } => {
                if let Some(from) = self
                    .idle_scan_from
                    .get_mut(e.cpu as usize)
                    .and_then(Option::take)
                {
                    self.observed
                        .note_idle_scan(now.saturating_sub(from), *cpu >= 0);
                }
            }
            EventKind::Migrate {
                orig_cpu, dest_cpu, ..
            } if *orig_cpu >= 0 && *dest_cpu >= 0 => {
                self.observed.migrations.count(
                    &self.machine.topo,
                    *orig_cpu as u32,
                    *dest_cpu as u32,
                );
            }
            _ => {}
        }
        // A waking goes to the latencies only when replayed (see replay_wakeup).
        if !matches!(e.kind, EventKind::Waking(_)) {
            if let Some(l) = self.latencies.feed(&e) {
                let slot = self.slot(now);
                let ns = l.ns();
                self.observed.note_latency_at(l.pid, l.waking_ns, ns, slot);
            }
        }
        if let Change::AvgIdle { cpu, avg_idle } = self.machine.apply(&e) {
            for a in self.arms.iter_mut() {
                a.policy.on_avg_idle(cpu, avg_idle, now);
            }
        }
        Ok(true)
    }

    /// The fine window of `now`, every series halved if the windows had to double.
    fn slot(&mut self, now: u64) -> Slot {
        let (slot, doubled) = self.clock.slot(now);
        if self.leaves.is_some() {
            // A slice's series hold the one fine window being filled, at index 0.
            let key = (slot, self.clock.fine_ns());
            let current = self.leaves.as_ref().and_then(|l| l.current);
            if current.map(|(_, s, f)| (s, f)) != Some(key) {
                self.flush_leaf();
                if let Some(l) = self.leaves.as_mut() {
                    l.current = Some((now, slot, key.1));
                }
            }
            return Slot {
                index: 0,
                start_ns: slot.start_ns,
            };
        }
        for _ in 0..doubled {
            for a in self.arms.iter_mut() {
                windows::halve(&mut a.metrics.windows);
            }
            windows::halve(&mut self.observed.windows);
        }
        slot
    }

    /// Classifies a sched_waking: replayed, or skipped for the reason the trace gives.
    fn on_waking(&mut self, e: &Event, w: &Wake) -> Result<(), ReplayError> {
        self.tally.wakings += 1;
        let now = e.ts;
        let selection = if self.probes {
            self.lookahead.selection(e.cpu, now)
        } else {
            None
        };
        // With probes, whether the kernel selected is known; without, it is inferred from
        // the reconstructed state.
        let (queued, delayed) = match (self.probes, &selection) {
            (true, Some(_)) => (false, false),
            (true, None) => (true, false),
            (false, _) => (self.wakee_queued(w.pid), self.delayed_dequeue(w.pid, now)),
        };
        let pinned = !self.probes && TaskState::comm_is_percpu_kthread(w.comm.as_bytes());
        let outcome = self.lookahead.outcome(w.pid, now);
        let skipped = &mut self.tally.skipped;
        match (queued, outcome) {
            (true, _) if self.probes => skipped.no_selection += 1,
            (false, Some(_)) if pinned => skipped.pinned += 1,
            (true, _) => skipped.on_rq += 1,
            (false, Some(_)) if delayed => skipped.delayed_dequeue += 1,
            (false, None) => skipped.no_wakeup += 1,
            (false, Some(out)) => return self.replay_wakeup(e, w, out, selection),
        }
        if let Some(out) = outcome.filter(|o| o.recorded_on != e.cpu) {
            // Not replayed, yet queued to another CPU by IPI all the same (a pinned
            // kworker, a wakee whose selection is not modelled): that CPU is not idle
            // to the searches until the wakeup activates there, which under an
            // emulator can take tens of milliseconds.
            let queued_at = self
                .lookahead
                .queued_after(w.pid, out.recorded_on)
                .unwrap_or(0);
            self.queue_wakeup_at(queued_at, w.pid, out.recorded_on, now);
        }
        Ok(())
    }

    /// The wakee is running or still queued: ttwu_runnable, no selection.
    fn wakee_queued(&self, pid: i32) -> bool {
        self.machine
            .tasks
            .get(&pid)
            .is_some_and(|t| t.on_rq() || t.running_on.is_some())
    }

    /// Taken as a delayed-dequeue wakeup (see ReplayOptions::delayed_dequeue_ns).
    fn delayed_dequeue(&self, pid: i32, now: u64) -> bool {
        self.delayed_dequeue_ns.is_some_and(|d| {
            self.machine
                .tasks
                .get(&pid)
                .and_then(|t| t.blocked_at)
                .is_some_and(|b| now.saturating_sub(b) < d)
        })
    }

    /// One wakeup the kernel selected a CPU for: counted as of its sched_waking, and
    /// decided by every policy on the machine as it was when the kernel searched.
    fn replay_wakeup(
        &mut self,
        e: &Event,
        w: &Wake,
        out: Outcome,
        selection: Option<Selection>,
    ) -> Result<(), ReplayError> {
        let (now, waker_cpu, pid) = (e.ts, e.cpu, w.pid);
        self.tally.replayed += 1;
        if let Some(sel) = &selection {
            self.tally.probed_selections += 1;
            if let Some(ns) = sel.duration_ns {
                self.observed.note_search(ns);
            }
        }
        let prev = w.target_cpu.max(0) as u32;
        let waker = e.common_pid;
        let in_task = waker != 0
            && self
                .machine
                .cpus
                .get(waker_cpu as usize)
                .is_some_and(|c| c.irq_depth == 0);
        // The sync flag is in no tracepoint: the probe records it; without one, a task
        // waking from task context is taken as a sync wakeup (the pipe and socket paths of
        // these loads).
        let sync = selection.map_or(in_task, |s| s.wake_flags & WF_SYNC != 0);
        let ipi = out.recorded_on != waker_cpu;
        self.tally.ipi_wakeups += ipi as u64;
        let slot = self.slot(now);
        let topo = &self.machine.topo;
        self.observed.note_wakeup(topo, prev, out.chosen, slot);
        if self.latencies.waking(e, w) {
            self.observed.rewoken += 1;
        }
        let search = Search {
            waking: Waking {
                now: selection.map_or(now, |s| s.entered_ns.max(now)),
                waker_cpu,
                waker,
                wakee: pid,
                prev,
                sync,
                in_task,
            },
            waking_ns: now,
            out,
            probe_ns: selection.and_then(|s| s.duration_ns),
            idle_scan: (self.idle_scan_probes && selection.is_some())
                .then(|| self.lookahead.idle_scan(waker_cpu, now)),
            counted: self.counting,
            // Only a wakeup queued to another CPU by IPI uses it.
            queued_after_ns: ipi
                .then(|| self.lookahead.queued_after(pid, out.chosen))
                .flatten(),
        };
        if search.waking.now > now {
            self.searches.push(search);
            Ok(())
        } else {
            self.decide(search)
        }
    }

    /// Decides the searches the kernel ran by `now`, in the order it ran them, before the
    /// event at `now` changes the machine.
    fn decide_due(&mut self, now: u64) -> Result<(), ReplayError> {
        while let Some(i) = self
            .searches
            .iter()
            .enumerate()
            .filter(|(_, s)| s.waking.now <= now)
            .min_by_key(|(_, s)| s.waking.now)
            .map(|(i, _)| i)
        {
            let search = self.searches.swap_remove(i);
            self.decide(search)?;
        }
        Ok(())
    }

    /// Every policy decides one search on the machine as it is now.
    fn decide(&mut self, search: Search) -> Result<(), ReplayError> {
        let Search {
            waking,
            waking_ns,
            out,
            probe_ns,
            idle_scan,
            counted,
            queued_after_ns,
        } = search;
        let (now, waker_cpu, pid, prev) = (waking.now, waking.waker_cpu, waking.wakee, waking.prev);
        // A search of the warm-up decided after counting began is not counted.
        let record = counted == self.counting;
        let explain = self.observers.iter().any(|o| o.wants_steps(waking_ns));
        let chosen = choose_target(&mut self.machine, &waking, explain);
        let wakee = chosen.wakee;
        let ipi = out.recorded_on != waker_cpu;
        let m = &self.machine;
        let span_idle = m.llc_idle().of(&m.topo, wakee.target).idle.any();
        let recorded_state = match m.runqueue_holds(out.chosen) {
            Some((false, 0)) => CpuSeen::Idle,
            Some((false, _)) => CpuSeen::Pending,
            _ => CpuSeen::Busy,
        };
        let slot = self.slot(now);
        let replayed = Replayed {
            now: waking_ns,
            pid,
            waker_cpu,
            prev,
            target: wakee.target,
            recorded_cpu: out.chosen,
            ipi,
            affine_stage: chosen.stage,
            flips: chosen.flips,
            span_idle,
            slot,
            kernel_idle_scan: idle_scan,
            recorded_state,
        };
        let mut clears_idle_cores = false;
        let mut search_ns = 0;
        for (i, a) in self.arms.iter_mut().enumerate() {
            let m = &self.machine;
            let d = select_idle_sibling(
                m,
                a.policy.as_mut(),
                &wakee,
                &self.time,
                &self.balancer.caploads,
                explain,
            );
            let mut fx = Effects {
                chosen_busy: !m.is_idle(d.cpu),
                lock_collision: false,
            };
            if d.cpu != waker_cpu {
                let last = a.last_lock.insert(d.cpu, now);
                fx.lock_collision = last.is_some_and(|l| now.saturating_sub(l) < self.lock_hold_ns);
            }
            if record {
                if let (Some(ns), true, true) =
                    (probe_ns, a.metrics.fidelity.is_some(), d.cpu == out.chosen)
                {
                    self.fit.add(d.probed, ns);
                }
                a.metrics.record(&replayed, &d, &m.topo, fx);
                if self.counting {
                    for o in self.observers.iter_mut() {
                        o.decision(&replayed, a.spec.as_str(), &d, &chosen.steps)?;
                    }
                }
            }
            clears_idle_cores |= i == self.hint_arm && d.cleared_idle_cores;
            if i == self.hint_arm {
                search_ns = d.search_ns;
            }
        }
        if clears_idle_cores {
            self.machine.clear_idle_cores(wakee.target);
        }
        note_recent_used(&mut self.machine, pid, &wakee);
        if ipi {
            // Queued to the target by IPI when the search ends (and the wakee has been
            // moved there, which the trace times): not idle to others from then until
            // activated. Searches that overlap this one still read it idle.
            let queued_at = (now + search_ns).max(queued_after_ns.unwrap_or(0));
            self.queue_wakeup_at(queued_at, pid, out.chosen, now);
        }
        Ok(())
    }

    /// `pid`'s wakeup is queued to `cpu` by IPI at `at`: from then until activated, that
    /// CPU is not idle to others (at once if `at` is not after `now`).
    fn queue_wakeup_at(&mut self, at: u64, pid: i32, cpu: u32, now: u64) {
        self.queueing.push((at, pid, cpu));
        self.queueing_due = self.queueing_due.min(at);
        if at <= now {
            self.queue_due_wakeups(now, None);
        }
    }

    /// Marks the CPUs of remote wakeups whose search has ended by `now` as having a
    /// wakeup queued (ttwu_pending); one whose task is `activated` at `now` first was
    /// never seen queued.
    fn queue_due_wakeups(&mut self, now: u64, activated: Option<i32>) {
        let queued = |p: i32| self.queueing.iter().any(|&(_, pid, _)| pid == p);
        if now < self.queueing_due && !activated.is_some_and(queued) {
            return;
        }
        let machine = &mut self.machine;
        self.queueing.retain(|&(at, pid, cpu)| {
            if at <= now {
                machine.add_pending_wakeup(cpu);
                false
            } else {
                activated != Some(pid)
            }
        });
        self.queueing_due = self.queueing.iter().map(|q| q.0).min().unwrap_or(u64::MAX);
    }
}

impl Partial {
    /// The result: derived figures computed and the windows regrouped.
    pub(super) fn finish(mut self, ties: Option<TieStats>) -> ReplayResult {
        let repairs = StateRepairs {
            ties,
            runqueues: self.runqueue_repairs,
        };
        let first = self.first_seen.unwrap_or(0);
        self.observed.finish(self.pending, self.windows);
        let mut policies = Vec::with_capacity(self.arms.len());
        for mut a in self.arms {
            if let Some(f) = a.fidelity.as_mut() {
                f.finish(repairs);
            }
            a.finish(self.windows);
            policies.push(a);
        }
        ReplayResult {
            kernel_release: self.kernel_release,
            as_kernel: self.as_kernel,
            nr_cpus: self.nr_cpus,
            llcs: self.llcs,
            topology_assumed: self.topology_assumed,
            wakings: self.tally.wakings,
            replayed: self.tally.replayed,
            ipi_wakeups: self.tally.ipi_wakeups,
            skipped: self.tally.skipped,
            time_model: self.time,
            lock_hold_ns: self.lock_hold_ns,
            first_ts_ns: first,
            duration_ns: self.last_seen.saturating_sub(first),
            policies,
            observed: self.observed,
            explained: Vec::new(),
            explain_nearest: (None, None),
            probed_selections: self.tally.probed_selections,
            search_fit: self.fit.fit(),
            flips_before_trace: crate::state::flips::BeforeTrace::default(),
            flips_fit: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::PolicySpec;
    use crate::replay::ReplayOptions;
    use crate::topology::Topology;
    use crate::trace::event::build::{migrate, select_enter, switch, wakeup, waking};
    use crate::wakeup::sis::Decision;

    /// The decisions a replay observed: (sched_waking time, CPU, path).
    #[derive(Default)]
    struct Seen(Vec<(u64, u32, &'static str)>);

    impl DecisionObserver for Seen {
        fn decision(
            &mut self,
            w: &Replayed,
            _: &str,
            d: &Decision,
            _: &[String],
        ) -> std::io::Result<()> {
            self.0.push((w.now, d.cpu, d.path.name()));
            Ok(())
        }
    }

    /// A replay of one flat 4-CPU LLC whose kernel ran no_limit, with probes.
    fn probed_no_limit(seen: &mut Seen) -> Replayer<'_> {
        let setup = Setup {
            topo: Topo::new(&Topology::flat(4), 4),
            kernel_release: Some("6.1.0".into()),
            as_kernel: "no_limit".into(),
            specs: vec![PolicySpec::parse("no_limit").unwrap()],
            topology_assumed: false,
            probes: true,
            idle_scan_probes: false,
            irq_pressure: true,
            util_est: util_est::Rules::default(),
            new_task_util: crate::state::pelt::NewTaskUtil::default(),
        };
        Replayer::new(setup, &ReplayOptions::default(), vec![seen]).unwrap()
    }

    /// A remote wakeup makes its CPU busy to other searches (ttwu_pending) only once
    /// try_to_wake_up has moved the wakee there and queued it, which the trace's
    /// sched_migrate_task times; a search that runs before then still finds it idle.
    #[test]
    fn a_cpu_turns_busy_when_the_wakee_is_moved_there() {
        let mut seen = Seen::default();
        let mut r = probed_no_limit(&mut seen);
        // 10 runs on CPU 0 and 11 on CPU 1; CPUs 2 and 3 are idle.
        let mut events = vec![
            switch(10, 0, 0, 0, 10),
            switch(11, 1, 0, 0, 11),
            // 10 wakes 30 (slept on busy CPU 1): the scan from CPU 1 on takes CPU 2;
            // the kernel moves 30 there at 9 us.
            waking(900, 0, 10, 30, 1),
            select_enter(1_000, 0, 1, 0x08),
            // 11 wakes 31 (slept on CPU 2) at 5 us: CPU 2 is still idle then, so
            // wake_affine_idle and select_idle_sibling take prev.
            waking(4_900, 1, 11, 31, 2),
            select_enter(5_000, 1, 2, 0x08),
            migrate(9_000, 0, 30, 1, 2),
            wakeup(50_000, 2, 0, 30, 2),
            wakeup(60_000, 2, 0, 31, 2),
            switch(70_000, 2, 0, 0, 30),
        ];
        events.push(switch(1_000_000_000, 1, 11, 0, 11));
        r.push(events).unwrap();
        r.finish(None).unwrap();
        // Taken as queued when 30's search ended (1.85 us), CPU 2 would be busy to 31's
        // search, which would scan on to CPU 3.
        assert_eq!(seen.0, vec![(900, 2, "cpu"), (4_900, 2, "target")]);
    }

    /// The decisions of a replay of `between` set in a common frame: 10 runs on CPU 0 and
    /// 11 on CPU 1; 10 wakes 30 at 0.9 us and 11 wakes 31 at 40 us, both asleep on idle
    /// CPU 2, where the kernel keeps 30 (activated at 60 us) and puts 31 on `second_on`.
    fn two_wakeups_from_cpu_2(
        between: Vec<Event>,
        second_on: u32,
    ) -> Vec<(u64, u32, &'static str)> {
        let mut seen = Seen::default();
        let mut r = probed_no_limit(&mut seen);
        let mut events = vec![
            switch(10, 0, 0, 0, 10),
            switch(11, 1, 0, 0, 11),
            waking(900, 0, 10, 30, 2),
            select_enter(1_000, 0, 2, 0x08),
            waking(40_000, 1, 11, 31, 2),
            select_enter(40_100, 1, 2, 0x08),
            wakeup(60_000, 2, 0, 30, 2),
            wakeup(61_000, second_on, 0, 31, second_on),
            switch(70_000, 2, 0, 0, 30),
            switch(1_000_000_000, 1, 11, 0, 11),
        ];
        events.extend(between);
        events.sort_by_key(|e| e.ts);
        r.push(events).unwrap();
        r.finish(None).unwrap();
        seen.0
    }

    /// A wakeup kept on an idle prev by IPI is queued there only when the waker gets past
    /// select_task_rq; an emulated waker can stall in between. The kernel's prev CPU
    /// switching in and out meanwhile without activating the wakee shows it was not yet
    /// queued (a CPU leaving idle flushes its wakelist first), so it stayed idle to
    /// others' searches until then.
    #[test]
    fn a_wakeup_is_not_queued_before_its_cpu_last_switched_without_it() {
        // CPU 2 runs 40 from 45 to 50 us and goes idle without activating 30.
        let between = vec![switch(45_000, 2, 0, 0, 40), switch(50_000, 2, 40, 1, 0)];
        // Taken as queued when 30's search ended, CPU 2 would be busy to 31's search,
        // which would then scan on to CPU 3.
        assert_eq!(
            two_wakeups_from_cpu_2(between, 2),
            vec![(900, 2, "target"), (40_000, 2, "target")]
        );
    }

    /// Only the kernel's target CPU's own switches bound the queueing: another CPU running
    /// a task meanwhile says nothing of it.
    #[test]
    fn another_cpus_switch_does_not_hold_a_wakeup_back() {
        // CPU 3, not CPU 2, runs 40 from 45 to 50 us.
        let between = vec![switch(45_000, 3, 0, 0, 40), switch(50_000, 3, 40, 1, 0)];
        // 30 was queued to CPU 2 when its search ended: 31's search scans on to CPU 3.
        assert_eq!(
            two_wakeups_from_cpu_2(between, 3),
            vec![(900, 2, "target"), (40_000, 3, "cpu")]
        );
    }

    /// Of the target's switches, the last before the activation bounds the queueing: the
    /// wakelist was flushed at each, so the wakee came after all of them.
    #[test]
    fn the_last_switch_before_the_activation_bounds_the_queueing() {
        // CPU 2 runs 40 from 20 to 25 us, before 31's search, and 41 from 45 to 50 us.
        let between = vec![
            switch(20_000, 2, 0, 0, 40),
            switch(25_000, 2, 40, 1, 0),
            switch(45_000, 2, 0, 0, 41),
            switch(50_000, 2, 41, 1, 0),
        ];
        assert_eq!(
            two_wakeups_from_cpu_2(between, 2),
            vec![(900, 2, "target"), (40_000, 2, "target")]
        );
    }

    /// A miss on a CPU that runs a task by the trace, neither prev nor the waker's, is
    /// counted as one the trace's timing explains.
    #[test]
    fn a_miss_on_a_running_cpu_is_counted_as_the_traces_timing() {
        let mut seen = Seen::default();
        let mut r = probed_no_limit(&mut seen);
        let mut events = vec![
            // 10 on CPU 0, 11 on CPU 1, 40 on CPU 3; CPU 2 is idle.
            switch(10, 0, 0, 0, 10),
            switch(11, 1, 0, 0, 11),
            switch(12, 3, 0, 0, 40),
            // 10 wakes 30, asleep on busy CPU 1: the model scans to idle CPU 2; the
            // kernel's wakeup lands on CPU 3, which runs 40 until 30 us.
            waking(900, 0, 10, 30, 1),
            select_enter(1_000, 0, 1, 0x08),
            migrate(9_000, 0, 30, 1, 3),
            switch(30_000, 3, 40, 1, 0),
            wakeup(40_000, 3, 0, 30, 3),
            switch(41_000, 3, 0, 0, 30),
        ];
        events.push(switch(1_000_000_000, 1, 11, 0, 11));
        r.push(events).unwrap();
        let result = r.finish(None).unwrap();
        assert_eq!(seen.0, vec![(900, 2, "cpu")]);
        let f = result.policies[0].fidelity.as_ref().unwrap();
        assert_eq!((f.decisions, f.agree), (1, 0));
        assert_eq!((f.busy_by_trace, f.pending_by_replay), (1, 0));
    }

    /// try_to_wake_up waits for a wakee still switching out on its CPU (p->on_cpu)
    /// before select_task_rq: the search reads the machine at the probe's entry, after
    /// prev went idle, not at the sched_waking.
    #[test]
    fn a_search_reads_the_machine_when_the_kernel_ran_it() {
        let mut seen = Seen::default();
        let mut r = probed_no_limit(&mut seen);
        // Every CPU busy: 10 on 0 (the waker), 20 on 1, 30 on 2 (the wakee), 40 on 3.
        let mut events = vec![
            switch(10, 0, 0, 0, 10),
            switch(11, 1, 0, 0, 20),
            switch(12, 2, 0, 0, 30),
            switch(13, 3, 0, 0, 40),
            // 10 wakes 30, which is still switching out on CPU 2 (sleeping)...
            waking(1_000, 0, 10, 30, 2),
            switch(1_050, 2, 30, 1, 0),
            // ...and selects once it has: CPU 2 is idle by then.
            select_enter(1_060, 0, 2, 0x08),
            wakeup(1_080, 2, 0, 30, 2),
            switch(1_090, 2, 0, 0, 30),
        ];
        // The trace goes on past the lookahead's horizon.
        events.push(switch(1_000_000_000, 1, 20, 0, 20));
        r.push(events).unwrap();
        r.finish(None).unwrap();
        // wake_affine_idle takes prev, idle at the entry; at the waking every CPU was
        // busy and the search would have failed.
        assert_eq!(seen.0, vec![(1_000, 2, "target")]);
    }
}
