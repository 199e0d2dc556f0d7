//! `replay` and `fidelity`: decision replay of one trace through policies, and of many
//! through their kernels' own policy.

use super::args::{FidelityArgs, FlipsArg, ReplayArgs};
use std::path::{Path, PathBuf};

use super::inputs::default_sample;
use crate::bundle;
use crate::replay::dataset::{self, PartitionedDecisions};
use crate::replay::{self, ReplayOptions};
use crate::Error;

/// `replay`: a trace's wakeups through the policies asked for, with the traced kernel's
/// policy checked against the trace; several traces (or directories of bundles) are a
/// fleet, replayed at once.
pub(super) fn replay(args: ReplayArgs) -> Result<(), Error> {
    let given = if args.inputs.is_empty() {
        vec![default_sample()]
    } else {
        args.inputs.clone()
    };
    let inputs = crate::input::expand(&given)?;
    match inputs.as_slice() {
        [one] if given.as_slice() == inputs.as_slice() => replay_one(&args, one),
        _ => fleet(&args, &inputs),
    }
}

/// The replay settings the arguments give, without outputs.
fn options(args: &ReplayArgs) -> ReplayOptions {
    ReplayOptions {
        policies: args.policy.clone(),
        time: crate::wakeup::sis::TimeModel {
            entry_ns: args.entry_ns,
            probe_ns: args.probe_ns,
        },
        windows: args.windows,
        as_kernel: args.as_kernel.clone(),
        delayed_dequeue_ns: args.delayed_dequeue_ns,
        ..ReplayOptions::default()
    }
}

/// Sets the wakee flips before the trace in `opts`: as given, or fitted to the trace
/// (opened once more for it) on `jobs` threads, or on the pool it runs in; returns the
/// fit.
fn set_flips(
    arg: FlipsArg,
    input: &Path,
    meta: Option<&bundle::Meta>,
    opts: &mut ReplayOptions,
    jobs: Option<usize>,
) -> Result<Option<replay::flips_fit::FlipsFit>, Error> {
    if let Some(n) = arg.fixed() {
        opts.flips_before_trace = n;
        return Ok(None);
    }
    let open = || -> Result<Box<dyn crate::trace::EventSource>, replay::ReplayError> {
        Ok(crate::input::open(input)?.source)
    };
    opts.fit_jobs = jobs;
    replay::flips_fit::fit_into(&open, meta, opts)
        .map(Some)
        .map_err(|e| replay_error(input, e))
}

/// The dataset's name for a trace: its path as given.
fn dataset_key(input: &Path) -> String {
    input.display().to_string()
}

/// With `--out DIR --out-decisions`, the writer of `input`'s decision partitions.
fn dataset_decisions(args: &ReplayArgs, input: &Path) -> Option<replay::DecisionsOut> {
    let (out, format) = (args.out.as_ref()?, args.out_decisions?);
    Some(replay::DecisionsOut::Observer(Box::new(
        PartitionedDecisions::new(out, &dataset_key(input), format),
    )))
}

/// The results of `input`'s replay beside the bundle (for compare, reports and
/// notebooks; a trace file has none) and, with `--out`, in the dataset; where the
/// bundle's went.
fn save(
    args: &ReplayArgs,
    input: &Path,
    meta: Option<&bundle::Meta>,
    r: &replay::ReplayResult,
) -> Result<Option<PathBuf>, Error> {
    let saved = match meta {
        Some(_) => Some(replay::results::write(input, r)?),
        None => None,
    };
    if let Some(out) = &args.out {
        dataset::write(out, &dataset_key(input), r)?;
    }
    Ok(saved)
}

/// A replay's failure, naming the trace unless the error already does.
fn replay_error(input: &Path, e: replay::ReplayError) -> Error {
    match e {
        replay::ReplayError::Trace(e) => e.into(),
        replay::ReplayError::Bundle(e) => e.into(),
        source => Error::ReplayOf {
            path: input.to_path_buf(),
            source,
        },
    }
}

fn replay_one(args: &ReplayArgs, input: &Path) -> Result<(), Error> {
    // Open before creating the decisions file, so a bad trace leaves an old one alone.
    let crate::input::Input {
        source: mut src,
        meta,
    } = crate::input::open(input)?;
    let mut settings = options(args);
    let flips_fit = set_flips(
        args.flips_before_trace,
        input,
        meta.as_ref(),
        &mut settings,
        args.jobs,
    )?;
    let decisions_out = match &args.decisions {
        Some(p) => {
            let f = std::fs::File::create(p).map_err(|source| Error::Create {
                path: p.clone(),
                source,
            })?;
            let out = Box::new(std::io::BufWriter::new(f));
            Some(match p.extension().and_then(|e| e.to_str()) {
                Some("parquet") => replay::DecisionsOut::Parquet(out),
                _ => replay::DecisionsOut::Csv(out),
            })
        }
        None => dataset_decisions(args, input),
    };
    let opts = ReplayOptions {
        decisions: decisions_out,
        explain_ts: args.explain,
        ..settings
    };
    // One exact pass unless slices are asked for: they change a few % of a loaded
    // trace's decisions, and every other command builds on these results.
    let jobs = args.jobs.unwrap_or(1);
    let result = if jobs <= 1 || args.out_decisions.is_some() {
        replay::replay(src.as_mut(), meta.as_ref(), opts)
    } else {
        drop(src);
        let open = || -> Result<Box<dyn crate::trace::EventSource>, replay::ReplayError> {
            Ok(crate::input::open(input)?.source)
        };
        replay::replay_parallel(&open, meta.as_ref(), opts, jobs)
    };
    let mut r = result?;
    r.flips_fit = flips_fit;
    // Saved first either way: the dataset's decisions were written as the replay ran.
    let saved = save(args, input, meta.as_ref(), &r)?;
    if let (Some(ts), true) = (args.explain, r.explained.is_empty()) {
        return Err(no_wakeup_at(ts, input, r.explain_nearest));
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&r).expect("serialises"));
        return Ok(());
    }
    print!("{}", replay::text::summary(input, &r));
    print!("{}", kernel_sis_text(meta.as_ref(), &r));
    if let Some(d) = saved {
        println!(
            "\nresults: {}/replay.json, replay-windows.parquet",
            d.display()
        );
    }
    if let Some(out) = &args.out {
        println!("dataset: {}", out.display());
    }
    Ok(())
}

/// --explain at a time no replayed wakeup has its sched_waking at: the nearest ones
/// before and after it, which the user most likely meant.
fn no_wakeup_at(ts: u64, input: &Path, nearest: (Option<u64>, Option<u64>)) -> Error {
    let near =
        |at: Option<u64>, side: &str| at.map(|t| format!("{t} ({} ns {side})", t.abs_diff(ts)));
    let around: Vec<String> = [near(nearest.0, "before"), near(nearest.1, "after")]
        .into_iter()
        .flatten()
        .collect();
    let hint = match around.is_empty() {
        true => "it replayed no wakeup at all".to_string(),
        false => format!("the nearest are at {}", around.join(" and ")),
    };
    Error::Usage(format!(
        "{}: --explain {ts}: no replayed wakeup has its sched_waking at that time (ns); \
         {hint}; --decisions FILE.csv lists every one",
        input.display()
    ))
}

/// Several traces, each replayed in one pass on its own thread, results beside each
/// bundle and in the dataset; a trace that fails is named and the others go on.
fn fleet(args: &ReplayArgs, inputs: &[PathBuf]) -> Result<(), Error> {
    if args.decisions.is_some() || args.explain.is_some() {
        return Err(Error::Usage(
            "--decisions and --explain are for one trace; with several, write the \
             decisions with --out DIR --out-decisions"
                .into(),
        ));
    }
    let jobs = super::inputs::jobs_or_cpus(args.jobs);
    let outcomes = crate::parallel::map(inputs, jobs, |input| fleet_member(args, input));
    let mut done = Vec::new();
    let mut failed = 0;
    for (input, o) in inputs.iter().zip(outcomes) {
        match o {
            Ok(r) => done.push((input.clone(), r)),
            Err(e) => {
                failed += 1;
                eprintln!("sisreplay: {e}");
            }
        }
    }
    if args.json {
        let v: Vec<_> = done
            .iter()
            .map(|(p, r)| serde_json::json!({ "trace": p, "result": r }))
            .collect();
        println!("{}", serde_json::to_string_pretty(&v).expect("serialises"));
    } else {
        print!("{}", replay::text::fleet(&done));
        if let Some(out) = &args.out {
            println!("\ndataset: {}", out.display());
        }
    }
    match failed {
        0 => Ok(()),
        n => Err(Error::Fleet {
            failed: n,
            of: inputs.len(),
        }),
    }
}

fn fleet_member(args: &ReplayArgs, input: &Path) -> Result<replay::ReplayResult, Error> {
    let crate::input::Input {
        source: mut src,
        meta,
    } = crate::input::open(input)?;
    let mut settings = options(args);
    // Already on a pool of --jobs threads.
    let flips_fit = set_flips(
        args.flips_before_trace,
        input,
        meta.as_ref(),
        &mut settings,
        None,
    )?;
    let opts = ReplayOptions {
        decisions: dataset_decisions(args, input),
        ..settings
    };
    let mut r =
        replay::replay(src.as_mut(), meta.as_ref(), opts).map_err(|e| replay_error(input, e))?;
    r.flips_fit = flips_fit;
    save(args, input, meta.as_ref(), &r)?;
    Ok(r)
}

/// `fidelity`: each trace replayed with the policy of the kernel that recorded it, and
/// how often the model picked the kernel's CPU.
pub(super) fn fidelity(args: FidelityArgs) -> Result<(), Error> {
    let inputs = crate::input::expand(&args.inputs)?;
    let jobs = super::inputs::jobs_or_cpus(args.jobs);
    let outcomes = crate::parallel::map(&inputs, jobs, |input| {
        let crate::input::Input {
            source: mut src,
            meta,
        } = crate::input::open(input)?;
        let mut opts = ReplayOptions {
            policies: Vec::new(),
            as_kernel: args.as_kernel.clone(),
            ..Default::default()
        };
        // Already on a pool of --jobs threads.
        let flips_fit = set_flips(
            args.flips_before_trace,
            input,
            meta.as_ref(),
            &mut opts,
            None,
        )?;
        let mut r = replay::replay(src.as_mut(), meta.as_ref(), opts)
            .map_err(|e| replay_error(input, e))?;
        r.flips_fit = flips_fit;
        let name = input
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        Ok::<_, Error>(((name, r), meta))
    });
    let mut rows = Vec::new();
    let mut metas = Vec::new();
    for o in outcomes {
        let (row, meta) = o?;
        rows.push(row);
        metas.push(meta);
    }
    if args.json {
        let v: Vec<_> = rows
            .iter()
            .zip(&metas)
            .map(|((n, r), meta)| {
                let measured = meta.as_ref().and_then(crate::metrics::kernel_sis::measured);
                serde_json::json!({
                    "trace": n,
                    "kernel_sis": measured,
                    // The seeds' efficiency figures of the kernel's own counts.
                    "kernel_sis_derived": measured.as_ref().map(|m| crate::metrics::Derived::of(&m.counters)),
                    "as_kernel": r.as_kernel,
                    "fidelity": r.policies.iter().find_map(|p| p.fidelity.as_ref()),
                    "flips_before_trace": r.flips_before_trace,
                    "flips_fit": r.flips_fit,
                    "skipped": r.skipped,
                    "search_latency": r.observed.search_latency,
                    "search_fit": r.search_fit,
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&v).expect("serialises"));
    } else {
        print!("{}", crate::report::fidelity::table(&rows));
        for ((name, r), meta) in rows.iter().zip(&metas) {
            let t = kernel_sis_text(meta.as_ref(), r);
            if !t.is_empty() {
                print!("\n{name}:{t}");
            }
        }
    }
    Ok(())
}

/// The kernel's measured SIS counters beside the traced policy's model, when the bundle's
/// kernel exported them (the rig's sis-stats patch); nothing otherwise.
fn kernel_sis_text(meta: Option<&bundle::Meta>, r: &crate::replay::ReplayResult) -> String {
    use crate::metrics::kernel_sis;
    let (Some(m), Some(p)) = (
        meta.and_then(kernel_sis::measured),
        r.policies.iter().find(|p| p.policy == r.as_kernel),
    ) else {
        return String::new();
    };
    format!("\n{}", kernel_sis::text(&m, &p.policy, &p.counters))
}
