//! The closed-loop simulator on cases whose outcome can be worked out by hand.

use sisreplay::presets;
use sisreplay::sim::{Penalty, Sim, SimOptions, SimResult};
use sisreplay::synth::{self, Step, TaskSpec, Workload};
use sisreplay::topology::Topology;
use sisreplay::wakeup::sis::TimeModel;

const US: u64 = 1_000;
const MS: u64 = 1_000_000;

fn run(w: Workload, topology: Topology, policy: &str, duration_ns: u64) -> SimResult {
    run_with(
        w,
        topology,
        policy,
        duration_ns,
        Penalty::default(),
        sisreplay::sim::DEFAULT_WAKE_IPI_NS,
    )
}

fn run_with(
    w: Workload,
    topology: Topology,
    policy: &str,
    duration_ns: u64,
    penalty: Penalty,
    wake_ipi_ns: u64,
) -> SimResult {
    let sim = Sim::new(
        w,
        SimOptions {
            topology,
            policy: policy.into(),
            warmup_ns: 0,
            duration_ns,
            time: TimeModel::default(),
            penalty,
            wake_ipi_ns,
            // Wakeup preemption at once: the cases are worked out without its delay.
            preempt_delay_ns: 0,
            // Exact run times: the outcomes are worked out by hand.
            jitter: 0.0,
            seed: 1,
            record: false,
            // The cases are worked out with v6.1's CFS.
            scheduler: sisreplay::sim::Scheduler::Cfs,
            util_est: Default::default(),
            new_task_util: Default::default(),
            traced_delays: Default::default(),
            flips_before_trace: Default::default(),
            // No trace: the tick ends a run when it would.
            preempted_runs: Default::default(),
            // The model's newidle costs, as the cases were worked out with.
            newidle_costs: Vec::new(),
        },
    )
    .unwrap();
    sim.run().0
}

fn preset(name: &str) -> Topology {
    let p = presets::lookup(name).unwrap();
    p.shape.topology(p.name)
}

/// Two ping-pong pairs on four idle CPUs: every wakee finds an idle CPU at once, so no
/// wakeup waits for a CPU, only for its waker's search, the enqueue under the chosen
/// runqueue's lock (0.3 us) and the wakeup IPI. With IPIs taking no time, each pair
/// does one transaction per 4 + 6 us of work plus the searches, enqueues and cache
/// refills of its two wakeups, about 93 K/s.
#[test]
fn ping_pong_pairs_on_idle_cpus_never_queue() {
    let pairs = || synth::build("netperf-tcp-rr", 2).unwrap();
    let ipi = sisreplay::sim::DEFAULT_WAKE_IPI_NS;
    // The longest search: its entry and every runqueue of the LLC.
    let t = TimeModel::default();
    let search = t.entry_ns + 4 * t.probe_ns;
    const ENQUEUE_NS: u64 = 300;
    let r = run(pairs(), Topology::flat(4), "sis_util", 50 * MS);
    assert!(r.wakeups > 10_000, "{}", r.wakeups);
    let most = search + ENQUEUE_NS + ipi;
    assert!(r.latency.max <= most, "a wakee waited {} ns", r.latency.max);
    let r = run_with(
        pairs(),
        Topology::flat(4),
        "sis_util",
        50 * MS,
        Penalty::default(),
        0,
    );
    assert!(r.wakeups > 18_000, "{}", r.wakeups);
    assert!(
        r.latency.max <= search + ENQUEUE_NS,
        "a wakee waited {}",
        r.latency.max
    );
    let per_pair = r.throughput_per_s / 2.0;
    let work_ns = 10_000.0
        + (2 * ENQUEUE_NS) as f64
        + (r.search_ns_total + r.penalty_ns) as f64 / r.units as f64;
    assert!(
        (per_pair - 1e9 / work_ns).abs() / per_pair < 0.01,
        "{per_pair} vs {}",
        1e9 / work_ns
    );
    // Two CPUs' worth of work on four, less the enqueues, which the CPUs wait idle for.
    let busy = 50.0 * (work_ns - (2 * ENQUEUE_NS) as f64) / work_ns;
    assert!((r.busy_pct - busy).abs() < 1.0, "{} vs {busy}", r.busy_pct);
}

/// Wakeup delays drawn from a trace's samples: the same two pairs, where a wakee sent to
/// another, idle CPU waits only for the IPI and the idle exit, take exactly the traced
/// delays, in the traced proportions (4 in 5 at 10 us, 1 in 5 stalled for 1 ms), however
/// short the search and the enqueue before them. (A CPU stalled that long is not idle to
/// the partner's next search, so some wakees now go to their waker's CPU and run as it
/// blocks, in under a microsecond.)
#[test]
fn idle_cpus_wake_after_delays_drawn_from_the_trace() {
    let mut samples = vec![10 * US as u32; 400];
    samples.extend([MS as u32; 100]);
    let opts = SimOptions {
        traced_delays: sisreplay::sim::WakeDelays::from_samples(samples, Vec::new(), Vec::new()),
        ..SimOptions::with_defaults(Topology::flat(4), "sis_util", 0, 200 * MS)
    };
    let r = Sim::new(synth::build("netperf-tcp-rr", 2).unwrap(), opts)
        .unwrap()
        .run()
        .0;
    assert!(r.delays_from_trace);
    assert!(r.wakeups > 1_000, "{}", r.wakeups);
    // No traced task to take a delay from: every remote idle wakeup draws, and the
    // preemptions and local idle wakeups (no samples) keep the model's constants.
    assert_eq!(r.delays_traced, 0);
    assert!(r.delays_drawn > 1_000, "{}", r.delays_drawn);
    // Bucket i holds [2^(i-1), 2^i) us: under 1 us in bucket 0, 10 us in bucket 4,
    // 1 ms in bucket 10.
    let h = &r.latency_us.buckets;
    let (fast, stalled) = (h[4], h[10..].iter().sum::<u64>());
    let all: u64 = h.iter().sum();
    assert_eq!(h[0] + fast + stalled, all, "{h:?}");
    assert!(fast + stalled > all / 4, "{h:?}");
    let share = stalled as f64 / (fast + stalled) as f64;
    assert!(
        (share - 0.2).abs() < 0.03,
        "{share} of remote wakeups stalled"
    );
    // One whose search began before a CPU's pending wakeup was queued may still pick
    // it and wait behind that wakee's 4 us turn.
    assert!(r.latency.max < MS + 10 * US, "{}", r.latency.max);
}

/// CPU-bound tasks: as many as CPUs keep every CPU busy (but for the start, where the
/// launcher forks them 20 us apart: 20 + 40 + 60 us of 400 ms idle, 99.97 %); twice as
/// many share them fairly, each getting half a CPU.
#[test]
fn cpu_bound_tasks_keep_every_cpu_busy_and_share_fairly() {
    let r = run(
        synth::build("spin", 4).unwrap(),
        Topology::flat(4),
        "sis_util",
        100 * MS,
    );
    assert!((r.busy_pct - 99.97).abs() < 0.005, "{}", r.busy_pct);
    // Each spinner counts one unit per ms of CPU: 4 CPUs x 100 ms.
    assert!((396..=400).contains(&r.units), "{}", r.units);
    let r = run(
        synth::build("spin", 8).unwrap(),
        Topology::flat(4),
        "sis_util",
        100 * MS,
    );
    assert!((r.busy_pct - 99.97).abs() < 0.005, "{}", r.busy_pct);
    assert!((392..=400).contains(&r.units), "{}", r.units);
}

/// A spinner and a task that runs 5 ms and sleeps 10 us share one CPU: sched_latency
/// 6 ms gives each a 3 ms slice, which CFS sees run out only at a tick (every 4 ms).
/// The ticks cut the sleeper's 5 ms in two, so its wakeups alternate. Woken 3 ms of
/// vruntime behind the spinner (more than the 1 ms granularity), it preempts at once.
/// Woken level with it, it waits for the spinner's slice: picked at 18.01 ms when the
/// sleeper slept, the spinner has run 1.99 ms at the tick at 20 ms and 5.99 ms at the
/// one at 24, so the wakee of 18.02 ms waits 5.98 ms (where an exact slice end, at
/// 21.01 ms, would make it 2.99).
#[test]
fn a_wakeup_onto_a_busy_cpu_waits_for_the_tick_after_the_current_slice() {
    let w = Workload {
        name: "slice".into(),
        unit: "rounds",
        tasks: vec![
            TaskSpec::looping("spinner".into(), vec![Step::Run(50 * MS)]),
            TaskSpec::looping(
                "sleeper".into(),
                vec![Step::Run(5 * MS), Step::SleepFor(10 * US), Step::Count],
            ),
        ],
        wakes_counted: false,
    };
    let r = run(w, Topology::flat(1), "sis_util", 200 * MS);
    assert!(r.wakeups >= 10, "{}", r.wakeups);
    assert_eq!(r.latency.p50, 0);
    assert_eq!(r.latency.max, 6 * MS - 20 * US);
}

/// Every migration is charged its refill penalty by distance; with a larger penalty the
/// same load gets less done.
#[test]
fn migrations_are_charged_their_penalty() {
    let topo = preset("x86-40");
    let w = || synth::build("hackbench", 80).unwrap();
    let p = Penalty::default();
    let r = run_with(w(), topo.clone(), "sis_util", 50 * MS, p, 0);
    let moves = |pl: &sisreplay::metrics::Placements| {
        pl.same_llc * p.same_llc_ns
            + pl.cross_llc * p.cross_llc_ns
            + pl.cross_numa * p.cross_numa_ns
    };
    // x86-40's two LLCs are its two NUMA nodes: moves are same-LLC or cross-node.
    assert!(
        r.placements.same_llc > 0 && r.placements.cross_numa + r.balance_migrations.cross_numa > 0,
        "{:?} {:?}",
        r.placements,
        r.balance_migrations
    );
    assert_eq!(
        r.penalty_ns,
        moves(&r.placements) + moves(&r.balance_migrations)
    );
    let dear = Penalty {
        same_llc_ns: 20_000,
        cross_llc_ns: 100_000,
        cross_numa_ns: 250_000,
    };
    let r2 = run_with(w(), topo, "sis_util", 50 * MS, dear, 0);
    assert!(r2.units < r.units, "{} vs {}", r2.units, r.units);
}

/// Seed 002: with newidle balance kept off NUMA domains, an idle CPU of a Kunpeng 920
/// never pulls across nodes at newidle, while the default does under the same load.
#[test]
fn newidle_llc_makes_no_cross_node_newidle_pulls() {
    let numa_pulls = |policy: &str| {
        let r = run(
            synth::build("hackbench", 256).unwrap(),
            preset("kunpeng920"),
            policy,
            50 * MS,
        );
        assert!(
            r.newidle_pulls.values().sum::<u64>() > 0,
            "{policy}: no newidle pull at all"
        );
        r.newidle_pulls
            .iter()
            .filter(|(level, _)| matches!(level.as_str(), "package" | "machine"))
            .map(|(_, n)| n)
            .sum::<u64>()
    };
    assert!(numa_pulls("sis_util") > 0);
    assert_eq!(numa_pulls("newidle_llc"), 0);
}

/// `sisreplay synth` writes a bundle per step that every command reads; replaying it with
/// the policy that placed its wakeups takes every decision the simulator took, since
/// both run the same placement code on the same reconstructed machine.
#[test]
fn synth_bundles_replay_to_the_simulated_decisions() {
    let dir = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_sisreplay");
    let o = std::process::Command::new(bin)
        .args([
            "synth",
            "--machine",
            "x86-40",
            "--workload",
            "hackbench",
            "--threads",
            "60",
        ])
        .args([
            "--duration",
            "20ms",
            "--warmup",
            "20ms",
            "--policy",
            "sis_util,sis_prop,no_limit",
        ])
        .arg("-o")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        text.lines().filter(|l| l.starts_with("60 threads")).count(),
        3,
        "{text}"
    );
    for policy in ["sis_util", "sis_prop", "no_limit"] {
        let b = dir
            .path()
            .join(format!("synth-x86-40-hackbench-60-{policy}"));
        let meta = sisreplay::bundle::read_meta(&b).unwrap();
        assert_eq!(meta.nr_cpus, 40);
        assert!(!meta.topology_assumed);
        let sim: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(b.join("results/sim.json")).unwrap())
                .unwrap();
        let mut src = sisreplay::input::open(&b).unwrap().source;
        let r = sisreplay::replay::replay(
            src.as_mut(),
            Some(&meta),
            sisreplay::replay::ReplayOptions {
                policies: vec![],
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(r.as_kernel, policy);
        let f = r.policies[0].fidelity.as_ref().unwrap();
        assert!(f.decisions > 1000, "{policy}: {}", f.decisions);
        // Every decision comes back: a replay queues each remote wakeup to its CPU when
        // the kernel policy's modelled search ends, as the simulator does, so even where
        // searches overlapped and chose the same CPU it decides as the simulator did; a
        // few differ where events share an instant (under 1 % of those collisions).
        let collisions = sim["wakeup_collisions_with_warmup"].as_u64().unwrap();
        assert!(collisions > 0, "{policy}: no collisions to test");
        let differ = f.decisions - f.agree;
        assert!(
            differ <= collisions / 100 + 2,
            "{policy}: {differ} decisions differ, {collisions} collisions"
        );
        // The warmup's wakeups are in the bundle too; the measured ones are fewer.
        assert!(sim["wakeups"].as_u64().unwrap() < f.decisions);
    }
}

/// Runs the command line tool; its standard output, once it succeeded.
fn cli(args: &[&str]) -> Vec<u8> {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_sisreplay"))
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    o.stdout
}

/// The same seed gives the same run, to the byte; another seed varies the run times.
#[test]
fn synth_runs_are_seeded_and_deterministic() {
    let run = |seed: &str| {
        cli(&[
            "synth",
            "--machine",
            "x86-40",
            "--workload",
            "hackbench",
            "--threads",
            "80",
            "--duration",
            "20ms",
            "--warmup",
            "20ms",
            "--no-bundle",
            "--json",
            "--jobs",
            "2",
            "--seed",
            seed,
        ])
    };
    assert_eq!(run("1"), run("1"));
    assert_ne!(run("1"), run("2"));
}

/// compare and report read simulated bundles' closed-loop results: the throughput and
/// latency they show are the ones the simulator wrote in results/sim.json.
#[test]
fn compare_and_report_show_simulated_results() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().display().to_string();
    let printed = cli(&[
        "synth",
        "--machine",
        "x86-40",
        "--workload",
        "netperf-tcp-rr",
        "--threads",
        "30",
        "--duration",
        "20ms",
        "--warmup",
        "20ms",
        "--policy",
        "sis_prop,sis_util",
        "-o",
        &out,
    ]);
    let b = |p: &str| {
        dir.path()
            .join(format!("synth-x86-40-netperf-tcp-rr-30-{p}"))
    };
    // Each bundle is listed with its size: the sum of its files' sizes.
    let printed = String::from_utf8(printed).unwrap();
    for p in ["sis_prop", "sis_util"] {
        let files = ["events.parquet", "meta.json", "results/sim.json"];
        let bytes: u64 = files
            .iter()
            .map(|f| std::fs::metadata(b(p).join(f)).unwrap().len())
            .sum();
        let line = format!("  {}  {:.1} MiB", b(p).display(), bytes as f64 / 1048576.0);
        assert!(
            printed.lines().any(|l| l == line),
            "{line:?} not in {printed}"
        );
    }
    let sim = |p: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(b(p).join("results/sim.json")).unwrap())
            .unwrap()
    };
    let base = format!("trace:{}", b("sis_prop").display());
    let other = format!("trace:{}", b("sis_util").display());
    let c: serde_json::Value =
        serde_json::from_slice(&cli(&["compare", &base, &other, "--json"])).unwrap();
    for (i, p) in ["sis_prop", "sis_util"].iter().enumerate() {
        let s = &c["traces"][i]["simulated"];
        assert_eq!(s["policy"], *p);
        assert_eq!(s["throughput_per_s"], sim(p)["throughput_per_s"]);
        assert_eq!(s["latency_p99_ns"], sim(p)["latency"]["p99"]);
    }
    let html = dir.path().join("r.html");
    cli(&["report", &base, &other, "-o", &html.display().to_string()]);
    let text = std::fs::read_to_string(&html).unwrap();
    let section = &text[text
        .find("<section id=\"simulated\">")
        .expect("a simulated section")..];
    let tput = sim("sis_util")["throughput_per_s"].as_f64().unwrap();
    assert!(section.contains(&format!("<td>{tput:.0}</td>")), "{tput}");
}

/// Two wakers on CPUs 0 and 1 wake two tasks pinned to CPU 2 at the same instant (10 us
/// into their loops; a pinned wakee needs no search). The first takes CPU 2's runqueue
/// lock for its enqueue (300 ns): the second waker spins those 300 ns, is charged them,
/// and from then on runs 300 ns behind, so the locks never overlap again.
#[test]
fn a_waker_waits_for_a_held_runqueue_lock() {
    let waker = |target: usize| TaskSpec {
        start: synth::Start::Runnable {
            cpu: Some(target as u32 - 2),
        },
        ..TaskSpec::looping(
            format!("waker-{target}"),
            vec![
                Step::Run(10 * US),
                Step::Wake {
                    task: target,
                    sync: false,
                },
            ],
        )
    };
    let pinned = |name: &str| TaskSpec {
        start: synth::Start::Runnable { cpu: Some(2) },
        pinned: Some(2),
        ..TaskSpec::looping(name.into(), vec![Step::Sleep])
    };
    let w = Workload {
        name: "locks".into(),
        unit: "rounds",
        tasks: vec![waker(2), waker(3), pinned("sleeper-a"), pinned("sleeper-b")],
        wakes_counted: false,
    };
    let r = run_with(
        w,
        Topology::flat(4),
        "sis_util",
        100 * US,
        Penalty::default(),
        0,
    );
    assert_eq!((r.rq_lock_waits, r.rq_lock_wait_ns), (1, 300));
    assert!(r.remote_rq_locks >= 19, "{}", r.remote_rq_locks);
}

/// A traced task, run once: `steps` from `start`.
fn traced_task(comm: &str, start: synth::Start, steps: Vec<Step>) -> TaskSpec {
    TaskSpec {
        comm: comm.into(),
        pid: None,
        steps,
        looping: false,
        start,
        pinned: None,
    }
}

/// A traced task on CPU 1 that runs 10 us, wakes `task`, then does `then`.
fn waker_on_cpu_1(task: usize, sync: bool, then: &[Step]) -> TaskSpec {
    let mut steps = vec![Step::Run(10 * US), Step::Wake { task, sync }];
    steps.extend_from_slice(then);
    traced_task("waker", synth::Start::Runnable { cpu: Some(1) }, steps)
}

/// A wake that comes while its task sleeps on a timer does not end that sleep (a timed
/// sleep runs to its timer, as nanosleep does): it is kept for the task's next sleep,
/// which it ends at once. Only the timer wakes the task, and both tasks finish.
#[test]
fn a_wake_during_a_timed_sleep_is_kept_for_the_next_sleep() {
    let w = Workload {
        name: "timed".into(),
        unit: "rounds",
        tasks: vec![
            traced_task(
                "sleeper",
                synth::Start::Runnable { cpu: Some(0) },
                vec![
                    Step::SleepFor(100 * US),
                    Step::Run(10 * US),
                    Step::Sleep,
                    Step::Count,
                ],
            ),
            waker_on_cpu_1(0, false, &[]),
        ],
        wakes_counted: true,
    };
    let r = run(w, Topology::flat(2), "sis_util", MS);
    assert_eq!((r.wakeups, r.units, r.unfinished_tasks), (1, 1, 0));
}

/// A task with nothing left to do but the cache refill of the migration that woke it
/// runs the refill and exits; it does not go back to sleep waiting for more.
#[test]
fn a_woken_task_with_no_steps_exits_after_its_refill() {
    let w = Workload {
        name: "refill".into(),
        unit: "rounds",
        tasks: vec![
            TaskSpec {
                start: synth::Start::Runnable { cpu: Some(0) },
                pinned: Some(0),
                ..TaskSpec::looping("spinner".into(), vec![Step::Run(50 * MS)])
            },
            traced_task("wakee", synth::Start::Asleep { cpu: 0 }, vec![]),
            waker_on_cpu_1(1, true, &[Step::Run(10 * US)]),
        ],
        wakes_counted: true,
    };
    let r = run(w, Topology::flat(2), "sis_util", 5 * MS);
    // Its prev CPU is the spinner's: a sync wakeup from the waker, alone on its CPU,
    // pulls the wakee there (wake_affine_idle), and it pays the same-LLC refill.
    assert_eq!(r.placements.same_llc, 1, "{:?}", r.placements);
    assert!(r.penalty_ns >= Penalty::default().same_llc_ns);
    assert_eq!(r.unfinished_tasks, 0);
}

/// Seven CPU-bound tasks queued on CPU 0 and one on CPU 1: CPU 1 is never idle, so only
/// the periodic balance of busy CPUs can even them out. Its first pass at the LLC
/// (every 2 ms · busy_factor 16) finds CPU 0's load 7 tasks against 1 and moves half the
/// difference, 3 tasks; then 4 and 4 stay.
#[test]
fn busy_cpus_balance_periodically() {
    let spinner = |cpu: u32| TaskSpec {
        start: synth::Start::Runnable { cpu: Some(cpu) },
        ..TaskSpec::looping("spinner".into(), vec![Step::Run(100 * MS)])
    };
    let mut tasks: Vec<TaskSpec> = (0..7).map(|_| spinner(0)).collect();
    tasks.push(spinner(1));
    let w = Workload {
        name: "busy".into(),
        unit: "rounds",
        tasks,
        wakes_counted: false,
    };
    let r = run(w, Topology::flat(2), "sis_util", 500 * MS);
    assert_eq!(
        r.balance_migrations.same_llc, 3,
        "{:?}",
        r.balance_migrations
    );
}
