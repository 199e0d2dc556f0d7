//! Workload models after the seeds' benchmarks, for the closed-loop simulator: each task
//! is a loop of steps (run for a while, wake a task, sleep until woken or for a time).
//! Run times are the model's: a request or a message costs a few microseconds of CPU on
//! the loopback path, as the seeds' netperf and hackbench runs imply; they are documented
//! per workload, not tuned per experiment.

pub mod exchange;
pub mod feasible;
pub mod interrupted;
pub mod late_timers;
pub mod steps;
pub mod streams;
pub mod traced;

/// One step of a task's loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Use the CPU for this many ns.
    Run(u64),
    /// Wake a task (index into the workload's tasks); `sync` as WF_SYNC (the waker is
    /// about to sleep: pipe and socket writes).
    Wake {
        /// The wakee: its index in the workload's tasks.
        task: usize,
        /// WF_SYNC: the waker is about to sleep.
        sync: bool,
    },
    /// Block until woken. A wakeup that came while the task ran is kept, as data left in
    /// a pipe is: the sleep then returns at once.
    Sleep,
    /// Block for this many ns; a timer wakes the task from interrupt context.
    SleepFor(u64),
    /// Block until the first timer interrupt (or wakeup IPI) of the task's CPU at least
    /// `due_ns` on, or for `by_ns` at the latest. In the trace this timer ran in an interrupt that had
    /// already woken a task on that CPU: a late interrupt (a vCPU its host ran late)
    /// runs every timer due by then, so its own expiry passed unseen, earlier.
    SleepLate {
        /// The earliest its timer can have been due (ns after the sleep began).
        due_ns: u64,
        /// The sleep the trace shows (ns).
        by_ns: u64,
    },
    /// One unit of work done (a transaction, a message, a loop), for throughput.
    Count,
}

/// How a task enters the simulation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// Runnable at time 0, on this CPU or spread over the CPUs by task index.
    Runnable {
        /// The CPU it is queued on; None spreads the tasks over the CPUs by index.
        cpu: Option<u32>,
    },
    /// Queued on `cpu` at `at_ns` (a task forked, or first seen, mid-trace).
    At {
        /// Simulated time it becomes runnable (ns).
        at_ns: u64,
        /// The CPU it is queued on.
        cpu: u32,
    },
    /// Asleep from time 0 with `cpu` as its previous CPU, until a task wakes it.
    Asleep {
        /// Its prev_cpu for the first wakeup.
        cpu: u32,
    },
    /// Forked by the benchmark's launcher at start-up, one task after another (in task
    /// order, [`FORK_INTERVAL_NS`] apart), each placed on the idlest CPU as
    /// sched_balance_fork places it: the start does not decide where tasks settle.
    Forked,
}

/// How far apart a benchmark's launcher forks its tasks (ns): a fork and exec of a few
/// tens of microseconds.
pub const FORK_INTERVAL_NS: u64 = 20_000;

impl Start {
    /// The CPU it names, if any.
    pub fn cpu(&self) -> Option<u32> {
        match *self {
            Start::Runnable { cpu } => cpu,
            Start::At { cpu, .. } | Start::Asleep { cpu } => Some(cpu),
            Start::Forked => None,
        }
    }
}

/// One task of a workload: its name, its steps and how it starts.
#[derive(Debug, Clone)]
pub struct TaskSpec {
    /// The task's comm in the recorded events, e.g. `hackbench-s0` or `kworker/3:1`.
    pub comm: String,
    /// The pid it had in a trace; the simulator numbers the others.
    pub pid: Option<i32>,
    /// What it does, in order.
    pub steps: Vec<Step>,
    /// Loop over the steps (a benchmark) or run them once and exit (a traced task).
    pub looping: bool,
    /// Where and when it becomes runnable, or that it starts asleep.
    pub start: Start,
    /// Allowed on this CPU only (a per-CPU kernel thread).
    pub pinned: Option<u32>,
}

impl TaskSpec {
    /// A benchmark task: its steps in a loop, runnable from the start.
    pub fn looping(comm: String, steps: Vec<Step>) -> TaskSpec {
        TaskSpec {
            comm,
            pid: None,
            steps,
            looping: true,
            start: Start::Forked,
            pinned: None,
        }
    }
}

/// A set of tasks the simulator runs, and what counts as a unit of throughput.
#[derive(Debug, Clone)]
pub struct Workload {
    /// The workload's name in results, e.g. `hackbench`.
    pub name: String,
    /// What one counted unit is.
    pub unit: &'static str,
    /// The tasks; [`Step::Wake`] names them by index in this list.
    pub tasks: Vec<TaskSpec>,
    /// Every wakeup that finds its task awake is kept for one later sleep (a traced
    /// task's sleeps and wakeups pair up one to one); otherwise they merge into one, as
    /// readiness of a pipe or socket does.
    pub wakes_counted: bool,
}

/// A built-in workload: its name and what it models.
pub struct WorkloadInfo {
    /// The name `synth --workload` takes.
    pub name: &'static str,
    /// What its tasks do, with their run times.
    pub doc: &'static str,
}

/// The built-in workloads; an unknown name's error lists them in this order.
pub const WORKLOADS: &[WorkloadInfo] = &[
    WorkloadInfo {
        name: "netperf-tcp-rr",
        doc: "N client/server pairs over loopback TCP: the client runs 4 us to send a \
              request and wakes its server (sync), the server runs 6 us and wakes the \
              client back; one transaction per round trip",
    },
    WorkloadInfo {
        name: "netperf-udp-rr",
        doc: "as netperf-tcp-rr with UDP's shorter paths: 3 us client, 4 us server",
    },
    WorkloadInfo {
        name: "tbench",
        doc: "N client/server pairs with longer bursts: 30 us client, 60 us server",
    },
    WorkloadInfo {
        name: "hackbench",
        doc: "groups of 20 senders and 20 receivers (threads = tasks): a sender runs 2 us \
              per message to each receiver of its group, then sleeps until a receiver \
              has read (pipe space freed); a receiver runs 3 us per message and wakes its \
              sender",
    },
    WorkloadInfo {
        name: "schbench",
        doc: "message threads each with workers (threads = workers, 8 per message \
              thread): a message thread runs 2 us and wakes each of its workers; a worker \
              runs 30 us of work and wakes its message thread",
    },
    WorkloadInfo {
        name: "spin",
        doc: "N CPU-bound tasks that never sleep (for tests of fair sharing)",
    },
];

const US: u64 = 1_000;

fn pairs(name: &str, n: usize, client_ns: u64, server_ns: u64) -> Workload {
    let mut tasks = Vec::with_capacity(2 * n);
    for i in 0..n {
        let (c, s) = (2 * i, 2 * i + 1);
        tasks.push(TaskSpec::looping(
            format!("{name}-c{i}"),
            vec![
                Step::Run(client_ns),
                Step::Wake {
                    task: s,
                    sync: true,
                },
                Step::Sleep,
                Step::Count,
            ],
        ));
        tasks.push(TaskSpec::looping(
            format!("{name}-s{i}"),
            vec![
                Step::Sleep,
                Step::Run(server_ns),
                Step::Wake {
                    task: c,
                    sync: true,
                },
            ],
        ));
    }
    Workload {
        name: name.into(),
        unit: "transactions",
        tasks,
        wakes_counted: false,
    }
}

/// hackbench's default: 20 file descriptors, i.e. 20 senders and 20 receivers a group.
const HACKBENCH_FDS: usize = 20;
/// Workers per message thread.
const SCHBENCH_WORKERS: usize = 8;

fn hackbench(threads: usize, fds: usize) -> Workload {
    let groups = threads.div_ceil(2 * fds).max(1);
    let mut tasks = Vec::new();
    for g in 0..groups {
        let base = g * 2 * fds;
        let receivers: Vec<usize> = (base + fds..base + 2 * fds).collect();
        for s in 0..fds {
            let mut steps = Vec::new();
            for &r in &receivers {
                steps.push(Step::Run(2 * US));
                steps.push(Step::Wake {
                    task: r,
                    sync: true,
                });
            }
            steps.push(Step::Sleep);
            steps.push(Step::Count);
            tasks.push(TaskSpec::looping(format!("hackbench-s{}", base + s), steps));
        }
        for r in 0..fds {
            // Each receiver reads from every sender in turn and frees its pipe space.
            let sender = base + r;
            tasks.push(TaskSpec::looping(
                format!("hackbench-r{}", base + fds + r),
                vec![
                    Step::Sleep,
                    Step::Run(3 * US),
                    Step::Wake {
                        task: sender,
                        sync: true,
                    },
                ],
            ));
        }
    }
    Workload {
        name: "hackbench".into(),
        unit: "sender rounds",
        tasks,
        wakes_counted: false,
    }
}

fn schbench(threads: usize, workers: usize) -> Workload {
    let groups = threads.div_ceil(workers).max(1);
    let mut tasks = Vec::new();
    for g in 0..groups {
        let msg = tasks.len();
        let worker_ids: Vec<usize> = (msg + 1..=msg + workers).collect();
        let mut steps = vec![Step::Run(2 * US)];
        for &w in &worker_ids {
            steps.push(Step::Wake {
                task: w,
                sync: false,
            });
        }
        steps.push(Step::Sleep);
        tasks.push(TaskSpec::looping(format!("schbench-m{g}"), steps));
        for w in 0..workers {
            tasks.push(TaskSpec::looping(
                format!("schbench-w{g}-{w}"),
                vec![
                    Step::Sleep,
                    Step::Run(30 * US),
                    Step::Count,
                    Step::Wake {
                        task: msg,
                        sync: false,
                    },
                ],
            ));
        }
    }
    Workload {
        name: "schbench".into(),
        unit: "requests",
        tasks,
        wakes_counted: false,
    }
}

/// How often each CPU's housekeeping kernel thread (kworker, RCU, timers) runs, and for
/// how long: the background of a real machine, which moves a benchmark's tasks off CPUs
/// they would otherwise keep forever.
pub const HOUSEKEEPING_PERIOD_NS: u64 = 4_000_000;
/// How long each housekeeping run uses the CPU (ns).
pub const HOUSEKEEPING_RUN_NS: u64 = 10_000;

/// Adds a housekeeping thread per CPU, pinned to it, its first run spread over the period.
pub fn add_housekeeping(w: &mut Workload, cpus: &[u32]) {
    let n = cpus.len().max(1) as u64;
    for (i, &cpu) in cpus.iter().enumerate() {
        w.tasks.push(TaskSpec {
            comm: format!("kworker/{cpu}:1"),
            pid: None,
            steps: vec![
                Step::Run(HOUSEKEEPING_RUN_NS),
                Step::SleepFor(HOUSEKEEPING_PERIOD_NS),
            ],
            looping: true,
            start: Start::At {
                at_ns: HOUSEKEEPING_PERIOD_NS * i as u64 / n,
                cpu,
            },
            pinned: Some(cpu),
        });
    }
}

/// Why a workload named on the command line cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkloadError {
    /// A parameter without `=`.
    #[error("workload {spec:?}: expected key=value after ':', got {part:?}")]
    NotKeyValue {
        /// The workload as named.
        spec: String,
        /// The part after a `:` that is not `key=value`.
        part: String,
    },
    /// A parameter whose value is not a positive integer.
    #[error("workload {spec:?}: {key} must be a positive integer")]
    NotPositive {
        /// The workload as named.
        spec: String,
        /// The parameter.
        key: String,
    },
    /// A parameter the workload does not take.
    #[error("workload {spec:?}: unknown parameter {key:?} ({})", takes(allowed))]
    UnknownParameter {
        /// The workload as named.
        spec: String,
        /// The parameter.
        key: String,
        /// The parameters it takes.
        allowed: &'static [&'static str],
    },
    /// No workload of that name.
    #[error("unknown workload {0:?}; known: {known}", known = WORKLOADS.iter().map(|w| w.name).collect::<Vec<_>>().join(", "))]
    Unknown(String),
}

/// "it takes fds", or "it takes none".
fn takes(allowed: &[&str]) -> String {
    if allowed.is_empty() {
        "it takes none".into()
    } else {
        format!("it takes {}", allowed.join(", "))
    }
}

/// Builds a workload with `threads` threads (pairs for the request/response ones).
/// `name` may carry parameters as policies do: `hackbench:fds=14` (senders and receivers
/// per group), `schbench:workers=27` (workers per message thread).
pub fn build(spec: &str, threads: usize) -> Result<Workload, WorkloadError> {
    let n = threads.max(1);
    let mut parts = spec.split(':');
    let name = parts.next().unwrap_or_default();
    let mut params: Vec<(&str, usize)> = Vec::new();
    for p in parts {
        let (k, v) = p
            .split_once('=')
            .ok_or_else(|| WorkloadError::NotKeyValue {
                spec: spec.into(),
                part: p.into(),
            })?;
        let v = v.parse::<usize>().ok().filter(|&v| v > 0).ok_or_else(|| {
            WorkloadError::NotPositive {
                spec: spec.into(),
                key: k.into(),
            }
        })?;
        params.push((k, v));
    }
    let allowed: &'static [&'static str] = match name {
        "hackbench" => &["fds"],
        "schbench" => &["workers"],
        _ => &[],
    };
    if let Some((k, _)) = params.iter().find(|(k, _)| !allowed.contains(k)) {
        return Err(WorkloadError::UnknownParameter {
            spec: spec.into(),
            key: k.to_string(),
            allowed,
        });
    }
    let param = |k: &str, default: usize| {
        params
            .iter()
            .find(|(name, _)| *name == k)
            .map_or(default, |(_, v)| *v)
    };
    let mut w = match name {
        "netperf-tcp-rr" => pairs(name, n, 4 * US, 6 * US),
        "netperf-udp-rr" => pairs(name, n, 3 * US, 4 * US),
        "tbench" => pairs(name, n, 30 * US, 60 * US),
        "hackbench" => hackbench(n, param("fds", HACKBENCH_FDS)),
        "schbench" => schbench(n, param("workers", SCHBENCH_WORKERS)),
        "spin" => Workload {
            name: name.into(),
            unit: "ms of CPU",
            tasks: (0..n)
                .map(|i| {
                    TaskSpec::looping(
                        format!("spin-{i}"),
                        vec![Step::Run(1_000 * US), Step::Count],
                    )
                })
                .collect(),
            wakes_counted: false,
        },
        other => return Err(WorkloadError::Unknown(other.into())),
    };
    w.name = spec.into();
    Ok(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        let w = build("netperf-tcp-rr", 3).unwrap();
        assert_eq!(w.tasks.len(), 6);
        assert_eq!(
            w.tasks[0].steps[1],
            Step::Wake {
                task: 1,
                sync: true
            }
        );
        assert_eq!(
            w.tasks[1].steps[2],
            Step::Wake {
                task: 0,
                sync: true
            }
        );
        let h = build("hackbench", 40).unwrap();
        assert_eq!(h.tasks.len(), 40);
        let s = build("schbench", 16).unwrap();
        assert_eq!(s.tasks.len(), 18);
        assert!(build("nope", 1)
            .unwrap_err()
            .to_string()
            .contains("netperf-tcp-rr"));
        // 2 groups of 14 senders and 14 receivers; 2 message threads of 28 workers.
        assert_eq!(build("hackbench:fds=14", 56).unwrap().tasks.len(), 56);
        assert_eq!(build("schbench:workers=28", 56).unwrap().tasks.len(), 58);
        assert_eq!(
            build("tbench:fds=3", 8).unwrap_err().to_string(),
            "workload \"tbench:fds=3\": unknown parameter \"fds\" (it takes none)"
        );
        assert!(matches!(
            build("hackbench:fds=0", 8),
            Err(WorkloadError::NotPositive { key, .. }) if key == "fds"
        ));
    }
}
