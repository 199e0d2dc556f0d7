//! Time-sliced parallel replay: the speed-up over thread counts 1, 2 and 4 on the
//! longest committed captures, each ratio against the 1-thread run in this process.
//! A trace is cut into as many slices as threads when each slice spans four warm-ups
//! (replay::slices); fewer otherwise, so a short trace flattens the curve.

use std::path::Path;
use std::time::Instant;

use sisreplay::replay::{replay_parallel, ReplayError, ReplayOptions};

const POLICIES: [&str; 6] = [
    "sis_util",
    "sis_prop",
    "sis_util_v3",
    "no_limit",
    "cas",
    "sis_util_idle_hint",
];

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "{cpus} CPUs available; {} policies; best of 5",
        POLICIES.len()
    );
    for trace in [
        "traces/rig/2x4/rig-2x4-hackbench-sis_util-tracefs",
        "traces/rig/2x4x2-numa/rig-2x4x2-numa-hackbench-sis_util-tracefs",
        "traces/host/hackbench-g4-l2000",
    ] {
        let bundle = root.join(trace);
        let meta = sisreplay::input::open(&bundle).unwrap().meta;
        let open = || -> Result<_, ReplayError> { Ok(sisreplay::input::open(&bundle)?.source) };
        let time = |jobs: usize| {
            let mut best = f64::MAX;
            let mut wakeups = 0;
            for _ in 0..5 {
                let t = Instant::now();
                let r = replay_parallel(
                    &open,
                    meta.as_ref(),
                    ReplayOptions {
                        policies: POLICIES.iter().map(|s| s.parse().unwrap()).collect(),
                        ..Default::default()
                    },
                    jobs,
                )
                .unwrap();
                best = best.min(t.elapsed().as_secs_f64());
                wakeups = r.replayed;
            }
            (best, wakeups)
        };
        let (one, n) = time(1);
        print!(
            "{}: {n} wakeups; 1 thread {one:.3} s",
            bundle.file_name().unwrap().to_string_lossy()
        );
        for jobs in [2, 4] {
            let (t, _) = time(jobs);
            print!("; {jobs} threads {t:.3} s ({:.2}x)", one / t);
        }
        println!();
    }
}
