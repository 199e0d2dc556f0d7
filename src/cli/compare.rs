//! `compare` and `report`: the arms named on the command line, measured over the row
//! traces.

use std::path::{Path, PathBuf};

use super::args::{CompareArgs, ReportArgs, ReportFormat};
use super::inputs::default_sample;
use crate::{compare, report, Error};

/// Wakeups per window below which a window's value is mostly chance.
const MIN_WAKEUPS_PER_WINDOW: u64 = 50;

/// Warns when a trace has too few wakeups for the windows asked for: their spread, and
/// every test over it, is then noise.
fn warn_thin_windows(c: &crate::compare::Comparison) {
    for t in &c.traces {
        let w = t.observed.wakeups;
        if w < MIN_WAKEUPS_PER_WINDOW * c.windows as u64 {
            eprintln!(
                "sisreplay: warning: {} has {w} replayed wakeups for {} windows (under {} each): the variation and the tests are unreliable; use --windows {} or fewer",
                t.trace,
                c.windows,
                MIN_WAKEUPS_PER_WINDOW,
                (w / MIN_WAKEUPS_PER_WINDOW).max(2)
            );
        }
    }
}

/// The arms and row traces of `compare` and `report`. When no trace is named, it says
/// which it replays, so a later run that analyses another one (after an import made a
/// newer bundle) is not a surprise.
fn resolve_arms(
    base: String,
    others: Vec<String>,
    traces: Vec<PathBuf>,
    traces_dir: &Path,
    windows: u32,
) -> Result<(Vec<compare::Arm>, Vec<Vec<PathBuf>>), Error> {
    if windows < 2 {
        return Err(Error::Usage(
            "--windows must be at least 2 to measure variation".into(),
        ));
    }
    let arms: Vec<String> = std::iter::once(base).chain(others).collect();
    let named = !traces.is_empty();
    // A directory of bundles is a row per bundle; a comma list stays one row of runs.
    let mut rows = Vec::new();
    for t in traces {
        if t.to_string_lossy().contains(',') {
            rows.push(t);
        } else {
            rows.extend(crate::input::expand(&[t])?);
        }
    }
    let traces = rows;
    let sample = default_sample();
    let (resolved, traces) =
        crate::compare::resolve(&arms, traces, traces_dir, &sample.to_string_lossy())?;
    if !named {
        for t in traces.iter().flatten() {
            eprintln!("sisreplay: no --trace given: replaying {}", t.display());
        }
    }
    Ok((resolved, traces))
}

/// `compare`: the arms' metrics over the row traces, in the seeds' table layout.
pub(super) fn compare(args: CompareArgs) -> Result<(), Error> {
    let CompareArgs {
        base,
        others,
        traces,
        windows,
        traces_dir,
        json,
        flips_before_trace,
    } = args;
    let (resolved, traces) = resolve_arms(base, others, traces, &traces_dir, windows)?;
    let c = compare::compare(&resolved, &traces, windows, flips_before_trace.fixed())?;
    warn_thin_windows(&c);
    if json {
        println!("{}", serde_json::to_string_pretty(&c).expect("serialises"));
    } else {
        print!("{}", compare::text::render(&c));
    }
    Ok(())
}

/// `report`: a comparison for patch review as HTML, text or JSON, written whole or not
/// at all.
pub(super) fn report(args: ReportArgs) -> Result<(), Error> {
    let ReportArgs {
        base,
        others,
        traces,
        output,
        format,
        windows,
        timeline,
        traces_dir,
        flips_before_trace,
    } = args;
    let arms: Vec<String> = std::iter::once(base.clone())
        .chain(others.clone())
        .collect();
    let traces_implicit = traces.is_empty();
    let (resolved, traces) = resolve_arms(base, others, traces, &traces_dir, windows)?;
    let opts = report::ReportOptions {
        windows,
        timeline_ns: timeline.as_nanos().min(u64::MAX as u128) as u64,
        command_line: std::env::args().collect(),
        traces_implicit,
        flips_before_trace: flips_before_trace.fixed(),
    };
    let r = report::build(&resolved, &traces, &opts)?;
    warn_thin_windows(&r.comparison);
    let text = match format {
        ReportFormat::Html => report::html::render(&r),
        ReportFormat::Text => report::text::render(&r),
        ReportFormat::Json => serde_json::to_string_pretty(&r).expect("serialises") + "\n",
    };
    let file_name = || {
        let name: Vec<String> = arms
            .iter()
            .map(|a| a.replace(['/', ':', '='], "_"))
            .collect();
        let ext = match format {
            ReportFormat::Html => "html",
            ReportFormat::Text => "txt",
            ReportFormat::Json => "json",
        };
        format!("{}.{ext}", name.join("-vs-"))
    };
    let output = match output {
        // A directory (existing, or written with a trailing slash) gets the default name.
        Some(dir) if dir.is_dir() || dir.as_os_str().to_string_lossy().ends_with('/') => {
            Some(dir.join(file_name()))
        }
        Some(file) => Some(file),
        None => (format == ReportFormat::Html).then(|| PathBuf::from("reports").join(file_name())),
    };
    match output {
        Some(path) => {
            crate::atomic::write(&path, text.as_bytes())?;
            println!("{}", path.display());
        }
        None => print!("{text}"),
    }
    Ok(())
}
