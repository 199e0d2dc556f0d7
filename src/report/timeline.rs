//! Per-CPU busy/idle intervals over a short window of a trace, from its run slices
//! (`crate::derived`): a CPU is busy while anything but the idle task (pid 0) runs on it.

use std::path::Path;

use serde::Serialize;

use crate::bundle::BundleError;
use crate::derived::{Slice, SliceEnd, SliceStart, Slices};

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

/// The busy intervals of a window, built from run slices.
struct Busy {
    start_ns: u64,
    span_ns: u64,
    /// Per CPU: (from, to) ns after `start_ns`.
    cpus: Vec<Vec<(u64, u64)>>,
}

impl Busy {
    /// A slice of a task (not the idle task) that began at a recorded switch, clipped to
    /// the window; one that began before the CPU's first switch is not drawn. A slice
    /// still running at the end of the window runs to its end.
    fn add(&mut self, s: &Slice) {
        let (SliceStart::At(since), true) = (s.start, s.pid != 0) else {
            return;
        };
        let Some(iv) = self.cpus.get_mut(s.cpu as usize) else {
            return;
        };
        let from = since.max(self.start_ns) - self.start_ns;
        if s.end == SliceEnd::TraceEnd {
            iv.push((from, self.span_ns));
        } else if s.end_ns > self.start_ns {
            iv.push((from, s.end_ns - self.start_ns));
        }
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
    let mut busy = Busy {
        start_ns,
        span_ns,
        cpus: vec![Vec::new(); nr_cpus as usize],
    };
    let mut slices = Slices::default();
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
            if let Some(ends) = slices.feed(e) {
                ends.slices().for_each(|s| busy.add(&s));
            }
        }
    }
    slices.finish(end).for_each(|s| busy.add(&s));
    Ok(Timeline {
        start_ns,
        span_ns,
        cpus: busy
            .cpus
            .into_iter()
            .enumerate()
            .map(|(c, iv)| (c as u32, iv))
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The trace of the derived pass's tests (see there) in the window 20..70 ns: CPU 0
    /// is busy with 2 until 25, then idle (4's slice after the missing switch is not
    /// drawn); CPU 1 with 4 until 30, 3 until 50, and 5 past the window's end. Slices
    /// begun before a CPU's first switch (1 and the idle task) are not drawn.
    #[test]
    fn busy_intervals_of_a_window() {
        let (start_ns, span_ns) = (20, 50);
        let mut busy = Busy {
            start_ns,
            span_ns,
            cpus: vec![Vec::new(); 2],
        };
        let mut slices = Slices::default();
        for e in crate::derived::tests::events()
            .iter()
            .take_while(|e| e.ts < start_ns + span_ns)
        {
            if let Some(ends) = slices.feed(e) {
                ends.slices().for_each(|s| busy.add(&s));
            }
        }
        slices.finish(start_ns + span_ns).for_each(|s| busy.add(&s));
        assert_eq!(busy.cpus, [vec![(0, 5)], vec![(0, 10), (10, 30), (30, 50)]]);
    }
}
