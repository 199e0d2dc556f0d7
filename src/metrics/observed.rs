//! What a trace shows by itself, whatever any model says: where the kernel placed each
//! wakee, how often tasks migrated and how far, and how long a woken task waited from
//! sched_waking until it ran. This is the "observed" arm of a comparison between two
//! captures (one with a feature on, one with it off).

use serde::{Deserialize, Serialize};

use super::windows::{self, Slot};
use super::{Log2Hist, Placements, Window};
use crate::state::Topo;

/// Percentiles of a set of durations, in the samples' unit (ns wherever used).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct Percentiles {
    /// Median (nearest rank); 0 with no samples.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p99_9: u64,
    /// The largest sample.
    pub max: u64,
}

impl Percentiles {
    /// Nearest-rank percentiles of `v` (sorted in place).
    pub fn of(v: &mut [u32]) -> Percentiles {
        if v.is_empty() {
            return Percentiles::default();
        }
        v.sort_unstable();
        let rank = |q: f64| {
            let i = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
            v[i] as u64
        };
        Percentiles {
            p50: rank(0.50),
            p90: rank(0.90),
            p99: rank(0.99),
            p99_9: rank(0.999),
            max: v[v.len() - 1] as u64,
        }
    }
}

/// How many tasks and wakeups the per-task and worst-wakeup lists keep.
pub const TOP: usize = 20;

/// One task's waking-to-running latency.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct TaskLatency {
    /// The task.
    pub pid: i32,
    /// Its wakeups whose wait was measured.
    pub wakeups: u64,
    /// Their waits summed (ns).
    pub total_ns: u64,
    /// The longest wait (ns).
    pub max_ns: u64,
    /// The sched_waking of the longest wait.
    pub max_at_ns: u64,
}

/// One long wait: the wakee, its sched_waking, and how long until it ran.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct WorstWakeup {
    /// The wakee.
    pub pid: i32,
    /// Timestamp of its sched_waking (ns, trace clock).
    pub waking_ns: u64,
    /// From that sched_waking to the sched_switch that ran it (ns).
    pub latency_ns: u64,
}

/// What the trace recorded over a replay, policy-independent: the kernel's placements,
/// migrations and wakeup latencies, overall and per time window.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Observed {
    /// Wakeups that went through select_task_rq (the ones replayed).
    pub wakeups: u64,
    /// Where the kernel put them, relative to prev.
    pub placements: Placements,
    /// Every sched_migrate_task, by distance: wakeup placements and load balancing alike.
    pub migrations: Placements,
    /// Waking→running latency of those wakeups, µs in log2 buckets.
    pub latency_us: Log2Hist,
    /// The same latencies' percentiles, ns.
    pub latency: Percentiles,
    /// Wakeups whose task did not run again before the trace ended.
    pub never_ran: u64,
    /// Wakeups followed by another of the same task before a switch to it was seen (the
    /// switch is missing from the trace): no latency is measured for the first.
    pub rewoken: u64,
    /// Per time window: wakeups, placements and latencies, for run-to-run variation.
    pub windows: Vec<Window>,
    /// Measured select_task_rq_fair durations (the `--search-latency` probes), µs in
    /// log2 buckets; empty when the trace has no probes.
    pub search_latency_us: Log2Hist,
    /// Their percentiles, ns; all 0 when the trace has no probes.
    pub search_latency: Percentiles,
    /// The same durations in ns log2 buckets: on a small LLC every search takes under
    /// 2 µs, which the µs buckets cannot tell apart. Left out of the replay's JSON, which
    /// keeps its form; the report's JSON carries it.
    #[serde(skip)]
    pub search_latency_ns: Log2Hist,
    /// Measured select_idle_cpu calls (its own probes, on kernels that keep it out of
    /// line); absent from the JSON when the trace has none.
    #[serde(skip_serializing_if = "IdleScans::is_empty")]
    pub idle_scans: IdleScans,
    /// Their durations in ns log2 buckets.
    #[serde(skip)]
    pub idle_scan_ns: Log2Hist,
    /// Per task: its wakeups' latency, as `perf sched latency` lists them, the tasks with
    /// the longest single wait first (at most [`TOP`]).
    pub per_task: Vec<TaskLatency>,
    /// The longest waits, longest first (at most [`TOP`]): each names its sched_waking,
    /// which `replay --explain` takes.
    pub worst: Vec<WorstWakeup>,
    #[serde(skip)]
    by_task: std::collections::HashMap<i32, TaskLatency>,
    #[serde(skip)]
    pub(crate) latencies_ns: Vec<u32>,
    #[serde(skip)]
    pub(crate) search_ns: Vec<u32>,
    #[serde(skip)]
    pub(crate) idle_scan_samples: Vec<u32>,
}

/// The kernel's own LLC scans, as the select_idle_cpu probes timed them.
#[derive(Debug, Clone, Default, Serialize)]
pub struct IdleScans {
    /// select_idle_cpu calls with both an entry and a return seen.
    pub scans: u64,
    /// Of those, the ones that returned an idle CPU.
    pub found: u64,
    /// Their durations' percentiles (ns).
    pub ns: Percentiles,
}

impl IdleScans {
    /// No scan was timed.
    pub fn is_empty(&self) -> bool {
        self.scans == 0
    }
}

impl Observed {
    /// A replayed wakeup the kernel placed on `chosen`.
    pub fn note_wakeup(&mut self, topo: &Topo, prev: u32, chosen: u32, slot: Slot) {
        self.wakeups += 1;
        self.placements.count(topo, prev, chosen);
        let wd = windows::window_at(&mut self.windows, slot);
        wd.wakeups += 1;
        wd.cross_llc += !topo.share_cache(chosen, prev) as u64;
        wd.moved += (chosen != prev) as u64;
    }

    /// Task `pid`, woken at `waking_ns`, ran `ns` later, in window `slot`.
    pub fn note_latency_at(&mut self, pid: i32, waking_ns: u64, ns: u64, slot: Slot) {
        self.note_latency(ns);
        let t = self.by_task.entry(pid).or_insert(TaskLatency {
            pid,
            ..TaskLatency::default()
        });
        t.wakeups += 1;
        t.total_ns += ns;
        if ns > t.max_ns {
            (t.max_ns, t.max_at_ns) = (ns, waking_ns);
        }
        // Kept sorted, longest first; a wait shorter than all of a full list is dropped.
        if self.worst.len() < TOP || self.worst.last().is_some_and(|w| ns > w.latency_ns) {
            let at = self.worst.partition_point(|w| w.latency_ns >= ns);
            self.worst.insert(
                at,
                WorstWakeup {
                    pid,
                    waking_ns,
                    latency_ns: ns,
                },
            );
            self.worst.truncate(TOP);
        }
        let wd = windows::window_at(&mut self.windows, slot);
        wd.latency_ns += ns;
        wd.latencies += 1;
    }

    /// One waking→running latency (ns), counted in the totals only.
    pub fn note_latency(&mut self, ns: u64) {
        self.latency_us.add(ns / 1000);
        self.latencies_ns.push(ns.min(u32::MAX as u64) as u32);
    }

    /// One measured select_task_rq_fair duration (ns).
    pub fn note_search(&mut self, ns: u64) {
        self.search_latency_us.add(ns / 1000);
        self.search_latency_ns.add(ns);
        self.search_ns.push(ns.min(u32::MAX as u64) as u32);
    }

    /// One select_idle_cpu call the probes timed (ns), and whether it found an idle CPU.
    pub fn note_idle_scan(&mut self, ns: u64, found: bool) {
        self.idle_scans.scans += 1;
        self.idle_scans.found += found as u64;
        self.idle_scan_ns.add(ns);
        self.idle_scan_samples.push(ns.min(u32::MAX as u64) as u32);
    }

    /// Adds what a later stretch of the same trace showed, all but the windows (see
    /// replay::slices, which merges those in time order) and `never_ran` (the last
    /// stretch's).
    pub fn merge(&mut self, later: Observed) {
        self.wakeups += later.wakeups;
        self.placements.merge(&later.placements);
        self.migrations.merge(&later.migrations);
        self.latency_us.merge(&later.latency_us);
        self.rewoken += later.rewoken;
        self.search_latency_us.merge(&later.search_latency_us);
        self.search_latency_ns.merge(&later.search_latency_ns);
        self.latencies_ns.extend(later.latencies_ns);
        self.search_ns.extend(later.search_ns);
        self.idle_scans.scans += later.idle_scans.scans;
        self.idle_scans.found += later.idle_scans.found;
        self.idle_scan_ns.merge(&later.idle_scan_ns);
        self.idle_scan_samples.extend(later.idle_scan_samples);
        for (pid, t) in later.by_task {
            let e = self.by_task.entry(pid).or_insert(TaskLatency {
                pid,
                ..TaskLatency::default()
            });
            e.wakeups += t.wakeups;
            e.total_ns += t.total_ns;
            // The earlier of equal longest waits, as one pass keeps.
            if t.max_ns > e.max_ns {
                (e.max_ns, e.max_at_ns) = (t.max_ns, t.max_at_ns);
            }
        }
        // Longest first, the earlier of equal waits first, as one pass keeps them.
        for w in later.worst {
            if self.worst.len() < TOP
                || self
                    .worst
                    .last()
                    .is_some_and(|l| w.latency_ns > l.latency_ns)
            {
                let at = self.worst.partition_point(|o| o.latency_ns >= w.latency_ns);
                self.worst.insert(at, w);
                self.worst.truncate(TOP);
            }
        }
    }

    /// Computes the percentiles once the trace is read, `pending` wakeups never having
    /// run, and regroups the windows into `n`.
    pub fn finish(&mut self, pending: u64, n: usize) {
        self.windows = windows::regroup(std::mem::take(&mut self.windows), n);
        self.never_ran = pending;
        self.latency = Percentiles::of(&mut self.latencies_ns);
        self.latencies_ns = Vec::new();
        self.search_latency = Percentiles::of(&mut self.search_ns);
        self.search_ns = Vec::new();
        self.idle_scans.ns = Percentiles::of(&mut self.idle_scan_samples);
        self.idle_scan_samples = Vec::new();
        let mut tasks: Vec<TaskLatency> = std::mem::take(&mut self.by_task).into_values().collect();
        tasks.sort_by_key(|t| (std::cmp::Reverse(t.max_ns), t.pid));
        tasks.truncate(TOP);
        self.per_task = tasks;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        // 1..=1000 µs: p50 is the 500th value, p99.9 the 999th.
        let mut v: Vec<u32> = (1..=1000).rev().map(|i| i * 1000).collect();
        let p = Percentiles::of(&mut v);
        assert_eq!(
            (p.p50, p.p90, p.p99, p.p99_9, p.max),
            (500_000, 900_000, 990_000, 999_000, 1_000_000)
        );
        assert_eq!(Percentiles::of(&mut []), Percentiles::default());
        assert_eq!(Percentiles::of(&mut [7]).p50, 7);
    }

    #[test]
    fn per_task_latency_and_the_longest_waits() {
        let slot = Slot {
            index: 0,
            start_ns: 0,
        };
        let mut o = Observed::default();
        // Task 7 waits 5, 30 and 10 us; task 8 waits 20 us; then 25 more short waits.
        for (pid, at, ns) in [
            (7, 100, 5_000),
            (7, 200, 30_000),
            (8, 300, 20_000),
            (7, 400, 10_000),
        ] {
            o.note_latency_at(pid, at, ns, slot);
        }
        for i in 0..25 {
            o.note_latency_at(9, 1_000 + i, 1_000 + i, slot);
        }
        o.finish(0, 1);
        assert_eq!(
            o.per_task[0],
            TaskLatency {
                pid: 7,
                wakeups: 3,
                total_ns: 45_000,
                max_ns: 30_000,
                max_at_ns: 200
            }
        );
        assert_eq!((o.per_task[1].pid, o.per_task[1].max_ns), (8, 20_000));
        assert_eq!((o.per_task[2].pid, o.per_task[2].wakeups), (9, 25));
        assert_eq!(o.worst.len(), TOP);
        let lat: Vec<u64> = o.worst.iter().take(4).map(|w| w.latency_ns).collect();
        assert_eq!(lat, [30_000, 20_000, 10_000, 5_000]);
        assert_eq!(o.worst[0].waking_ns, 200);
        // The shortest waits fell off the end: the last kept is the 16th longest.
        assert_eq!(o.worst[TOP - 1].latency_ns, 1_000 + 25 - (TOP as u64 - 4));
    }
}
