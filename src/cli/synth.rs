//! `synth` and `simulate`: closed-loop runs of a workload model, or of a trace's tasks.

use std::io::IsTerminal;
use std::path::Path;

use super::args::{SimulateArgs, SynthArgs};
use super::inputs::{jobs_or_cpus, machine};
use crate::bundle;
use crate::simulate::{self, RerunOptions};
use crate::synth::steps::{self, SynthError, SynthOptions};
use crate::Error;

/// `simulate`: a captured trace's tasks re-run in closed loop under each policy.
pub(super) fn simulate(args: SimulateArgs) -> Result<(), Error> {
    let path = [args.bundle.clone(), Path::new("traces").join(&args.bundle)]
        .into_iter()
        .find(|p| bundle::is_bundle(p));
    let Some(path) = path else {
        return Err(Error::Usage(format!(
            "{}: not a bundle (no meta.json there nor in traces/); make one with \
             `sisreplay import FILE` or `sisreplay capture`",
            args.bundle.display()
        )));
    };
    let o = RerunOptions {
        bundle: path,
        policies: args.policy.clone(),
        out_dir: args.output.clone(),
        jobs: jobs_or_cpus(args.jobs),
        scheduler: args.scheduler.scheduler(),
        flips_before_trace: args.flips_before_trace.fixed(),
        seed: args.seed,
        newidle_cost: args.newidle_cost,
    };
    let r = simulate::run(&o)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&r).expect("serialises"));
    } else {
        print!("{}", simulate::render(&r));
    }
    Ok(())
}

/// `synth`: a workload model simulated on a machine under each policy and load level.
pub(super) fn synth(args: SynthArgs) -> Result<(), Error> {
    let topology = machine(&args.machine)?;
    // A misspelt workload is said before any step runs.
    crate::synth::build(&args.workload, 1).map_err(SynthError::from)?;
    let cpus = topology.cpus.len() as u32;
    let load_steps = steps::load_steps(args.load.as_deref(), args.threads, cpus)?;
    let single = load_steps.len() == 1 && args.policy.len() == 1;
    let out_dir = (!args.no_bundle).then(|| args.output.clone().unwrap_or_else(|| "traces".into()));
    let machine_name = Path::new(&args.machine)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| args.machine.clone());
    let o = SynthOptions {
        machine_name,
        topology,
        workload: args.workload.clone(),
        steps: load_steps,
        policies: args.policy.clone(),
        duration_ns: args.duration.as_nanos().min(u64::MAX as u128) as u64,
        warmup_ns: args.warmup.as_nanos().min(u64::MAX as u128) as u64,
        out_is_bundle: single && args.output.is_some(),
        seed: args.seed,
        out_dir,
        jobs: jobs_or_cpus(args.jobs),
        progress: std::io::stderr().is_terminal(),
    };
    let results = steps::run(&o)?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&results).expect("serialises")
        );
        return Ok(());
    }
    println!(
        "{} on {} ({} CPUs), {} measured after {} of warmup per step",
        args.workload,
        args.machine,
        cpus,
        humantime(o.duration_ns),
        humantime(o.warmup_ns)
    );
    println!(
        "{:<8} {:>7} {:<12} {:>11} {:>8} {:>9} {:>7} {:>6} {:>7} {:>6}",
        "load",
        "threads",
        "policy",
        "units/s",
        "p50 ns",
        "p99 ns",
        "se_eff%",
        "scan",
        "xLLC%",
        "busy%"
    );
    for r in &results {
        let s = &r.result;
        let scan = s.counters.scanned as f64 / s.counters.search.max(1) as f64;
        let p = &s.placements;
        let cross = p.cross_llc + p.cross_numa;
        println!(
            "{:<8} {:>7} {:<12} {:>11.0} {:>8} {:>9} {:>7.2} {:>6.2} {:>7.2} {:>6.1}",
            r.step.label,
            r.step.threads,
            s.policy.chars().take(12).collect::<String>(),
            s.throughput_per_s,
            s.latency.p50,
            s.latency.p99,
            s.derived.se_eff,
            scan,
            100.0 * cross as f64 / s.wakeups.max(1) as f64,
            s.busy_pct
        );
    }
    let saturated: Vec<String> = (results.iter())
        .filter(|r| r.result.busy_pct >= SATURATED_PCT)
        .map(|r| format!("{} {}", r.step.label, r.result.policy))
        .collect();
    if !saturated.is_empty() {
        let text = format!(
            "Saturated (CPUs busy {SATURATED_PCT:.0} % of the time or more): {}. No idle \
             time is left to find there: throughput is bounded by CPU time, and a policy \
             changes it by the time its searches, migrations and runqueue-lock waits take \
             from the work, and by where tasks pile up when searches collide.",
            saturated.join(", ")
        );
        println!("{}", crate::report::text::fit(&text));
    }
    let written: Vec<(&Path, u64)> = results
        .iter()
        .filter_map(|r| r.bundle.as_deref().map(|b| (b, bundle_bytes(b))))
        .collect();
    if !written.is_empty() {
        let total: u64 = written.iter().map(|(_, n)| n).sum();
        println!("bundles written ({}):", mib(total));
        for (b, n) in &written {
            println!("  {}  {}", b.display(), mib(*n));
        }
    }
    Ok(())
}

/// The bytes of a bundle's files (events, meta, results), as written.
fn bundle_bytes(dir: &Path) -> u64 {
    fn walk(dir: &Path) -> u64 {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return 0;
        };
        entries
            .flatten()
            .map(|e| match e.metadata() {
                Ok(m) if m.is_dir() => walk(&e.path()),
                Ok(m) => m.len(),
                Err(_) => 0,
            })
            .sum()
    }
    walk(dir)
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// A load step whose CPUs are busy this share of the time or more is said to saturate.
const SATURATED_PCT: f64 = 95.0;

/// 100ms, 2s: a duration as the command line takes it.
fn humantime(ns: u64) -> String {
    if ns % 1_000_000_000 == 0 {
        format!("{}s", ns / 1_000_000_000)
    } else {
        format!("{}ms", ns / 1_000_000)
    }
}
