//! `capture`: a trace of this machine into a bundle, and how its workload ended.

use super::args::{BackendArg, CaptureArgs};
use crate::bundle;
use crate::capture::{self, Backend, CaptureOptions};
use crate::Error;

/// `capture`: records this machine's scheduler events into a bundle, optionally around
/// a workload.
pub(super) fn capture(args: CaptureArgs) -> Result<(), Error> {
    let CaptureArgs {
        duration,
        output,
        traces,
        backend,
        events,
        buffer_kb,
        trace_clock,
        search_latency,
        json,
        command,
    } = args;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = stop.clone();
    // SIGINT, SIGTERM and SIGHUP end the capture early; the bundle is still written and
    // tracefs restored.
    ctrlc::set_handler(move || flag.store(true, std::sync::atomic::Ordering::Release))?;
    let opts = CaptureOptions {
        duration,
        output,
        traces_dir: traces,
        backend: match backend {
            BackendArg::Tracefs => Backend::Tracefs,
            BackendArg::Perf => Backend::Perf,
        },
        events: events.unwrap_or_else(|| {
            capture::DEFAULT_EVENTS
                .iter()
                .map(|s| s.to_string())
                .collect()
        }),
        buffer_kb,
        trace_clock,
        search_latency,
        command,
        argv: std::env::args().collect(),
        stop,
        watchdog: std::env::current_exe().ok(),
    };
    let (dest, meta) = capture::capture(opts)?;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&meta).expect("serialises")
        );
        return workload_status(&meta);
    }
    let cap = meta.provenance.capture();
    println!("bundle: {}", dest.display());
    println!(
        "{} events in {:.2} s, {} lost",
        meta.events,
        cap.map_or(0.0, |c| c.duration_s),
        meta.lost_total()
    );
    for c in cap.iter().flat_map(|c| &c.cpus) {
        println!(
            "  CPU {:>3}: {:>10} events, {} overrun, {} dropped",
            c.cpu, c.events, c.overrun, c.dropped
        );
    }
    if let Some(w) = cap.and_then(|c| c.workload.as_ref()) {
        let how = match (w.exit_code, w.signal) {
            _ if w.stopped_by_capture => "stopped by capture".to_string(),
            (Some(c), _) => format!("exit {c}"),
            (None, Some(s)) => format!("killed by signal {s}"),
            (None, None) => "ended".into(),
        };
        println!("workload: {how} after {:.2} s", w.wall_s);
    }
    workload_status(&meta)
}

/// A workload that failed on its own (a non-zero exit, or a signal capture did not send)
/// is said on stderr and makes capture exit 1; the bundle is written all the same.
fn workload_status(meta: &bundle::Meta) -> Result<(), Error> {
    let Some(w) = meta.provenance.capture().and_then(|c| c.workload.as_ref()) else {
        return Ok(());
    };
    if w.stopped_by_capture || w.exit_code == Some(0) {
        return Ok(());
    }
    let cmd = &w.command;
    let how = match (w.exit_code, w.signal) {
        (Some(c), _) => format!("exited with status {c}"),
        (None, Some(s)) => format!("was killed by signal {s}"),
        _ => "failed".into(),
    };
    Err(Error::Workload {
        command: cmd.join(" "),
        how,
    })
}
