//! Decision replay speed: wakeups/s per policy over the 2-million-event hackbench trace
//! (target/bench-data, made by the read benchmark's script), against reading alone in
//! the same run, so the policies' own cost shows as the difference; then the speed-up of
//! time-sliced replay over 1, 2 and 4 threads.

use std::path::Path;
use std::time::Instant;

use sisreplay::replay::{replay, replay_parallel, ReplayOptions};
use sisreplay::trace;

fn main() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-data/big-v6.dat");
    assert!(
        p.exists(),
        "run `cargo bench --bench read` first: it captures {}",
        p.display()
    );
    let time = |policies: &[&str]| {
        let mut best = f64::MAX;
        let mut wakeups = 0;
        for _ in 0..3 {
            let mut src = trace::open(&p).unwrap();
            let t = Instant::now();
            let r = replay(
                src.as_mut(),
                None,
                ReplayOptions {
                    policies: policies.iter().map(|s| s.parse().unwrap()).collect(),
                    as_kernel: Some(policies[0].to_string()),
                    ..Default::default()
                },
            )
            .unwrap();
            best = best.min(t.elapsed().as_secs_f64());
            wakeups = r.replayed;
        }
        (best, wakeups)
    };
    let read = {
        let t = Instant::now();
        let mut src = trace::open(&p).unwrap();
        let mut b = Vec::new();
        while src.next_batch(&mut b, 4096).unwrap() > 0 {
            b.clear();
        }
        t.elapsed().as_secs_f64()
    };
    let (one, n) = time(&["sis_util"]);
    let all = [
        "sis_util",
        "sis_prop",
        "sis_util_v3",
        "no_limit",
        "cas",
        "sis_util_idle_hint",
    ];
    let (many, _) = time(&all);
    let per_policy = (many - one) / (all.len() - 1) as f64;
    println!("{n} wakeups replayed; reading alone {read:.3} s");
    println!(
        "1 policy:  {one:.3} s  ({:.2} M wakeups/s end to end)",
        n as f64 / one / 1e6
    );
    println!("{} policies: {many:.3} s", all.len());
    println!(
        "each added policy: {:.3} s = {:.2} M wakeups/s per policy per core",
        per_policy,
        n as f64 / per_policy / 1e6
    );
    println!(
        "state + reading share of one-policy time: {:.0}%",
        100.0 * (one - per_policy) / one
    );
    // Time slices on 1, 2 and 4 threads (replay::slices), against 1 in this run.
    let open = || -> Result<Box<dyn trace::EventSource>, sisreplay::replay::ReplayError> {
        Ok(trace::open(&p).map_err(|e| std::io::Error::other(e.to_string()))?)
    };
    let sliced = |jobs: usize| {
        let mut best = f64::MAX;
        for _ in 0..3 {
            let t = Instant::now();
            replay_parallel(
                &open,
                None,
                ReplayOptions {
                    policies: all.iter().map(|s| s.parse().unwrap()).collect(),
                    as_kernel: Some(all[0].to_string()),
                    ..Default::default()
                },
                jobs,
            )
            .unwrap();
            best = best.min(t.elapsed().as_secs_f64());
        }
        best
    };
    let one = sliced(1);
    print!("{} policies in time slices: 1 thread {one:.3} s", all.len());
    for jobs in [2, 4] {
        let t = sliced(jobs);
        print!("; {jobs} threads {t:.3} s ({:.2}x)", one / t);
    }
    println!();
}
