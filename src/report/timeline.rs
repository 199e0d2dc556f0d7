//! Per-CPU busy/idle intervals over a short window of a trace, from its run slices
//! (`crate::derived`): a CPU is busy while anything but the idle task (pid 0) runs on it.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use crate::bundle::BundleError;
use crate::derived::{Slice, SliceEnd, SliceStart, Slices};
use crate::topology::Topology;

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

/// One LLC's CPUs over the window: what the busy/idle strip draws for a machine too
/// large for a row per CPU.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LlcBusy {
    /// The LLC's id in the topology.
    pub llc: u32,
    /// Its CPUs.
    pub cpus: usize,
    /// Per equal bin of the window, the share of the LLC's CPU time spent running a task
    /// (0..=1).
    pub shares: Vec<f64>,
}

impl Timeline {
    /// Per LLC of `topo`, in id order, the share of its CPUs busy in each of `bins` equal
    /// parts of the window.
    pub fn llc_busy(&self, topo: &Topology, bins: usize) -> Vec<LlcBusy> {
        let bins = bins.max(1);
        let llc_of: BTreeMap<u32, u32> = topo.cpus.iter().map(|c| (c.cpu, c.llc)).collect();
        let mut out: BTreeMap<u32, LlcBusy> = BTreeMap::new();
        for c in &topo.cpus {
            out.entry(c.llc)
                .or_insert_with(|| LlcBusy {
                    llc: c.llc,
                    cpus: 0,
                    shares: vec![0.0; bins],
                })
                .cpus += 1;
        }
        let bin_ns = self.span_ns.max(1) as f64 / bins as f64;
        for (cpu, busy) in &self.cpus {
            let Some(row) = llc_of.get(cpu).and_then(|l| out.get_mut(l)) else {
                continue;
            };
            // Busy ns in each bin the interval overlaps.
            for &(a, b) in busy {
                let (a, b) = (a as f64, b.min(self.span_ns) as f64);
                let first = (a / bin_ns) as usize;
                let last = ((b / bin_ns).ceil() as usize).min(bins);
                for (k, share) in row.shares.iter_mut().enumerate().take(last).skip(first) {
                    let (lo, hi) = (k as f64 * bin_ns, (k + 1) as f64 * bin_ns);
                    *share += (b.min(hi) - a.max(lo)).max(0.0);
                }
            }
        }
        for row in out.values_mut() {
            let capacity = bin_ns * row.cpus.max(1) as f64;
            row.shares.iter_mut().for_each(|s| *s /= capacity);
        }
        out.into_values().collect()
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
    fn llc_rows_shade_the_share_of_their_cpus_busy() {
        // Two LLCs of two CPUs; over a 100 ns window in 2 bins, CPU 0 runs the first half,
        // CPU 1 all of it, CPU 2 nothing and CPU 3 the last quarter.
        let mut topo = Topology::flat(4);
        for c in &mut topo.cpus {
            c.llc = c.cpu / 2;
        }
        let t = Timeline {
            start_ns: 0,
            span_ns: 100,
            cpus: vec![
                (0, vec![(0, 50)]),
                (1, vec![(0, 100)]),
                (2, vec![]),
                (3, vec![(75, 100)]),
            ],
        };
        let rows = t.llc_busy(&topo, 2);
        assert_eq!(rows.len(), 2);
        assert_eq!((rows[0].llc, rows[0].cpus), (0, 2));
        assert_eq!(rows[0].shares, [1.0, 0.5]);
        assert_eq!(rows[1].shares, [0.0, 0.25]);
    }

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
