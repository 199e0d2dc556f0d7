//! `sisreplay synth`: one simulation per load step and policy, in parallel, each written
//! as a bundle (events.parquet and meta.json like a capture's, the result in
//! results/sim.json) so every other command reads it.

use std::path::{Path, PathBuf};

use serde::Serialize;

pub use crate::bundle::provenance::LoadStep;
use crate::bundle::provenance::{Provenance, SynthRecord};
use crate::bundle::{self, ImportOptions};
use crate::sim::{Sim, SimOptions, SimResult};
use crate::synth;
use crate::topology::Topology;
use crate::trace::causal::Ordered;
use crate::trace::stream::VecSource;
use crate::trace::SourceInfo;

/// `--load 50%`, `--load 25%..200%` (steps of 25 % of the CPUs, as the seeds' tables) or
/// `--threads N`.
pub fn load_steps(
    load: Option<&str>,
    threads: Option<usize>,
    cpus: u32,
) -> Result<Vec<LoadStep>, SynthError> {
    if let Some(n) = threads {
        if n == 0 {
            return Err(SynthError::NoThreads);
        }
        return Ok(vec![LoadStep {
            label: format!("{n} threads"),
            threads: n,
        }]);
    }
    let text = load.unwrap_or("100%");
    let pct = |s: &str| {
        s.trim()
            .strip_suffix('%')
            .and_then(|v| v.parse::<u32>().ok())
            .filter(|&v| v > 0)
            .ok_or_else(|| SynthError::BadLoad(text.into()))
    };
    let (lo, hi) = match text.split_once("..") {
        Some((a, b)) => (pct(a)?, pct(b)?),
        None => (pct(text)?, pct(text)?),
    };
    if hi < lo {
        return Err(SynthError::BackwardsLoad(text.into()));
    }
    let mut out = Vec::new();
    let mut p = lo;
    while p <= hi {
        out.push(LoadStep {
            label: format!("{p}%"),
            threads: ((cpus as u64 * p as u64).div_ceil(100)).max(1) as usize,
        });
        p += 25;
    }
    Ok(out)
}

/// What `sisreplay synth` runs: one workload on one machine, at each load step under each
/// policy.
pub struct SynthOptions {
    /// The machine's preset name (or `here`), for bundle names and provenance.
    pub machine_name: String,
    /// The simulated machine.
    pub topology: Topology,
    /// A built-in workload's name (see [`synth::WORKLOADS`]).
    pub workload: String,
    /// The load steps, each a thread count.
    pub steps: Vec<LoadStep>,
    /// The policies each step is simulated under.
    pub policies: Vec<crate::policy::PolicySpec>,
    /// Simulated time run before anything is counted (ns).
    pub warmup_ns: u64,
    /// Simulated time measured after the warm-up (ns).
    pub duration_ns: u64,
    /// Bundles go here, one per step and policy; None writes none.
    pub out_dir: Option<PathBuf>,
    /// With one step and one policy, `out_dir` is the bundle itself.
    pub out_is_bundle: bool,
    /// Simulations run at once, one per thread.
    pub jobs: usize,
    /// Seeds the run-time variation of every step and policy alike.
    pub seed: u64,
    /// Say on stderr how many runs there are and as each one ends (for a terminal: a
    /// sweep takes minutes).
    pub progress: bool,
}

/// One simulation: a load step under one policy.
#[derive(Debug, Clone, Serialize)]
pub struct StepResult {
    /// The load step: its label (`50%`, `7 threads`) and thread count.
    pub step: LoadStep,
    /// What the simulation measured (the policy is in it).
    pub result: SimResult,
    /// The bundle written for it; None without an output directory.
    pub bundle: Option<PathBuf>,
}

/// The sched features a kernel running this policy would show, so replay of the bundle
/// takes the simulated policy as the kernel's.
pub fn features_of(policy: &str) -> Option<&'static str> {
    crate::policy::entry(policy).and_then(|e| e.features)
}

/// Why a synth run could not be made or written.
#[derive(Debug, thiserror::Error)]
pub enum SynthError {
    /// `--threads 0`.
    #[error("--threads must be at least 1")]
    NoThreads,
    /// A `--load` that is not `P%` or `A%..B%`.
    #[error("--load {0:?}: expected P% or A%..B%, e.g. 25%..200%")]
    BadLoad(String),
    /// A `--load` range whose end is below its start.
    #[error("--load {0:?}: the range runs backwards")]
    BackwardsLoad(String),
    /// The workload as named cannot be built.
    #[error(transparent)]
    Workload(#[from] synth::WorkloadError),
    /// The simulation cannot be set up (a policy or machine it cannot run).
    #[error(transparent)]
    Sim(#[from] crate::sim::SimError),
    /// The run's bundle cannot be written.
    #[error(transparent)]
    Bundle(#[from] bundle::BundleError),
    /// The run's results file cannot be written.
    #[error(transparent)]
    Write(#[from] crate::atomic::WriteError),
}

fn one(o: &SynthOptions, step: &LoadStep, policy: &str) -> Result<StepResult, SynthError> {
    let mut workload = synth::build(&o.workload, step.threads)?;
    let cpus: Vec<u32> = o.topology.cpus.iter().map(|c| c.cpu).collect();
    synth::add_housekeeping(&mut workload, &cpus);
    let sim = Sim::new(
        workload,
        SimOptions {
            seed: o.seed,
            record: o.out_dir.is_some(),
            ..SimOptions::with_defaults(o.topology.clone(), policy, o.warmup_ns, o.duration_ns)
        },
    )?;
    let (result, events) = sim.run();
    let bundle = match &o.out_dir {
        None => None,
        Some(dir) => {
            let dest = if o.out_is_bundle {
                dir.clone()
            } else {
                dir.join(format!(
                    "synth-{}-{}-{}-{}",
                    o.machine_name,
                    o.workload,
                    step.threads,
                    policy.replace([':', '='], "_")
                ))
            };
            let provenance = Provenance::Synth(SynthRecord {
                machine: o.machine_name.clone(),
                workload: o.workload.clone(),
                load: step.clone(),
                policy: policy.to_string(),
                warmup_ns: o.warmup_ns,
                duration_ns: o.duration_ns,
            });
            write_bundle(&dest, &o.topology, events, provenance, policy, &result)?;
            Some(dest)
        }
    };
    Ok(StepResult {
        step: step.clone(),
        result,
        bundle,
    })
}

/// Writes a simulated run of `policy` as a bundle: its events as a capture's, how it
/// was made as its provenance, the sched features a kernel running the policy would
/// show, and `result` as results/sim.json.
pub fn write_bundle(
    dest: &Path,
    topology: &Topology,
    events: Vec<crate::trace::Event>,
    provenance: Provenance,
    policy: &str,
    result: &impl Serialize,
) -> Result<(), SynthError> {
    let info = SourceInfo {
        format: "sisreplay synth".into(),
        nr_cpus: Some(topology.cpus.iter().map(|c| c.cpu + 1).max().unwrap_or(1)),
        kernel_release: None,
        clock: Some("virtual".into()),
        comms: Default::default(),
        extra: Default::default(),
    };
    // Put in causal order once here, as an import does, so that meta.json records it and
    // every later read of the bundle skips the pass.
    let mut src = Ordered::new(VecSource::new(info, events));
    bundle::write_bundle(
        &mut src,
        dest,
        ImportOptions {
            topology: Some(topology.clone()),
            source_path: Path::new("synth"),
            provenance,
            sched_features: features_of(policy).map(str::to_string),
            progress: None,
        },
    )?;
    let text = serde_json::to_string_pretty(result).expect("serialises");
    crate::atomic::write(&dest.join("results/sim.json"), (text + "\n").as_bytes())?;
    Ok(())
}

/// Runs every (step, policy) pair over `jobs` threads; results in step, then policy
/// order, whatever order they finish in.
pub fn run(o: &SynthOptions) -> Result<Vec<StepResult>, SynthError> {
    let work: Vec<(&LoadStep, &str)> = o
        .steps
        .iter()
        .flat_map(|s| o.policies.iter().map(move |p| (s, p.as_str())))
        .collect();
    if o.progress {
        eprintln!(
            "sisreplay: synth: {} runs ({} load steps x {} policies){}",
            work.len(),
            o.steps.len(),
            o.policies.len(),
            o.out_dir.as_ref().map_or(String::new(), |d| format!(
                ", a bundle each in {}",
                d.display()
            ))
        );
    }
    let started = std::time::Instant::now();
    let done = std::sync::atomic::AtomicUsize::new(0);
    crate::parallel::map(&work, o.jobs, |(step, policy)| {
        let r = one(o, step, policy);
        if o.progress {
            let k = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            eprintln!(
                "sisreplay: synth: {k} of {} done ({}, {policy}) after {:.1} s",
                work.len(),
                step.label,
                started.elapsed().as_secs_f64()
            );
        }
        r
    })
    .into_iter()
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_ranges_step_by_a_quarter_of_the_cpus() {
        let s = load_steps(Some("25%..200%"), None, 224).unwrap();
        let t: Vec<usize> = s.iter().map(|x| x.threads).collect();
        assert_eq!(t, vec![56, 112, 168, 224, 280, 336, 392, 448]);
        assert_eq!(load_steps(Some("50%"), None, 40).unwrap()[0].threads, 20);
        assert_eq!(load_steps(None, Some(7), 40).unwrap()[0].threads, 7);
        assert!(matches!(
            load_steps(Some("200%..25%"), None, 4),
            Err(SynthError::BackwardsLoad(_))
        ));
        assert!(load_steps(Some("lots"), None, 4)
            .unwrap_err()
            .to_string()
            .contains("25%..200%"));
    }
}
