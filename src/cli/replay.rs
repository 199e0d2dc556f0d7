//! `replay` and `fidelity`: decision replay of one trace through policies, and of many
//! through their kernels' own policy.

use super::args::{FidelityArgs, ReplayArgs};
use super::inputs::default_input;
use crate::bundle;
use crate::replay::{self, ReplayOptions};
use crate::Error;

/// `replay`: a trace's wakeups through the policies asked for, with the traced kernel's
/// policy checked against the trace.
pub(super) fn replay(args: ReplayArgs) -> Result<(), Error> {
    let ReplayArgs {
        input,
        policy,
        as_kernel,
        decisions,
        explain,
        probe_ns,
        entry_ns,
        windows,
        delayed_dequeue_ns,
        jobs,
        json,
    } = args;
    let input = default_input(input);
    // Open before creating the decisions file, so a bad trace leaves an old one alone.
    let crate::input::Input {
        source: mut src,
        meta,
    } = crate::input::open(&input)?;
    let decisions_out = match &decisions {
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
        None => None,
    };
    let opts = ReplayOptions {
        policies: policy,
        time: crate::wakeup::sis::TimeModel { entry_ns, probe_ns },
        windows,
        as_kernel,
        decisions: decisions_out,
        explain_ts: explain,
        delayed_dequeue_ns,
        ..ReplayOptions::default()
    };
    // One exact pass unless slices are asked for: they change a few % of a loaded
    // trace's decisions, and every other command builds on these results.
    let jobs = jobs.unwrap_or(1);
    let result = if jobs <= 1 {
        replay::replay(src.as_mut(), meta.as_ref(), opts)
    } else {
        drop(src);
        let open = || -> Result<Box<dyn crate::trace::EventSource>, replay::ReplayError> {
            Ok(crate::input::open(&input)?.source)
        };
        replay::replay_parallel(&open, meta.as_ref(), opts, jobs)
    };
    let r = result?;
    // Results of a bundle go beside it, for compare, reports and notebooks.
    let saved = match meta {
        Some(_) => Some(replay::results::write(&input, &r)?),
        None => None,
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&r).expect("serialises"));
        return Ok(());
    }
    print!("{}", replay::text::summary(&input, &r));
    print!("{}", kernel_sis_text(meta.as_ref(), &r));
    if let (Some(ts), true) = (explain, r.explained.is_empty()) {
        println!("\nno replayed wakeup at {ts} ns; --decisions FILE.csv lists their timestamps");
    }
    if let Some(d) = saved {
        println!(
            "\nresults: {}/replay.json, replay-windows.parquet",
            d.display()
        );
    }
    Ok(())
}

/// `fidelity`: each trace replayed with the policy of the kernel that recorded it, and
/// how often the model picked the kernel's CPU.
pub(super) fn fidelity(args: FidelityArgs) -> Result<(), Error> {
    let mut rows = Vec::new();
    let mut metas = Vec::new();
    for input in &args.inputs {
        let crate::input::Input {
            source: mut src,
            meta,
        } = crate::input::open(input)?;
        let opts = ReplayOptions {
            policies: Vec::new(),
            as_kernel: args.as_kernel.clone(),
            ..Default::default()
        };
        let r = replay::replay(src.as_mut(), meta.as_ref(), opts);
        metas.push(meta);
        match r {
            Ok(r) => rows.push((
                input
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                r,
            )),
            // Errors of reading already name the file.
            Err(replay::ReplayError::Trace(e)) => return Err(e.into()),
            Err(replay::ReplayError::Bundle(e)) => return Err(e.into()),
            Err(source) => {
                return Err(Error::ReplayOf {
                    path: input.clone(),
                    source,
                })
            }
        }
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
