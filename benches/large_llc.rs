//! Decision replay on a machine with large LLCs: spr-2s112 (two LLCs of 56 cores x SMT2),
//! netperf TCP_RR at 100 % load simulated for 100 ms and replayed from its bundle. It
//! prints the cost of each policy added to a replay, in wakeups/s per core, as a ratio
//! against the one-policy replay in the same run (state tracking and reading are the
//! one-policy time; what each added policy costs is its select_idle_sibling walk over
//! 112-CPU LLCs).

use std::path::Path;
use std::time::Instant;

use sisreplay::bundle::{self, Bundle, ImportOptions, Meta, Provenance};
use sisreplay::presets;
use sisreplay::replay::{replay, ReplayOptions};
use sisreplay::sim::{Sim, SimOptions};
use sisreplay::synth;
use sisreplay::trace::stream::VecSource;
use sisreplay::trace::SourceInfo;

/// Simulates the load and writes it as a bundle in `dir`.
fn make_bundle(dir: &Path) -> Meta {
    let p = presets::lookup("spr-2s112").unwrap();
    let topology = p.shape.topology(p.name);
    let sim = Sim::new(
        synth::build("netperf-tcp-rr", 224).unwrap(),
        SimOptions {
            record: true,
            ..SimOptions::with_defaults(topology.clone(), "no_limit", 0, 100_000_000)
        },
    )
    .unwrap();
    let (_, events) = sim.run();
    let info = SourceInfo {
        format: "bench".into(),
        nr_cpus: Some(224),
        kernel_release: None,
        clock: None,
        comms: Default::default(),
        extra: Default::default(),
    };
    bundle::write_bundle(
        &mut VecSource::new(info, events),
        dir,
        ImportOptions {
            topology: Some(topology),
            source_path: Path::new("bench"),
            provenance: Provenance::Import,
            sched_features: None,
            progress: None,
        },
    )
    .unwrap()
}

/// Best of three replays with `policies`: (seconds, wakeups replayed).
fn time(dir: &Path, meta: &Meta, policies: &[&str]) -> (f64, u64) {
    let mut best = f64::MAX;
    let mut wakeups = 0;
    for _ in 0..3 {
        let mut src = Bundle::open(dir).unwrap();
        let t = Instant::now();
        let r = replay(
            &mut src,
            Some(meta),
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
}

fn main() {
    let dir = std::env::temp_dir().join(format!("sisreplay-large-llc-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let meta = make_bundle(&dir);
    let (one, n) = time(&dir, &meta, &["no_limit"]);
    let added = ["sis_util", "sis_prop", "cas"];
    let all: Vec<&str> = std::iter::once("no_limit").chain(added).collect();
    let (many, _) = time(&dir, &meta, &all);
    let _ = std::fs::remove_dir_all(&dir);
    let per_policy = (many - one) / added.len() as f64;
    println!("spr-2s112, {} events, {n} wakeups replayed", meta.events);
    println!(
        "1 policy (no_limit): {one:.3} s = {:.2} M wakeups/s end to end",
        n as f64 / one / 1e6
    );
    println!("{} policies: {many:.3} s", all.len());
    println!(
        "each added policy: {:.2} M wakeups/s per core; {:.2}x the one-policy replay's rate",
        n as f64 / per_policy / 1e6,
        one / per_policy
    );
}
