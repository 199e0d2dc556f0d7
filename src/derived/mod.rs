//! What every analysis derives from the event stream, derived once: run slices per CPU
//! ([`slices`]) and wakeup latencies ([`latency`]), fed one event at a time so that the
//! streaming readers (info, the report's timeline, replay) and the readers of a whole
//! trace (simulate's statistics, the traced workload model) share one definition.
//!
//! [`Pass`] runs both over a stream and classifies each sched_migrate_task as a wakeup's
//! placement or not; a reader that needs only one half uses [`Slices`] or [`Latencies`]
//! alone.

pub mod latency;
pub mod slices;

pub use latency::{AwaitingWakeup, Latencies, WakeupLatency};
pub use slices::{Slice, SliceEnd, SliceStart, Slices, SwitchEnds};

use crate::trace::{Event, EventKind};

/// A sched_migrate_task, and whether it placed a wakeup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Migration {
    /// The task moved.
    pub pid: i32,
    /// From and to, as the tracepoint records them.
    pub orig_cpu: i32,
    /// See `orig_cpu`.
    pub dest_cpu: i32,
    /// Between the task's sched_waking and its sched_wakeup: where the wakeup put it.
    /// Otherwise load balancing, affinity or exec moved it.
    pub at_wakeup: bool,
}

/// One fact the pass derived from an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Derived {
    /// A run slice that ended.
    Slice(Slice),
    /// A wakeup whose task was switched in.
    Latency(WakeupLatency),
    /// A migration, classified.
    Migration(Migration),
}

/// Slices, latencies and migrations of one stream of events, fed in time order.
#[derive(Debug, Clone, Default)]
pub struct Pass {
    slices: Slices,
    latencies: Latencies,
}

impl Pass {
    /// Reads one event and hands `emit` what it ends, in order: a sched_switch's slices
    /// (the earlier first), then the latency of the task it switched in.
    pub fn feed(&mut self, e: &Event, mut emit: impl FnMut(Derived)) {
        if let Some(ends) = self.slices.feed(e) {
            ends.slices().for_each(|s| emit(Derived::Slice(s)));
        }
        if let EventKind::Migrate {
            pid,
            orig_cpu,
            dest_cpu,
            ..
        } = &e.kind
        {
            emit(Derived::Migration(Migration {
                pid: *pid,
                orig_cpu: *orig_cpu,
                dest_cpu: *dest_cpu,
                at_wakeup: self.latencies.awaiting_wakeup(*pid),
            }));
        }
        if let Some(l) = self.latencies.feed(e) {
            emit(Derived::Latency(l));
        }
    }

    /// Ends the stream at `end_ns`: hands `emit` the slices still running, ended
    /// [`SliceEnd::TraceEnd`] there.
    pub fn finish(&mut self, end_ns: u64, mut emit: impl FnMut(Derived)) {
        self.slices
            .finish(end_ns)
            .for_each(|s| emit(Derived::Slice(s)));
    }

    /// The slices' state: who runs on each CPU.
    pub fn slices(&self) -> &Slices {
        &self.slices
    }

    /// The latencies' state: wakeups still pending.
    pub fn latencies(&self) -> &Latencies {
        &self.latencies
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::abi::{EXIT_DEAD, EXIT_ZOMBIE, PREEMPTED};
    use crate::trace::event::build::{migrate, switch, wakeup, waking};

    /// Two CPUs, times in ns:
    ///
    /// ```text
    ///  5 CPU 1  switch 0 (R) -> 4     CPU 1's first switch: idle ran since before the trace
    /// 10 CPU 0  switch 1 (R) -> 2     CPU 0's first: 1 ran since before the trace, preempted
    /// 20 CPU 0  2 wakes 3 (prev 1)
    /// 21 CPU 0  sched_wakeup 3 on 1
    /// 25 CPU 0  switch 2 (S) -> 0     2 blocks after 25 - 10 = 15
    /// 30 CPU 1  switch 4 (R+) -> 3    4 preempted after 30 - 5 = 25; 3 waited 30 - 20 = 10
    /// 40 CPU 1  3 wakes 5 (prev 0)
    /// 41 CPU 1  migrate 5 0 -> 1      between waking and wakeup: the wakeup's placement
    /// 42 CPU 1  sched_wakeup 5 on 1
    /// 43 CPU 0  migrate 4 1 -> 0      no waking pending: load balancing
    /// 50 CPU 1  switch 3 (X) -> 5     3 exits after 20; 5 waited 50 - 40 = 10, moved once
    /// 60 CPU 0  switch 4 (S) -> 0     CPU 0 ran idle since 25, not 4: the switch putting 4
    ///                                 on is missing; idle's slice ends unrecorded by 60,
    ///                                 4's began unrecorded
    /// 70 CPU 1  5 wakes 2 (prev 0)    no switch-in of 2 follows: pending at the end
    /// 71 CPU 1  sched_wakeup 2 on 0
    /// 72 CPU 0  an interrupt of idle wakes 6
    /// 74 CPU 0  and again, before 6 is seen running: it ran, its switch-in lost
    /// 80 CPU 0  switch 0 (R) -> 6     6 waited 80 - 74 = 6, from the last waking
    /// 100       end: 6 on CPU 0 since 80, 5 on CPU 1 since 50
    /// ```
    pub(crate) fn events() -> Vec<Event> {
        vec![
            switch(5, 1, 0, 0, 4),
            switch(10, 0, 1, 0, 2),
            waking(20, 0, 2, 3, 1),
            wakeup(21, 0, 2, 3, 1),
            switch(25, 0, 2, 1, 0),
            switch(30, 1, 4, PREEMPTED, 3),
            waking(40, 1, 3, 5, 0),
            migrate(41, 1, 5, 0, 1),
            wakeup(42, 1, 3, 5, 1),
            migrate(43, 0, 4, 1, 0),
            switch(50, 1, 3, EXIT_DEAD, 5),
            switch(60, 0, 4, 1, 0),
            waking(70, 1, 5, 2, 0),
            wakeup(71, 1, 5, 2, 0),
            waking(72, 0, 0, 6, 0),
            waking(74, 0, 0, 6, 0),
            switch(80, 0, 0, 0, 6),
        ]
    }

    fn slice(cpu: u32, pid: i32, start: SliceStart, end_ns: u64, end: SliceEnd) -> Derived {
        Derived::Slice(Slice {
            cpu,
            pid,
            start,
            end_ns,
            end,
        })
    }

    /// A latency with one waking, no migration.
    fn latency(
        pid: i32,
        (waking_ns, waking_cpu, waker): (u64, u32, i32),
        wakeup_ns: Option<u64>,
        (switch_in_ns, cpu): (u64, u32),
        (prev_pid, prev_end): (i32, SliceEnd),
    ) -> WakeupLatency {
        WakeupLatency {
            pid,
            waking_ns,
            waking_cpu,
            waker,
            wakings: 1,
            wakeup_ns,
            migrations: 0,
            switch_in_ns,
            cpu,
            prev_pid,
            prev_end,
        }
    }

    #[test]
    fn slices_latencies_and_migrations_of_a_short_trace() {
        use SliceEnd::{Blocked, Dead, Preempted, TraceEnd};
        use SliceStart::{At, BeforeTrace};
        let mut pass = Pass::default();
        let mut got = Vec::new();
        for e in &events() {
            pass.feed(e, |d| got.push(d));
        }
        // Only 2's wakeup at 70 is left: no switch-in of 2 before the end.
        assert_eq!(pass.latencies().pending(), 1);
        assert_eq!(pass.slices().running(0), Some((6, 80)));
        pass.finish(100, |d| got.push(d));
        let l3 = latency(3, (20, 0, 2), Some(21), (30, 1), (4, Preempted));
        let l5 = WakeupLatency {
            migrations: 1,
            ..latency(5, (40, 1, 3), Some(42), (50, 1), (3, Dead))
        };
        let l6 = WakeupLatency {
            wakings: 2,
            ..latency(6, (74, 0, 0), None, (80, 0), (0, Preempted))
        };
        let want = vec![
            slice(1, 0, BeforeTrace, 5, Preempted),
            slice(0, 1, BeforeTrace, 10, Preempted),
            slice(0, 2, At(10), 25, Blocked),
            slice(1, 4, At(5), 30, Preempted),
            Derived::Latency(l3),
            Derived::Migration(Migration {
                pid: 5,
                orig_cpu: 0,
                dest_cpu: 1,
                at_wakeup: true,
            }),
            Derived::Migration(Migration {
                pid: 4,
                orig_cpu: 1,
                dest_cpu: 0,
                at_wakeup: false,
            }),
            slice(1, 3, At(30), 50, Dead),
            Derived::Latency(l5),
            slice(0, 0, At(25), 60, SliceEnd::Unrecorded),
            slice(0, 4, SliceStart::Unrecorded, 60, Blocked),
            slice(0, 0, At(60), 80, Preempted),
            Derived::Latency(l6),
            slice(0, 6, At(80), 100, TraceEnd),
            slice(1, 5, At(50), 100, TraceEnd),
        ];
        assert_eq!(got, want);
        assert_eq!((l3.ns(), l5.ns(), l6.ns()), (10, 10, 6));
    }

    /// Only a slice with both ends recorded has a length: 2's (15 ns), 6's to the end of
    /// the trace (20 ns); not 1's (begun before the trace), not the idle slice whose end
    /// is missing, not 4's (begun at a missing switch).
    #[test]
    fn a_slice_has_a_length_when_both_ends_were_recorded() {
        let mut pass = Pass::default();
        let mut lengths = Vec::new();
        let mut keep = |d: Derived| {
            if let Derived::Slice(s) = d {
                lengths.push((s.cpu, s.pid, s.recorded_ns()));
            }
        };
        for e in &events() {
            pass.feed(e, &mut keep);
        }
        pass.finish(100, &mut keep);
        assert_eq!(
            lengths,
            [
                (1, 0, None),
                (0, 1, None),
                (0, 2, Some(15)),
                (1, 4, Some(25)),
                (1, 3, Some(20)),
                (0, 0, None),
                (0, 4, None),
                (0, 0, Some(20)),
                (0, 6, Some(20)),
                (1, 5, Some(50)),
            ]
        );
    }

    /// prev_state as the kernel reports it: R (0) and R+ are preemptions, X and Z exits
    /// (unless also marked preempted), everything else a sleep.
    #[test]
    fn prev_state_says_how_a_slice_ended() {
        use SliceEnd::*;
        let cases = [
            (0, Preempted),
            (PREEMPTED, Preempted),
            (PREEMPTED | 1, Preempted),
            (1, Blocked),
            (2, Blocked),
            (0x80, Blocked),
            (EXIT_DEAD, Dead),
            (EXIT_ZOMBIE, Dead),
            (PREEMPTED | EXIT_DEAD, Preempted),
        ];
        for (state, end) in cases {
            assert_eq!(SliceEnd::of_prev_state(state), end, "prev_state {state:#x}");
        }
    }

    /// A reader that counts only some wakings (replay: the ones it replays) notes those
    /// and feeds the rest: 3's waking at 20 is not noted, so its switch-in at 30 closes
    /// nothing; 5's is, twice (the second says one was pending), and its latency counts
    /// from the last: 50 - 45 = 5.
    #[test]
    fn a_reader_can_count_only_the_wakings_it_notes() {
        let mut lat = Latencies::default();
        let mut got = Vec::new();
        let again = waking(45, 1, 3, 5, 0);
        for e in events().iter().filter(|e| e.ts <= 50) {
            if let EventKind::Waking(w) = &e.kind {
                if w.pid == 5 {
                    assert!(!lat.waking(e, w));
                    let EventKind::Waking(w) = &again.kind else {
                        unreachable!()
                    };
                    assert!(lat.waking(&again, w));
                }
                continue;
            }
            got.extend(lat.feed(e));
        }
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].pid, got[0].wakings), (5, 2));
        assert_eq!(got[0].ns(), 5);
        assert_eq!(lat.pending(), 0);
    }
}
