//! Per-CPU busy/idle intervals over a short window of a trace, from sched_switch: a CPU
//! is busy while anything but the idle task (pid 0) runs on it.

use std::path::Path;

use serde::Serialize;

use crate::bundle::BundleError;
use crate::trace::EventKind;

/// Which CPUs ran something, and when, over a short window of a trace: the report's
/// busy/idle strip.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Timeline {
    /// Where the window starts (ns, trace clock).
    pub start_ns: u64,
    /// The window's length (ns).
    pub span_ns: u64,
    /// Per CPU: busy intervals as (from, to) ns after `start_ns`.
    pub cpus: Vec<(u32, Vec<(u64, u64)>)>,
}

impl Timeline {
    /// Share of the window each CPU was busy, in percent.
    pub fn busy_pct(&self) -> Vec<(u32, f64)> {
        self.cpus
            .iter()
            .map(|(c, iv)| {
                let busy: u64 = iv.iter().map(|(a, b)| b - a).sum();
                (*c, 100.0 * busy as f64 / self.span_ns.max(1) as f64)
            })
            .collect()
    }
}

/// Reads the trace up to the end of the window (not beyond), so a long trace costs
/// only the events before it.
pub fn read(
    path: &Path,
    start_ns: u64,
    span_ns: u64,
    nr_cpus: u32,
) -> Result<Timeline, BundleError> {
    let mut src = crate::input::open(path)?.source;
    let end = start_ns.saturating_add(span_ns);
    let n = nr_cpus as usize;
    // Per CPU: whether busy, and since when (clipped to the window).
    let mut busy_since: Vec<Option<u64>> = vec![None; n];
    let mut cpus: Vec<Vec<(u64, u64)>> = vec![Vec::new(); n];
    let mut batch = Vec::with_capacity(4096);
    'read: loop {
        batch.clear();
        if src.next_batch(&mut batch, 4096)? == 0 {
            break;
        }
        for e in &batch {
            if e.ts >= end {
                break 'read;
            }
            let EventKind::Switch { next_pid, .. } = &e.kind else {
                continue;
            };
            let c = e.cpu as usize;
            if c >= n {
                continue;
            }
            let t = e.ts.max(start_ns);
            if let Some(since) = busy_since[c].take() {
                if e.ts > start_ns {
                    cpus[c].push((since - start_ns, t - start_ns));
                }
            }
            if *next_pid != 0 {
                busy_since[c] = Some(t);
            }
        }
    }
    for (c, since) in busy_since.iter().enumerate() {
        if let Some(s) = since {
            cpus[c].push((s.saturating_sub(start_ns), span_ns));
        }
    }
    Ok(Timeline {
        start_ns,
        span_ns,
        cpus: cpus
            .into_iter()
            .enumerate()
            .map(|(c, iv)| (c as u32, iv))
            .collect(),
    })
}
