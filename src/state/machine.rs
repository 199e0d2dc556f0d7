//! Per-CPU and per-task state rebuilt from the events, as select_task_rq_fair would see
//! it: running task, the runnable tasks of each runqueue, idle periods and avg_idle,
//! pending IPI wakeups, PELT util and load, wakee flips and recent_used_cpu, IRQ nesting.
//!
//! Runqueue membership is kept as a set per CPU, not a count: a count drifts for good
//! once an event is missed (a saturated CPU never idles, where a count could be reset),
//! while a set heals at the task's next event. A task seen switched in (or woken) on one
//! CPU while held in another's set is moved, and the repair counted; a CPU that switches
//! to its idle task has nothing runnable, so whatever its set still holds is dropped and
//! counted.

use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasherDefault;

use crate::topology::Topology;
use crate::trace::event::Wake;
use crate::trace::{Comm, Event, EventKind};

use super::flips::{Flips, ForkCopy};
use super::llc_idle::LlcIdle;
use super::pelt::{Avg, NewTaskUtil, Removed};
use super::util_est::{self, UtilEst};
use crate::abi::{EXIT_DEAD, EXIT_ZOMBIE, MIGRATION_COST_NS, PREEMPTED, TASK_UNINTERRUPTIBLE};

/// The load weight of a nice-0 task.
const NICE_0_WEIGHT: u64 = 1024;

/// The machine's shape as the policies need it.
#[derive(Debug, Clone)]
pub struct Topo {
    /// CPUs: the count given or one past the highest CPU the topology lists, whichever
    /// is more.
    pub nr_cpus: u32,
    /// Per CPU: its LLC id (sd_llc_id, the LLC's lowest CPU).
    pub llc_of: Vec<u32>,
    /// Per LLC id: its CPUs in ascending order.
    pub llc_cpus: BTreeMap<u32, Vec<u32>>,
    /// Per CPU: its SMT siblings, itself included (cpu_smt_mask).
    pub smt: Vec<Vec<u32>>,
    /// Per CPU: its NUMA node.
    pub node_of: Vec<u32>,
    /// Per CPU: its package (socket).
    pub package_of: Vec<u32>,
    /// Some core has more than one thread.
    pub smt_active: bool,
}

impl Topo {
    /// From a topology description; CPUs below `nr_cpus` it does not list are single-thread
    /// CPUs in the first listed CPU's LLC, node 0.
    pub fn new(t: &Topology, nr_cpus: u32) -> Topo {
        let n = nr_cpus.max(t.cpus.iter().map(|c| c.cpu + 1).max().unwrap_or(0)) as usize;
        let mut llc_of: Vec<u32> = (0..n as u32).collect();
        let mut smt: Vec<Vec<u32>> = (0..n as u32).map(|c| vec![c]).collect();
        let mut node_of = vec![0; n];
        let mut package_of = vec![0; n];
        for c in &t.cpus {
            let i = c.cpu as usize;
            llc_of[i] = c.llc;
            smt[i] = c.smt_siblings.clone();
            node_of[i] = c.node;
            package_of[i] = c.package;
        }
        // CPUs the description does not list: one more flat LLC with CPU 0's id.
        for (i, l) in llc_of.iter_mut().enumerate() {
            if !t.cpus.iter().any(|c| c.cpu as usize == i) {
                *l = t.cpus.first().map_or(0, |c| c.llc);
            }
        }
        let mut llc_cpus: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        for (cpu, &l) in llc_of.iter().enumerate() {
            llc_cpus.entry(l).or_default().push(cpu as u32);
        }
        let smt_active = smt.iter().any(|s| s.len() > 1);
        Topo {
            nr_cpus: n as u32,
            llc_of,
            llc_cpus,
            smt,
            node_of,
            package_of,
            smt_active,
        }
    }

    /// cpus_share_cache(a, b): the same LLC.
    pub fn share_cache(&self, a: u32, b: u32) -> bool {
        self.llc_of.get(a as usize) == self.llc_of.get(b as usize)
    }

    /// The LLC id of `cpu`; 0 for a CPU beyond the machine.
    pub fn llc(&self, cpu: u32) -> u32 {
        self.llc_of.get(cpu as usize).copied().unwrap_or(0)
    }

    /// The CPUs of `cpu`'s LLC (sched_domain_span(sd_llc)), ascending.
    pub fn llc_span(&self, cpu: u32) -> &[u32] {
        self.llc_cpus
            .get(&self.llc(cpu))
            .map_or(&[], |v| v.as_slice())
    }

    /// `b` is an SMT sibling of `a` (or `a` itself).
    pub fn same_core(&self, a: u32, b: u32) -> bool {
        self.smt.get(a as usize).is_some_and(|s| s.contains(&b))
    }
}

/// One CPU's runqueue as the events show it.
#[derive(Debug, Clone)]
pub struct CpuState {
    /// The running task, 0 for idle.
    pub curr: i32,
    /// The runnable tasks of this runqueue, the running one included (pids, in the
    /// order they arrived).
    pub queued: Vec<i32>,
    /// Wakeups queued to this CPU by IPI and not yet activated (ttwu_pending).
    pub pending: u32,
    /// When the CPU last went idle, until a wakeup activates a task on it.
    pub idle_stamp: Option<u64>,
    /// rq->avg_idle (ns): idle periods averaged with weight 1/8, capped at
    /// 2 · max_idle_balance_cost; 1 ms at boot.
    pub avg_idle: u64,
    /// rq->max_idle_balance_cost (ns): sysctl_sched_migration_cost (0.5 ms) here, never
    /// raised or decayed.
    pub max_idle_balance_cost: u64,
    /// The root cfs_rq's PELT signal.
    pub avg: Avg,
    /// Load that tasks took away by wakeup migration, still in `avg` until this CPU's
    /// next update (cfs_rq->removed).
    pub removed: Removed,
    /// Hard and soft IRQ nesting right now.
    pub irq_depth: u32,
    /// Priority of the running task (< 100: RT).
    pub curr_prio: i32,
    /// Time in hard and soft IRQ, as a PELT signal (avg_irq).
    pub irq_avg: Avg,
    /// Time running RT tasks, as a PELT signal (avg_rt).
    pub rt_avg: Avg,
}

impl CpuState {
    /// rq->nr_running.
    pub fn nr_running(&self) -> u32 {
        self.queued.len() as u32
    }
}

/// Where the events contradicted the runqueue membership they had built, and how it
/// was mended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Repairs {
    /// A task switched in, woken or switched out on one CPU while held on another's
    /// runqueue: moved to the CPU the event names.
    pub moved: u64,
    /// Tasks still held on a runqueue whose CPU switched to its idle task: dropped.
    pub dropped_at_idle: u64,
}

/// One task as the events show it.
#[derive(Debug, Clone)]
pub struct TaskState {
    /// Its name, as the latest event that carried one gave it.
    pub comm: Comm,
    /// task_cpu(p), when known.
    pub cpu: Option<u32>,
    /// The CPU whose runqueue holds it while it is runnable (running or waiting).
    pub rq: Option<u32>,
    /// The CPU it is running on.
    pub running_on: Option<u32>,
    /// p->recent_used_cpu: None until a wakeup or fork sets it.
    pub recent_used_cpu: Option<u32>,
    /// p->wakee_flips: how often this task, as a waker, switched to waking another task;
    /// halved once a second.
    pub wakee_flips: u32,
    /// p->wakee_flip_decay_ts: when `wakee_flips` was last halved (ns).
    pub wakee_flip_decay_ts: u64,
    /// p->last_wakee: the pid this task woke last, 0 for none.
    pub last_wakee: i32,
    /// The task's PELT signal (se->avg), nice-0 weight.
    pub avg: Avg,
    /// Its utilisation estimate (se->avg.util_est), taken at each sleep.
    pub util_est: UtilEst,
    /// The CPU whose signal holds the task's contribution; None between a wakeup
    /// migration's removal and the attach at its enqueue (se->avg.last_update_time == 0).
    pub attached: Option<u32>,
    /// Its priority as sched_switch reports it (< 100: RT; 120: nice 0).
    pub prio: i32,
    /// When it last blocked (switched out not runnable).
    pub blocked_at: Option<u64>,
    /// Its last sleep was uninterruptible (TASK_UNINTERRUPTIBLE).
    pub uninterruptible: bool,
    /// What a child it forks now copies of its wake_wide memory.
    pub fork_copy: ForkCopy,
}

impl TaskState {
    fn new(comm: Comm, now: u64) -> TaskState {
        TaskState {
            comm,
            cpu: None,
            rq: None,
            running_on: None,
            recent_used_cpu: None,
            wakee_flips: 0,
            wakee_flip_decay_ts: now,
            last_wakee: 0,
            avg: Avg::starting_at(now),
            util_est: UtilEst::default(),
            attached: None,
            prio: 120,
            blocked_at: None,
            uninterruptible: false,
            fork_copy: ForkCopy::default(),
        }
    }

    /// Its wake_wide memory.
    pub fn flips(&self) -> Flips {
        Flips {
            flips: self.wakee_flips,
            decay_ts: self.wakee_flip_decay_ts,
            last_wakee: self.last_wakee,
        }
    }

    /// Takes `f` as its wake_wide memory.
    fn set_flips(&mut self, f: Flips) {
        self.wakee_flips = f.flips;
        self.wakee_flip_decay_ts = f.decay_ts;
        self.last_wakee = f.last_wakee;
    }

    /// p->on_rq: runnable, on some runqueue.
    pub fn on_rq(&self) -> bool {
        self.rq.is_some()
    }

    /// A per-CPU kernel thread by name (kworker/N:M, ksoftirqd/N, migration/N, ...),
    /// since traces do not carry nr_cpus_allowed.
    pub fn is_percpu_kthread(&self) -> bool {
        TaskState::comm_is_percpu_kthread(self.comm.as_bytes())
    }

    /// Whether a comm names a per-CPU kernel thread: a `/` followed by a CPU number.
    pub fn comm_is_percpu_kthread(name: &[u8]) -> bool {
        match name.iter().position(|&b| b == b'/') {
            Some(slash) => name.get(slash + 1).is_some_and(u8::is_ascii_digit),
            None => false,
        }
    }
}

/// The reconstructed machine.
pub struct Machine {
    /// The machine's shape.
    pub topo: Topo,
    /// Per CPU, indexed by CPU number.
    pub cpus: Vec<CpuState>,
    /// By pid. Looked up several times per event: a fast hasher with fixed keys (pids
    /// are not attacker-chosen, and a fixed hasher keeps any iteration order stable).
    pub tasks: HashMap<i32, TaskState, BuildHasherDefault<ahash::AHasher>>,
    /// Runqueue membership mended so far.
    pub repairs: Repairs,
    /// Per LLC id: sd_llc_shared->has_idle_cores, the kernel's hint that the LLC has a
    /// wholly idle core. Set when a CPU goes idle with all its SMT siblings idle, cleared
    /// only by a search that looked for an idle core and found none, so it can stay set
    /// after the cores have filled. None until first set or cleared: the truth is used.
    pub idle_cores: BTreeMap<u32, bool>,
    /// wake_wide's memory of tasks not seen yet, from before the events applied (see
    /// state::flips): a task takes its own when first seen.
    pub earlier_flips: HashMap<i32, super::flips::Flips>,
    /// The wakee_flips a task has when first seen other than at its fork (alive before
    /// the trace, or forked by a task that was), and when they were last halved: none,
    /// halved as it is first seen, unless assumed otherwise. A child
    /// keeps its parent's for life unless it wakes others, so this reaches every task
    /// a workload forks from one started before the trace.
    pub flips_before_trace: super::flips::BeforeTrace,
    /// Interrupt time counts as pressure on capacity (avg_irq), as it does in a kernel
    /// built with CONFIG_IRQ_TIME_ACCOUNTING; without it the kernel keeps no avg_irq.
    pub irq_pressure: bool,
    /// The util_est rules of the kernel the events come from (traced, or modelled by a
    /// re-run), by its release.
    pub util_est_rules: util_est::Rules,
    /// How a new task's utilisation starts (post_init_entity_util_avg), by release.
    pub new_task_util: NewTaskUtil,
    /// idle_cpu() of every CPU of the topology, and of their cores, as each LLC's
    /// bitsets: kept in step with `cpus` by every change of a CPU's running task,
    /// runqueue or pending wakeups, so that change goes through this type.
    llc_idle: LlcIdle,
}

/// What applying an event changed that policies want to hear about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Nothing a policy needs to hear.
    None,
    /// This CPU's rq recorded an idle period; its avg_idle is now this.
    AvgIdle {
        /// The CPU whose idle period ended.
        cpu: u32,
        /// Its new rq->avg_idle (ns).
        avg_idle: u64,
    },
}

impl Machine {
    /// Every CPU idle with avg_idle at boot's 1 ms, no tasks known yet.
    pub fn new(topo: Topo) -> Machine {
        let cpu = CpuState {
            curr: 0,
            queued: Vec::new(),
            pending: 0,
            idle_stamp: None,
            avg_idle: 2 * MIGRATION_COST_NS,
            max_idle_balance_cost: MIGRATION_COST_NS,
            avg: Avg::default(),
            removed: Removed::default(),
            irq_depth: 0,
            curr_prio: 120,
            irq_avg: Avg::default(),
            rt_avg: Avg::default(),
        };
        Machine {
            cpus: vec![cpu; topo.nr_cpus as usize],
            llc_idle: LlcIdle::new(&topo),
            topo,
            tasks: HashMap::default(),
            repairs: Repairs::default(),
            idle_cores: BTreeMap::new(),
            earlier_flips: HashMap::new(),
            flips_before_trace: super::flips::BeforeTrace::default(),
            irq_pressure: true,
            util_est_rules: util_est::Rules::default(),
            new_task_util: NewTaskUtil::default(),
        }
    }

    /// test_idle_cores(cpu): the hint of `cpu`'s LLC, or whether a core there is wholly
    /// idle while the hint is unknown (the trace's start).
    pub fn has_idle_cores(&self, cpu: u32) -> bool {
        let topo = &self.topo;
        if !topo.smt_active {
            return false;
        }
        match self.idle_cores.get(&topo.llc(cpu)) {
            Some(&hint) => hint,
            None => self.llc_idle.of(topo, cpu).core_idle.any(),
        }
    }

    /// Each LLC's idle CPUs and idle cores as bitsets.
    pub fn llc_idle(&self) -> &LlcIdle {
        &self.llc_idle
    }

    /// A wakeup queued to `cpu` by IPI (ttwu_pending): it is not idle to others until
    /// the wakeup activates the task.
    pub fn add_pending_wakeup(&mut self, cpu: u32) {
        if let Some(c) = self.cpus.get_mut(cpu as usize) {
            c.pending += 1;
            self.note_idleness(cpu);
        }
    }

    /// The LLC bitsets say what the runqueues say.
    #[cfg(test)]
    pub(crate) fn llc_idle_agrees(&self) -> bool {
        self.llc_idle.agrees(&self.topo, |c| self.runqueue_idle(c))
    }

    /// Brings `cpu`'s bits in the LLC bitsets to its idle_cpu() now.
    fn note_idleness(&mut self, cpu: u32) {
        let idle = self.runqueue_idle(cpu);
        self.llc_idle.set_idle(&self.topo, cpu, idle);
    }

    /// set_idle_cores(cpu, false): a search for an idle core in `cpu`'s LLC found none.
    pub fn clear_idle_cores(&mut self, cpu: u32) {
        let llc = self.topo.llc(cpu);
        self.idle_cores.insert(llc, false);
    }

    /// __update_idle_core, as a CPU picks its idle task: the LLC has an idle core when
    /// all of this CPU's SMT siblings are idle too.
    fn update_idle_core(&mut self, cpu: u32) {
        let topo = &self.topo;
        if !topo.smt_active {
            return;
        }
        let idle_core = topo.smt[cpu as usize]
            .iter()
            .all(|&s| s == cpu || self.is_idle(s));
        if idle_core {
            let llc = topo.llc(cpu);
            self.idle_cores.insert(llc, true);
        }
    }

    /// The task `pid`, created at `now` on first sight; a non-empty `comm` renames it.
    pub fn task(&mut self, pid: i32, comm: Comm, now: u64) -> &mut TaskState {
        let earlier = &mut self.earlier_flips;
        let assumed = self.flips_before_trace;
        let t = self.tasks.entry(pid).or_insert_with(|| {
            let mut t = TaskState::new(comm, now);
            let f = earlier.remove(&pid).unwrap_or_else(|| assumed.at(now));
            t.set_flips(f);
            t
        });
        if t.comm != comm && comm != Comm::default() {
            t.comm = comm;
        }
        t
    }

    /// idle_cpu(): running the idle task, nothing queued, no wakeup pending. Read from
    /// the LLC bitsets for the topology's CPUs (a bit, not a runqueue, per look).
    pub fn is_idle(&self, cpu: u32) -> bool {
        let idle = self.llc_idle.idle_of(cpu);
        // A runqueue changed without going through the Machine would leave them behind.
        debug_assert!(
            idle.is_none_or(|i| i == self.runqueue_idle(cpu)),
            "CPU {cpu}'s idleness changed behind the LLC bitsets"
        );
        idle.unwrap_or_else(|| self.runqueue_idle(cpu))
    }

    /// What `cpu`'s runqueue holds: whether a task runs or is queued there, and how many
    /// wakeups are queued to it by IPI (ttwu_pending, at times the replay infers); None
    /// for a CPU the machine does not have.
    pub fn runqueue_holds(&self, cpu: u32) -> Option<(bool, u32)> {
        let c = self.cpus.get(cpu as usize)?;
        Some((c.curr != 0 || !c.queued.is_empty(), c.pending))
    }

    /// idle_cpu() from the runqueue itself.
    pub(crate) fn runqueue_idle(&self, cpu: u32) -> bool {
        self.runqueue_holds(cpu) == Some((false, 0))
    }

    /// cpu_util_cfs: the CFS util of a CPU, or the estimates of the tasks it holds
    /// runnable when they add up to more (util_est), capped at its capacity.
    pub fn cpu_util(&self, cpu: u32) -> u64 {
        let Some(c) = self.cpus.get(cpu as usize) else {
            return 0;
        };
        let estimated: u64 = c
            .queued
            .iter()
            .filter_map(|p| self.tasks.get(p))
            .map(|t| t.util_est.value(self.util_est_rules))
            .sum();
        c.avg.util_avg.max(estimated).min(1024)
    }

    /// capacity_of as scale_rt_capacity computes it (v4.19+) on a symmetric machine:
    /// (1024 − rt) · (1024 − irq) / 1024 from the PELT-averaged RT and IRQ time, at least 1.
    pub fn capacity(&self, cpu: u32) -> u64 {
        let Some(c) = self.cpus.get(cpu as usize) else {
            return 1024;
        };
        let (max, irq, used) = (1024u64, c.irq_avg.util_avg, c.rt_avg.util_avg);
        if irq >= max || used >= max {
            return 1;
        }
        ((max - used) * (max - irq) / max).max(1)
    }

    /// cpu_load: the root cfs_rq's load_avg.
    pub fn cpu_load(&self, cpu: u32) -> u64 {
        self.cpus.get(cpu as usize).map_or(0, |c| c.avg.load_avg)
    }

    fn ensure_cpu(&mut self, cpu: u32) {
        if cpu < crate::trace::MAX_CPUS && cpu as usize >= self.cpus.len() {
            let proto = self.cpus.first().cloned();
            if let Some(p) = proto {
                self.cpus.resize(cpu as usize + 1, p);
            }
        }
    }

    /// Brings a CPU's PELT signal up to `now`, as the tick and the periodic balance's
    /// blocked-average update do between events.
    pub fn refresh(&mut self, cpu: u32, now: u64) {
        if (cpu as usize) < self.cpus.len() {
            self.update_cpu_avg(cpu, now);
        }
    }

    /// Brings a CPU's PELT signal to `now` under its state since the last event, as
    /// update_cfs_rq_load_avg does: the removed load comes off first.
    fn update_cpu_avg(&mut self, cpu: u32, now: u64) {
        let c = &mut self.cpus[cpu as usize];
        c.avg.apply_removed(&mut c.removed);
        let running = c.curr != 0;
        let runnable = c.queued.len() as u64;
        c.avg
            .update(now, runnable * NICE_0_WEIGHT, runnable, running, 1);
    }

    /// Brings an attached task's signal to `now` (__update_load_avg_se); a task between
    /// a wakeup migration and its enqueue is not aged.
    fn update_task_avg(&mut self, pid: i32, now: u64) {
        if pid == 0 {
            return;
        }
        if let Some(t) = self.tasks.get_mut(&pid).filter(|t| t.attached.is_some()) {
            let running = t.running_on.is_some();
            let on_rq = t.rq.is_some() as u64;
            if t.avg.update(now, on_rq, on_rq, running, NICE_0_WEIGHT) {
                t.util_est.pelt_changed();
            }
        }
    }

    /// dequeue_task_fair's util_est_update of a task going to sleep, from its signal as
    /// it is, on a CPU of original capacity 1024.
    fn util_est_sleep(&mut self, pid: i32) {
        let rules = self.util_est_rules;
        if let Some(t) = self.tasks.get_mut(&pid) {
            let (util, runnable) = (t.avg.util_avg, t.avg.runnable_avg);
            t.util_est.sleep(util, runnable, 1024, rules);
        }
    }

    /// Puts a task on `cpu`'s runqueue; if another CPU's held it, takes it from there and
    /// says so (true), for the caller to count as a repair or not.
    fn enqueue(&mut self, pid: i32, cpu: u32) -> bool {
        let Some(t) = self.tasks.get_mut(&pid) else {
            return false;
        };
        match t.rq.replace(cpu) {
            Some(c) if c == cpu => false,
            Some(other) => {
                if let Some(o) = self.cpus.get_mut(other as usize) {
                    o.queued.retain(|&p| p != pid);
                }
                self.cpus[cpu as usize].queued.push(pid);
                self.note_idleness(other);
                self.note_idleness(cpu);
                true
            }
            None => {
                self.cpus[cpu as usize].queued.push(pid);
                self.note_idleness(cpu);
                false
            }
        }
    }

    /// Takes a task off whatever runqueue holds it; returns that CPU.
    fn dequeue(&mut self, pid: i32) -> Option<u32> {
        let c = self.tasks.get_mut(&pid)?.rq.take()?;
        if let Some(cs) = self.cpus.get_mut(c as usize) {
            cs.queued.retain(|&p| p != pid);
        }
        self.note_idleness(c);
        Some(c)
    }

    /// attach_entity_load_avg: the task's contribution joins `cpu`'s signal, brought up
    /// to date first (the enqueue's update_load_avg). A task still attached elsewhere
    /// (a move the events did not show) leaves that CPU at once.
    fn attach(&mut self, pid: i32, cpu: u32, now: u64) {
        let Some(held) = self.tasks.get(&pid).map(|t| t.attached) else {
            return;
        };
        match held {
            Some(c) if c == cpu => return,
            Some(other) => self.detach(pid, other),
            None => {}
        }
        self.update_cpu_avg(cpu, now);
        let (Some(t), Some(c)) = (self.tasks.get_mut(&pid), self.cpus.get_mut(cpu as usize)) else {
            return;
        };
        c.avg.attach(&mut t.avg, NICE_0_WEIGHT);
        t.attached = Some(cpu);
    }

    /// detach_entity_load_avg: the task's contribution leaves `cpu`'s signal at once.
    fn detach(&mut self, pid: i32, cpu: u32) {
        let (Some(t), Some(c)) = (self.tasks.get_mut(&pid), self.cpus.get_mut(cpu as usize)) else {
            return;
        };
        c.avg.detach(&t.avg, NICE_0_WEIGHT);
        t.attached = None;
    }

    /// remove_entity_load_avg, for a task leaving a CPU it is not queued on (wakeup
    /// migration): it is synced to that CPU's last update, not to now, and its averages
    /// join the CPU's removed load, taken off at that CPU's next update; so until then
    /// cpu_load still counts it. Then migrate_se_pelt_lag: if that CPU is idle (its clock
    /// may be stale), the task is decayed on to now.
    fn remove(&mut self, pid: i32, now: u64) {
        let Some(t) = self.tasks.get_mut(&pid) else {
            return;
        };
        let Some(c) = t
            .attached
            .take()
            .and_then(|c| self.cpus.get_mut(c as usize))
        else {
            return;
        };
        let mut changed = t
            .avg
            .update(c.avg.last_update_ns, 0, 0, false, NICE_0_WEIGHT);
        c.removed.add(&t.avg);
        if c.curr == 0 {
            changed |= t.avg.update(now, 0, 0, false, NICE_0_WEIGHT);
        }
        if changed {
            t.util_est.pelt_changed();
        }
    }

    /// Applies one event.
    pub fn apply(&mut self, e: &Event) -> Change {
        let c = e.cpu;
        self.ensure_cpu(c);
        if !Machine::names_possible_cpus(e) {
            // A CPU the machine cannot have: leave the state alone.
            return Change::None;
        }
        if self.cpus.is_empty() || c as usize >= self.cpus.len() {
            return Change::None;
        }
        self.update_pressure(c, e.ts);
        let now = e.ts;
        match &e.kind {
            EventKind::Switch {
                prev_comm,
                prev_pid,
                prev_state,
                next_comm,
                next_pid,
                next_prio,
                ..
            } => {
                // Both tasks and the CPU age under the state before the switch.
                self.update_cpu_avg(c, now);
                self.update_task_avg(*prev_pid, now);
                self.update_task_avg(*next_pid, now);
                self.switch_out(c, *prev_pid, *prev_comm, *prev_state, now);
                self.switch_in(c, *next_pid, *next_comm, *next_prio, now);
                Change::None
            }
            EventKind::Wakeup(w) => self.wakeup(w, false, now),
            EventKind::WakeupNew(w) => self.wakeup(w, true, now),
            EventKind::Migrate {
                comm,
                pid,
                orig_cpu,
                dest_cpu,
                ..
            } => {
                self.migrate(*pid, *comm, *orig_cpu, *dest_cpu, now);
                Change::None
            }
            EventKind::Fork {
                child_comm,
                child_pid,
                parent_pid,
                ..
            } => {
                self.fork(c, *parent_pid, *child_pid, *child_comm, now);
                Change::None
            }
            EventKind::Exit { pid, .. } => {
                self.exit(*pid);
                Change::None
            }
            EventKind::IrqEntry { .. } | EventKind::SoftirqEntry { .. } => {
                self.cpus[c as usize].irq_depth += 1;
                Change::None
            }
            EventKind::IrqExit { .. } | EventKind::SoftirqExit { .. } => {
                let d = &mut self.cpus[c as usize].irq_depth;
                *d = d.saturating_sub(1);
                Change::None
            }
            EventKind::Waking(_)
            | EventKind::SelectEnter { .. }
            | EventKind::SelectExit { .. }
            | EventKind::IdleScanEnter { .. }
            | EventKind::IdleScanExit { .. } => Change::None,
        }
    }

    /// Whether the event's CPU, and any CPU it names (a wakeup's target, a migration's
    /// ends), is one a machine can have.
    fn names_possible_cpus(e: &Event) -> bool {
        let cpu_ok = |x: i64| (0..crate::trace::MAX_CPUS as i64).contains(&x);
        let named_ok = match &e.kind {
            EventKind::Wakeup(w) | EventKind::WakeupNew(w) => cpu_ok(w.target_cpu as i64),
            EventKind::Migrate {
                orig_cpu, dest_cpu, ..
            } => cpu_ok(*orig_cpu as i64) && cpu_ok(*dest_cpu as i64),
            _ => true,
        };
        cpu_ok(e.cpu as i64) && named_ok
    }

    /// RT and IRQ pressure (avg_rt, avg_irq) of `cpu` up to now, under the state since
    /// the last event there; every event on the CPU does this first.
    fn update_pressure(&mut self, cpu: u32, now: u64) {
        let cs = &mut self.cpus[cpu as usize];
        let in_irq = cs.irq_depth > 0 && self.irq_pressure;
        let rt = cs.curr != 0 && cs.curr_prio < 100;
        cs.irq_avg
            .update(now, in_irq as u64, in_irq as u64, in_irq, 1);
        cs.rt_avg.update(now, rt as u64, rt as u64, rt, 1);
    }

    /// sched_switch, the previous task's side: it leaves `cpu`, still queued there if
    /// preempted, off every runqueue if it blocked. Its load stays on (or joins) `cpu`.
    fn switch_out(&mut self, cpu: u32, pid: i32, comm: Comm, state: i64, now: u64) {
        if pid == 0 {
            return;
        }
        let elsewhere = self
            .tasks
            .get(&pid)
            .and_then(|t| t.running_on)
            .is_some_and(|r| r != cpu);
        if elsewhere {
            // Already switched in on another CPU: this switch-out comes late (the
            // CPUs' clocks disagree), and its runqueue is that one's now.
            self.task(pid, comm, now);
            return;
        }
        let still_queued = state == 0 || state & PREEMPTED != 0;
        let t = self.task(pid, comm, now);
        t.running_on = None;
        t.cpu = Some(cpu);
        t.fork_copy.forget();
        if still_queued {
            // Preempted: it waits on this runqueue. Held on none, it ran here
            // unseen (the trace's start).
            if self.enqueue(pid, cpu) {
                self.repairs.moved += 1;
            }
        } else {
            let t = self.tasks.get_mut(&pid).expect("made above");
            t.blocked_at = Some(now);
            t.uninterruptible = state & TASK_UNINTERRUPTIBLE != 0;
            self.util_est_sleep(pid);
            if self.dequeue(pid).is_some_and(|h| h != cpu) {
                self.repairs.moved += 1;
            }
        }
        // Its load is on this CPU (first seen here, or moved unseen).
        self.attach(pid, cpu, now);
        if state & (EXIT_DEAD | EXIT_ZOMBIE) != 0 {
            // The task's last switch: finish_task_switch runs task_dead_fair, whose
            // remove_entity_load_avg takes its load off this CPU at the next update
            // (kept as blocked load, a dead hackbench sender weighed on its CPU for
            // a hundred ms and pushed wake_affine_weight toward the waker's CPU).
            self.remove(pid, now);
        }
    }

    /// sched_switch, the next task's side: it runs on `cpu`, queued there; pid 0 (the
    /// idle task) empties the runqueue and starts an idle period.
    fn switch_in(&mut self, cpu: u32, pid: i32, comm: Comm, prio: i32, now: u64) {
        if pid != 0 {
            let t = self.task(pid, comm, now);
            t.prio = prio;
            t.running_on = Some(cpu);
            t.cpu = Some(cpu);
            // Held on none: running without a wakeup we saw (the trace's start),
            // so it was queued here. Held elsewhere: moved, a repair.
            if self.enqueue(pid, cpu) {
                self.repairs.moved += 1;
            }
            self.attach(pid, cpu, now);
        } else {
            self.go_idle(cpu, now);
        }
        self.cpus[cpu as usize].curr = pid;
        self.cpus[cpu as usize].curr_prio = prio;
        self.note_idleness(cpu);
        if pid == 0 {
            self.update_idle_core(cpu);
        }
    }

    /// A CPU picking its idle task: nothing is runnable on it, so whatever its runqueue
    /// still holds is dropped (a repair), and the idle period starts.
    fn go_idle(&mut self, cpu: u32, now: u64) {
        let stale = std::mem::take(&mut self.cpus[cpu as usize].queued);
        self.repairs.dropped_at_idle += stale.len() as u64;
        for p in stale {
            if let Some(t) = self.tasks.get_mut(&p) {
                t.rq = None;
            }
        }
        // Newidle balance stamps the rq just before it idles.
        self.cpus[cpu as usize].idle_stamp = Some(now);
    }

    /// sched_wakeup / sched_wakeup_new (`new`): the task is enqueued on its target CPU,
    /// its load attached there; ends the target's idle period, if any.
    fn wakeup(&mut self, w: &Wake, new: bool, now: u64) -> Change {
        let target = w.target_cpu.max(0) as u32;
        self.ensure_cpu(target);
        self.update_cpu_avg(target, now);
        let new_util = new.then(|| {
            let c = &self.cpus[target as usize].avg;
            self.new_task_util.initial(c.util_avg, c.load_avg)
        });
        let (held, attached) = {
            let t = self.task(w.pid, w.comm, now);
            t.cpu = Some(target);
            if let Some(util) = new_util {
                // wake_up_new_task: a new task starts heavy until its own history builds.
                t.avg = Avg::forked(now, NICE_0_WEIGHT, util);
                t.attached = None;
            }
            (t.rq, t.attached)
        };
        match held {
            // ttwu_runnable: still queued here, nothing moves.
            Some(h) if h == target => {
                self.update_task_avg(w.pid, now);
                return Change::None;
            }
            // Held on another CPU's runqueue, but woken onto this one: it had
            // left that one unseen. Woken here as any other.
            Some(_) => {
                self.dequeue(w.pid);
                self.repairs.moved += 1;
            }
            None => {}
        }
        // enqueue_entity's update_load_avg(DO_ATTACH): a task still attached here
        // is aged over its sleep; one that migrated (removed from its old CPU) is
        // attached as it was synced there, without ageing.
        match attached {
            Some(a) if a == target => self.update_task_avg(w.pid, now),
            // Moved without a sched_migrate_task: removed from there as at one.
            Some(_) => self.remove(w.pid, now),
            None => {}
        }
        self.attach(w.pid, target, now);
        self.enqueue(w.pid, target);
        let cs = &mut self.cpus[target as usize];
        cs.pending = cs.pending.saturating_sub(1);
        self.note_idleness(target);
        self.end_idle(target, now)
    }

    /// A wakeup activating a task on `cpu` ends its idle period: the period joins
    /// avg_idle, which policies hear of.
    fn end_idle(&mut self, cpu: u32, now: u64) -> Change {
        let cs = &mut self.cpus[cpu as usize];
        let Some(stamp) = cs.idle_stamp.take() else {
            return Change::None;
        };
        // update_avg(&rq->avg_idle, delta), capped at 2·max_idle_balance_cost.
        let delta = now.saturating_sub(stamp) as i64;
        let avg = cs.avg_idle as i64;
        let capped = (avg + (delta - avg) / 8).max(0) as u64;
        cs.avg_idle = capped.min(2 * cs.max_idle_balance_cost);
        Change::AvgIdle {
            cpu,
            avg_idle: cs.avg_idle,
        }
    }

    /// sched_migrate_task: a waiting task moved by load balance changes runqueue and
    /// carries its load; a sleeping one being woken elsewhere leaves its load behind
    /// as removed load. A running task's move shows at its next switch.
    fn migrate(&mut self, pid: i32, comm: Comm, orig_cpu: i32, dest_cpu: i32, now: u64) {
        let (orig, dest) = (
            orig_cpu.max(0).unsigned_abs(),
            dest_cpu.max(0).unsigned_abs(),
        );
        self.ensure_cpu(dest);
        self.ensure_cpu(orig);
        let (queued, running) = {
            let t = self.task(pid, comm, now);
            t.cpu = Some(dest);
            (t.rq.is_some(), t.running_on.is_some())
        };
        if queued && !running {
            // A load-balance move of a waiting task. The dequeue brings orig and
            // the task up to now and detaches it at once; the enqueue brings
            // dest up to now and attaches it, aligned to dest's window.
            self.update_cpu_avg(orig, now);
            self.update_task_avg(pid, now);
            if let Some(a) = self.tasks.get(&pid).and_then(|t| t.attached) {
                self.detach(pid, a);
            }
            if self.dequeue(pid).is_some_and(|h| h != orig) {
                self.repairs.moved += 1;
            }
            self.update_cpu_avg(dest, now);
            self.attach(pid, dest, now);
            self.enqueue(pid, dest);
        } else if !running {
            // A wakeup migration (set_task_cpu between waking and wakeup):
            // migrate_task_rq_fair's remove_entity_load_avg. Neither CPU is
            // updated; the wakeup's enqueue attaches the task.
            self.remove(pid, now);
        }
    }

    /// sched_process_fork on `cpu`: the child starts with the parent's CPU as its
    /// recent_used_cpu and the parent's wakee flips.
    fn fork(&mut self, cpu: u32, parent_pid: i32, child_pid: i32, child_comm: Comm, now: u64) {
        // wake_up_new_task starts recent_used_cpu at the parent's CPU.
        let parent_cpu = self
            .tasks
            .get(&parent_pid)
            .and_then(|t| t.cpu)
            .unwrap_or(cpu);
        // dup_task_struct copies the parent, and __sched_fork resets none of
        // wakee_flips, wakee_flip_decay_ts and last_wakee: the child starts with
        // the parent's as copy_process began (ForkCopy). They only change in
        // record_wakee, when the child wakes someone, so a child that seldom does
        // keeps them (and wake_wide sees them) for its whole life.
        let inherited = self
            .tasks
            .get_mut(&parent_pid)
            .map(|p| p.fork_copy.copied(p.flips(), now));
        let t = self.task(child_pid, child_comm, now);
        t.recent_used_cpu = Some(parent_cpu);
        if let Some(f) = inherited {
            t.set_flips(f);
        }
    }

    /// sched_process_exit: the task wakes no one any more.
    fn exit(&mut self, pid: i32) {
        if let Some(t) = self.tasks.get_mut(&pid) {
            t.last_wakee = 0;
        }
    }

    /// record_wakee(p), run on the waker: flips halve at most once per second, and grow
    /// when the waker wakes a different task than last time.
    /// A CPU's idle task (waking from an interrupt, see [`flips_key`]) is counted from
    /// the flips assumed before the trace. A task not seen yet is not: the kernel counts
    /// it too, but a child takes its parent's flips when copy_process starts, and a
    /// multi-threaded launcher (the capture itself) wakes its threads from inside the
    /// fork (the mmap lock's waiters), which the fork event follows; counted, those
    /// flips reach every task the launcher forks (3 too many on each hackbench task of
    /// a capture whose kernel recorded its own flips, traces/rig/ground-truth).
    pub fn record_wakee(&mut self, waker: i32, wakee: i32, now: u64) {
        if waker == 0 {
            return;
        }
        let uninterruptible = self.tasks.get(&wakee).is_some_and(|t| t.uninterruptible);
        if let Some(w) = self.tasks.get_mut(&waker) {
            w.fork_copy.waking(w.flips(), uninterruptible, now);
            flip(
                &mut w.wakee_flips,
                &mut w.wakee_flip_decay_ts,
                &mut w.last_wakee,
                wakee,
                now,
            );
            return;
        }
        if waker > 0 {
            return;
        }
        let assumed = self.flips_before_trace;
        let w = self
            .earlier_flips
            .entry(waker)
            .or_insert_with(|| assumed.at(now));
        flip(&mut w.flips, &mut w.decay_ts, &mut w.last_wakee, wakee, now);
    }

    /// p->wakee_flips as wake_wide reads it, of a task seen or not seen yet (then as it
    /// will be when first seen: what it was given before, or the flips assumed for the
    /// tasks alive before the trace).
    pub fn wakee_flips(&self, pid: i32, now: u64) -> u32 {
        match self.tasks.get(&pid) {
            Some(t) => t.wakee_flips,
            None => {
                self.earlier_flips
                    .get(&pid)
                    .copied()
                    .unwrap_or_else(|| self.flips_before_trace.at(now))
                    .flips
            }
        }
    }
}

/// Whose wake_wide memory a waking on `cpu` by `pid` counts in: the waker's, or, for a
/// waking from an interrupt on an idle CPU (pid 0), that CPU's idle task's, a task of
/// its own in the kernel (swapper/N) that record_wakee counts like any other.
pub fn flips_key(pid: i32, cpu: u32) -> i32 {
    if pid == 0 {
        -1 - cpu.min(i32::MAX as u32 - 1) as i32
    } else {
        pid
    }
}

/// record_wakee on a waker's flip count: halved once a second has passed since the last
/// halving, counted up when it wakes another task than last time.
pub(crate) fn flip(
    flips: &mut u32,
    decay_ts: &mut u64,
    last_wakee: &mut i32,
    wakee: i32,
    now: u64,
) {
    if now.saturating_sub(*decay_ts) > 1_000_000_000 {
        *flips >>= 1;
        *decay_ts = now;
    }
    if *last_wakee != wakee {
        *last_wakee = wakee;
        *flips += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::event::build::{fork, migrate, switch, wakeup, waking};
    use crate::trace::Comm;
    use crate::wakeup::target::{choose_target, Waking};

    fn machine(cpus: u32) -> Machine {
        Machine::new(Topo::new(&crate::topology::Topology::flat(cpus), cpus))
    }

    /// Two cores of two threads in one LLC: CPUs 0 and 1, CPUs 2 and 3.
    fn smt_machine() -> Machine {
        let mut t = crate::topology::Topology::flat(4);
        for c in &mut t.cpus {
            c.core = c.cpu / 2;
            c.smt_siblings = vec![c.cpu & !1, c.cpu | 1];
        }
        Machine::new(Topo::new(&t, 4))
    }

    /// Interrupt time takes capacity (avg_irq) only in a kernel that keeps it: 40 ms of
    /// every 50 in interrupts leaves a CPU well under full capacity, or at full capacity
    /// without CONFIG_IRQ_TIME_ACCOUNTING.
    #[test]
    fn interrupts_take_capacity_only_where_the_kernel_counts_them() {
        use crate::trace::{Event, EventKind};
        let capacity = |irq_pressure: bool| {
            let mut m = machine(2);
            m.irq_pressure = irq_pressure;
            let at = |ts, kind| Event {
                ts,
                cpu: 1,
                common_pid: 0,
                kind,
            };
            for i in 0..20u64 {
                let t = i * 50_000_000;
                m.apply(&at(
                    t,
                    EventKind::IrqEntry {
                        irq: 1,
                        name: "timer".into(),
                    },
                ));
                m.apply(&at(t + 40_000_000, EventKind::IrqExit { irq: 1, ret: 1 }));
            }
            m.apply(&at(
                1_000_000_000,
                EventKind::IrqEntry {
                    irq: 1,
                    name: "timer".into(),
                },
            ));
            m.capacity(1)
        };
        assert_eq!(capacity(false), 1024);
        let pressed = capacity(true);
        assert!(pressed < 512, "{pressed}");
        assert_eq!(machine(2).capacity(1), 1024);
    }

    /// has_idle_cores as the kernel keeps it: unknown at the start (the truth is used),
    /// set when a CPU idles with its sibling idle, left set while the core fills again,
    /// and cleared only by a search that finds no idle core.
    #[test]
    fn the_idle_cores_hint_stays_set_until_a_search_clears_it() {
        let mut m = smt_machine();
        assert!(m.has_idle_cores(0), "all idle, hint unknown: the truth");
        for (cpu, pid) in [(0, 10), (1, 11), (2, 12), (3, 13)] {
            m.apply(&switch(1, cpu, 0, 0, pid));
        }
        assert!(!m.has_idle_cores(0), "all busy, hint unknown: the truth");
        m.clear_idle_cores(0);
        // CPU 3 idles while its sibling 2 runs: no idle core, no hint.
        m.apply(&switch(2, 3, 13, 1, 0));
        assert!(!m.has_idle_cores(3));
        // CPU 2 idles with 3 idle: the core is idle, the hint is set.
        m.apply(&switch(3, 2, 12, 1, 0));
        assert!(m.has_idle_cores(0));
        // The core fills again: the hint stays set (it is only a hint).
        m.apply(&switch(4, 2, 0, 0, 12));
        assert!(m.has_idle_cores(1));
        m.clear_idle_cores(1);
        assert!(!m.has_idle_cores(2));
    }

    /// The LLC bitsets follow every change of idleness the events make: a task
    /// starting, queued behind another, moved to another CPU's runqueue, blocking; a
    /// wakeup pending by IPI and its activation; a CPU idling with tasks still held.
    #[test]
    fn the_llc_bitsets_follow_the_runqueues() {
        let mut m = smt_machine();
        assert!(m.llc_idle_agrees());
        // An event, or None for a wakeup pending by IPI on CPU 2.
        let steps = [
            Some(switch(1, 0, 0, 0, 10)),
            Some(wakeup(2, 0, 10, 11, 1)),
            Some(wakeup(3, 0, 10, 12, 0)),
            None,
            Some(wakeup(4, 0, 10, 13, 2)),
            // 12, queued on 0, is woken onto 3: it leaves 0's runqueue.
            Some(wakeup(5, 0, 10, 12, 3)),
            Some(switch(6, 1, 0, 0, 0)),
            Some(switch(7, 0, 10, 1, 0)),
            Some(switch(8, 2, 0, 0, 13)),
            Some(switch(9, 2, 13, 1, 0)),
        ];
        for (i, step) in steps.iter().enumerate() {
            match step {
                Some(e) => {
                    m.apply(e);
                }
                None => m.add_pending_wakeup(2),
            }
            assert!(m.llc_idle_agrees(), "after step {i}");
        }
        assert_eq!((0..4).filter(|&c| m.is_idle(c)).count(), 3);
    }

    /// CPU 1 runs task 1 and never idles. Task 2 is woken onto CPU 1 and queued there;
    /// load balance then moves it to CPU 2, but that sched_migrate_task is lost, and 2 is
    /// seen switched in on CPU 2. The kernel's runqueues: CPU 1 holds 1, CPU 2 holds 2.
    /// So when 1 wakes task 3 (prev CPU 3, busy) with WF_SYNC, wake_affine_idle sees
    /// cpu_rq(this)->nr_running == 1 and takes the waker's CPU; a count that kept task 2
    /// on CPU 1 (2 running) would have gone on to the load comparison.
    #[test]
    fn a_task_seen_on_another_cpu_than_it_is_held_on_moves() {
        let mut m = machine(4);
        for e in [
            switch(0, 1, 0, 0, 1),
            switch(1, 3, 0, 0, 4),
            switch(2, 2, 2, 1, 0),
            switch(3, 0, 3, 1, 0),
            waking(10, 1, 1, 2, 2),
            wakeup(11, 1, 1, 2, 1),
        ] {
            m.apply(&e);
        }
        assert_eq!(m.cpus[1].queued, vec![1, 2]);
        m.apply(&switch(20, 2, 0, 0, 2));
        assert_eq!(m.cpus[1].nr_running(), 1);
        assert_eq!(m.cpus[2].queued, vec![2]);
        assert_eq!(m.tasks[&2].rq, Some(2));
        assert_eq!(m.repairs.moved, 1);
        let t = choose_target(
            &mut m,
            &Waking {
                now: 30,
                waker_cpu: 1,
                waker: 1,
                wakee: 3,
                prev: 3,
                sync: true,
                in_task: true,
            },
            false,
        );
        assert_eq!((t.wakee.target, t.stage), (1, "wake_affine_idle"));
    }

    /// A CPU that switches to its idle task has an empty runqueue, whatever it was
    /// thought to hold: a task queued there whose move was lost is dropped (and counted),
    /// and the CPU is idle to the search.
    #[test]
    fn what_an_idling_cpu_still_holds_is_dropped() {
        let mut m = machine(2);
        for e in [
            switch(0, 0, 0, 0, 1),
            waking(5, 0, 1, 2, 0),
            wakeup(6, 0, 1, 2, 0),
            switch(10, 0, 1, 1, 0),
        ] {
            m.apply(&e);
        }
        assert!(m.is_idle(0));
        assert_eq!(m.repairs.dropped_at_idle, 1);
        assert!(!m.tasks[&2].on_rq());
    }

    /// The case, small. Tasks 11..14 ran 10 ms each on CPU 0 and sleep there,
    /// task 15 ran 0.2 ms; CPU 0 then runs task 10, CPU 1 runs a waker, 20, that wakes
    /// 11..14 and pulls them to CPU 1 (set_task_cpu → migrate_task_rq_fair), then wakes
    /// 15, whose prev is CPU 0.
    ///
    /// fair.c: remove_entity_load_avg syncs each to CPU 0's last_update_time and only
    /// adds its load to cfs_rq->removed, which CPU 0 takes off at its own next
    /// update_cfs_rq_load_avg; the enqueue on CPU 1 attaches it, window aligned to CPU
    /// 1's. So wake_affine_weight still reads CPU 0's load with 11..14 in it:
    /// this_eff = (Σ11..14 + L15)·100 against prev_eff = (Σ11..14 + L15 − L15)·108, and
    /// with L15 small the waker's CPU is chosen. Taking the load off CPU 0 at once would
    /// leave prev_eff near 0 and keep 15 on prev.
    #[test]
    fn load_pulled_off_prev_by_wakeup_migration_stays_until_prev_updates() {
        const MS: u64 = 1_000_000;
        let mut m = machine(2);
        let mut t = 0;
        for pid in [11, 12, 13, 14, 15] {
            let run = if pid == 15 { MS / 5 } else { 10 * MS };
            m.apply(&switch(t, 0, 0, 0, pid));
            t += run;
            m.apply(&switch(t, 0, pid, 1, 0));
        }
        m.apply(&switch(59 * MS, 0, 0, 0, 10));
        m.apply(&switch(59 * MS + 500, 1, 0, 0, 20));
        let load0 = m.cpu_load(0);
        let lut0 = m.cpus[0].avg.last_update_ns;
        // What each of 11..14 takes away: its load synced to CPU 0's last update.
        let synced = |m: &Machine, pid: i32| {
            let mut a = m.tasks[&pid].avg;
            a.update(lut0, 0, 0, false, NICE_0_WEIGHT);
            a.load_avg
        };
        let removed: u64 = [11, 12, 13, 14].iter().map(|&p| synced(&m, p)).sum();
        let l15 = m.tasks[&15].avg.load_avg;
        assert!(l15 * 100 < removed * 8, "{l15} vs {removed}");
        let mut now = 60 * MS;
        for pid in [11, 12, 13, 14] {
            let a = synced(&m, pid);
            m.apply(&waking(now, 1, 20, pid, 0));
            m.apply(&migrate(now + 100, 1, pid, 0, 1));
            m.apply(&wakeup(now + 200, 1, 20, pid, 1));
            let t = &m.tasks[&pid];
            // Attached to CPU 1 as synced on CPU 0, in CPU 1's window.
            assert_eq!(t.attached, Some(1));
            assert_eq!(t.avg.load_avg, a);
            assert_eq!(t.avg.last_update_ns, m.cpus[1].avg.last_update_ns);
            assert_eq!(t.avg.period_contrib, m.cpus[1].avg.period_contrib);
            assert_eq!(t.avg.load_sum, a * m.cpus[1].avg.divider() / NICE_0_WEIGHT);
            now += MS / 10;
        }
        // CPU 0 has not been updated: its load still holds them, and its removed load
        // is theirs.
        assert_eq!(m.cpu_load(0), load0);
        assert_eq!(m.cpus[0].removed.load_avg, removed);
        assert_eq!(m.cpus[0].removed.nr, 4);
        let target = choose_target(
            &mut m,
            &Waking {
                now,
                waker_cpu: 1,
                waker: 20,
                wakee: 15,
                prev: 0,
                sync: false,
                in_task: true,
            },
            false,
        );
        assert_eq!(
            (target.wakee.target, target.stage),
            (1, "wake_affine_weight")
        );
        // CPU 0's next update (here at its last update's time, so nothing decays) takes
        // exactly the removed load off.
        m.refresh(0, lut0);
        assert_eq!(m.cpu_load(0), load0 - removed);
        assert_eq!(m.cpus[0].removed, Removed::default());
    }

    /// A task's last switch (prev_state Z or X) runs task_dead_fair: its load joins the
    /// CPU's removed load, taken off at the CPU's next update (here the next task's
    /// switch-in), and does not stay on as blocked load. A task that only blocks (S)
    /// keeps its load there.
    #[test]
    fn a_dead_tasks_load_leaves_its_cpu_at_the_next_update() {
        const MS: u64 = 1_000_000;
        let load_after = |state: i64| {
            let mut m = machine(1);
            m.apply(&switch(0, 0, 0, 0, 10));
            m.apply(&switch(20 * MS, 0, 10, state, 11));
            m.refresh(0, 21 * MS);
            (m.cpu_load(0), m.tasks[&10].attached)
        };
        let (blocked, attached) = load_after(1);
        assert_eq!(attached, Some(0));
        for dead in [EXIT_ZOMBIE, EXIT_DEAD] {
            let (load, attached) = load_after(dead);
            assert_eq!(attached, None, "{dead:#x}");
            // 11 has run 1 ms: its load alone is left, far below 10's 20 ms of it.
            assert!(load * 5 < blocked, "{dead:#x}: {load} against {blocked}");
        }
    }

    /// record_wakee runs only on the waker, and fork copies the parent's wakee_flips
    /// (__sched_fork does not reset them). Task 1 wakes five different tasks (flips 5),
    /// then forks 10, which never wakes anyone. Task 2, with 20 flips of its own, wakes
    /// 10: wake_wide with an LLC of 4 sees slave 5 ≥ 4 and master 20 ≥ 5·4, so it is
    /// wide and the target stays prev. A child starting at 0 flips would be affine.
    #[test]
    fn a_forked_child_inherits_its_parents_wakee_flips() {
        let mut m = machine(4);
        for e in [switch(0, 0, 0, 0, 1), switch(0, 1, 0, 0, 2)] {
            m.apply(&e);
        }
        for (i, pid) in (100..105).enumerate() {
            m.record_wakee(1, pid, 10 + i as u64);
        }
        for (i, pid) in (200..220).enumerate() {
            m.record_wakee(2, pid, 10 + i as u64);
        }
        let fork = fork(50, 0, 1, 10);
        m.apply(&fork);
        assert_eq!(m.tasks[&10].wakee_flips, 5);
        assert_eq!(m.tasks[&10].last_wakee, 104);
        // 10 runs on CPU 2 and sleeps there; CPU 2 stays busy.
        for e in [
            switch(60, 2, 0, 0, 10),
            switch(70, 2, 10, 1, 3),
            waking(100, 1, 2, 10, 2),
        ] {
            m.apply(&e);
        }
        let t = choose_target(
            &mut m,
            &Waking {
                now: 100,
                waker_cpu: 1,
                waker: 2,
                wakee: 10,
                prev: 2,
                sync: true,
                in_task: true,
            },
            false,
        );
        assert_eq!((t.wakee.target, t.stage), (2, "wake_wide"));
    }

    /// Tasks first seen other than at their fork were alive before the trace, with
    /// wakee_flips it cannot show; their children inherit them (dup_task_struct), and
    /// the cheap pass of the slices assumes the same. Tasks 1 and 2 are first seen
    /// running; 2 wakes 20 different tasks; 1 forks 10, which wakes no one. When 2 wakes
    /// 10 (prev CPU 2, an LLC of 4, WF_SYNC, CPU 1 running only the waker): assuming no
    /// flips before the trace, 10 has 0 < 4, so wake_wide is off and wake_affine_idle
    /// takes the waker's CPU (sync, one task running). Assuming 5, 10 inherits 5 from 1,
    /// and 2 has 5 + 20, then 26 once it records 10: slave 5 ≥ 4 and master 26 ≥ 5 · 4,
    /// so wake_wide keeps 10 on prev.
    #[test]
    fn flips_assumed_before_the_trace_reach_the_tasks_forked_from_then() {
        let fork = fork(50, 0, 1, 10);
        let events = [
            switch(0, 0, 0, 0, 1),
            switch(0, 1, 0, 0, 2),
            fork,
            switch(60, 2, 0, 0, 10),
            switch(70, 2, 10, 1, 3),
        ];
        for (assumed, stage, target, flips_10) in
            [(0, "wake_affine_idle", 1, 0), (5, "wake_wide", 2, 5)]
        {
            let mut m = machine(4);
            let before = crate::state::flips::BeforeTrace::flips(assumed);
            m.flips_before_trace = before;
            let mut pass = crate::state::flips::FlipsPass::new(false, before);
            for e in &events[..2] {
                m.apply(e);
                pass.apply(e);
            }
            for (i, pid) in (200..220).enumerate() {
                m.record_wakee(2, pid, 10 + i as u64);
            }
            for e in &events[2..] {
                m.apply(e);
                pass.apply(e);
            }
            assert_eq!(m.tasks[&1].wakee_flips, assumed);
            assert_eq!(m.tasks[&10].wakee_flips, flips_10);
            assert_eq!(pass.flips()[&10].flips, flips_10, "the pass agrees");
            let t = choose_target(
                &mut m,
                &Waking {
                    now: 100,
                    waker_cpu: 1,
                    waker: 2,
                    wakee: 10,
                    prev: 2,
                    sync: true,
                    in_task: true,
                },
                false,
            );
            assert_eq!(m.tasks[&2].wakee_flips, assumed + 21);
            assert_eq!(
                (t.wakee.target, t.stage),
                (target, stage),
                "assumed {assumed}"
            );
        }
    }

    /// wake_up_new_task puts a new task on its CPU at full load (its weight, 1024 at
    /// nice 0), so that wake_affine_weight counts it heavy from the start; an idle CPU
    /// with no load before holds 1024 once the child is woken there. A task first seen
    /// at a plain wakeup brings no history.
    #[test]
    fn a_new_task_is_woken_at_full_load() {
        let t0 = 10_000_000_000;
        let wake = |pid: i32, target_cpu: i32| Wake {
            comm: Comm::from_bytes(b"child"),
            pid,
            prio: 120,
            target_cpu,
        };
        let new = Event {
            ts: t0,
            cpu: 0,
            common_pid: 1,
            kind: EventKind::WakeupNew(wake(10, 1)),
        };
        let seen = Event {
            ts: t0,
            cpu: 0,
            common_pid: 1,
            kind: EventKind::Wakeup(wake(11, 2)),
        };
        let mut m = machine(4);
        m.apply(&new);
        m.apply(&seen);
        assert_eq!(m.cpu_load(1), 1024);
        assert_eq!(m.tasks[&10].attached, Some(1));
        assert_eq!(m.cpu_load(2), 0);
    }

    /// The age of the last halving decides which children inherit the count from
    /// before a halving. Launcher 1 is first seen running at t0 with 8 flips, last
    /// halved 900 ms before (so due again at t0 + 100 ms); it wakes 5 at t0 + 50 ms (9
    /// flips), forks 10 at + 60 ms, wakes 6 at + 150 ms and forks 11 at + 160 ms.
    /// record_wakee at + 150 ms finds more than a second since the halving: 9 >> 1 = 4, then 5 with the
    /// flip, so 11 inherits 5, where 10 keeps 9. Halved as first seen instead, both
    /// wakes count up with no halving: 10 has 9 and 11 has 10.
    #[test]
    fn the_age_of_the_last_halving_splits_the_children() {
        use crate::state::flips::{BeforeTrace, FlipsPass};
        let ms = 1_000_000u64;
        let waking = |ts: u64, pid: i32| Event {
            ts,
            cpu: 0,
            common_pid: 1,
            kind: EventKind::Waking(crate::trace::Wake {
                comm: Comm::from_bytes(b"peer"),
                pid,
                prio: 120,
                target_cpu: 1,
            }),
        };
        // Ten seconds after boot, as a trace's stamps are.
        let t0 = 10_000 * ms;
        let events = [
            switch(t0, 0, 0, 0, 1),
            waking(t0 + 50 * ms, 5),
            fork(t0 + 60 * ms, 0, 1, 10),
            waking(t0 + 150 * ms, 6),
            fork(t0 + 160 * ms, 0, 1, 11),
        ];
        for (halved_ago_ns, want_10, want_11) in [(900 * ms, 9, 5), (0, 9, 10)] {
            let before = BeforeTrace {
                flips: 8,
                halved_ago_ns,
            };
            let mut m = machine(4);
            m.flips_before_trace = before;
            let mut pass = FlipsPass::new(false, before);
            for e in &events {
                m.apply(e);
                pass.apply(e);
                if let EventKind::Waking(w) = &e.kind {
                    m.record_wakee(1, w.pid, e.ts);
                }
            }
            let got = (m.tasks[&10].wakee_flips, m.tasks[&11].wakee_flips);
            assert_eq!(got, (want_10, want_11), "halved {halved_ago_ns} ns before");
            let flips = pass.flips();
            assert_eq!((flips[&10].flips, flips[&11].flips), got, "the pass agrees");
        }
    }

    /// A child copies its parent's flips as copy_process starts, before dup_mmap's
    /// release of the mmap lock wakes the parent's threads that faulted meanwhile
    /// (blocked uninterruptibly, `D`); the fork's event follows those wakings. Launcher
    /// 1 wakes 5 (asleep in `S`, 1 flip), then its threads 6 and 7 (in `D`, 3 flips),
    /// and forks 10 100 µs later: 10 gets 1. Switched out between the wakings and the
    /// fork, or forking 2 ms later, the launcher was not in copy_process when it woke
    /// them: 10 gets 3. Waking a task in `S` ends the run as well.
    #[test]
    fn a_child_does_not_copy_the_wakings_of_its_parents_fork() {
        use crate::state::flips::{BeforeTrace, FlipsPass};
        let us = 1_000u64;
        let forked = fork(0, 0, 1, 10);
        let at = |ts: u64, e: &Event| Event { ts, ..e.clone() };
        let t0 = 10_000_000 * us;
        // Tasks 5, 6 and 7 sleep (5 in S, 6 and 7 in D); 1 runs on CPU 0.
        let start = [
            switch(t0, 1, 5, 1, 0),
            switch(t0 + us, 2, 6, 2, 0),
            switch(t0 + 2 * us, 3, 7, 2, 0),
            switch(t0 + 3 * us, 0, 0, 0, 1),
        ];
        let wake = |ts: u64, pid: i32| waking(ts, 0, 1, pid, 1);
        let in_fork = [
            wake(t0 + 10 * us, 5),
            wake(t0 + 20 * us, 6),
            wake(t0 + 30 * us, 7),
        ];
        let fork_at = |dt: u64| at(t0 + 30 * us + dt, &forked);
        let cases: [(&str, Vec<Event>, u32); 4] = [
            ("forked 100 µs after", vec![fork_at(100 * us)], 1),
            ("forked 2 ms after", vec![fork_at(2_000 * us)], 3),
            (
                "switched out and back between",
                vec![
                    switch(t0 + 50 * us, 0, 1, 0, 9),
                    switch(t0 + 60 * us, 0, 9, 1, 1),
                    fork_at(100 * us),
                ],
                3,
            ),
            (
                "woke 5 again after",
                vec![wake(t0 + 40 * us, 5), fork_at(100 * us)],
                4,
            ),
        ];
        for (case, then, want) in cases {
            let mut m = machine(4);
            let mut pass = FlipsPass::new(false, BeforeTrace::default());
            for e in start.iter().chain(&in_fork).chain(&then) {
                m.apply(e);
                pass.apply(e);
                if let EventKind::Waking(w) = &e.kind {
                    m.record_wakee(1, w.pid, e.ts);
                }
            }
            assert_eq!(m.tasks[&10].wakee_flips, want, "{case}");
            assert_eq!(pass.flips()[&10].flips, want, "{case}: the pass agrees");
        }
    }

    /// cpu_util_cfs counts the estimates of the tasks a CPU holds runnable: task 5 runs
    /// on CPU 0 for 20 ms (util ≈ 1024·(1 − y^19.5) ≈ 360) and sleeps, CPU 0 idles for
    /// 200 ms (its util decays to ≈ 4). Woken onto CPU 1, idle from the start (util 0),
    /// it waits there without running: PELT holds only its decayed util (360 / 2^6.25
    /// ≈ 5), the estimate its util at the sleep, and CPU 1 reads as the latter.
    #[test]
    fn a_cpu_holding_a_woken_task_reports_the_tasks_estimate() {
        let mut m = machine(4);
        m.apply(&switch(0, 0, 0, 0, 5));
        m.apply(&switch(20_000_000, 0, 5, 1, 0));
        let at_sleep = m.tasks[&5].avg.util_avg;
        assert!((340..380).contains(&at_sleep), "{at_sleep}");
        assert_eq!(m.tasks[&5].util_est.value(m.util_est_rules), at_sleep);
        let later = 220_000_000;
        m.apply(&wakeup(later, 1, 0, 5, 1));
        m.refresh(1, later);
        assert!(
            (4..=6).contains(&m.cpus[1].avg.util_avg),
            "{}",
            m.cpus[1].avg.util_avg
        );
        assert_eq!(m.cpu_util(1), at_sleep);
        // CPU 0's own signal has decayed; nothing is queued there.
        m.refresh(0, later);
        assert!(m.cpu_util(0) < 10, "{}", m.cpu_util(0));
        // Picked and run at once: the estimate stays until util_avg passes it.
        m.apply(&switch(later + 1000, 1, 0, 0, 5));
        assert_eq!(m.cpu_util(1), at_sleep);
    }
}
