//! Closed-loop simulation speed: netperf TCP_RR at 200 % load (448 pairs) on spr-2s112,
//! simulated wakeups per second of wall time, against decision replay of the very events
//! the simulation emitted, in the same run (the ratio is what the closed loop costs over
//! the open one); and the memory the recorded events take.

use std::time::Instant;

use sisreplay::presets;
use sisreplay::replay::{replay, ReplayOptions};
use sisreplay::sim::{Sim, SimOptions};
use sisreplay::synth;
use sisreplay::trace::stream::VecSource;
use sisreplay::trace::SourceInfo;

fn peak_rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

fn main() {
    let p = presets::lookup("spr-2s112").unwrap();
    let topology = p.shape.topology(p.name);
    let sim = |record: bool| {
        Sim::new(
            synth::build("netperf-tcp-rr", 448).unwrap(),
            SimOptions {
                record,
                ..SimOptions::with_defaults(topology.clone(), "sis_util", 0, 50_000_000)
            },
        )
        .unwrap()
    };
    let t = Instant::now();
    let (r, _) = sim(false).run();
    let sim_s = t.elapsed().as_secs_f64();
    let rss_before = peak_rss_kb();
    let (_, events) = sim(true).run();
    let n_events = events.len();
    let rss_after = peak_rss_kb();
    // Decision replay reads them back from a bundle, as it would a capture.
    let dir = std::env::temp_dir().join(format!("sisreplay-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut src = VecSource::new(
        SourceInfo {
            format: "bench".into(),
            nr_cpus: Some(224),
            kernel_release: None,
            clock: None,
            comms: Default::default(),
            extra: Default::default(),
        },
        events,
    );
    let meta = sisreplay::bundle::write_bundle(
        &mut src,
        &dir,
        sisreplay::bundle::ImportOptions {
            topology: Some(topology.clone()),
            source_path: std::path::Path::new("bench"),
            provenance: sisreplay::bundle::Provenance::Import,
            sched_features: None,
            progress: None,
        },
    )
    .unwrap();
    // A bundle directory opens as a bundle (trace::open reads single trace files).
    let mut src: Box<dyn sisreplay::trace::EventSource> =
        Box::new(sisreplay::bundle::Bundle::open(&dir).unwrap());
    let t = Instant::now();
    let rr = replay(
        src.as_mut(),
        Some(&meta),
        ReplayOptions {
            policies: vec!["sis_util".parse().unwrap()],
            as_kernel: Some("sis_util".into()),
            ..Default::default()
        },
    )
    .unwrap();
    let replay_s = t.elapsed().as_secs_f64();
    let _ = std::fs::remove_dir_all(&dir);
    let sim_rate = r.wakeups as f64 / sim_s;
    let replay_rate = rr.replayed as f64 / replay_s;
    println!(
        "simulated {} wakeups in {sim_s:.3} s: {:.2} M wakeups/s on one core",
        r.wakeups,
        sim_rate / 1e6
    );
    println!(
        "replay of its {n_events} events: {:.2} M wakeups/s; simulation / replay = {:.2}",
        replay_rate / 1e6,
        sim_rate / replay_rate
    );
    println!(
        "recorded events: peak RSS {} MB -> {} MB, {:.0} bytes per event",
        rss_before / 1024,
        rss_after / 1024,
        (rss_after.saturating_sub(rss_before) * 1024) as f64 / n_events as f64
    );
}
