//! Closed-loop simulation: the tasks of a workload model run on a machine in virtual
//! time, and every wakeup is placed by a policy, so a different placement changes what
//! happens next (queueing, latency, throughput, migrations).
//!
//! The scheduler is a small CFS: per-CPU runqueues ordered by vruntime, a slice of
//! sched_latency (6 ms) shared among the runnable tasks (at least 0.75 ms) and seen to
//! run out at the scheduler tick (HZ=250), a woken task placed at most half a
//! sched_latency behind min_vruntime and preempting the current task when it is more
//! than the wakeup granularity (1 ms) behind it, after a preemption delay (the rest of
//! the waker's system call and the context switch); the wakee that preempts runs next
//! and the task it preempted after it (the next and last buddies), when that is not
//! unfair by more than the granularity; the three tunables scaled, as the kernel
//! scales them, by 1 + log2 of the CPU count (at most 8 CPUs counted). A task that
//! changes CPU takes its vruntime along relative to the runqueues' min_vruntime (as
//! migrate_task_rq_fair and enqueue_entity do). A re-run of a trace lets a run the tick
//! would end go on as the trace's preempted runs did ([`stretch`]). Idle
//! CPUs pull a waiting task at newidle balance (while avg_idle covers its cost; reach
//! limited by the policy, seed 002) and at an idle balance every 4 ms, each only from a
//! group find_busiest_group finds imbalanced; the policies get their LLC statistics on
//! replay's schedule.
//!
//! A wakeup onto another CPU takes time: the search ends, the wakeup is queued to the
//! chosen CPU (from then on not idle to other searches), and the waker enqueues it once
//! it holds that runqueue's lock. Searches that overlap can choose the same idle CPU.
//! Benchmark tasks are forked one after another onto the idlest CPU.
//!
//! For kernels from v6.6 the fair scheduler is EEVDF instead ([`eevdf`]: lag kept across
//! sleeps and migrations, eligibility, virtual deadlines, RUN_TO_PARITY, and from v6.12
//! DELAY_DEQUEUE), with the same costs, balancing and placement around it.
//!
//! The simulator emits the tracepoints a kernel would (sched_waking, sched_migrate_task,
//! sched_wakeup, sched_switch, sched_wakeup_new) and keeps the same reconstructed machine
//! state as decision replay by applying them, so placement goes through the very code
//! replay uses (select_task_rq_fair's target, then select_idle_sibling), and the events
//! make a bundle every other command reads.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use serde::{Deserialize, Serialize};

use crate::abi::{EXIT_DEAD, MIGRATION_COST_NS, PREEMPTED, WF_SYNC, WF_TTWU};
use crate::bundle::provenance::NewidleCost;
use crate::metrics::observed::Percentiles;
use crate::metrics::{Derived, Distance, Log2Hist, Placements};
use crate::policy::{self, NewidleReach, Policy, PolicyError};
use crate::state::{Change, Machine, Topo};
use crate::synth::streams::Streams;
use crate::synth::{Start, Step, Workload, FORK_INTERVAL_NS};
use crate::topology::Topology;
use crate::trace::{Comm, Event, EventKind, Wake};
use crate::wakeup::balance::Balancer;
use crate::wakeup::sis::{select_idle_sibling, SisCounters, TimeModel};
use crate::wakeup::target::{choose_target, note_recent_used, Waking};

pub mod delays;
pub mod eevdf;
pub mod stretch;
pub use delays::{DelayKind, TracedWakeup, WakeDelays};
pub use eevdf::Scheduler;
pub use stretch::PreemptedRuns;

const MS: u64 = 1_000_000;
/// The normalized CFS tunables, before get_update_sysctl_factor's scaling.
const SCHED_LATENCY: u64 = 6 * MS;
const MIN_GRANULARITY: u64 = 750_000;
const WAKEUP_GRANULARITY: u64 = MS;
/// EEVDF's sysctl_sched_base_slice, normalized likewise.
const BASE_SLICE: u64 = 750_000;
const BALANCE_INTERVAL: u64 = 4 * MS;
/// A scheduler tick at HZ=250 (Debian's). CFS sees a slice run out only here: with
/// HRTICK off, check_preempt_tick runs from the tick, not when the slice ends.
pub(crate) const TICK_NS: u64 = 4 * MS;

/// The first tick after `now`.
fn next_tick(now: u64) -> u64 {
    (now / TICK_NS + 1) * TICK_NS
}
/// sd->busy_factor: a busy CPU balances this many times less often than an idle one.
const BUSY_FACTOR: u64 = 16;
/// sysctl_sched_nr_migrate: at most this many tasks move in one balance.
const NR_MIGRATE: u64 = 32;
/// How long an enqueue or a context switch holds a runqueue lock (replay's default).
const RQ_LOCK_HOLD_NS: u64 = 300;

/// CPU time a migrated task loses refilling its caches, by distance.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Penalty {
    /// Charged for a move to another CPU of the same LLC (ns).
    pub same_llc_ns: u64,
    /// Charged for a move to another LLC of the same node (ns).
    pub cross_llc_ns: u64,
    /// Charged for a move to another NUMA node (ns).
    pub cross_numa_ns: u64,
}

impl Default for Penalty {
    /// A working set of a few tens of KB: L2 refills from the shared LLC (~2 us), from
    /// another LLC's lines or memory (~10 us), from a remote node (~25 us).
    fn default() -> Penalty {
        Penalty {
            same_llc_ns: 2_000,
            cross_llc_ns: 10_000,
            cross_numa_ns: 25_000,
        }
    }
}

/// How a simulation runs: the machine, the policy, the measured time and the model's
/// costs.
pub struct SimOptions {
    /// The simulated machine.
    pub topology: Topology,
    /// The policy spec every wakeup is placed by, e.g. `sis_util:pct=117`.
    pub policy: String,
    /// Virtual time simulated before measuring: PELT signals (and SIS_UTIL's view of
    /// the LLC's utilisation) need a few half-lives of 32 ms to settle.
    pub warmup_ns: u64,
    /// Virtual time measured after the warmup.
    pub duration_ns: u64,
    /// The modelled cost of a search (entry and per-runqueue ns), charged to the waker.
    pub time: TimeModel,
    /// Cache refill time charged to a task that changes CPU, by distance.
    pub penalty: Penalty,
    /// How long an idle CPU takes to run a task woken onto it from another CPU: the IPI
    /// and the exit from idle.
    pub wake_ipi_ns: u64,
    /// How long a wakee that preempts the running task waits for the CPU: the running
    /// task goes on to its next preemption point (the return from the system call or
    /// interrupt that woke the wakee) and then the context switch.
    pub preempt_delay_ns: u64,
    /// A benchmark's run bursts vary by up to this share either way (uniformly), as
    /// real requests and messages do; traced bursts are taken as recorded.
    pub jitter: f64,
    /// Seeds the variation: the same seed gives the same run.
    pub seed: u64,
    /// Keep the emitted events, for a bundle.
    pub record: bool,
    /// The fair scheduler: CFS as in v6.1, or EEVDF (v6.6+, DELAY_DEQUEUE from v6.12).
    pub scheduler: Scheduler,
    /// The util_est rules of the kernel modelled, by its release (SIS_UTIL's budget and
    /// the balancer's group utilisation read them); `scheduler` does not change them.
    pub util_est: crate::state::util_est::Rules,
    /// How the modelled kernel starts a new task's utilisation, by its release.
    pub new_task_util: crate::state::pelt::NewTaskUtil,
    /// A traced machine's own wakeup delays: where a kind has samples, each such delay
    /// is drawn from them instead of `wake_ipi_ns` or `preempt_delay_ns`.
    pub traced_delays: WakeDelays,
    /// wakee_flips assumed for a traced task as it first appears (what it had, or
    /// inherited at fork, before the trace; see Machine::flips_before_trace).
    pub flips_before_trace: crate::state::flips::BeforeTrace,
    /// A re-run of a trace: how long the trace's preempted runs lasted, which a run the
    /// tick would end goes on to (see [`stretch`]); empty, the tick ends it.
    pub preempted_runs: PreemptedRuns,
    /// The kernel's newidle balance costs, as a capture recorded them: where they match
    /// the topology's domains they replace the model's estimates, and raise avg_idle's
    /// cap as the kernel's do.
    pub newidle_costs: Vec<NewidleCost>,
}

impl SimOptions {
    /// The model's documented defaults for everything but what is named; seed 1, no
    /// events kept.
    pub fn with_defaults(
        topology: Topology,
        policy: &str,
        warmup_ns: u64,
        duration_ns: u64,
    ) -> SimOptions {
        SimOptions {
            topology,
            policy: policy.into(),
            warmup_ns,
            duration_ns,
            time: TimeModel::default(),
            penalty: Penalty::default(),
            wake_ipi_ns: DEFAULT_WAKE_IPI_NS,
            preempt_delay_ns: DEFAULT_PREEMPT_DELAY_NS,
            jitter: DEFAULT_JITTER,
            seed: 1,
            record: false,
            scheduler: Scheduler::Cfs,
            util_est: crate::state::util_est::Rules::default(),
            new_task_util: crate::state::pelt::NewTaskUtil::default(),
            traced_delays: WakeDelays::default(),
            flips_before_trace: crate::state::flips::BeforeTrace::default(),
            preempted_runs: PreemptedRuns::default(),
            newidle_costs: Vec::new(),
        }
    }
}

/// What a simulation measured: written as results/sim.json and read back from it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SimResult {
    /// The workload's name.
    pub workload: String,
    /// The policy spec simulated.
    pub policy: String,
    /// Tasks in the workload (with synth, its per-CPU housekeeping threads too).
    pub tasks: usize,
    /// CPUs of the simulated machine (highest CPU number + 1).
    pub nr_cpus: u32,
    /// Virtual time run before measuring (ns).
    pub warmup_ns: u64,
    /// Virtual time measured after the warm-up (ns).
    pub duration_ns: u64,
    /// What one counted unit of work is, e.g. "transactions".
    pub unit: String,
    /// Units of work done in the measured time.
    pub units: u64,
    /// `units` per second of measured virtual time.
    pub throughput_per_s: f64,
    /// Wakeups placed by the policy in the measured time.
    pub wakeups: u64,
    /// Waking to running, ns.
    pub latency: Percentiles,
    /// The same latencies, µs, in log2 buckets.
    pub latency_us: Log2Hist,
    /// SIS counters summed over the measured wakeups.
    pub counters: SisCounters,
    /// Percentages of `counters`.
    pub derived: Derived,
    /// Modelled search time summed over the measured wakeups (ns).
    pub search_ns_total: u64,
    /// Wakeup placements relative to prev.
    pub placements: Placements,
    /// Tasks moved by newidle and periodic balance, by distance.
    pub balance_migrations: Placements,
    /// Newidle pulls by the domain level they came from.
    pub newidle_pulls: BTreeMap<String, u64>,
    /// Penalty time charged to migrated tasks, ns.
    pub penalty_ns: u64,
    /// Wakeups onto another CPU than the waker's, which take that CPU's runqueue lock.
    pub remote_rq_locks: u64,
    /// Of those, how many found it held (by another waker or by that CPU's own context
    /// switch) and waited.
    pub rq_lock_waits: u64,
    /// Time wakers spent waiting for those locks, charged to them as CPU time.
    pub rq_lock_wait_ns: u64,
    /// Remote wakeups whose search chose a CPU that another search had chosen and not
    /// yet queued to: both read it idle while they scanned. (A decision replay, which
    /// takes each choice as queued at once, chooses otherwise there.)
    #[serde(default)]
    pub wakeup_collisions: u64,
    /// The same over the warm-up too: what a replay of the whole bundle meets.
    #[serde(default)]
    pub wakeup_collisions_with_warmup: u64,
    /// Sleeps of a stream's reader ended by a write the trace hid (see
    /// [`crate::synth::streams`]).
    #[serde(default)]
    pub hidden_writes: u64,
    /// Runs the tick would have ended that went on as the trace's did (see
    /// [`stretch`]).
    #[serde(default)]
    pub runs_stretched: u64,
    /// Timed sleeps whose trace showed a late interrupt (see
    /// [`crate::synth::late_timers`]) ended by another timer's interrupt of their CPU,
    /// not by their own.
    #[serde(default)]
    pub late_timers_bunched: u64,
    /// CPUs whose newidle balance costs were the kernel's, as the capture recorded them
    /// (the others', the model's estimate).
    #[serde(default)]
    pub newidle_costs_recorded: u64,
    /// Each level's newidle balance cost (ns), lowest level first, the least and the
    /// most over the CPUs.
    #[serde(default)]
    pub newidle_cost_ns: Vec<(u64, u64)>,
    /// When the last task finished, for workloads whose tasks end (a traced run); None
    /// when work remained at the end of the duration.
    pub finished_ns: Option<u64>,
    /// Run-once tasks that had not run all their steps when the simulation ended.
    pub unfinished_tasks: u64,
    /// CPU time spent running tasks, % of the measured time times the CPUs.
    pub busy_pct: f64,
    /// The migration penalties the run charged (settings).
    pub penalties: Penalty,
    /// The IPI and idle-exit delay the run used (setting, ns).
    pub wake_ipi_ns: u64,
    /// Absent from results written before wakeup preemption had a delay.
    #[serde(default)]
    pub preempt_delay_ns: u64,
    /// Whether wakeup delays were drawn from a trace's samples (the two above are then
    /// that trace's medians, used only for kinds it had too few samples of).
    #[serde(default)]
    pub delays_from_trace: bool,
    /// Wakeup delays taken from the traced wakeup that ended the same sleep.
    #[serde(default)]
    pub delays_traced: u64,
    /// Wakeup delays drawn from the trace's samples of their kind.
    #[serde(default)]
    pub delays_drawn: u64,
    /// Wakeup delays of the model's constants (a kind the trace shows too little of).
    #[serde(default)]
    pub delays_fixed: u64,
    /// The run-burst variation the run used (setting, share either way).
    pub jitter: f64,
    /// The seed of the variation.
    pub seed: u64,
    /// The search cost model the run used.
    pub time_model: TimeModel,
}

impl SimResult {
    /// A result with the run's settings and nothing measured yet.
    fn empty(workload: &Workload, opts: &SimOptions, nr_cpus: u32) -> SimResult {
        SimResult {
            workload: workload.name.clone(),
            policy: opts.policy.clone(),
            tasks: workload.tasks.len(),
            nr_cpus,
            warmup_ns: opts.warmup_ns,
            duration_ns: opts.duration_ns,
            unit: workload.unit.to_string(),
            units: 0,
            throughput_per_s: 0.0,
            wakeups: 0,
            latency: Percentiles::default(),
            latency_us: Log2Hist::default(),
            counters: SisCounters::default(),
            derived: Derived::of(&SisCounters::default()),
            search_ns_total: 0,
            placements: Placements::default(),
            balance_migrations: Placements::default(),
            newidle_pulls: BTreeMap::new(),
            penalty_ns: 0,
            remote_rq_locks: 0,
            wakeup_collisions: 0,
            wakeup_collisions_with_warmup: 0,
            hidden_writes: 0,
            runs_stretched: 0,
            late_timers_bunched: 0,
            newidle_costs_recorded: 0,
            newidle_cost_ns: Vec::new(),
            rq_lock_waits: 0,
            rq_lock_wait_ns: 0,
            finished_ns: None,
            unfinished_tasks: 0,
            busy_pct: 0.0,
            penalties: opts.penalty,
            wake_ipi_ns: opts.wake_ipi_ns,
            preempt_delay_ns: opts.preempt_delay_ns,
            delays_from_trace: opts.traced_delays.any(),
            delays_traced: 0,
            delays_drawn: 0,
            delays_fixed: 0,
            jitter: opts.jitter,
            seed: opts.seed,
            time_model: opts.time,
        }
    }
}

/// A server's idle CPU woken by IPI: the IPI and a shallow C-state's exit take a couple
/// of microseconds (deeper states take tens).
pub const DEFAULT_WAKE_IPI_NS: u64 = 2_000;

/// A wakeup preemption takes effect after the rest of the system call that woke the
/// wakee and a context switch: lmbench's lat_ctx and perf bench sched pipe put a switch
/// between two tasks at 1-3 us on current x86 servers; traced local wakees on this
/// project's captures reach the CPU 0.7-20 us after their waking.
pub const DEFAULT_PREEMPT_DELAY_NS: u64 = 2_000;

/// Run bursts of a benchmark vary by up to half either way.
pub const DEFAULT_JITTER: f64 = 0.5;

/// A vruntime taken from a runqueue whose min_vruntime is `from_min` to one whose
/// min_vruntime is `to_min`, its distance to the minimum kept (a task behind the old
/// minimum stays as far behind the new one, down to vruntime 0).
fn rebase(v: u64, from_min: u64, to_min: u64) -> u64 {
    let relative = i128::from(v) - i128::from(from_min);
    (i128::from(to_min) + relative).max(0) as u64
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Sleeping,
    Runnable,
    Running,
}

struct Task {
    pid: i32,
    comm: Comm,
    pc: usize,
    /// ns left of the current Run step, when it started.
    left: Option<u64>,
    /// CPU time owed before the next step: search time and cache refills.
    debt: u64,
    state: State,
    /// Ran its last step (a traced task's end).
    exited: bool,
    cpu: u32,
    vruntime: u64,
    /// Wakeups that found the task awake, kept for its next sleeps.
    wake_pending: u32,
    /// When it last left a CPU (exec_start, for cache hotness).
    last_ran: u64,
    woken_at: Option<u64>,
    /// EEVDF: the virtual deadline.
    deadline: u64,
    /// EEVDF: the lag kept from its last dequeue.
    vlag: i64,
    /// EEVDF: picked and not yet past the deadline it was picked with
    /// (RUN_TO_PARITY).
    protected: bool,
    /// DELAY_DEQUEUE: blocked, but still queued on its CPU until picked or woken.
    delayed: bool,
    /// Not forked yet (Start::At, Start::Forked): a wake that comes first is kept for
    /// it, as a message sent to a task that does not exist yet waits for it.
    unborn: bool,
    /// In a timed sleep: only its timer ends it; a task's wake that comes meanwhile is
    /// kept for its next sleep (a traced task's timed sleep was ended by an interrupt,
    /// not by the wake that follows it).
    timed: bool,
    /// Counts its timed sleeps: a sleep's timer carries it, so that the timer of a
    /// sleep an earlier interrupt ended (a late one's) does not end a later sleep.
    sleep_gen: u32,
    /// When it last went to sleep waiting for a wake (a Sleep step).
    slept_at: u64,
    /// Sleeps a stream's hidden write ended (see [`crate::synth::streams`]), each owed
    /// one traced wakeup by a task: absorbed when one comes that finds the task awake
    /// or in a timed sleep (one that finds it waiting again wakes it, and the debt
    /// stays for a later one).
    hidden_woken: u32,
}

/// Who wakes a task, as the wakeup's events and its selection see it.
struct Waker {
    /// The waking task; None for a timer.
    task: Option<usize>,
    cpu: u32,
    /// The pid the events carry: the waker's, or whatever runs where the timer fires.
    pid: i32,
    sync: bool,
    /// Woken from task context (not from the timer softirq).
    in_task: bool,
}

#[derive(Default)]
struct Cpu {
    curr: Option<usize>,
    rq: Vec<usize>,
    /// When the current stint of curr began.
    started: u64,
    /// When curr was picked: check_preempt_tick's delta_exec counts from here.
    picked: u64,
    /// When the current stint ends at the latest: under CFS the next tick (or the end
    /// of a run the tick let go on), under EEVDF the running task's deadline.
    slice_end: u64,
    gen: u64,
    /// Idle, with a wakeup IPI on its way.
    kicked: bool,
    /// Its runqueue lock is held until then.
    lock_free_at: u64,
    min_vruntime: u64,
    busy_ns: u64,
    /// EEVDF: the running task's vruntime as the kernel last updated it (update_curr
    /// runs at a pick, an enqueue and a preemption check, not at every instant).
    curr_vruntime_seen: u64,
    /// The `gen` of the running task a wakeup has marked for preemption (TIF_NEED_RESCHED),
    /// while the Resched that carries it out is on its way.
    need_resched: Option<u64>,
    /// The tick would have ended the running task's run; it goes on to then (see
    /// [`stretch`]).
    run_ends_at: Option<u64>,
    /// CFS's buddies: the wakee whose wakeup preempted (next) and, on a runqueue of
    /// sched_nr_latency or more, the task it preempted (last); picked before the
    /// leftmost task when that is not unfair by more than the wakeup granularity.
    next_buddy: Option<usize>,
    last_buddy: Option<usize>,
    /// Tasks asleep on a timer of this CPU that its next timer interrupt or wakeup IPI
    /// ends once due (a [`Step::SleepLate`]): each with when it is due and its sleep's
    /// gen.
    late_timers: Vec<(usize, u64, u32)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    /// The running task's stint on `cpu` ends (its run step or its slice).
    Stint {
        cpu: u32,
        gen: u64,
    },
    Timer {
        task: usize,
        /// The task's sleep_gen when the timer was set.
        gen: u32,
    },
    /// An idle CPU woken by IPI starts running.
    Kick {
        cpu: u32,
    },
    /// A wakeup preemption of `cpu`'s running task takes effect, if that task still
    /// runs.
    Resched {
        cpu: u32,
        gen: u64,
    },
    /// A task enters: queued on its CPU (Start::At).
    Start {
        task: usize,
    },
    /// A task is forked and placed on the idlest CPU (Start::Forked).
    Fork {
        task: usize,
    },
    /// A remote wakeup is queued to the CPU its search chose (ttwu_pending): from now
    /// on that CPU is not idle to other searches.
    Queued {
        dest: u32,
    },
    /// A remote wakeup's enqueue on the CPU its search chose, once the waker holds that
    /// runqueue's lock.
    Enqueue {
        task: usize,
        dest: u32,
        waker_cpu: u32,
        waking_at: u64,
    },
    Balance,
}

/// A domain level around a CPU: its name, its span, and whether it has SD_NUMA.
struct Level {
    name: &'static str,
    span: Vec<u32>,
    numa: bool,
    /// sd->imb_numa_nr: how many tasks a NUMA group may run before a small imbalance
    /// toward it counts (build_sched_domains: the LLCs in the first domain above the
    /// LLC, scaled by how much wider than the first NUMA span a domain is).
    imb_numa_nr: u32,
    /// sd->imbalance_pct: 110 for SMT, 117 elsewhere.
    imbalance_pct: u64,
    /// sd->max_newidle_lb_cost (ns): the kernel's, where the capture recorded it, else
    /// the model's estimate ([`NEWIDLE_COST_BASE_NS`]).
    newidle_cost_ns: u64,
    /// sd->balance_interval (ms): the domain's weight, doubled up to twice that each
    /// time a periodic balance finds it balanced, back to the weight when one moves tasks.
    balance_interval_ms: u64,
    /// The balance tick (of [`BALANCE_INTERVAL`]) from which this CPU balances it next.
    next_balance_tick: u64,
}

/// The statistics find_busiest_group gathers for one group of a domain
/// (update_sg_lb_stats), reduced to what decides a pull.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum GroupType {
    HasSpare,
    FullyBusy,
    Overloaded,
}

#[derive(Debug, Clone, Copy)]
struct GroupStats {
    /// Tasks running or queued on the group's CPUs.
    nr: u64,
    idle_cpus: u64,
    weight: u64,
    util: u64,
    /// The CPUs' PELT load (cpu_load) summed.
    load: u64,
    kind: GroupType,
}

impl GroupStats {
    /// group_classify: overloaded with more tasks than CPUs and its utilisation above
    /// capacity / imbalance_pct; fully busy with no idle CPU left that way; else spare.
    fn of(nr: u64, idle_cpus: u64, weight: u64, util: u64, load: u64, pct: u64) -> GroupStats {
        let capacity = 1024 * weight;
        let util_high = util * pct > capacity * 100;
        let kind = if nr > weight && util_high {
            GroupType::Overloaded
        } else if nr >= weight && util_high {
            GroupType::FullyBusy
        } else {
            GroupType::HasSpare
        };
        GroupStats {
            nr,
            idle_cpus,
            weight,
            util,
            load,
            kind,
        }
    }

    /// avg_load: the group's load per CPU of capacity 1024.
    fn avg_load(&self) -> u64 {
        self.load / self.weight.max(1)
    }

    /// The load of one of its tasks, on average.
    fn task_load(&self) -> u64 {
        (self.load / self.nr.max(1)).max(1)
    }
}

/// find_busiest_group and calculate_imbalance (v6.1) for an idle `local` group against
/// the busiest other group: how many tasks to pull (0: balanced). `prefer_sibling` when
/// the child domain spreads tasks (SD_PREFER_SIBLING), `within_llc` when the domain
/// shares the LLC, `numa` with its imb_numa_nr when it is a NUMA domain.
fn imbalance(
    local: &GroupStats,
    busiest: &GroupStats,
    pct: u64,
    prefer_sibling: bool,
    within_llc: bool,
    numa: Option<u32>,
) -> u64 {
    if busiest.nr == 0 || local.kind > busiest.kind {
        return 0;
    }
    if local.kind == GroupType::Overloaded
        && (local.avg_load() >= busiest.avg_load()
            || 100 * busiest.avg_load() <= pct * local.avg_load())
    {
        return 0;
    }
    let spread = prefer_sibling && local.kind == GroupType::HasSpare && busiest.nr > local.nr + 1;
    if !spread && busiest.kind != GroupType::Overloaded {
        // Not overloaded: balanced unless the idle CPUs differ by more than one, and
        // nothing to take from a group running a single task.
        if busiest.weight > 1 && local.idle_cpus <= busiest.idle_cpus + 1 {
            return 0;
        }
        if busiest.nr == 1 {
            return 0;
        }
    }
    if local.kind != GroupType::HasSpare {
        // migrate_load: the load that brings both to the domain's average, in tasks
        // of the busiest group's average load; at least the one task a newly idle CPU
        // takes.
        let per_cpu = busiest.avg_load().saturating_sub(local.avg_load()) / 2;
        let load = per_cpu * local.weight.min(busiest.weight);
        return (load / busiest.task_load()).max(1);
    }
    if busiest.kind == GroupType::Overloaded && !within_llc {
        // migrate_util: fill the local group's spare capacity.
        return u64::from(local.util < 1024 * local.weight);
    }
    let mut imb = if busiest.weight == 1 || prefer_sibling {
        busiest.nr.saturating_sub(local.nr)
    } else {
        local.idle_cpus.saturating_sub(busiest.idle_cpus)
    };
    if let Some(imb_numa_nr) = numa {
        // adjust_numa_imbalance: a small imbalance toward a lightly used node stays.
        const NUMA_IMBALANCE_MIN: u64 = 2;
        // dst_running (this group's tasks and the one pulled) ≤ imb_numa_nr.
        if local.nr < u64::from(imb_numa_nr) && imb <= NUMA_IMBALANCE_MIN {
            imb = 0;
        }
    }
    imb >> 1
}

/// The CFS tunables of a machine: SCHED_TUNABLESCALING_LOG multiplies the normalized
/// ones by 1 + ilog2(min(CPUs, 8)), so 4 times on any machine of 8 CPUs or more.
struct Tunables {
    latency: u64,
    min_granularity: u64,
    wakeup_granularity: u64,
    base_slice: u64,
}

impl Tunables {
    fn for_cpus(cpus: u32) -> Tunables {
        let factor = 1 + u64::from(cpus.clamp(1, 8).ilog2());
        Tunables {
            latency: SCHED_LATENCY * factor,
            min_granularity: MIN_GRANULARITY * factor,
            wakeup_granularity: WAKEUP_GRANULARITY * factor,
            base_slice: BASE_SLICE * factor,
        }
    }
}

/// One simulation: the workload's tasks, the CPUs' runqueues, the event queue in virtual
/// time, the reconstructed machine state and the policy placing the wakeups.
pub struct Sim {
    tun: Tunables,
    topo_levels: Vec<Vec<Level>>,
    workload: Workload,
    tasks: Vec<Task>,
    cpus: Vec<Cpu>,
    heap: BinaryHeap<Reverse<(u64, u64, Ev)>>,
    seq: u64,
    m: Machine,
    policy: Box<dyn Policy>,
    opts: SimOptions,
    balancer: Balancer,
    events: Vec<Event>,
    latencies: Vec<u32>,
    rng: fastrand::Rng,
    /// When a task last left a CPU.
    last_active: u64,
    /// The last event's timestamp.
    last_stamp: u64,
    /// Per CPU: remote wakeups whose search chose it and has not yet ended.
    in_flight: Vec<u32>,
    /// Wakeup collisions since the start, warm-up included.
    collisions_with_warmup: u64,
    /// Writers and readers whose writes the trace hides.
    streams: Streams,
    result: SimResult,
}

/// Why a simulation cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The policy spec is not valid.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// The simulation as asked for cannot run, e.g. a workload without tasks.
    #[error("{0}")]
    Usage(String),
}

fn levels(topo: &Topo, t: &Topology, cpu: u32) -> Vec<Level> {
    let all: Vec<u32> = (0..topo.nr_cpus).collect();
    let c = t.cpus.iter().find(|x| x.cpu == cpu);
    let by = |f: &dyn Fn(&crate::topology::CpuTopo) -> bool| -> Vec<u32> {
        let mut v: Vec<u32> = t.cpus.iter().filter(|x| f(x)).map(|x| x.cpu).collect();
        v.sort_unstable();
        v
    };
    let Some(c) = c else {
        return vec![Level {
            name: "machine",
            newidle_cost_ns: newidle_cost_estimate(all.len()),
            balance_interval_ms: all.len() as u64,
            next_balance_tick: u64::from(cpu),
            span: all,
            numa: false,
            imb_numa_nr: 1,
            imbalance_pct: 117,
        }];
    };
    let candidates = [
        ("smt", by(&|x| c.smt_siblings.contains(&x.cpu)), false),
        (
            "cluster",
            by(&|x| x.cluster == c.cluster && x.llc == c.llc),
            false,
        ),
        ("llc", by(&|x| x.llc == c.llc), false),
        ("node", by(&|x| x.node == c.node), false),
        ("package", by(&|x| x.package == c.package), true),
        ("machine", all, true),
    ];
    let mut out: Vec<Level> = Vec::new();
    for (name, span, numa_if_wider) in candidates {
        if out.last().is_some_and(|l| l.span.len() >= span.len()) || span.len() <= 1 {
            continue;
        }
        // A level spanning several NUMA nodes is a NUMA domain.
        let nodes: std::collections::BTreeSet<u32> = span
            .iter()
            .filter_map(|&x| topo.node_of.get(x as usize).copied())
            .collect();
        out.push(Level {
            name,
            numa: numa_if_wider && nodes.len() > 1,
            imb_numa_nr: 1,
            imbalance_pct: if name == "smt" { 110 } else { 117 },
            newidle_cost_ns: newidle_cost_estimate(span.len()),
            balance_interval_ms: span.len() as u64,
            next_balance_tick: u64::from(cpu),
            span,
        });
    }
    // imb_numa_nr as build_sched_domains sets it: in the first domain above the LLC,
    // the LLCs it spans (or an eighth of its CPUs when it spans one); above that, that
    // many times the domain's width over the first NUMA domain's above it.
    let llc_weight = topo.llc_span(cpu).len().max(1);
    if let Some(first) = out.iter().position(|l| l.span.len() > llc_weight) {
        let w = out[first].span.len();
        let imb = match w / llc_weight {
            1 => (w >> 3).max(1),
            n => n,
        } as u32;
        let imb_span = out[first + 1..]
            .iter()
            .find(|l| l.numa)
            .map_or(w, |l| l.span.len())
            .max(1);
        out[first].imb_numa_nr = imb;
        for l in &mut out[first + 1..] {
            l.imb_numa_nr = imb * (l.span.len() / imb_span).max(1) as u32;
        }
    }
    out
}

/// A newly idle CPU's load balance costs about this much per CPU of the domain it
/// balances (updating blocked averages, find_busiest_group over the groups, locking
/// the busiest runqueue), plus a fixed part: the model's estimate of
/// sd->max_newidle_lb_cost (/sys/kernel/debug/sched/domains/cpu*/domain*/
/// max_newidle_lb_cost shows a few microseconds for domains of a few CPUs on current
/// x86 servers). Newidle skips a domain when the CPU's avg_idle is below the cost of
/// balancing it plus what the lower domains cost (sched_balance_newidle's cut-off).
/// This is the fixed part (ns).
pub const NEWIDLE_COST_BASE_NS: u64 = 1_000;
/// The per-CPU part of a newidle balance's cost (ns per CPU of the domain).
pub const NEWIDLE_COST_PER_CPU_NS: u64 = 250;

/// rebalance_domains' schedule, after a periodic balance of level `l` at balance tick
/// `tick` that moved tasks or found the domain balanced: load_balance puts
/// sd->balance_interval back to the domain's weight (ms) or doubles it, up to twice
/// that; the next balance comes that interval on, times sd->busy_factor on a busy CPU.
fn reschedule_balance(l: &mut Level, tick: u64, moved: bool, busy: bool) {
    let weight = l.span.len() as u64;
    l.balance_interval_ms = match moved {
        true => weight,
        false => (l.balance_interval_ms * 2).min(2 * weight),
    };
    let factor = if busy { BUSY_FACTOR } else { 1 };
    l.next_balance_tick = tick + (l.balance_interval_ms * MS * factor / BALANCE_INTERVAL).max(1);
}

/// The model's estimate of a domain of `cpus` CPUs' max_newidle_lb_cost (ns).
fn newidle_cost_estimate(cpus: usize) -> u64 {
    NEWIDLE_COST_BASE_NS + NEWIDLE_COST_PER_CPU_NS * cpus as u64
}

/// Puts the kernel's own max_newidle_lb_cost, as a capture recorded it, on each CPU's
/// domain levels, where that CPU's recorded domains are as many as its levels (the
/// kernel's domains, degenerate ones removed, are the levels the model builds); a CPU
/// whose domains do not match keeps the estimates. Returns the CPUs given the kernel's.
fn apply_newidle_costs(levels: &mut [Vec<Level>], costs: &[NewidleCost]) -> usize {
    let mut applied = 0;
    for (cpu, lv) in levels.iter_mut().enumerate() {
        let mine: Vec<&NewidleCost> = costs.iter().filter(|c| c.cpu as usize == cpu).collect();
        let in_order = mine.iter().enumerate().all(|(i, c)| c.domain as usize == i);
        if mine.len() != lv.len() || !in_order {
            continue;
        }
        for (l, c) in lv.iter_mut().zip(mine) {
            l.newidle_cost_ns = c.max_newidle_lb_cost_ns;
        }
        applied += 1;
    }
    applied
}

impl Sim {
    /// Sets up `workload` on `opts.topology`, every task in its start state; nothing runs
    /// until [`Sim::run`].
    pub fn new(workload: Workload, opts: SimOptions) -> Result<Sim, SimError> {
        let policy = policy::build(&opts.policy)?;
        let nr = opts
            .topology
            .cpus
            .iter()
            .map(|c| c.cpu + 1)
            .max()
            .unwrap_or(1);
        if workload.tasks.is_empty() {
            return Err(SimError::Usage("the workload has no tasks".into()));
        }
        let topo = Topo::new(&opts.topology, nr);
        let mut topo_levels: Vec<Vec<Level>> =
            (0..nr).map(|c| levels(&topo, &opts.topology, c)).collect();
        let kernel_costs = apply_newidle_costs(&mut topo_levels, &opts.newidle_costs);
        let tasks = workload
            .tasks
            .iter()
            .enumerate()
            .map(|(i, t)| Task {
                pid: t.pid.unwrap_or(1000 + i as i32),
                comm: Comm::from_bytes(t.comm.as_bytes()),
                pc: 0,
                left: None,
                debt: 0,
                state: match t.start {
                    Start::Runnable { .. } => State::Runnable,
                    Start::At { .. } | Start::Asleep { .. } | Start::Forked => State::Sleeping,
                },
                exited: false,
                cpu: t.start.cpu().unwrap_or(i as u32) % nr,
                vruntime: 0,
                wake_pending: 0,
                last_ran: 0,
                woken_at: None,
                deadline: 0,
                vlag: 0,
                protected: false,
                delayed: false,
                unborn: matches!(t.start, Start::At { .. } | Start::Forked),
                timed: false,
                sleep_gen: 0,
                slept_at: 0,
                hidden_woken: 0,
            })
            .collect();
        let v0 = if opts.scheduler.is_eevdf() {
            eevdf::VRUNTIME_BASE
        } else {
            0
        };
        let mut result = SimResult::empty(&workload, &opts, nr);
        result.newidle_costs_recorded = kernel_costs as u64;
        let depth = topo_levels.iter().map(Vec::len).max().unwrap_or(0);
        result.newidle_cost_ns = (0..depth)
            .map(|li| {
                let costs = topo_levels
                    .iter()
                    .filter_map(|lv| Some(lv.get(li)?.newidle_cost_ns));
                costs.fold((u64::MAX, 0), |(lo, hi), c| (lo.min(c), hi.max(c)))
            })
            .collect();
        let streams = if workload.wakes_counted {
            Streams::of(&workload)
        } else {
            Streams::default()
        };
        let mut m = Machine::new(topo);
        // rq->max_idle_balance_cost, which caps avg_idle at twice itself: the costliest
        // newidle balance lately, at least sysctl_sched_migration_cost (which the model's
        // estimates stay below).
        for (cs, lv) in m.cpus.iter_mut().zip(&topo_levels) {
            let most = lv.iter().map(|l| l.newidle_cost_ns).max().unwrap_or(0);
            cs.max_idle_balance_cost = most.max(MIGRATION_COST_NS);
        }
        m.flips_before_trace = opts.flips_before_trace;
        m.util_est_rules = opts.util_est;
        m.new_task_util = opts.new_task_util;
        Ok(Sim {
            tun: Tunables::for_cpus(nr),
            balancer: Balancer::new(&m),
            m,
            topo_levels,
            workload,
            tasks,
            cpus: (0..nr)
                .map(|_| Cpu {
                    min_vruntime: v0,
                    ..Cpu::default()
                })
                .collect(),
            heap: BinaryHeap::new(),
            seq: 0,
            policy,
            events: Vec::new(),
            latencies: Vec::new(),
            rng: fastrand::Rng::with_seed(opts.seed),
            last_active: 0,
            last_stamp: 0,
            in_flight: vec![0; nr as usize],
            collisions_with_warmup: 0,
            streams,
            result,
            opts,
        })
    }

    /// sched_balance_fork's choice for a new task, reduced to task counts: the LLC with
    /// the most idle CPUs, its first idle CPU; with none idle anywhere, the CPU with the
    /// fewest tasks (the lowest-numbered of equals).
    fn idlest_cpu(&self) -> u32 {
        let idle = |c: u32| {
            let cpu = &self.cpus[c as usize];
            cpu.curr.is_none() && cpu.rq.is_empty()
        };
        let best_llc = (self.m.topo.llc_cpus.values())
            .map(|span| (span.iter().filter(|&&c| idle(c)).count(), span))
            .filter(|(n, _)| *n > 0)
            .max_by_key(|(n, span)| (*n, Reverse(span[0])));
        if let Some((_, span)) = best_llc {
            return *span.iter().find(|&&c| idle(c)).expect("an idle CPU");
        }
        (0..self.cpus.len() as u32)
            .min_by_key(|&c| {
                let cpu = &self.cpus[c as usize];
                (cpu.rq.len() + usize::from(cpu.curr.is_some()), c)
            })
            .unwrap_or(0)
    }

    /// Queues a new task on its CPU, as wake_up_new_task does after fork placement.
    fn enter(&mut self, t: usize, now: u64) {
        self.tasks[t].unborn = false;
        let cpu = self.tasks[t].cpu;
        let w = self.wake_payload(t, cpu);
        self.emit(now, cpu, 0, EventKind::WakeupNew(w));
        self.tasks[t].state = State::Runnable;
        if self.opts.scheduler.is_eevdf() {
            // PLACE_DEADLINE_INITIAL: a new task's first request is half a slice.
            let (sum, n) = self.queued_sum(cpu, self.running_vruntime(cpu, now));
            let avg = self.avg_of(cpu, sum, n);
            let task = &mut self.tasks[t];
            task.vruntime = avg;
            task.deadline = avg + self.tun.base_slice / 2;
        } else {
            self.tasks[t].vruntime = self.min_vruntime(cpu, now);
        }
        self.cpus[cpu as usize].rq.push(t);
    }

    fn schedule(&mut self, at: u64, ev: Ev) {
        self.seq += 1;
        self.heap.push(Reverse((at, self.seq, ev)));
    }

    /// Emits a tracepoint: the machine state follows it, and it is kept for the bundle.
    /// Events get distinct timestamps (a nanosecond apart where the simulation made
    /// several at once): a bundle orders equal timestamps by its own rules, and its
    /// replay must see them in the order the simulation made them. Returns the stamp.
    fn emit(&mut self, now: u64, cpu: u32, common_pid: i32, kind: EventKind) -> u64 {
        let ts = now.max(self.last_stamp + 1);
        self.last_stamp = ts;
        // SIS_UTIL's and CAS's view of the machine, on replay's schedule: before the
        // event that finds the balance due.
        if self.balancer.due(ts) {
            self.balancer.tick(&mut self.m, vec![&mut self.policy], ts);
        }
        let e = Event {
            ts,
            cpu,
            common_pid,
            kind,
        };
        if let Change::AvgIdle { cpu, avg_idle } = self.m.apply(&e) {
            self.policy.on_avg_idle(cpu, avg_idle, ts);
        }
        if self.opts.record {
            self.events.push(e);
        }
        ts
    }

    fn wake_payload(&self, t: usize, target_cpu: u32) -> Wake {
        Wake {
            comm: self.tasks[t].comm,
            pid: self.tasks[t].pid,
            prio: 120,
            target_cpu: target_cpu as i32,
        }
    }

    /// Moves waiting task `t` from `from` to `to` (emitting sched_migrate_task on
    /// `on_cpu`) and charges it the cache refill of that distance. Its vruntime moves
    /// with it relative to the runqueues' min_vruntime: `from_min` is `from`'s when the
    /// task left it (migrate_task_rq_fair for a waking task, dequeue_entity for a queued
    /// one, subtract it), and `to`'s is added back as enqueue_entity does before
    /// place_entity. A task keeping its absolute vruntime would arrive from a busier
    /// runqueue far behind everyone there, or from a quieter one far ahead.
    #[allow(clippy::too_many_arguments)]
    fn migrate(
        &mut self,
        t: usize,
        from: u32,
        from_min: u64,
        to: u32,
        now: u64,
        on_cpu: u32,
        common_pid: i32,
    ) {
        if !self.opts.scheduler.is_eevdf() {
            let to_min = self.min_vruntime(to, now);
            let v = &mut self.tasks[t].vruntime;
            *v = rebase(*v, from_min, to_min);
        }
        let task = &self.tasks[t];
        let kind = EventKind::Migrate {
            comm: task.comm,
            pid: task.pid,
            prio: 120,
            orig_cpu: from as i32,
            dest_cpu: to as i32,
        };
        self.emit(now, on_cpu, common_pid, kind);
        let p = &self.opts.penalty;
        let refill = match Distance::between(&self.m.topo, from, to) {
            Distance::SameCpu => 0,
            Distance::SameLlc => p.same_llc_ns,
            Distance::CrossLlc => p.cross_llc_ns,
            Distance::CrossNuma => p.cross_numa_ns,
        };
        self.tasks[t].debt += refill;
        self.tasks[t].cpu = to;
        self.result.penalty_ns += refill;
    }

    /// Runs the workload for the duration; returns the result and the events.
    pub fn run(mut self) -> (SimResult, Vec<Event>) {
        // Every runnable task starts on its CPU, as after fork placement spread them.
        let mut forked = 0;
        for t in 0..self.tasks.len() {
            match self.workload.tasks[t].start {
                Start::Runnable { .. } => self.enter(t, 0),
                Start::Forked => {
                    self.schedule(forked * FORK_INTERVAL_NS, Ev::Fork { task: t });
                    forked += 1;
                }
                Start::At { at_ns, .. } => self.schedule(at_ns, Ev::Start { task: t }),
                Start::Asleep { .. } => {}
            }
        }
        for c in 0..self.cpus.len() as u32 {
            self.switch_to_next(c, 0, None, 0);
        }
        self.schedule(BALANCE_INTERVAL, Ev::Balance);
        let warmup = self.opts.warmup_ns;
        let end = warmup + self.opts.duration_ns;
        let mut busy_at_warmup: Option<Vec<u64>> = (warmup == 0).then(|| vec![0; self.cpus.len()]);
        while let Some(Reverse((now, _, ev))) = self.heap.pop() {
            if now > end {
                break;
            }
            // Tasks that end (a traced run) have all ended, or sleep with no one left
            // to wake them: only the balance timer would go on.
            if ev == Ev::Balance
                && self.heap.is_empty()
                && self.cpus.iter().all(|c| c.curr.is_none())
            {
                self.result.finished_ns = Some(self.last_active);
                break;
            }
            if busy_at_warmup.is_none() && now >= warmup {
                busy_at_warmup = Some(self.reset_metrics(warmup));
            }
            match ev {
                Ev::Stint { cpu, gen } => {
                    if self.cpus[cpu as usize].gen == gen {
                        self.stint_end(cpu, now);
                    }
                }
                Ev::Timer { task, gen } => {
                    if self.tasks[task].sleep_gen == gen
                        && std::mem::take(&mut self.tasks[task].timed)
                    {
                        let cpu = self.tasks[task].cpu;
                        self.wake(task, None, now);
                        self.late_timers(cpu, now);
                    }
                }
                Ev::Resched { cpu, gen } => {
                    let c = &mut self.cpus[cpu as usize];
                    if c.need_resched == Some(gen) {
                        c.need_resched = None;
                    }
                    if c.gen == gen && c.curr.is_some() && !c.rq.is_empty() {
                        if self.opts.scheduler.is_eevdf() {
                            self.resched_eevdf(cpu, now);
                        } else {
                            self.preempt(cpu, now);
                        }
                    }
                }
                Ev::Kick { cpu } => {
                    self.cpus[cpu as usize].kicked = false;
                    self.run_if_idle(cpu, now);
                    // Running again, the CPU takes its timer interrupt if one is due.
                    self.late_timers(cpu, now);
                }
                Ev::Start { task } => {
                    self.enter(task, now);
                    self.run_if_idle(self.tasks[task].cpu, now);
                }
                Ev::Fork { task } => {
                    let cpu = self.idlest_cpu();
                    self.tasks[task].cpu = cpu;
                    self.enter(task, now);
                    self.run_if_idle(cpu, now);
                }
                Ev::Queued { dest } => self.queued(dest),
                Ev::Enqueue {
                    task,
                    dest,
                    waker_cpu,
                    waking_at,
                } => self.finish_wakeup(task, dest, waker_cpu, waking_at, now),
                Ev::Balance => {
                    self.balance(now);
                    self.schedule(now + BALANCE_INTERVAL, Ev::Balance);
                }
            }
        }
        // Traced tasks left waiting for a wakeup that never came (the re-run ordered
        // their dependencies differently) or with work left at the end of the duration.
        self.result.unfinished_tasks = (0..self.tasks.len())
            .filter(|&i| !self.workload.tasks[i].looping && !self.tasks[i].exited)
            .count() as u64;
        let busy_at_warmup = busy_at_warmup.unwrap_or_else(|| self.reset_metrics(warmup));
        for c in 0..self.cpus.len() {
            if let Some(t) = self.cpus[c].curr {
                let ran = end.saturating_sub(self.cpus[c].started);
                self.cpus[c].busy_ns += ran;
                self.tasks[t].vruntime += ran;
            }
        }
        let measured = self.opts.duration_ns.max(1);
        let r = &mut self.result;
        r.throughput_per_s = r.units as f64 / (measured as f64 / 1e9);
        r.wakeup_collisions_with_warmup = self.collisions_with_warmup;
        r.latency = Percentiles::of(&mut self.latencies);
        r.derived = Derived::of(&r.counters);
        let busy: u64 = self
            .cpus
            .iter()
            .zip(&busy_at_warmup)
            .map(|(c, b)| c.busy_ns - b)
            .sum();
        r.busy_pct = 100.0 * busy as f64 / (measured as f64 * self.cpus.len() as f64);
        (self.result, self.events)
    }

    /// Starts measuring at `at`: counters back to zero; returns each CPU's busy time so
    /// far (a running task's stint counted up to `at`), to subtract at the end.
    fn reset_metrics(&mut self, at: u64) -> Vec<u64> {
        let fresh = SimResult::empty(&self.workload, &self.opts, self.result.nr_cpus);
        let old = std::mem::replace(&mut self.result, fresh);
        // What the run was set up with, not measured.
        self.result.finished_ns = old.finished_ns;
        self.result.newidle_costs_recorded = old.newidle_costs_recorded;
        self.result.newidle_cost_ns = old.newidle_cost_ns;
        self.latencies.clear();
        self.cpus
            .iter()
            .map(|c| c.busy_ns + c.curr.map_or(0, |_| at.saturating_sub(c.started)))
            .collect()
    }

    /// An idle `cpu` picks up what waits on it.
    fn run_if_idle(&mut self, cpu: u32, now: u64) {
        if self.cpus[cpu as usize].curr.is_none() {
            self.switch_to_next(cpu, now, None, 0);
        }
    }

    /// The task to run next on `cpu`, removed from its queue: CFS's least vruntime, or
    /// EEVDF's pick.
    fn pick(&mut self, cpu: u32) -> Option<usize> {
        if self.opts.scheduler.is_eevdf() {
            return self.pick_eevdf(cpu);
        }
        let c = &self.cpus[cpu as usize];
        let (left, &left_t) =
            c.rq.iter()
                .enumerate()
                .min_by_key(|(_, &t)| (self.tasks[t].vruntime, t))?;
        // pick_next_entity: the next buddy, else the last, if not more than the
        // wakeup granularity right of the leftmost.
        let fair = self.tasks[left_t].vruntime + self.tun.wakeup_granularity;
        let queued_buddy = |b: Option<usize>| {
            let i = c.rq.iter().position(|&t| Some(t) == b)?;
            (self.tasks[c.rq[i]].vruntime <= fair).then_some(i)
        };
        let i = queued_buddy(c.next_buddy)
            .or_else(|| queued_buddy(c.last_buddy))
            .unwrap_or(left);
        let t = self.cpus[cpu as usize].rq.swap_remove(i);
        // set_next_entity clears the buddies that name it.
        self.clear_buddies(cpu, t);
        Some(t)
    }

    /// clear_buddies: `t` is no longer anyone's buddy on `cpu`.
    fn clear_buddies(&mut self, cpu: u32, t: usize) {
        let c = &mut self.cpus[cpu as usize];
        if c.next_buddy == Some(t) {
            c.next_buddy = None;
        }
        if c.last_buddy == Some(t) {
            c.last_buddy = None;
        }
    }

    /// Switches `cpu` from `prev` (which has left the CPU in state `prev_state`) to the
    /// next waiting task, or to idle after a newidle balance.
    fn switch_to_next(&mut self, cpu: u32, now: u64, prev: Option<usize>, prev_state: i64) {
        if let Some(p) = prev {
            self.last_active = now;
            self.tasks[p].last_ran = now;
            if prev_state != PREEMPTED {
                // dequeue_entity: a task that leaves the runqueue is no buddy.
                self.clear_buddies(cpu, p);
            }
        }
        let next = self.pick(cpu).or_else(|| self.newidle(cpu, now));
        let (prev_pid, prev_comm) = prev.map_or((0, Comm::default()), |p| {
            (self.tasks[p].pid, self.tasks[p].comm)
        });
        let (next_pid, next_comm) = next.map_or((0, Comm::default()), |n| {
            (self.tasks[n].pid, self.tasks[n].comm)
        });
        if prev.is_some() || next.is_some() {
            self.emit(
                now,
                cpu,
                prev_pid,
                EventKind::Switch {
                    prev_comm,
                    prev_pid,
                    prev_prio: 120,
                    prev_state,
                    next_comm,
                    next_pid,
                    next_prio: 120,
                },
            );
        }
        let c = &mut self.cpus[cpu as usize];
        c.curr = next;
        c.gen += 1;
        c.lock_free_at = c.lock_free_at.max(now) + RQ_LOCK_HOLD_NS;
        if let Some(n) = next {
            c.started = now;
            c.picked = now;
            c.run_ends_at = None;
            c.slice_end = next_tick(now);
            if self.opts.scheduler.is_eevdf() {
                // set_next_entity: runs to its deadline, protected (RUN_TO_PARITY).
                let t = &mut self.tasks[n];
                if t.deadline <= t.vruntime {
                    t.deadline = t.vruntime + self.tun.base_slice;
                }
                t.protected = true;
                c.slice_end = now + (t.deadline - t.vruntime);
                c.curr_vruntime_seen = t.vruntime;
            }
            let t = &mut self.tasks[n];
            t.state = State::Running;
            t.cpu = cpu;
            // The workload's latency: a pinned housekeeping thread's is not its.
            let woken = t.woken_at.take();
            if let (Some(w), None) = (woken, self.workload.tasks[n].pinned) {
                let lat = now - w;
                self.result.latency_us.add(lat / 1000);
                self.latencies.push(lat.min(u32::MAX as u64) as u32);
            }
            self.advance(cpu, now);
        }
    }

    /// Runs the current task of `cpu` from `now` through its zero-time steps until it
    /// uses the CPU (a stint is scheduled), sleeps, or leaves the CPU.
    fn advance(&mut self, cpu: u32, now: u64) {
        loop {
            let Some(t) = self.cpus[cpu as usize].curr else {
                return;
            };
            let task = &mut self.tasks[t];
            let spec = &self.workload.tasks[t];
            if task.debt == 0 && !spec.looping && task.pc >= spec.steps.len() {
                // The task has done what the trace recorded of it.
                task.state = State::Sleeping;
                task.exited = true;
                self.switch_to_next(cpu, now, Some(t), EXIT_DEAD);
                return;
            }
            if task.debt > 0 {
                // Time charged to it (its searches as a waker, a cache refill after
                // a move) is run before any step, even by a task with no steps left.
                let c = &self.cpus[cpu as usize];
                let end = (now + task.debt).min(c.slice_end.max(now + 1));
                let gen = c.gen;
                self.schedule(end, Ev::Stint { cpu, gen });
                return;
            }
            if spec.steps.is_empty() {
                // A looping task with nothing to do would spin in zero time: it sleeps.
                task.state = State::Sleeping;
                self.switch_to_next(cpu, now, Some(t), 1);
                return;
            }
            let step = spec.steps[task.pc % spec.steps.len()];
            let work = match (step, task.left) {
                (Step::Run(0), None) => None,
                (Step::Run(_), Some(left)) => Some(left),
                (Step::Run(ns), None) => {
                    let ns = if spec.looping && self.opts.jitter > 0.0 {
                        let f = 1.0 + self.opts.jitter * (2.0 * self.rng.f64() - 1.0);
                        ((ns as f64 * f) as u64).max(1)
                    } else {
                        ns
                    };
                    task.left = Some(ns);
                    Some(ns)
                }
                _ => None,
            };
            if let Some(ns) = work {
                let c = &self.cpus[cpu as usize];
                let end = (now + ns).min(c.slice_end.max(now + 1));
                let gen = c.gen;
                self.schedule(end, Ev::Stint { cpu, gen });
                return;
            }
            task.pc += 1;
            match step {
                // Zero-length: nothing to run (a traced wakeup that woke no one).
                Step::Run(_) => {}
                Step::Count => self.result.units += 1,
                Step::Wake { task: target, sync } => {
                    // Its hidden writes first; should one switch the CPU to another
                    // task (which may even run this one on, from this step), the step
                    // is left to whoever runs the task next.
                    self.tasks[t].pc -= 1;
                    let gen = self.cpus[cpu as usize].gen;
                    self.hidden_writes(t, target, cpu, sync, now);
                    if self.cpus[cpu as usize].gen != gen {
                        return;
                    }
                    self.tasks[t].pc += 1;
                    self.wake(target, Some((t, cpu, sync)), now);
                    if self.cpus[cpu as usize].curr != Some(t) {
                        // Preempted by its own wakee.
                        return;
                    }
                }
                Step::Sleep if self.tasks[t].wake_pending > 0 => self.tasks[t].wake_pending -= 1,
                Step::Sleep | Step::SleepFor(_) | Step::SleepLate { .. }
                    if self.resched_due(cpu) =>
                {
                    // Marked for preemption, it is preempted at its next preemption
                    // point, the return from the call that woke: before it can block.
                    self.tasks[t].pc -= 1;
                    if self.opts.scheduler.is_eevdf() {
                        self.resched_eevdf(cpu, now);
                    } else {
                        self.preempt(cpu, now);
                    }
                    return;
                }
                Step::Sleep | Step::SleepFor(_) | Step::SleepLate { .. } => {
                    let timer = match step {
                        Step::SleepFor(ns) => Some((ns, None)),
                        Step::SleepLate { due_ns, by_ns } => Some((by_ns, Some(due_ns))),
                        _ => None,
                    };
                    if let Some((ns, due)) = timer {
                        let task = &mut self.tasks[t];
                        task.sleep_gen = task.sleep_gen.wrapping_add(1);
                        task.timed = true;
                        let gen = task.sleep_gen;
                        self.schedule(now + ns, Ev::Timer { task: t, gen });
                        if let Some(due) = due {
                            self.cpus[cpu as usize]
                                .late_timers
                                .push((t, now + due, gen));
                        }
                    }
                    if self.opts.scheduler.is_eevdf() {
                        self.dequeue_sleeper(cpu, t, now);
                    }
                    self.tasks[t].state = State::Sleeping;
                    self.tasks[t].slept_at = now;
                    self.switch_to_next(cpu, now, Some(t), 1);
                    return;
                }
            }
        }
    }

    /// The running task of `cpu` was marked for preemption by a wakeup, and a task
    /// waits to take its place.
    fn resched_due(&self, cpu: u32) -> bool {
        let c = &self.cpus[cpu as usize];
        c.need_resched == Some(c.gen) && !c.rq.is_empty()
    }

    /// The current task's stint ended: its work (or debt) is done, or its slice is.
    fn stint_end(&mut self, cpu: u32, now: u64) {
        if self.cpus[cpu as usize].curr.is_none() {
            return;
        }
        self.charge(cpu, now);
        if self.opts.scheduler.is_eevdf() {
            if now >= self.cpus[cpu as usize].slice_end {
                // update_deadline: the slice is used up; others waiting, schedule.
                self.renew_deadline(cpu, now);
                if !self.cpus[cpu as usize].rq.is_empty() {
                    self.resched_eevdf(cpu, now);
                    return;
                }
            }
            self.advance(cpu, now);
            return;
        }
        if now >= self.cpus[cpu as usize].slice_end && self.tick(cpu, now) {
            self.preempt(cpu, now);
            return;
        }
        self.advance(cpu, now);
    }

    /// The scheduler tick (or the end of a run it let go on) on `cpu`, whose current
    /// slice has run out: whether it preempts the running task now.
    fn tick(&mut self, cpu: u32, now: u64) -> bool {
        let c = &mut self.cpus[cpu as usize];
        c.slice_end = next_tick(now);
        if let Some(at) = c.run_ends_at {
            if now < at {
                c.slice_end = at;
                return false;
            }
            c.run_ends_at = None;
            return !c.rq.is_empty();
        }
        if !self.tick_preempts(cpu, now) {
            return false;
        }
        // A traced machine's run went on past the tick as long as its trace's did.
        let picked = self.cpus[cpu as usize].picked;
        let drawn = (self.opts.preempted_runs)
            .draw_longer_than(now - picked, &mut self.rng)
            .map(|len| picked + len);
        match drawn {
            Some(at) if at > now => {
                let c = &mut self.cpus[cpu as usize];
                (c.run_ends_at, c.slice_end) = (Some(at), at);
                self.result.runs_stretched += 1;
                false
            }
            _ => true,
        }
    }

    /// check_preempt_tick at a tick of `cpu` (its running task charged up to now):
    /// the task has run its slice of the period since it was picked, or it has run the
    /// least granularity and is a slice ahead of the leftmost waiting task.
    fn tick_preempts(&mut self, cpu: u32, now: u64) -> bool {
        let c = &self.cpus[cpu as usize];
        let (Some(curr), Some(leftmost)) =
            (c.curr, c.rq.iter().map(|&t| self.tasks[t].vruntime).min())
        else {
            return false;
        };
        let nr = c.rq.len() as u64 + 1;
        let ideal = (self.tun.latency / nr).max(self.tun.min_granularity);
        let ran = now - c.picked;
        if ran > ideal {
            // A task whose slice ran out is not returned to as the last buddy.
            self.clear_buddies(cpu, curr);
            return true;
        }
        ran >= self.tun.min_granularity && self.tasks[curr].vruntime > leftmost + ideal
    }

    /// Counts the CPU time the current task of `cpu` has had since its stint began:
    /// against its debt first, then its run step (done when nothing is left).
    fn charge(&mut self, cpu: u32, now: u64) {
        let Some(t) = self.cpus[cpu as usize].curr else {
            return;
        };
        let ran = now - self.cpus[cpu as usize].started;
        self.cpus[cpu as usize].busy_ns += ran;
        self.cpus[cpu as usize].started = now;
        let task = &mut self.tasks[t];
        task.vruntime += ran;
        let from_debt = task.debt.min(ran);
        task.debt -= from_debt;
        if let Some(left) = task.left.as_mut() {
            *left = left.saturating_sub(ran - from_debt);
            if *left == 0 {
                task.left = None;
                task.pc += 1;
            }
        }
    }

    /// Puts the current task back on the queue, its progress kept, and runs the next.
    fn preempt(&mut self, cpu: u32, now: u64) {
        self.charge(cpu, now);
        let Some(t) = self.cpus[cpu as usize].curr.take() else {
            return;
        };
        self.tasks[t].state = State::Runnable;
        self.cpus[cpu as usize].rq.push(t);
        self.switch_to_next(cpu, now, Some(t), PREEMPTED);
    }

    /// A timer interrupt of `cpu` at `now`, or its leaving idle for a wakeup's IPI (an
    /// idle vCPU its host runs again takes its due timer interrupt at once), also ends
    /// the sleeps of the tasks whose late timers there are due by then, in the order they
    /// went to sleep; a timer an earlier interrupt (or its own) already ran is dropped.
    fn late_timers(&mut self, cpu: u32, now: u64) {
        // Every timer and IPI comes here: most CPUs hold no late timer.
        if self.cpus[cpu as usize].late_timers.is_empty() {
            return;
        }
        let pending = std::mem::take(&mut self.cpus[cpu as usize].late_timers);
        let mut kept = Vec::with_capacity(pending.len());
        for (t, due, gen) in pending {
            let task = &self.tasks[t];
            if task.sleep_gen != gen || !task.timed {
                continue;
            }
            if due > now {
                kept.push((t, due, gen));
                continue;
            }
            self.tasks[t].timed = false;
            self.result.late_timers_bunched += 1;
            self.wake(t, None, now);
        }
        // Wakes above may have added sleepers of their own.
        kept.append(&mut self.cpus[cpu as usize].late_timers);
        self.cpus[cpu as usize].late_timers = kept;
    }

    /// Wakes `t`, by a task (`by`: waker, its CPU, sync) or by a timer.
    fn wake(&mut self, t: usize, by: Option<(usize, u32, bool)>, now: u64) {
        if self.tasks[t].exited {
            return;
        }
        let awake = self.tasks[t].state != State::Sleeping || self.tasks[t].unborn;
        if by.is_some() && self.tasks[t].hidden_woken > 0 && (awake || self.tasks[t].timed) {
            // The write that ended an earlier sleep was this one, put earlier.
            self.tasks[t].hidden_woken -= 1;
            return;
        }
        if self.tasks[t].timed && by.is_some() {
            self.keep_wake_pending(t);
            return;
        }
        if self.tasks[t].delayed {
            self.wake_delayed(t, by, now);
            return;
        }
        if awake {
            self.keep_wake_pending(t);
            return;
        }
        let prev = self.tasks[t].cpu;
        let wk = self.waker(by, prev);
        self.timer_softirq(&wk, now, true);
        let w = self.wake_payload(t, prev);
        let stamp = self.emit(now, wk.cpu, wk.pid, EventKind::Waking(w));
        let (dest, search_ns) = self.select_task_rq(t, prev, &wk, stamp);
        if dest != prev {
            let prev_min = self.min_vruntime(prev, now);
            self.migrate(t, prev, prev_min, dest, now, wk.cpu, wk.pid);
        }
        if dest != wk.cpu {
            // The search read the CPUs' states as it went: until it ends and queues the
            // wakeup to the chosen CPU, other searches still see that CPU as it was
            // (idle, if it was) and two wakers can pick it at once. The enqueue follows
            // once the waker holds the chosen runqueue's lock (done under it); the wakee
            // is on no runqueue meanwhile.
            if self.in_flight[dest as usize] > 0 {
                self.result.wakeup_collisions += 1;
                self.collisions_with_warmup += 1;
            }
            self.in_flight[dest as usize] += 1;
            self.schedule(now + search_ns, Ev::Queued { dest });
            let locked = self.lock_remote_rq(dest, &wk, now + search_ns);
            self.tasks[t].state = State::Runnable;
            self.timer_softirq(&wk, now, false);
            let ev = Ev::Enqueue {
                task: t,
                dest,
                waker_cpu: wk.cpu,
                waking_at: now,
            };
            self.schedule(locked + RQ_LOCK_HOLD_NS, ev);
            return;
        }
        let w = self.wake_payload(t, dest);
        self.emit(now, wk.cpu, wk.pid, EventKind::Wakeup(w));
        self.timer_softirq(&wk, now, false);
        let v = self.enqueue_woken(t, dest, now);
        self.check_preempt_wakeup(dest, wk.cpu, t, v, now, now);
    }

    /// A timer wakes from the timer softirq, in the context of whatever runs there: the
    /// trace shows its entry (`entry`) and exit around the waking, so a replay does not
    /// take the wakeup for that task's. Nothing for a wakeup from task context.
    fn timer_softirq(&mut self, wk: &Waker, now: u64, entry: bool) {
        const TIMER_SOFTIRQ: u32 = 1;
        if wk.in_task {
            return;
        }
        let kind = if entry {
            EventKind::SoftirqEntry { vec: TIMER_SOFTIRQ }
        } else {
            EventKind::SoftirqExit { vec: TIMER_SOFTIRQ }
        };
        self.emit(now, wk.cpu, wk.pid, kind);
    }

    /// The running task of `cpu`'s vruntime with its current stint counted up to `now`.
    fn running_vruntime(&self, cpu: u32, now: u64) -> Option<u64> {
        let c = &self.cpus[cpu as usize];
        c.curr
            .map(|t| self.tasks[t].vruntime + now.saturating_sub(c.started))
    }

    /// The end of a remote wakeup's search: queued to `dest`, which is no longer idle to
    /// others until the wakee is activated there.
    fn queued(&mut self, dest: u32) {
        self.in_flight[dest as usize] -= 1;
        self.m.add_pending_wakeup(dest);
    }

    /// The enqueue of a remote wakeup: sched_wakeup on the chosen CPU (as ttwu's
    /// activation there traces it), the wakee queued, its latency counted from its
    /// waking.
    fn finish_wakeup(&mut self, t: usize, dest: u32, waker_cpu: u32, waking_at: u64, now: u64) {
        let w = self.wake_payload(t, dest);
        let on_dest = self.cpus[dest as usize]
            .curr
            .map_or(0, |c| self.tasks[c].pid);
        self.emit(now, dest, on_dest, EventKind::Wakeup(w));
        let v = self.enqueue_woken(t, dest, now);
        self.tasks[t].woken_at = Some(waking_at);
        self.check_preempt_wakeup(dest, waker_cpu, t, v, waking_at, now);
    }

    /// Writer `w`, about to wake `visible` as the trace shows, is in its write loop: it
    /// also writes to its other readers, and wakes those that have slept long enough
    /// (see [`crate::synth::streams`]).
    fn hidden_writes(&mut self, w: usize, visible: usize, cpu: u32, sync: bool, now: u64) {
        if !self.streams.readers(w).contains(&visible) {
            // Not a write of its loop: the wakeup of another task (its parent).
            return;
        }
        let after = self.streams.after_ns(w);
        let gen = self.cpus[cpu as usize].gen;
        for k in 0..self.streams.readers(w).len() {
            let r = self.streams.readers(w)[k];
            let tr = &self.tasks[r];
            let steps = &self.workload.tasks[r].steps;
            // Blocked in a Sleep step (its pc is past it), delayed on its queue or not.
            let in_sleep = tr
                .pc
                .checked_sub(1)
                .map(|k| steps.get(k % steps.len().max(1)))
                == Some(Some(&Step::Sleep));
            let waiting =
                tr.state == State::Sleeping && !(tr.exited || tr.timed || tr.unborn) && in_sleep;
            if r == visible || !waiting || now.saturating_sub(tr.slept_at) < after {
                continue;
            }
            self.tasks[r].hidden_woken += 1;
            self.result.hidden_writes += 1;
            self.wake(r, Some((w, cpu, sync)), now);
            if self.cpus[cpu as usize].gen != gen {
                return;
            }
        }
    }

    /// A wakeup that found `t` awake is kept for its next sleep (one only, unless the
    /// workload counts wakes).
    fn keep_wake_pending(&mut self, t: usize) {
        let cap = if self.workload.wakes_counted {
            u32::MAX
        } else {
            1
        };
        self.tasks[t].wake_pending = (self.tasks[t].wake_pending + 1).min(cap);
    }

    /// Who wakes: the waking task on its CPU, or a timer on the wakee's prev CPU in the
    /// context of whatever runs there.
    fn waker(&self, by: Option<(usize, u32, bool)>, prev: u32) -> Waker {
        match by {
            Some((w, cpu, sync)) => Waker {
                task: Some(w),
                cpu,
                pid: self.tasks[w].pid,
                sync,
                in_task: true,
            },
            None => Waker {
                task: None,
                cpu: prev,
                pid: self.cpus[prev as usize]
                    .curr
                    .map_or(0, |c| self.tasks[c].pid),
                sync: false,
                in_task: false,
            },
        }
    }

    /// select_task_rq for `t`: its one CPU if pinned, else wake_affine's target and the
    /// policy's select_idle_sibling, counted in the result and charged to the waker;
    /// returns the CPU and how long the search took.
    fn select_task_rq(&mut self, t: usize, prev: u32, wk: &Waker, stamp: u64) -> (u32, u64) {
        // A task allowed on one CPU gets no selection at all (select_task_rq does not
        // call the class's), so not even wake_wide's flip count sees it.
        if let Some(cpu) = self.workload.tasks[t].pinned {
            return (cpu, 0);
        }
        if self.opts.scheduler == Scheduler::EevdfDelayDequeue {
            // As a capture with the select_task_rq_fair probe: a replay of the bundle
            // then tells the wakeups of delayed tasks, which select nothing, from others.
            let wake_flags = WF_TTWU | if wk.sync { WF_SYNC } else { 0 };
            let kind = EventKind::SelectEnter {
                prev_cpu: prev as i32,
                wake_flags,
            };
            self.emit(stamp, wk.cpu, wk.pid, kind);
        }
        let chosen = choose_target(
            &mut self.m,
            &Waking {
                now: stamp,
                waker_cpu: wk.cpu,
                waker: wk.pid,
                wakee: self.tasks[t].pid,
                prev,
                sync: wk.sync,
                in_task: wk.in_task,
            },
            false,
        );
        let d = select_idle_sibling(
            &self.m,
            self.policy.as_mut(),
            &chosen.wakee,
            &self.opts.time,
            &self.balancer.caploads,
            false,
        );
        if d.cleared_idle_cores {
            self.m.clear_idle_cores(chosen.wakee.target);
        }
        note_recent_used(&mut self.m, self.tasks[t].pid, &chosen.wakee);
        let r = &mut self.result;
        r.counters.add(&d.counters);
        r.search_ns_total += d.search_ns;
        r.wakeups += 1;
        r.placements.count(&self.m.topo, prev, d.cpu);
        // The search runs on the waker's CPU, in its time.
        if let Some(w) = wk.task {
            self.tasks[w].debt += d.search_ns;
        }
        (d.cpu, d.search_ns)
    }

    /// try_to_wake_up enqueues under the chosen CPU's runqueue lock; a waker that finds
    /// it held spins, in its own time. Returns when it holds the lock.
    fn lock_remote_rq(&mut self, dest: u32, wk: &Waker, now: u64) -> u64 {
        let c = &mut self.cpus[dest as usize];
        let start = c.lock_free_at.max(now);
        c.lock_free_at = start + RQ_LOCK_HOLD_NS;
        let r = &mut self.result;
        r.remote_rq_locks += 1;
        if start > now {
            r.rq_lock_waits += 1;
            r.rq_lock_wait_ns += start - now;
            if let Some(w) = wk.task {
                self.tasks[w].debt += start - now;
            }
        }
        start
    }

    /// Queues the woken `t` on `dest`, its vruntime credited as a sleeper's; returns
    /// that vruntime.
    fn enqueue_woken(&mut self, t: usize, dest: u32, now: u64) -> u64 {
        let min_v = self.min_vruntime(dest, now);
        let task = &mut self.tasks[t];
        task.cpu = dest;
        task.state = State::Runnable;
        task.woken_at = Some(now);
        if self.opts.scheduler.is_eevdf() {
            // place_entity: behind the average by the lag it left with.
            let (sum, n) = self.queued_sum(dest, self.running_vruntime(dest, now));
            let avg = self.avg_of(dest, sum, n);
            let task = &mut self.tasks[t];
            task.vruntime = eevdf::place(avg, task.vlag, n as u64);
            task.deadline = task.vruntime + self.tun.base_slice;
            self.cpus[dest as usize].rq.push(t);
            return self.tasks[t].vruntime;
        }
        // GENTLE_FAIR_SLEEPERS: a sleeper is credited half a sched_latency.
        task.vruntime = task
            .vruntime
            .max(min_v.saturating_sub(self.tun.latency / 2));
        let v = task.vruntime;
        self.cpus[dest as usize].rq.push(t);
        v
    }

    /// After a task of vruntime `v` is queued on `dest`: an idle CPU is kicked by IPI
    /// (or runs it at once, from its own CPU or without IPI delay); a running task far
    /// enough ahead of it is preempted, after the configured delay. Delays drawn from a
    /// trace count from the waking (`waking_at`), as the trace measured them.
    fn check_preempt_wakeup(
        &mut self,
        dest: u32,
        waker_cpu: u32,
        t: usize,
        v: u64,
        waking_at: u64,
        now: u64,
    ) {
        let idle = self.cpus[dest as usize].curr.is_none();
        if idle {
            let (kind, fixed) = if dest == waker_cpu {
                (DelayKind::LocalIdle, 0)
            } else {
                (DelayKind::RemoteIdle, self.opts.wake_ipi_ns)
            };
            let at = match self.traced_delay(t, kind) {
                Some(ns) => (waking_at + ns).max(now),
                None => now + fixed,
            };
            if at == now {
                self.switch_to_next(dest, now, None, 0);
            } else if !self.cpus[dest as usize].kicked {
                self.cpus[dest as usize].kicked = true;
                self.schedule(at, Ev::Kick { cpu: dest });
            }
            return;
        }
        let preempts = if self.opts.scheduler.is_eevdf() {
            // check_preempt_wakeup_fair updates the running task first.
            let running_v = self.running_vruntime(dest, now).expect("a running task");
            self.cpus[dest as usize].curr_vruntime_seen = running_v;
            self.eevdf_would_pick(dest, t, now)
        } else {
            let running_v = self.running_vruntime(dest, now).expect("a running task");
            running_v > v + self.tun.wakeup_granularity
        };
        if !preempts {
            return;
        }
        if !self.opts.scheduler.is_eevdf() {
            self.mark_buddies(dest, t);
        }
        let at = match self.traced_delay(t, DelayKind::Preempt) {
            Some(ns) => (waking_at + ns).max(now),
            None => now + self.opts.preempt_delay_ns,
        };
        if at == now {
            if self.opts.scheduler.is_eevdf() {
                self.resched_eevdf(dest, now);
            } else {
                self.preempt(dest, now);
            }
        } else {
            let c = &mut self.cpus[dest as usize];
            // The running task is the waker, or what a timer or an interrupt of this CPU
            // interrupted: either reaches a preemption point before it can block. A
            // task on another CPU may block before the IPI reaches it.
            if dest == waker_cpu {
                c.need_resched = Some(c.gen);
            }
            let gen = c.gen;
            self.schedule(at, Ev::Resched { cpu: dest, gen });
        }
    }

    /// check_preempt_wakeup's buddies for a wakeup of `t` that preempts the running task
    /// of `cpu` (LAST_BUDDY on, NEXT_BUDDY off: v6.1's defaults). A task already marked
    /// for preemption keeps the buddies its first preemptor set.
    fn mark_buddies(&mut self, cpu: u32, t: usize) {
        let nr_latency = self.tun.latency / self.tun.min_granularity;
        let c = &mut self.cpus[cpu as usize];
        if c.need_resched == Some(c.gen) {
            return;
        }
        c.next_buddy = Some(t);
        if c.rq.len() as u64 + 1 >= nr_latency {
            c.last_buddy = c.curr;
        }
    }

    /// The trace's delay for the wakeup of `t` that ends its current sleep step, of
    /// `kind`, if the re-run takes delays from a trace.
    fn traced_delay(&mut self, t: usize, kind: DelayKind) -> Option<u64> {
        let step = self.tasks[t].pc.saturating_sub(1);
        let pid = self.tasks[t].pid;
        let delay = self.opts.traced_delays.of(pid, step, kind, &mut self.rng);
        let r = &mut self.result;
        match delay {
            Some((_, delays::Source::Traced)) => r.delays_traced += 1,
            Some((_, delays::Source::Drawn)) => r.delays_drawn += 1,
            None => r.delays_fixed += 1,
        }
        delay.map(|(ns, _)| ns)
    }

    /// update_min_vruntime: the least vruntime of the running task (its current stint
    /// counted up to `now`) and the queued ones, never moving backwards; an empty
    /// runqueue keeps the last.
    fn min_vruntime(&mut self, cpu: u32, now: u64) -> u64 {
        let c = &self.cpus[cpu as usize];
        let v = self
            .running_vruntime(cpu, now)
            .into_iter()
            .chain(c.rq.iter().map(|&t| self.tasks[t].vruntime))
            .min()
            .unwrap_or(c.min_vruntime);
        let c = &mut self.cpus[cpu as usize];
        c.min_vruntime = c.min_vruntime.max(v);
        c.min_vruntime
    }

    /// Moves a waiting task of `from` to the idle `to`; returns it.
    fn pull(&mut self, from: u32, to: u32, now: u64) -> Option<usize> {
        let i = self.cpus[from as usize]
            .rq
            .iter()
            .rposition(|&t| self.can_migrate(t, now))?;
        // dequeue_entity makes the vruntime relative before min_vruntime moves on
        // (EEVDF: keeps the lag, and the deadline relative to the vruntime).
        let from_min = self.min_vruntime(from, now);
        let t = self.cpus[from as usize].rq[i];
        let eevdf_rel = self.opts.scheduler.is_eevdf().then(|| {
            let (sum, n) = self.queued_sum(from, self.running_vruntime(from, now));
            let avg = self.avg_of(from, sum, n);
            let task = &mut self.tasks[t];
            task.vlag = eevdf::lag(avg, task.vruntime, self.tun.base_slice);
            task.deadline.saturating_sub(task.vruntime)
        });
        self.cpus[from as usize].rq.remove(i);
        self.clear_buddies(from, t);
        self.migrate(t, from, from_min, to, now, to, 0);
        if let Some(rel) = eevdf_rel {
            let (sum, n) = self.queued_sum(to, self.running_vruntime(to, now));
            let avg = self.avg_of(to, sum, n);
            let task = &mut self.tasks[t];
            task.vruntime = eevdf::place(avg, task.vlag, n as u64);
            task.deadline = task.vruntime + rel;
        }
        self.result.balance_migrations.count(&self.m.topo, from, to);
        Some(t)
    }

    /// can_migrate_task: not pinned, and not cache-hot (it last ran at least a
    /// migration cost ago).
    fn can_migrate(&self, t: usize, now: u64) -> bool {
        self.workload.tasks[t].pinned.is_none()
            && !self.tasks[t].delayed
            && now.saturating_sub(self.tasks[t].last_ran) >= MIGRATION_COST_NS
    }

    /// The CPU of a span with the most tasks that a balance may take one from: two
    /// tasks or more (a balance never takes a runqueue's only task, such as one woken
    /// onto an idle CPU still leaving idle) and one of them movable.
    fn busiest_rq(&self, span: &[u32], except: u32, now: u64) -> Option<u32> {
        span.iter()
            .copied()
            .filter(|&c| {
                let cpu = &self.cpus[c as usize];
                c != except
                    && cpu.rq.len() + cpu.curr.is_some() as usize >= 2
                    && cpu.rq.iter().any(|&t| self.can_migrate(t, now))
            })
            .max_by_key(|&c| (self.cpus[c as usize].rq.len(), Reverse(c)))
    }

    /// The statistics of a group of CPUs.
    fn group_stats(&self, cpus: &[u32], pct: u64) -> GroupStats {
        let (mut nr, mut idle, mut util, mut load) = (0u64, 0u64, 0u64, 0u64);
        for &c in cpus {
            let cpu = &self.cpus[c as usize];
            let n = cpu.rq.len() as u64 + cpu.curr.is_some() as u64;
            nr += n;
            idle += (n == 0) as u64;
            util += self.m.cpu_util(c);
            load += self.m.cpu_load(c);
        }
        GroupStats::of(nr, idle, cpus.len() as u64, util, load, pct)
    }

    /// load_balance at domain level `li` of idle `cpu`: the groups are the child
    /// domain's spans (single CPUs at the lowest level); the CPU to pull a task from
    /// when the busiest group is imbalanced against the local one, as
    /// find_busiest_group and calculate_imbalance decide, then its busiest runqueue.
    fn balance_source(&self, cpu: u32, li: usize, now: u64) -> Option<(u32, u64)> {
        let levels = &self.topo_levels[cpu as usize];
        let l = &levels[li];
        let child_of = |c: u32| -> Vec<u32> {
            match li.checked_sub(1) {
                None => vec![c],
                Some(k) => self.topo_levels[c as usize]
                    .get(k)
                    .map_or_else(|| vec![c], |x| x.span.clone()),
            }
        };
        let local_span = child_of(cpu);
        let local = self.group_stats(&local_span, l.imbalance_pct);
        let mut seen: Vec<u32> = local_span.clone();
        let mut best: Option<(GroupStats, Vec<u32>)> = None;
        for &c in &l.span {
            if seen.contains(&c) {
                continue;
            }
            let g = child_of(c);
            seen.extend(&g);
            let s = self.group_stats(&g, l.imbalance_pct);
            if s.nr == 0 {
                continue;
            }
            // update_sd_pick_busiest: the worse group type; within a type, the higher
            // load, or for spare groups the fewer idle CPUs and then more tasks.
            let better = match &best {
                None => true,
                Some((b, _)) => {
                    if s.kind != b.kind {
                        s.kind > b.kind
                    } else if s.kind == GroupType::HasSpare {
                        (Reverse(s.idle_cpus), s.nr) > (Reverse(b.idle_cpus), b.nr)
                    } else {
                        s.avg_load() > b.avg_load()
                    }
                }
            };
            if better {
                best = Some((s, g));
            }
        }
        let (busiest, span) = best?;
        let prefer_sibling = li > 0 && !levels[li - 1].numa;
        let within_llc = l.span.len() <= self.m.topo.llc_span(cpu).len();
        let numa = l.numa.then_some(l.imb_numa_nr);
        let imb = imbalance(
            &local,
            &busiest,
            l.imbalance_pct,
            prefer_sibling,
            within_llc,
            numa,
        );
        if imb == 0 {
            return None;
        }
        Some((self.busiest_rq(&span, cpu, now)?, imb))
    }

    /// sched_balance_newidle: domain by domain outwards, as far as the policy reaches,
    /// while the CPU's expected idle time (avg_idle) covers what balancing costs so far
    /// plus the next domain's cost; a domain pulls only when it is imbalanced.
    fn newidle(&mut self, cpu: u32, now: u64) -> Option<usize> {
        // The root domain's overload flag: some runqueue has a task waiting.
        if !self.cpus.iter().any(|c| !c.rq.is_empty()) {
            return None;
        }
        let avg_idle = self.m.cpus.get(cpu as usize).map_or(0, |c| c.avg_idle);
        let reach = self.policy.newidle_reach();
        let mut spent = 0;
        for li in 0..self.topo_levels[cpu as usize].len() {
            let l = &self.topo_levels[cpu as usize][li];
            let cost = l.newidle_cost_ns;
            if avg_idle < spent + cost {
                break;
            }
            let allowed = match reach {
                NewidleReach::All => true,
                NewidleReach::BelowNuma => !l.numa,
                NewidleReach::Llc => matches!(l.name, "smt" | "cluster" | "llc"),
            };
            if !allowed {
                break;
            }
            spent += cost;
            let name = l.name;
            if let Some((from, _)) = self.balance_source(cpu, li, now) {
                let t = self.pull(from, cpu, now)?;
                *self
                    .result
                    .newidle_pulls
                    .entry(name.to_string())
                    .or_default() += 1;
                return Some(t);
            }
        }
        None
    }

    /// Periodic idle balance: idle CPUs pull waiting tasks from the nearest imbalanced
    /// domain whose interval is due (nohz idle balance), NUMA domains included, as many
    /// as the imbalance says: a newly idle CPU stops after one task on preemptible
    /// kernels, an idle one's detach_tasks goes on (the host's hackbench trace shows idle
    /// CPUs taking 17 to 32 tasks at a tick).
    fn balance(&mut self, now: u64) {
        let tick = now / BALANCE_INTERVAL;
        for cpu in 0..self.cpus.len() as u32 {
            if self.cpus[cpu as usize].curr.is_some() {
                self.busy_balance(cpu, tick, now);
                continue;
            }
            // An idle CPU's domains, the lowest first; once one has moved tasks here the
            // CPU is busy.
            for li in 0..self.topo_levels[cpu as usize].len() {
                if self.balance_level(cpu, li, tick, true, now) > 0 {
                    self.switch_to_next(cpu, now, None, 0);
                    break;
                }
            }
        }
    }

    /// detach_tasks: moves up to `imb` tasks (and sysctl_sched_nr_migrate) from
    /// `from` onto the runqueue of `to`; an idle `to` leaves `from` at least one task.
    /// Returns how many moved.
    fn pull_tasks(&mut self, from: u32, to: u32, imb: u64, idle: bool, now: u64) -> u64 {
        let mut moved = 0;
        while moved < imb.min(NR_MIGRATE) {
            let c = &self.cpus[from as usize];
            if idle && c.rq.len() + usize::from(c.curr.is_some()) <= 1 {
                break;
            }
            let Some(t) = self.pull(from, to, now) else {
                break;
            };
            self.cpus[to as usize].rq.push(t);
            moved += 1;
        }
        moved
    }

    /// Periodic balance of a busy `cpu` at tick `tick`: each domain when its interval
    /// is due ([`reschedule_balance`]); an imbalanced domain moves tasks from its busiest
    /// runqueue to this one, up to the imbalance calculate_imbalance gives and
    /// sysctl_sched_nr_migrate.
    fn busy_balance(&mut self, cpu: u32, tick: u64, now: u64) {
        for li in 0..self.topo_levels[cpu as usize].len() {
            self.balance_level(cpu, li, tick, false, now);
        }
    }

    /// load_balance of level `li` of `cpu` (`idle` or busy) at balance tick `tick`, when
    /// its interval is due ([`reschedule_balance`]): the tasks it moved here.
    fn balance_level(&mut self, cpu: u32, li: usize, tick: u64, idle: bool, now: u64) -> u64 {
        if tick < self.topo_levels[cpu as usize][li].next_balance_tick {
            return 0;
        }
        let moved = match self.balance_source(cpu, li, now) {
            Some((from, imb)) => self.pull_tasks(from, cpu, imb, idle, now),
            None => 0,
        };
        let busy = !idle || moved > 0;
        reschedule_balance(
            &mut self.topo_levels[cpu as usize][li],
            tick,
            moved > 0,
            busy,
        );
        moved
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::TaskSpec;

    /// A simulator on 2 CPUs of one LLC (sched_latency 12 ms, wakeup granularity 2 ms)
    /// with `n` tasks asleep on CPU 0, none started: the tests set the state they need.
    fn two_cpus(n: usize, pinned: &[Option<u32>]) -> Sim {
        two_cpus_with(n, pinned, 0)
    }

    /// `tasks` as a workload on 2 CPUs of one LLC, and options for 100 ms of it under
    /// sis_util.
    pub(in crate::sim) fn on_two_cpus(tasks: Vec<TaskSpec>) -> (Workload, SimOptions) {
        let w = Workload {
            name: "t".into(),
            unit: "units",
            tasks,
            wakes_counted: true,
        };
        let opts = SimOptions::with_defaults(Topology::flat(2), "sis_util", 0, 100 * MS);
        (w, opts)
    }

    fn two_cpus_with(n: usize, pinned: &[Option<u32>], preempt_delay_ns: u64) -> Sim {
        let tasks = (0..n)
            .map(|i| TaskSpec {
                comm: format!("t{i}"),
                pid: Some(100 + i as i32),
                steps: vec![Step::Run(MS), Step::Sleep],
                looping: false,
                start: Start::Asleep { cpu: 0 },
                pinned: pinned.get(i).copied().flatten(),
            })
            .collect();
        let (w, mut opts) = on_two_cpus(tasks);
        opts.wake_ipi_ns = 0;
        opts.preempt_delay_ns = preempt_delay_ns;
        Sim::new(w, opts).unwrap()
    }

    /// Wakes `t` by a timer at `now` and carries out the queueing and enqueue of a
    /// remote wakeup, which the event loop would do once the search has ended and the
    /// waker holds the runqueue lock.
    fn wake_and_enqueue(sim: &mut Sim, t: usize, now: u64) {
        sim.wake(t, None, now);
        let events = std::mem::take(&mut sim.heap).into_sorted_vec();
        for Reverse((at, seq, ev)) in events.into_iter().rev() {
            match ev {
                Ev::Enqueue {
                    task,
                    dest,
                    waker_cpu,
                    waking_at,
                } => sim.finish_wakeup(task, dest, waker_cpu, waking_at, at),
                Ev::Queued { dest } => sim.queued(dest),
                ev => sim.heap.push(Reverse((at, seq, ev))),
            }
        }
    }

    /// Task `t` runs on `cpu` from `now` with vruntime `v`.
    fn running(sim: &mut Sim, t: usize, cpu: u32, v: u64, now: u64) {
        sim.tasks[t].vruntime = v;
        sim.tasks[t].state = State::Running;
        sim.tasks[t].cpu = cpu;
        let c = &mut sim.cpus[cpu as usize];
        c.curr = Some(t);
        c.started = now;
        c.picked = now;
        c.slice_end = next_tick(now);
    }

    /// Two tasks pinned to CPU 0 of 2 (sched_latency 12 ms, least granularity 1.5 ms),
    /// each with 40 ms to run, re-run with `preempted_runs` from a trace: the times of
    /// the first two preemptions, and how many runs went on past the tick.
    fn two_spinners(preempted_runs: PreemptedRuns) -> (Vec<u64>, u64) {
        let task = |i: i32| TaskSpec {
            comm: format!("t{i}"),
            pid: Some(100 + i),
            steps: vec![Step::Run(40 * MS)],
            looping: false,
            start: Start::Runnable { cpu: Some(0) },
            pinned: Some(0),
        };
        let w = Workload {
            name: "t".into(),
            unit: "units",
            tasks: vec![task(0), task(1)],
            wakes_counted: true,
        };
        let mut opts = SimOptions::with_defaults(Topology::flat(2), "sis_util", 0, 100 * MS);
        opts.record = true;
        opts.preempted_runs = preempted_runs;
        let (r, events) = Sim::new(w, opts).unwrap().run();
        let preempted = events
            .iter()
            .filter_map(|e| match e.kind {
                EventKind::Switch { prev_state, .. } if prev_state == PREEMPTED => Some(e.ts),
                _ => None,
            })
            .take(2)
            .collect();
        (preempted, r.runs_stretched)
    }

    /// Each of the two spinners' slice is 12/2 = 6 ms, but CFS sees it run out only at a
    /// tick (every 4 ms), so the first switch comes at 8 ms, the next at 16.
    #[test]
    fn a_slice_runs_out_at_the_tick_after_it() {
        let (preempted, stretched) = two_spinners(PreemptedRuns::default());
        assert_eq!(preempted, [8 * MS, 16 * MS]);
        assert_eq!(stretched, 0);
    }

    /// The two spinners re-run from a trace whose preempted runs all lasted 15 ms (its
    /// CPU stalled past the tick): at the tick of 8 ms the first one's run goes on to
    /// 15 ms; the second, picked then, has run 9 ms at the tick of 24 ms and goes on to
    /// 15 ms too, to 30 ms.
    #[test]
    fn a_run_goes_on_past_the_tick_as_the_traces_did() {
        let (preempted, stretched) = two_spinners(PreemptedRuns::from_lengths(vec![15 * MS; 50]));
        assert_eq!(preempted, [15 * MS, 30 * MS]);
        assert!(stretched >= 2, "{stretched}");
    }

    /// CPU 0 runs a waker 1.5 ms right of `queued` tasks waiting at 100 ms; a timer
    /// wakes a sleeper there, placed at 100 − 6 ms, which preempts (more than the 2 ms
    /// granularity behind). It runs first, as the next buddy. When it blocks, the waker
    /// is not the leftmost, yet within the granularity of it: with 9 tasks on the
    /// runqueue (sched_nr_latency is 12/1.5 = 8) it is the last buddy and gets the CPU
    /// back; with 5 it is not, and the leftmost waiting task runs.
    #[test]
    fn a_preempted_task_is_returned_to_as_the_last_buddy() {
        for (queued, back) in [(7, true), (3, false)] {
            let n = queued + 2;
            let mut sim = two_cpus(n, &vec![Some(0); n]);
            running(&mut sim, 0, 0, 101 * MS + MS / 2, 0);
            for t in 1..=queued {
                sim.tasks[t].vruntime = 100 * MS;
                sim.tasks[t].state = State::Runnable;
                sim.cpus[0].rq.push(t);
            }
            let wakee = n - 1;
            sim.tasks[wakee].vruntime = 50 * MS;
            wake_and_enqueue(&mut sim, wakee, 1_000);
            assert_eq!(sim.cpus[0].curr, Some(wakee), "{queued} queued");
            assert_eq!(sim.cpus[0].next_buddy, None, "cleared when picked");
            sim.tasks[wakee].state = State::Sleeping;
            sim.switch_to_next(0, 2_000, Some(wakee), 1);
            let curr = sim.cpus[0].curr.unwrap();
            assert_eq!(curr == 0, back, "{queued} queued: task {curr} runs");
            assert_eq!(sim.cpus[0].last_buddy, None);
        }
    }

    /// A traced task first seen at 2 ms is woken at 1 ms by a re-run that got ahead of
    /// the trace: the wake is kept for it, not acted on (it would queue the task, and
    /// its start would queue it a second time). It starts once, at 2 ms, and its first
    /// sleep returns at once.
    #[test]
    fn a_wake_before_the_wakee_exists_waits_for_it() {
        let tasks = vec![
            TaskSpec {
                comm: "waker".into(),
                pid: Some(1),
                steps: vec![
                    Step::Run(MS),
                    Step::Wake {
                        task: 1,
                        sync: false,
                    },
                    Step::Sleep,
                ],
                looping: false,
                start: Start::Runnable { cpu: Some(0) },
                pinned: None,
            },
            TaskSpec {
                comm: "late".into(),
                pid: Some(2),
                steps: vec![Step::Run(MS), Step::Sleep, Step::Run(MS)],
                looping: false,
                start: Start::At {
                    at_ns: 2 * MS,
                    cpu: 1,
                },
                pinned: None,
            },
        ];
        let w = Workload {
            name: "t".into(),
            unit: "units",
            tasks,
            wakes_counted: true,
        };
        let opts = SimOptions::with_defaults(Topology::flat(2), "sis_util", 0, 10 * MS);
        let mut sim = Sim::new(w, opts).unwrap();
        sim.wake(1, Some((0, 0, false)), MS);
        assert_eq!(sim.tasks[1].state, State::Sleeping);
        assert_eq!(sim.tasks[1].wake_pending, 1);
        assert!(sim.cpus.iter().all(|c| c.rq.is_empty()));
        sim.enter(1, 2 * MS);
        assert_eq!(sim.cpus[1].rq, vec![1]);
        assert!(!sim.tasks[1].unborn);
    }

    /// Writers 0 and 1 both write to readers 2 and 3 (hackbench's senders and
    /// receivers). Reader 2 sleeps at 0. Writer 0 (4 ms of CPU per traced write) wakes
    /// reader 3: reader 2 is woken too once it has slept HIDDEN_WRITE_PERIODS write
    /// periods, not before; the traced wakeup by writer 1 that would have ended that
    /// sleep then finds it awake and is absorbed, not kept for its next sleep; one that
    /// finds the reader waiting again wakes it (the debt stays), one that finds it in
    /// a timed sleep is absorbed.
    #[test]
    fn a_stream_writer_wakes_its_other_sleeping_readers() {
        use crate::synth::streams::HIDDEN_WRITE_PERIODS;
        let wake = |task| Step::Wake { task, sync: true };
        let spec = |steps| TaskSpec {
            comm: "hackbench".into(),
            pid: None,
            steps,
            looping: false,
            start: Start::Runnable { cpu: None },
            pinned: None,
        };
        let tasks = vec![
            spec(vec![Step::Run(4 * MS), wake(2), Step::Run(4 * MS), wake(3)]),
            spec(vec![Step::Run(MS), wake(3), Step::Run(MS), wake(2)]),
            spec(vec![Step::Sleep, Step::Run(MS), Step::Sleep, Step::Run(MS)]),
            spec(vec![Step::Sleep, Step::Run(MS), Step::Sleep]),
        ];
        let w = Workload {
            name: "t".into(),
            unit: "units",
            tasks,
            wakes_counted: true,
        };
        let opts = SimOptions::with_defaults(Topology::flat(4), "sis_util", 0, 100 * MS);
        let mut sim = Sim::new(w, opts).unwrap();
        assert_eq!(sim.streams.readers(0), &[2, 3]);
        let after = 4 * MS * HIDDEN_WRITE_PERIODS;
        running(&mut sim, 0, 0, 0, 0);
        for r in [2, 3] {
            sim.tasks[r].state = State::Sleeping;
            sim.tasks[r].pc = 1;
            sim.tasks[r].slept_at = 0;
        }
        sim.hidden_writes(0, 3, 0, true, after - 1);
        assert_eq!(
            sim.tasks[2].state,
            State::Sleeping,
            "slept too short a time"
        );
        assert_eq!(sim.result.hidden_writes, 0);
        sim.hidden_writes(0, 3, 0, true, after);
        assert_ne!(sim.tasks[2].state, State::Sleeping);
        assert_eq!(
            sim.tasks[3].state,
            State::Sleeping,
            "the traced wakeup's own reader"
        );
        assert_eq!(
            (sim.tasks[2].hidden_woken, sim.result.hidden_writes),
            (1, 1)
        );
        // Writer 1's traced wakeup of reader 2 was that write: absorbed.
        sim.wake(2, Some((1, 1, true)), after + MS);
        assert_eq!(
            (sim.tasks[2].hidden_woken, sim.tasks[2].wake_pending),
            (0, 0)
        );
        // The next finds it awake with nothing owed: kept for its next sleep.
        sim.wake(2, Some((1, 1, true)), after + 2 * MS);
        assert_eq!(sim.tasks[2].wake_pending, 1);
        // A reader in a timed sleep waits for its timer.
        sim.tasks[3].timed = true;
        sim.hidden_writes(0, 2, 0, true, 2 * after);
        assert_eq!(sim.tasks[3].state, State::Sleeping);
        assert_eq!(
            (sim.tasks[3].hidden_woken, sim.result.hidden_writes),
            (0, 1)
        );
        // A wake of a task that is not its reader is no write of its loop.
        sim.tasks[3].timed = false;
        sim.hidden_writes(0, 1, 0, true, 2 * after);
        assert_eq!(sim.tasks[3].state, State::Sleeping);
        // An owed wakeup that finds the reader waiting again wakes it; the debt stays.
        sim.tasks[3].hidden_woken = 1;
        sim.wake(3, Some((1, 1, true)), 3 * after);
        assert_ne!(sim.tasks[3].state, State::Sleeping);
        assert_eq!(sim.tasks[3].hidden_woken, 1);
        // One that finds it in a timed sleep is absorbed, not kept for a later sleep.
        sim.tasks[3].state = State::Sleeping;
        sim.tasks[3].timed = true;
        sim.wake(3, Some((1, 1, true)), 4 * after);
        assert_eq!(
            (sim.tasks[3].hidden_woken, sim.tasks[3].wake_pending),
            (0, 0)
        );
    }

    #[test]
    fn rebasing_keeps_the_distance_to_min_vruntime() {
        assert_eq!(rebase(101 * MS, 100 * MS, 10 * MS), 11 * MS);
        assert_eq!(rebase(97 * MS, 100 * MS, 10 * MS), 7 * MS);
        assert_eq!(rebase(5 * MS, 10 * MS, 100 * MS), 95 * MS);
        // Far behind a busy runqueue, and the new one's minimum is small: floor at 0.
        assert_eq!(rebase(50 * MS, 100 * MS, 10 * MS), 0);
    }

    /// CPU 0 runs task 1 at vruntime 100 ms, CPU 1 runs task 2 at 10 ms. Task 0 sleeps
    /// with CPU 0 as prev and may only run on CPU 1, so its wakeup migrates it. At
    /// 101 ms (1 ms ahead of CPU 0's minimum) it arrives 1 ms ahead of CPU 1's, at
    /// 11 ms (place_entity's floor, 10 − 12/2 = 4 ms, is below), and does not preempt
    /// task 2. At 97 ms (3 ms behind) it arrives at 7 ms, more than the 2 ms wakeup
    /// granularity behind task 2, and preempts it. Kept absolute, 101 ms or 97 ms
    /// would queue it behind task 2 for 87 ms or more of task 2's CPU time.
    #[test]
    fn a_wakeup_migration_rebases_vruntime_and_then_places_it() {
        for (v, expect, preempts) in [(101 * MS, 11 * MS, false), (97 * MS, 7 * MS, true)] {
            let mut sim = two_cpus(3, &[Some(1)]);
            let now = 0;
            running(&mut sim, 1, 0, 100 * MS, now);
            running(&mut sim, 2, 1, 10 * MS, now);
            sim.tasks[0].vruntime = v;
            wake_and_enqueue(&mut sim, 0, now);
            assert_eq!(sim.tasks[0].cpu, 1);
            assert_eq!(sim.tasks[0].vruntime, expect, "from {v}");
            assert_eq!(sim.cpus[1].curr == Some(0), preempts, "from {v}");
        }
    }

    /// A waker 5 ms ahead of its pinned wakee (over the 2 ms granularity) wakes it on
    /// its own CPU, runs 10 us more and would block; the preemption is 50 us away. As
    /// in the kernel, where the waker is preempted on its way out of the call that woke,
    /// it leaves the CPU runnable at 10 us, before it can block, and the wakee runs.
    #[test]
    fn a_waker_marked_for_preemption_is_preempted_before_it_blocks() {
        let tasks = vec![
            TaskSpec {
                comm: "waker".into(),
                pid: Some(1),
                steps: vec![
                    Step::Run(5 * MS),
                    Step::Wake {
                        task: 1,
                        sync: true,
                    },
                    Step::Run(10_000),
                    Step::Sleep,
                ],
                looping: false,
                start: Start::Runnable { cpu: Some(0) },
                pinned: Some(0),
            },
            TaskSpec {
                comm: "wakee".into(),
                pid: Some(2),
                steps: vec![Step::Run(MS)],
                looping: false,
                start: Start::Asleep { cpu: 0 },
                pinned: Some(0),
            },
        ];
        let w = Workload {
            name: "t".into(),
            unit: "units",
            tasks,
            wakes_counted: true,
        };
        let mut opts = SimOptions::with_defaults(Topology::flat(2), "sis_util", 0, 100 * MS);
        opts.preempt_delay_ns = 50_000;
        opts.record = true;
        let (_, events) = Sim::new(w, opts).unwrap().run();
        let waker_out = events
            .iter()
            .find_map(|e| match e.kind {
                EventKind::Switch {
                    prev_pid: 1,
                    prev_state,
                    next_pid,
                    ..
                } if e.ts > 5 * MS => Some((e.ts, prev_state, next_pid)),
                _ => None,
            })
            .expect("the waker leaves the CPU");
        let (ts, state, next) = waker_out;
        assert_eq!((state, next), (PREEMPTED, 2), "at {ts}");
        assert!((5 * MS + 10_000..5 * MS + 50_000).contains(&ts), "at {ts}");
        // Back on the CPU once the wakee's 1 ms is done, it goes on to its sleep, its
        // 10 us not run again.
        let slept = events
            .iter()
            .find_map(|e| match e.kind {
                EventKind::Switch {
                    prev_pid: 1,
                    prev_state,
                    ..
                } if e.ts > ts => Some((e.ts, prev_state)),
                _ => None,
            })
            .expect("the waker sleeps");
        assert_eq!(slept.1, 1);
        assert!(slept.0 < ts + MS + 5_000, "slept at {}", slept.0);
    }

    /// With a preemption delay of 5 us, the wakee of the case above (7 ms against the
    /// running task's 10 ms) is queued 0.3 us after its wakeup (the waker's hold of the
    /// runqueue lock) and the running task keeps the CPU until the delay has passed;
    /// then the wakee runs, 5.3 us after its wakeup.
    #[test]
    fn a_wakeup_preemption_takes_effect_after_its_delay() {
        let mut sim = two_cpus_with(3, &[Some(1)], 5_000);
        running(&mut sim, 1, 0, 100 * MS, 0);
        running(&mut sim, 2, 1, 10 * MS, 0);
        sim.tasks[0].vruntime = 97 * MS;
        wake_and_enqueue(&mut sim, 0, 1_000);
        assert_eq!(sim.cpus[1].curr, Some(2));
        assert_eq!(sim.cpus[1].rq, [0]);
        let Some(Reverse((at, _, Ev::Resched { cpu: 1, gen }))) = sim.heap.pop() else {
            panic!("no preemption pending");
        };
        assert_eq!((at, gen), (6_300, sim.cpus[1].gen));
        // What the event loop does when it fires.
        sim.preempt(1, at);
        assert_eq!(sim.cpus[1].curr, Some(0));
        assert_eq!(sim.cpus[1].started, 6_300);
        assert_eq!(sim.tasks[2].state, State::Runnable);
    }

    /// A sleeper far behind its old runqueue's minimum (3 ms behind 100 ms) lands 3 ms
    /// behind the new one's (30 ms − 3 = 27 ms), within place_entity's 6 ms of credit;
    /// 20 ms behind it would land at 10 ms and is raised to 6 ms behind the minimum at
    /// its enqueue, 0.3 us later (the waker's hold of the lock): 30.0003 − 6 ms.
    #[test]
    fn a_migrated_sleeper_keeps_at_most_half_a_latency_of_credit() {
        for (v, expect) in [(97 * MS, 27 * MS), (80 * MS, 24 * MS + 300)] {
            let mut sim = two_cpus(3, &[Some(1)]);
            running(&mut sim, 1, 0, 100 * MS, 0);
            running(&mut sim, 2, 1, 30 * MS, 0);
            sim.tasks[0].vruntime = v;
            wake_and_enqueue(&mut sim, 0, 0);
            assert_eq!(sim.tasks[0].vruntime, expect, "from {v}");
        }
    }

    /// A balance pull: CPU 0 runs task 1 (vruntime 100 ms, 2 ms into its stint, so its
    /// runqueue's minimum is 102 ms) with task 2 queued at 105 ms; idle CPU 1's minimum
    /// is 10 ms. Task 2, pulled, keeps its 3 ms lead: 13 ms. No place_entity (not a
    /// wakeup).
    #[test]
    fn a_balance_pull_rebases_vruntime() {
        let mut sim = two_cpus(3, &[]);
        let now = 10 * MS;
        running(&mut sim, 1, 0, 100 * MS, now - 2 * MS);
        sim.tasks[2].vruntime = 105 * MS;
        sim.tasks[2].state = State::Runnable;
        sim.tasks[2].cpu = 0;
        sim.cpus[0].rq.push(2);
        sim.cpus[1].min_vruntime = 10 * MS;
        assert_eq!(sim.pull(0, 1, now), Some(2));
        assert_eq!(sim.tasks[2].cpu, 1);
        assert_eq!(sim.tasks[2].vruntime, 13 * MS);
        assert_eq!(sim.cpus[0].min_vruntime, 102 * MS);
    }

    /// An idle CPU's periodic balance takes as many tasks as calculate_imbalance gives,
    /// not one: half the difference of two single-CPU groups' tasks, (9 - 0) / 2 = 4.
    #[test]
    fn an_idle_balance_pulls_the_whole_imbalance() {
        let mut sim = two_cpus(9, &[]);
        let now = 10 * MS;
        running(&mut sim, 0, 0, 100 * MS, now - MS);
        for t in 1..9 {
            sim.tasks[t].state = State::Runnable;
            sim.tasks[t].cpu = 0;
            sim.cpus[0].rq.push(t);
        }
        sim.balance(now);
        let c1 = &sim.cpus[1];
        assert!(c1.curr.is_some(), "the idle CPU runs a pulled task");
        assert_eq!(c1.rq.len() + 1, 4, "four tasks pulled");
        assert_eq!(sim.cpus[0].rq.len(), 4, "four left waiting on CPU 0");
        assert_eq!(sim.result.balance_migrations.same_llc, 4);
    }

    fn group(nr: u64, idle: u64, weight: u64, util: u64) -> GroupStats {
        // Every task at full nice-0 load.
        GroupStats::of(nr, idle, weight, util, nr * 1024, 117)
    }

    /// find_busiest_group's verdicts on hand-made groups (v6.1 rules).
    #[test]
    fn imbalance_follows_find_busiest_group() {
        // Lowest level, groups of one CPU: an idle CPU takes one of a CPU's two tasks.
        let idle_cpu = group(0, 1, 1, 0);
        assert_eq!(
            imbalance(&idle_cpu, &group(2, 0, 1, 300), 117, false, true, None),
            1
        );
        // ... but not the only task of a busy CPU.
        assert_eq!(
            imbalance(&idle_cpu, &group(1, 0, 1, 900), 117, false, true, None),
            0
        );
        // Across LLCs of 4: a ping-pong pair stacked on one CPU of the other LLC (2
        // tasks, 3 idle CPUs) against an LLC running 1 task (3 idle): neither 2 > 1 + 1
        // tasks nor idle CPUs differing by more than one, so the pair stays together.
        let local = group(1, 3, 4, 400);
        assert_eq!(
            imbalance(&local, &group(2, 3, 4, 600), 117, true, false, None),
            0
        );
        // Three tasks there against none here: spread, (3 − 0) / 2 = 1 task.
        let empty = group(0, 4, 4, 0);
        assert_eq!(
            imbalance(&empty, &group(3, 2, 4, 1500), 117, true, false, None),
            1
        );
        // Five against none: 2.
        assert_eq!(
            imbalance(&empty, &group(5, 1, 4, 2500), 117, true, false, None),
            2
        );
        // Between NUMA nodes (imb_numa_nr 2): 2 tasks against none is (2 − 0) = 2, a
        // small imbalance left alone while this node runs fewer than 2 tasks.
        let node = group(0, 8, 8, 0);
        let other = group(2, 7, 8, 1000);
        assert_eq!(imbalance(&node, &other, 117, true, false, Some(2)), 0);
        assert_eq!(imbalance(&node, &other, 117, true, false, None), 1);
        // An overloaded LLC (10 tasks on 4 CPUs, util 4000 > 4096 · 100/117) fills a
        // spare LLC by utilisation: one task.
        let busy = group(10, 0, 4, 4000);
        assert_eq!(busy.kind, GroupType::Overloaded);
        assert_eq!(imbalance(&local, &busy, 117, true, false, None), 1);
        // An overloaded local group does not pull from a less loaded one, nor from one
        // loaded less than 117 % of it.
        let local_busy = group(9, 1, 4, 3900);
        assert_eq!(local_busy.kind, GroupType::Overloaded);
        assert_eq!(
            imbalance(&local_busy, &group(8, 0, 4, 4000), 117, true, false, None),
            0
        );
        assert_eq!(
            imbalance(&local_busy, &group(10, 0, 4, 4000), 117, true, false, None),
            0
        );
        assert_eq!(
            imbalance(&local_busy, &group(11, 0, 4, 4000), 117, true, false, None),
            1
        );
    }

    /// Newidle on CPU 1 with task 2 waiting behind task 1 on CPU 0 (one LLC of 2 CPUs,
    /// groups of one CPU): the pull happens when avg_idle (1 ms at boot) covers the
    /// domain's balance cost (1 us + 2 × 250 ns), and not when the CPU's idle periods
    /// have averaged 1 us.
    #[test]
    fn newidle_is_gated_by_avg_idle_against_its_cost() {
        for (avg_idle, pulls) in [(1_000_000, true), (1_000, false)] {
            let got = newidle_pulls(two_cpus(3, &[]), avg_idle);
            assert_eq!(got, pulls, "avg_idle {avg_idle}");
        }
    }

    /// Whether CPU 1, its avg_idle `avg_idle`, pulls at newidle balance task 2 waiting
    /// behind task 1 on CPU 0.
    fn newidle_pulls(mut sim: Sim, avg_idle: u64) -> bool {
        let now = 10 * MS;
        running(&mut sim, 1, 0, 0, now);
        sim.tasks[2].state = State::Runnable;
        sim.tasks[2].cpu = 0;
        sim.cpus[0].rq.push(2);
        sim.m.cpus[1].avg_idle = avg_idle;
        sim.newidle(1, now).is_some()
    }

    /// The kernel's recorded max_newidle_lb_cost replaces the model's estimate where a
    /// CPU's domains match its levels, and raises that CPU's avg_idle cap: on a TCG guest,
    /// where a balance the host interrupts costs milliseconds (its rig showed 1.3 to 15 ms),
    /// a CPU idle 1 ms on average does not balance where the estimate (1.5 us) lets it.
    #[test]
    fn a_recorded_newidle_cost_gates_newidle_balance() {
        let cost = |cpu, domain, ns| NewidleCost {
            cpu,
            domain,
            name: "MC".into(),
            max_newidle_lb_cost_ns: ns,
        };
        let sim_with = |costs: Vec<NewidleCost>| {
            let start = Start::Asleep { cpu: 0 };
            let tasks = (0..3)
                .map(|i| spec(100 + i, vec![Step::Run(MS), Step::Sleep], start, None))
                .collect();
            let (w, mut opts) = on_two_cpus(tasks);
            opts.newidle_costs = costs;
            Sim::new(w, opts).unwrap()
        };
        // CPU 1's one domain recorded at 5 ms; CPU 0's not at all; a domain1 with no
        // domain0 matches no level.
        let sim = sim_with(vec![cost(1, 0, 5 * MS)]);
        assert_eq!(sim.result.newidle_costs_recorded, 1);
        assert_eq!(sim.topo_levels[1][0].newidle_cost_ns, 5 * MS);
        assert_eq!(sim.topo_levels[0][0].newidle_cost_ns, 1_500);
        assert_eq!(sim.m.cpus[1].max_idle_balance_cost, 5 * MS);
        assert_eq!(sim.m.cpus[0].max_idle_balance_cost, MIGRATION_COST_NS);
        assert_eq!(
            sim_with(vec![cost(1, 1, 5 * MS)])
                .result
                .newidle_costs_recorded,
            0
        );
        for (costs, avg_idle, pulls) in [
            (vec![], MS, true),
            (vec![cost(1, 0, 5 * MS)], MS, false),
            (vec![cost(1, 0, 5 * MS)], 6 * MS, true),
        ] {
            let got = newidle_pulls(sim_with(costs), avg_idle);
            assert_eq!(got, pulls, "avg_idle {avg_idle}");
        }
    }

    /// A domain of 8 CPUs balanced at balance tick 10 (ticks of 4 ms): found balanced,
    /// its interval doubles from 8 to 16 ms and stops there; once it moves a task it is
    /// 8 ms again, 16 times that on a busy CPU.
    #[test]
    fn a_balanced_domain_is_balanced_less_often() {
        let mut l = Level {
            name: "llc",
            span: (0..8).collect(),
            numa: false,
            imb_numa_nr: 1,
            imbalance_pct: 117,
            newidle_cost_ns: 0,
            balance_interval_ms: 8,
            next_balance_tick: 0,
        };
        let mut at = |tick, moved, busy| {
            reschedule_balance(&mut l, tick, moved, busy);
            (l.balance_interval_ms, l.next_balance_tick)
        };
        assert_eq!(at(10, false, false), (16, 14));
        assert_eq!(at(14, false, false), (16, 18));
        assert_eq!(at(18, true, false), (8, 20));
        assert_eq!(at(20, true, true), (8, 52));
    }

    /// imb_numa_nr on two nodes of 8 CPUs, one LLC each: the NUMA domain is the first
    /// above the LLC and spans 2 LLCs.
    #[test]
    fn imb_numa_nr_counts_the_llcs_of_the_first_domain_above_them() {
        let cpus = (0..16)
            .map(|c| crate::topology::CpuTopo {
                cpu: c,
                core: c / 2,
                smt_siblings: vec![c & !1, c | 1],
                cluster: c & !1,
                llc: c / 8 * 8,
                package: c / 8,
                node: c / 8,
                capacity: 1024,
            })
            .collect();
        let t = Topology {
            source: "test".into(),
            cpus,
        };
        let topo = Topo::new(&t, 16);
        let l = levels(&topo, &t, 3);
        let names: Vec<_> = l.iter().map(|l| (l.name, l.numa, l.imb_numa_nr)).collect();
        assert_eq!(
            names,
            [("smt", false, 1), ("llc", false, 1), ("machine", true, 2)]
        );
    }

    /// sched_latency by CPU count, as a booted kernel shows it in
    /// /sys/kernel/debug/sched/latency_ns: 6 ms on 1 CPU, 12 on 2, 18 on 4, 24 from 8 up.
    #[test]
    fn tunables_scale_with_the_log_of_the_cpus() {
        let ms = |c| Tunables::for_cpus(c).latency / MS;
        assert_eq!(
            [ms(1), ms(2), ms(3), ms(4), ms(8), ms(224)],
            [6, 12, 12, 18, 24, 24]
        );
        let t = Tunables::for_cpus(224);
        assert_eq!((t.min_granularity, t.wakeup_granularity), (3 * MS, 4 * MS));
    }

    /// A traced task of pid `pid`, `pinned` or not.
    fn spec(pid: i32, steps: Vec<Step>, start: Start, pinned: Option<u32>) -> TaskSpec {
        TaskSpec {
            comm: format!("t{pid}"),
            pid: Some(pid),
            steps,
            looping: false,
            start,
            pinned,
        }
    }

    /// A late timer sleep due 2 ms on, 20 ms at the latest.
    const LATE: Step = Step::SleepLate {
        due_ns: 2 * MS,
        by_ns: 20 * MS,
    };

    /// `tasks` re-run for 100 ms on 2 CPUs: the result, and the wakings of `pid` (time,
    /// CPU).
    fn late_rerun(tasks: Vec<TaskSpec>, pid: i32) -> (SimResult, Vec<(u64, u32)>, Vec<Event>) {
        let (w, mut opts) = on_two_cpus(tasks);
        opts.record = true;
        let (r, events) = Sim::new(w, opts).unwrap().run();
        let wakings = events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::Waking(w) if w.pid == pid => Some((e.ts, e.cpu)),
                _ => None,
            })
            .collect();
        (r, wakings, events)
    }

    /// A sleeps at 1 ms for 5 ms on CPU 0; B, there from 2 ms, sleeps at 3 ms with a
    /// late timer due 2 ms on (by 20 ms at the latest). A's timer interrupt at 6 ms ends
    /// B's sleep too; A takes the idle CPU 0 first, so B is placed on CPU 1. B's next
    /// sleep (30 ms, from about 7 ms) is not ended by the first sleep's timer at 23 ms.
    #[test]
    fn a_late_timer_ends_with_its_cpus_next_timer_interrupt() {
        let a = vec![Step::Run(MS), Step::SleepFor(5 * MS), Step::Run(MS)];
        let b = vec![
            Step::Run(MS),
            LATE,
            Step::Run(MS),
            Step::SleepFor(30 * MS),
            Step::Run(MS),
        ];
        let b_start = Start::At {
            at_ns: 2 * MS,
            cpu: 0,
        };
        let tasks = vec![
            spec(101, a, Start::Runnable { cpu: Some(0) }, None),
            spec(102, b, b_start, None),
        ];
        let (r, wakings, events) = late_rerun(tasks, 102);
        assert_eq!(wakings.len(), 2, "{wakings:?}");
        // The events of one instant are stamped a few ns apart, in order.
        let (at, cpu) = wakings[0];
        assert!((6 * MS..6 * MS + 1_000).contains(&at), "{wakings:?}");
        assert_eq!(cpu, 0, "woken by A's interrupt on CPU 0");
        assert!(wakings[1].0 >= 37 * MS, "{wakings:?}");
        let moved_to_1 = events.iter().any(|e| {
            matches!(
                e.kind,
                EventKind::Migrate {
                    pid: 102,
                    orig_cpu: 0,
                    dest_cpu: 1,
                    ..
                }
            ) && e.ts >= 6 * MS
                && e.ts < 7 * MS
        });
        assert!(moved_to_1, "B placed off its busy prev");
        assert_eq!(r.late_timers_bunched, 1);
    }

    /// B sleeps on the idle CPU 1 at 1 ms with a late timer due 2 ms on (by 20 ms at the
    /// latest). At 5 ms A, on CPU 0, wakes E, which is pinned to CPU 1: the IPI that
    /// brings CPU 1 out of idle also runs B's due timer.
    #[test]
    fn a_late_timer_ends_when_its_cpu_leaves_idle_for_a_wakeup() {
        let wake_e = Step::Wake {
            task: 2,
            sync: false,
        };
        let tasks = vec![
            spec(
                101,
                vec![Step::Run(5 * MS), wake_e, Step::Run(MS)],
                Start::Runnable { cpu: Some(0) },
                Some(0),
            ),
            spec(
                102,
                vec![Step::Run(MS), LATE, Step::Run(MS)],
                Start::Runnable { cpu: Some(1) },
                Some(1),
            ),
            spec(103, vec![Step::Run(MS)], Start::Asleep { cpu: 1 }, Some(1)),
        ];
        let (r, b_wakings, events) = late_rerun(tasks, 102);
        let e_at = events
            .iter()
            .find_map(|e| match &e.kind {
                EventKind::Waking(w) if w.pid == 103 => Some(e.ts),
                _ => None,
            })
            .expect("E woken");
        let (b_at, b_cpu) = *b_wakings.first().expect("B woken");
        assert!((5 * MS..6 * MS).contains(&e_at), "{e_at}");
        assert!(b_at > e_at && b_at < 6 * MS, "B at {b_at}, E at {e_at}");
        assert_eq!(b_cpu, 1);
        assert_eq!(r.late_timers_bunched, 1);
    }
}
