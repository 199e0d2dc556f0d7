//! `sisreplay info`: what a trace holds, in one pass over its events.

mod columnar;

pub use columnar::summarise_columns;

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use crate::bundle::{is_bundle, losses, read_meta, BundleError, CpuLoss, Tally};
use crate::derived::{Derived, Pass, Slice, SliceStart};
use crate::pid_table::PidTable;
use crate::trace::causal::{CausalCheck, TieStats};
use crate::trace::{EventKind, EventSource, ReadStats, Result, SourceInfo};

/// One task's time on CPU in the trace.
#[derive(Debug, Serialize)]
pub struct TaskRuntime {
    /// Its pid; never 0 (the idle task is not counted).
    pub pid: i32,
    /// Its latest name in the events (or the source's comm table); `<...>` when unknown.
    pub comm: String,
    /// Time on CPU between sched_switch-in and -out, within the trace.
    pub runtime_ns: u64,
    /// How often sched_switch put it on a CPU.
    pub switches_in: u64,
}

/// What a trace holds: its source, its span, its events by type, its losses and its
/// busiest tasks.
#[derive(Debug, Serialize)]
pub struct Summary {
    /// The trace's format as its reader names it.
    pub format: String,
    /// uname -r of the traced kernel, when the source records it.
    pub kernel_release: Option<String>,
    /// The trace clock, when the source records it.
    pub clock: Option<String>,
    /// CPUs: the source's count or one past the highest CPU an event names, whichever
    /// is more.
    pub nr_cpus: u32,
    /// Events read (sched events the model knows; others are in `unknown_events`).
    pub events: u64,
    /// Timestamp of the first event (ns, trace clock); None for an empty trace.
    pub first_ts_ns: Option<u64>,
    /// Timestamp of the last event (ns, trace clock); None for an empty trace.
    pub last_ts_ns: Option<u64>,
    /// From the first event to the last (ns).
    pub duration_ns: u64,
    /// Events by type name, types with none left out.
    pub counts: BTreeMap<String, u64>,
    /// sched_wakeup plus sched_wakeup_new.
    pub wakeups: u64,
    /// sched_migrate_task between a task's sched_waking and its sched_wakeup.
    pub wakeup_migrations: u64,
    /// All other sched_migrate_task (load balance, affinity, exec).
    pub other_migrations: u64,
    /// Per CPU: events the tracer reported lost, and the windows they fell in.
    pub lost: BTreeMap<u32, CpuLoss>,
    /// Per CPU: switches that do not continue the previous one (see bundle::Meta).
    pub switch_gaps: BTreeMap<u32, u64>,
    /// What putting equal-timestamp groups in causal order did when the trace was read
    /// (or imported, for a bundle); None where it was not done.
    pub ties: Option<TieStats>,
    /// Events, as read, that break the order the kernel gives a task's own events
    /// (switch-out → migrate → wakeup → switch-in; a waking names the task's CPU).
    pub causal_disorder: u64,
    /// Groups of events sharing one timestamp on more than one CPU, as read.
    pub tie_groups: u64,
    /// Events outside the model, by `system:name`, skipped.
    pub unknown_events: BTreeMap<String, u64>,
    /// The tasks with the most CPU time, most first (ties by pid), at most `top` of them.
    pub top_tasks: Vec<TaskRuntime>,
}

/// Per task: time on CPU and switches in, from its run slices.
#[derive(Default)]
struct Runtimes(PidTable<(u64, u64)>);

impl Runtimes {
    /// A slice that began at a recorded switch counts as one switch in; its time counts
    /// when its end was recorded too. A CPU's first slice, begun before the trace, counts
    /// for neither.
    #[inline]
    fn add(&mut self, s: &Slice) {
        if s.pid == 0 || !matches!(s.start, SliceStart::At(_)) {
            return;
        }
        let r = self.0.get_mut(s.pid);
        r.0 += s.recorded_ns().unwrap_or(0);
        r.1 += 1;
    }

    /// The `top` tasks with the most time on CPU, most first (ties by pid), named by
    /// `comm`.
    fn top(&self, top: usize, comm: impl Fn(i32) -> Option<String>) -> Vec<TaskRuntime> {
        let mut tasks: Vec<(i32, (u64, u64))> = self.0.iter().collect();
        tasks.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then(a.0.cmp(&b.0)));
        tasks.truncate(top);
        tasks
            .into_iter()
            .map(|(pid, (rt, n))| TaskRuntime {
                pid,
                comm: comm(pid).unwrap_or_else(|| "<...>".into()),
                runtime_ns: rt,
                switches_in: n,
            })
            .collect()
    }
}

/// What a pass over the events counted, whichever way it read them.
struct Counted {
    events: u64,
    first_ts: Option<u64>,
    last_ts: Option<u64>,
    max_cpu: Option<u32>,
    counts: BTreeMap<String, u64>,
    wakeups: u64,
    wakeup_migrations: u64,
    other_migrations: u64,
    switch_gaps: BTreeMap<u32, u64>,
    causal: CausalCheck,
    top_tasks: Vec<TaskRuntime>,
}

impl Counted {
    fn summary(self, info: SourceInfo, stats: ReadStats) -> Summary {
        let seen = self.max_cpu.map_or(0, |m| m + 1);
        Summary {
            format: info.format,
            kernel_release: info.kernel_release,
            clock: info.clock,
            nr_cpus: info.nr_cpus.unwrap_or(seen).max(seen),
            events: self.events,
            first_ts_ns: self.first_ts,
            last_ts_ns: self.last_ts,
            duration_ns: match (self.first_ts, self.last_ts) {
                (Some(a), Some(b)) => b - a,
                _ => 0,
            },
            counts: self.counts,
            wakeups: self.wakeups,
            wakeup_migrations: self.wakeup_migrations,
            other_migrations: self.other_migrations,
            lost: losses(&stats),
            switch_gaps: self.switch_gaps,
            ties: stats.ties,
            causal_disorder: self.causal.inconsistent,
            tie_groups: self.causal.tie_groups,
            unknown_events: stats.unknown,
            top_tasks: self.top_tasks,
        }
    }
}

/// Summarises the bundle or trace at `path`, listing the `top` tasks by CPU time: a
/// bundle by its columns ([`summarise_columns`]), a trace file (or a bundle imported
/// before equal timestamps were put in causal order, which reading re-orders) by its
/// events.
pub fn summarise_path(path: &Path, top: usize) -> std::result::Result<Summary, BundleError> {
    if is_bundle(path) {
        let meta = read_meta(path)?;
        if meta.ties.is_some() {
            return Ok(summarise_columns(path, &meta, top)?);
        }
    }
    let mut input = crate::input::open(path)?;
    Ok(summarise(input.source.as_mut(), top)?)
}

/// Reads the whole source once and summarises it, listing the `top` tasks by CPU time.
pub fn summarise(src: &mut dyn EventSource, top: usize) -> Result<Summary> {
    let mut tally = Tally::default();
    let mut pass = Pass::default();
    let mut runtime = Runtimes::default();
    let (mut wakeups, mut wmig, mut omig) = (0u64, 0u64, 0u64);
    let mut causal = CausalCheck::default();
    let mut batch = Vec::with_capacity(1 << 14);
    loop {
        batch.clear();
        if src.next_batch(&mut batch, 1 << 14)? == 0 {
            break;
        }
        for e in &batch {
            tally.add(e);
            causal.add(e);
            if let EventKind::Wakeup(_) | EventKind::WakeupNew(_) = &e.kind {
                wakeups += 1;
            }
            pass.feed(e, |d| match d {
                Derived::Slice(s) => runtime.add(&s),
                Derived::Migration(m) if m.at_wakeup => wmig += 1,
                Derived::Migration(_) => omig += 1,
                Derived::Latency(_) => {}
            });
        }
    }
    // Tasks still running at the end ran until the last event.
    if let Some(end) = tally.last_ts {
        pass.finish(end, |d| {
            if let Derived::Slice(s) = d {
                runtime.add(&s)
            }
        });
    }
    let info = src.info().clone();
    let top_tasks = runtime.top(top, |pid| {
        tally
            .tasks
            .get(&pid)
            .or_else(|| info.comms.get(&pid))
            .cloned()
    });
    Ok(Counted {
        events: tally.events,
        first_ts: tally.first_ts,
        last_ts: tally.last_ts,
        max_cpu: tally.max_cpu,
        counts: tally.counts_by_type(),
        wakeups,
        wakeup_migrations: wmig,
        other_migrations: omig,
        switch_gaps: tally.switch_gaps.clone(),
        causal,
        top_tasks,
    }
    .summary(info, src.stats()))
}

impl Summary {
    /// The summary as a person reads it, within 80 columns.
    pub fn to_text(&self) -> String {
        use std::fmt::Write;
        let mut o = String::new();
        let secs = self.duration_ns as f64 / 1e9;
        let _ = writeln!(o, "format     {}", self.format);
        let _ = writeln!(
            o,
            "kernel     {}",
            self.kernel_release.as_deref().unwrap_or("not recorded")
        );
        let _ = writeln!(
            o,
            "clock      {}",
            self.clock.as_deref().unwrap_or("not recorded")
        );
        let _ = writeln!(o, "CPUs       {}", self.nr_cpus);
        let _ = writeln!(o, "duration   {secs:.6} s");
        let _ = writeln!(o, "events     {}", self.events);
        for (k, v) in &self.counts {
            let _ = writeln!(o, "  {k:<22} {v:>10}");
        }
        let _ = writeln!(o, "wakeups    {}", self.wakeups);
        let _ = writeln!(
            o,
            "migrations {} at wakeup, {} other",
            self.wakeup_migrations, self.other_migrations
        );
        if self.lost.is_empty() {
            let _ = writeln!(o, "lost       none");
        } else {
            for (cpu, l) in &self.lost {
                let _ = writeln!(
                    o,
                    "lost       CPU {cpu}: {} events in {} windows ({} uncounted)",
                    l.events,
                    l.windows.len(),
                    l.uncounted_windows
                );
            }
        }
        if !self.switch_gaps.is_empty() {
            let gaps: Vec<String> = self
                .switch_gaps
                .iter()
                .map(|(c, n)| format!("CPU {c}: {n}"))
                .collect();
            let _ = writeln!(
                o,
                "switch gaps {} (switches not continuing the previous one)",
                gaps.join(", ")
            );
        }
        match &self.ties {
            Some(t) => {
                let _ = writeln!(
                    o,
                    "ties       {} same-stamp groups across CPUs: {} re-ordered, {} events \
                     left",
                    t.groups, t.reordered, t.inconsistent_left
                );
            }
            None => {
                let _ = writeln!(
                    o,
                    "ties       {} same-stamp groups across CPUs (not re-ordered: older import)",
                    self.tie_groups
                );
            }
        }
        let _ = writeln!(
            o,
            "order      {} events out of their task's causal order",
            self.causal_disorder
        );
        if !self.unknown_events.is_empty() {
            let n: u64 = self.unknown_events.values().sum();
            let _ = writeln!(
                o,
                "skipped    {n} events of {} other types",
                self.unknown_events.len()
            );
        }
        let _ = writeln!(o, "top tasks by runtime");
        let _ = writeln!(
            o,
            "  {:>8}  {:<16} {:>12} {:>8}",
            "pid", "comm", "runtime ms", "runs"
        );
        for t in &self.top_tasks {
            let _ = writeln!(
                o,
                "  {:>8}  {:<16} {:>12.3} {:>8}",
                t.pid,
                t.comm,
                t.runtime_ns as f64 / 1e6,
                t.switches_in
            );
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::stream::VecSource;

    /// The trace of the derived pass's tests (see there): a CPU's first slice began
    /// before the trace, so it counts for neither runtime nor runs (task 1 is not listed);
    /// 4's slice after a missing switch is not counted; 5 and 6 run to the last event
    /// (80). One migration placed a wakeup, one did not.
    #[test]
    fn runtimes_count_the_slices_begun_at_a_recorded_switch() {
        let mut src = VecSource::new(Default::default(), crate::derived::tests::events());
        let s = summarise(&mut src, 10).unwrap();
        let top: Vec<(i32, u64, u64)> = s
            .top_tasks
            .iter()
            .map(|t| (t.pid, t.runtime_ns, t.switches_in))
            .collect();
        assert_eq!(
            top,
            [(5, 30, 1), (4, 25, 1), (3, 20, 1), (2, 15, 1), (6, 0, 1)]
        );
        assert_eq!(
            (s.wakeups, s.wakeup_migrations, s.other_migrations),
            (3, 1, 1)
        );
    }
}
