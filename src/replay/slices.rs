//! Time-sliced parallel replay: the trace's span is cut into slices, each replayed on its
//! own thread from a machine state rebuilt over a warm-up before it, and the slices'
//! counts merged in time order.
//!
//! A slice starts at a sched_waking's timestamp, so no wakeup's waking, wakeup and probes
//! are split, and reads past its end as far as the lookahead would (the outcome horizon),
//! so its last wakeups learn their outcome as in one pass. Events of the warm-up,
//! [start − warm-up, start), are applied to the machine and the policies (their decisions
//! are taken, so the policies' own state moves as in one pass) but not counted.
//!
//! What merges exactly: counters, histograms, paths, placements, agreement and its
//! tenths (each later slice keeps its decisions' times), latency percentiles, per-task
//! and worst-wakeup lists, and the time windows (each later slice keeps its fine windows
//! as leaves, replayed in order through the first slice's clock, so they double and
//! regroup as in one pass). What the warm-up does not rebuild exactly shows as decisions
//! that differ from one pass's: the state a slice starts from is the warm-up's, not the
//! whole past's.

use std::io::Write;

use super::lookahead::OUTCOME_HORIZON_NS;
use super::observer::{CsvDecisions, DecisionObserver, DecisionsOut, ParquetDecisions};
use super::replayer::{Partial, Replayer, Stretch};
use super::{check_cpus, setup, ReplayError, ReplayOptions, ReplayResult};
use crate::bundle::Meta;
use crate::metrics::windows::{self, Slot};
use crate::metrics::{Replayed, Window};
use crate::state::flips::FlipsPass;
use crate::state::Machine;
use crate::trace::{Event, EventKind, EventSource};
use crate::wakeup::balance::Balancer;
use crate::wakeup::sis::{Decision, Path};

/// How long before its start a slice rebuilds the state. The slowest state to forget
/// its start is PELT's (32 ms half-life: 2^-(300/32) ≈ 1.5e-3 of the start is left after
/// 300 ms); avg_idle converges within a few of a CPU's idle periods, recent_used_cpu at
/// a task's next wakeup, and wake_wide's wakee_flips halve each second, so they are off
/// by at most a few flips after 300 ms. On the committed traces, 100 ms, 300 ms and 1 s
/// of warm-up leave respectively the share of decisions the README gives differing from
/// one pass's; 300 ms is where more warm-up stops paying for itself.
pub const WARMUP_NS: u64 = 300_000_000;

/// A slice is replayed on its own only when it spans at least this many warm-ups: the
/// warm-up is then at most a fifth of its work.
pub const MIN_WARMUPS_PER_SLICE: u64 = 4;

/// How many slices a trace of `span_ns` is cut into on `jobs` threads: as many as the
/// threads, each at least [`MIN_WARMUPS_PER_SLICE`] warm-ups long; 1 is one pass.
pub fn slice_count(span_ns: u64, jobs: usize, warmup_ns: u64) -> usize {
    let most = span_ns / (MIN_WARMUPS_PER_SLICE * warmup_ns.max(1));
    (jobs as u64).min(most).max(1) as usize
}

/// The read batch of one pass: a slice pushes its events in the same batches (it matters
/// only to when probes are first seen in a trace not known to carry them).
const BATCH: usize = 4096;

/// Replays `src` cut into as many time slices as `jobs` (see [`slice_count`]), each
/// warmed up for `warmup_ns`, on up to `jobs` threads. One slice is one pass. --explain
/// is not supported here (see [`super::replay_parallel`]).
pub fn replay_sliced(
    src: &mut dyn EventSource,
    meta: Option<&Meta>,
    mut opts: ReplayOptions,
    jobs: usize,
    warmup_ns: u64,
) -> Result<ReplayResult, ReplayError> {
    let setup = setup(src, meta, &opts)?;
    let nr_cpus = setup.topo.nr_cpus;
    let mut events = Vec::new();
    let mut batch = Vec::with_capacity(BATCH);
    loop {
        batch.clear();
        if src.next_batch(&mut batch, BATCH)? == 0 {
            break;
        }
        check_cpus(&batch, src, meta, nr_cpus)?;
        events.append(&mut batch);
    }
    let span = match (events.first(), events.last()) {
        (Some(a), Some(b)) => b.ts - a.ts,
        _ => 0,
    };
    let starts = slice_starts(&events, slice_count(span, jobs, warmup_ns));
    let t0 = events.first().map_or(0, |e| e.ts);
    let decisions = opts.decisions.take();
    if matches!(decisions, Some(DecisionsOut::Observer(_))) {
        return Err(std::io::Error::other(
            "time slices write decisions as CSV or Parquet only; replay in one pass",
        )
        .into());
    }
    let csv = matches!(decisions, Some(DecisionsOut::Csv(_)));
    let parquet = matches!(decisions, Some(DecisionsOut::Parquet(_)));
    // What one pass would look at past the slice's last event.
    let reach = OUTCOME_HORIZON_NS;
    // Shared by the slices' threads: the settings without the decisions file.
    let settings = std::sync::Mutex::new(opts.clone_settings());
    // Where each slice's warm-up starts, and wake_wide's memory there.
    let froms: Vec<usize> = std::iter::once(0)
        .chain(
            starts
                .iter()
                .map(|&s| events.partition_point(|e| e.ts < s.saturating_sub(warmup_ns))),
        )
        .collect();
    // Where each slice's warm-up starts, wake_wide's memory and the balance schedule
    // there: both keep a phase a warm-up does not rebuild (see state::flips).
    let mut flips = Vec::with_capacity(froms.len());
    let mut schedules = Vec::with_capacity(froms.len());
    let mut pass = FlipsPass::new(setup.probes, opts.flips_before_trace);
    let mut balancer = Balancer::new(&Machine::new(setup.topo.clone()));
    let mut at = 0;
    for &from in &froms {
        for e in &events[at.min(from)..from] {
            balancer.advance(e.ts);
            if let EventKind::SoftirqEntry {
                vec: crate::abi::SCHED_SOFTIRQ,
            } = e.kind
            {
                balancer.sched_softirq(e.cpu, e.ts);
            }
            if let EventKind::Switch { next_pid, .. } = e.kind {
                balancer.switched(e.cpu, next_pid);
            }
            pass.apply(e);
        }
        at = at.max(from);
        flips.push(std::sync::Mutex::new(pass.flips()));
        schedules.push(balancer.schedule());
    }
    let run = |k: usize| -> Result<(Partial, Vec<u8>, Vec<Row>), ReplayError> {
        let count_from = (k > 0).then(|| starts[k - 1]);
        let stop_at = starts.get(k).copied();
        let from = froms[k];
        let to = stop_at.map_or(events.len(), |s| {
            events.partition_point(|e| e.ts <= s.saturating_add(reach))
        });
        let mut text = CsvDecisions::new(Vec::new());
        if k > 0 {
            text.continuing();
        }
        let mut rows = Rows::default();
        let mut observers: Vec<&mut dyn DecisionObserver> = Vec::new();
        if csv {
            observers.push(&mut text);
        }
        if parquet {
            observers.push(&mut rows);
        }
        let opts = settings.lock().expect("not poisoned").clone_settings();
        let mut replayer = Replayer::new(setup.clone(), &opts, observers)?.stretch(Stretch {
            count_from,
            stop_at,
            t0,
        });
        if k > 0 {
            let earlier = std::mem::take(&mut *flips[k].lock().expect("not poisoned"));
            replayer = replayer
                .earlier_flips(earlier)
                .balance_schedule(&schedules[k]);
        }
        // The same batches as one pass reads.
        let mut at = from;
        while at < to {
            let end = ((at / BATCH + 1) * BATCH).min(to);
            replayer.push(events[at..end].iter().cloned())?;
            at = end;
        }
        let partial = replayer.into_partial()?;
        drop(text.finish());
        Ok((partial, text.into_inner(), rows.0))
    };
    let slices: Vec<usize> = (0..=starts.len()).collect();
    let parts = crate::parallel::map(&slices, jobs, |&k| run(k));
    let mut merged: Option<Partial> = None;
    let mut out_csv = None;
    let mut out_parquet = None;
    match decisions {
        Some(DecisionsOut::Csv(w)) => out_csv = Some(w),
        Some(DecisionsOut::Parquet(w)) => out_parquet = Some(ParquetDecisions::new(w)?),
        Some(DecisionsOut::Observer(_)) | None => {}
    }
    for p in parts {
        let (partial, text, rows) = p?;
        if let Some(w) = out_csv.as_mut() {
            w.write_all(&text)?;
        }
        if let Some(pq) = out_parquet.as_mut() {
            for r in rows {
                r.replay_into(pq)?;
            }
        }
        match merged.as_mut() {
            None => merged = Some(partial),
            Some(m) => merge(m, partial),
        }
    }
    if let Some(mut w) = out_csv {
        w.flush()?;
    }
    if let Some(mut pq) = out_parquet {
        pq.finish()?;
    }
    let merged = merged.expect("at least one slice");
    let mut result = merged.finish(src.stats().ties);
    result.flips_before_trace = opts.flips_before_trace;
    Ok(result)
}

/// Where slices 2..=n start: the first sched_waking at or after each n-th of the span.
fn slice_starts(events: &[Event], slices: usize) -> Vec<u64> {
    let (Some(first), Some(last)) = (events.first(), events.last()) else {
        return Vec::new();
    };
    let span = last.ts - first.ts;
    let mut starts: Vec<u64> = Vec::new();
    for k in 1..slices as u64 {
        let nominal = first.ts + (span as u128 * k as u128 / slices as u128) as u64;
        let from = events.partition_point(|e| e.ts < nominal);
        let waking = events[from..]
            .iter()
            .find(|e| matches!(e.kind, EventKind::Waking(_)));
        match waking {
            Some(e) if starts.last().is_none_or(|&s| e.ts > s) && e.ts > first.ts => {
                starts.push(e.ts)
            }
            _ => {}
        }
    }
    starts
}

/// Adds a later slice's counts to `acc`: sums, then its windows replayed leaf by leaf
/// through `acc`'s clock, every series halved whenever the windows double, as one pass
/// does.
fn merge(acc: &mut Partial, later: Partial) {
    acc.tally.merge(&later.tally);
    acc.fit.merge(&later.fit);
    acc.runqueue_repairs.moved += later.runqueue_repairs.moved;
    acc.runqueue_repairs.dropped_at_idle += later.runqueue_repairs.dropped_at_idle;
    // Latencies still open at a slice's end close in the next one, which saw the wakings
    // in its warm-up: the last slice's are the trace's.
    acc.pending = later.pending;
    if later.first_seen.is_some() {
        acc.last_seen = acc.last_seen.max(later.last_seen);
    }
    let fine_ns = later.clock.fine_ns();
    let mut leaves: Vec<(u64, usize, Window)> = Vec::new();
    for (series, log) in later.leaves.into_iter().flatten().enumerate() {
        leaves.extend(log.into_iter().map(|(now, w)| (now, series, w)));
    }
    // Stable: a fine window two series first touched at one time keeps their order.
    leaves.sort_by_key(|l| l.0);
    for (a, l) in acc.arms.iter_mut().zip(later.arms) {
        a.merge(l);
    }
    acc.observed.merge(later.observed);
    let nr_arms = acc.arms.len();
    let halve_all = |acc: &mut Partial, times: u32| {
        for _ in 0..times {
            for a in acc.arms.iter_mut() {
                windows::halve(&mut a.windows);
            }
            windows::halve(&mut acc.observed.windows);
        }
    };
    for (now, series, w) in leaves {
        let (slot, doubled): (Slot, u32) = acc.clock.slot(now);
        halve_all(acc, doubled);
        let into = if series < nr_arms {
            &mut acc.arms[series].windows
        } else {
            &mut acc.observed.windows
        };
        windows::window_at(into, slot).merge(&w);
    }
    let doubled = acc.clock.widen_to(fine_ns);
    halve_all(acc, doubled);
}

/// One decision kept for the Parquet decisions file, written in slice order at the end.
struct Row {
    w: Replayed,
    policy: String,
    cpu: u32,
    path: Path,
    probed: u32,
    search_ns: u64,
    budget: Option<u32>,
}

impl Row {
    fn replay_into(self, o: &mut dyn DecisionObserver) -> std::io::Result<()> {
        let d = Decision {
            cpu: self.cpu,
            path: self.path,
            probed: self.probed,
            search_ns: self.search_ns,
            counters: Default::default(),
            steps: Vec::new(),
            cleared_idle_cores: false,
            budget: self.budget,
        };
        o.decision(&self.w, &self.policy, &d, &[])
    }
}

/// Keeps a slice's decisions, for the Parquet file.
#[derive(Default)]
struct Rows(Vec<Row>);

impl DecisionObserver for Rows {
    fn decision(
        &mut self,
        w: &Replayed,
        policy: &str,
        d: &Decision,
        _: &[String],
    ) -> std::io::Result<()> {
        self.0.push(Row {
            w: *w,
            policy: policy.to_string(),
            cpu: d.cpu,
            path: d.path,
            probed: d.probed,
            search_ns: d.search_ns,
            budget: d.budget,
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_only_when_each_spans_enough_warm_ups() {
        let ms = 1_000_000;
        assert_eq!(slice_count(6_000 * ms, 4, 300 * ms), 4);
        assert_eq!(slice_count(6_000 * ms, 8, 300 * ms), 5);
        assert_eq!(slice_count(1_000 * ms, 4, 300 * ms), 1);
        assert_eq!(slice_count(6_000 * ms, 1, 300 * ms), 1);
    }
}
