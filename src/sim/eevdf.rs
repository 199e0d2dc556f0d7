//! Which fair scheduler the simulator runs, and EEVDF's arithmetic (v6.6+) for tasks of
//! equal weight, as the simulator's are (all nice 0).
//!
//! EEVDF keeps, per runqueue, the average vruntime of its queued entities (the running
//! one and, from v6.12, those whose dequeue is delayed included). An entity is eligible
//! when its vruntime is at most that average; the scheduler runs the eligible one with
//! the earliest virtual deadline (vruntime + one base slice when it was placed or its
//! slice ran out). A task that sleeps keeps its lag (average − vruntime, bounded by
//! max(2 slices, a tick)) and is placed by it when it wakes, on whatever runqueue;
//! a wakee preempts only when it is what pick_eevdf would now choose, and under
//! RUN_TO_PARITY a freshly picked task is not preempted before its deadline while it
//! stays eligible. From v6.12 (DELAY_DEQUEUE) a task that blocks while not eligible stays
//! queued until it is picked (its dequeue finishes then, positive lag dropped:
//! DELAY_ZERO) or woken (put back where it is, without select_task_rq, so on its prev).
//!
//! The kernel reads the running task's vruntime as update_curr last left it, and the
//! requeue of a delayed wakee runs before the wakeup's update_curr: a wakee that the
//! runner has overtaken since its pick then keeps its place behind it instead of being
//! placed at the average, and preempts it. This is what lets a v6.12 ping-pong wakee
//! preempt its waker on most local wakeups (94 % on the rig's 6.12 capture).

use super::{Sim, State, TICK_NS};
use crate::trace::EventKind;

/// The fair scheduler a simulation runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scheduler {
    /// CFS as in v6.1: vruntime order, sched_latency slices, the wakeup granularity.
    Cfs,
    /// EEVDF as in v6.6 to v6.11.
    Eevdf,
    /// EEVDF with DELAY_DEQUEUE, as in v6.12 and later.
    EevdfDelayDequeue,
}

impl Scheduler {
    /// The scheduler a kernel release runs: CFS before v6.6, EEVDF from it,
    /// DELAY_DEQUEUE from v6.12; CFS when the release is not known.
    pub fn of_release(release: Option<&str>) -> Scheduler {
        let version = release.and_then(crate::abi::kernel_version);
        match version {
            Some(v) if v >= (6, 12) => Scheduler::EevdfDelayDequeue,
            Some(v) if v >= (6, 6) => Scheduler::Eevdf,
            _ => Scheduler::Cfs,
        }
    }

    /// How the output names it.
    pub fn describe(self) -> &'static str {
        match self {
            Scheduler::Cfs => "CFS (v6.1)",
            Scheduler::Eevdf => "EEVDF (v6.6)",
            Scheduler::EevdfDelayDequeue => "EEVDF with DELAY_DEQUEUE (v6.12)",
        }
    }

    /// Whether it is one of the EEVDF ones.
    pub fn is_eevdf(self) -> bool {
        self != Scheduler::Cfs
    }
}

/// Where vruntimes start under EEVDF: far enough above zero that a placement behind the
/// average (by a lag of a few slices) never goes below it.
pub const VRUNTIME_BASE: u64 = 1 << 40;

/// avg_vruntime: the mean vruntime of the queued entities (rounded down, as the
/// kernel's division is), or `empty` (the runqueue's min_vruntime) when none is.
pub fn avg_vruntime(vruntimes: impl Iterator<Item = u64>, empty: u64) -> u64 {
    let (sum, n) = vruntimes.fold((0u128, 0u128), |(s, n), v| (s + u128::from(v), n + 1));
    sum.checked_div(n).map_or(empty, |avg| avg as u64)
}

/// entity_eligible: at most the average, compared without rounding (v·n ≤ Σv).
pub fn eligible(v: u64, sum: u128, n: u128) -> bool {
    u128::from(v) * n <= sum
}

/// update_entity_lag: how far behind the average a leaving task is (positive: owed
/// time), bounded by max(2 slices, a tick).
pub fn lag(avg: u64, v: u64, slice: u64) -> i64 {
    let limit = (2 * slice).max(TICK_NS) as i64;
    (avg as i64 - v as i64).clamp(-limit, limit)
}

/// place_entity's vruntime for a task of lag `lag` joining `queued` entities whose
/// average is `avg`: the lag is scaled by (n + 1) / n so that the average after the
/// join leaves the task that lag behind it; an empty runqueue ignores the lag.
pub fn place(avg: u64, lag: i64, queued: u64) -> u64 {
    if queued == 0 || lag == 0 {
        return avg;
    }
    let scaled = i128::from(lag) * i128::from(queued + 1) / i128::from(queued);
    (i128::from(avg) - scaled).max(0) as u64
}

/// One queued entity as pick_eevdf sees it.
#[derive(Debug, Clone, Copy)]
pub struct Entity {
    /// Which task (an index the caller knows).
    pub id: usize,
    /// Its vruntime now (ns).
    pub vruntime: u64,
    /// Its virtual deadline (ns).
    pub deadline: u64,
}

/// pick_eevdf over `queued` (the running entity included, if it is still queued):
/// the eligible entity with the earliest deadline, ties to the lower vruntime and then
/// the lower id; `protected` (RUN_TO_PARITY) is returned first if it is eligible.
pub fn pick(queued: &[Entity], protected: Option<usize>) -> Option<usize> {
    let sum: u128 = queued.iter().map(|e| u128::from(e.vruntime)).sum();
    let n = queued.len() as u128;
    let ok = |e: &&Entity| eligible(e.vruntime, sum, n);
    if let Some(p) = protected {
        if queued.iter().filter(ok).any(|e| e.id == p) {
            return Some(p);
        }
    }
    queued
        .iter()
        .filter(ok)
        .min_by_key(|e| (e.deadline, e.vruntime, e.id))
        .map(|e| e.id)
}

/// The simulator's EEVDF: the runqueue operations that differ from CFS's.
impl Sim {
    /// The sum and count of the vruntimes queued on `cpu` (delayed tasks included),
    /// with `running`, the running task's vruntime as counted (None: without it).
    pub(super) fn queued_sum(&self, cpu: u32, running: Option<u64>) -> (u128, u128) {
        let c = &self.cpus[cpu as usize];
        running
            .into_iter()
            .chain(c.rq.iter().map(|&t| self.tasks[t].vruntime))
            .fold((0, 0), |(s, n), v| (s + u128::from(v), n + 1))
    }

    /// avg_vruntime from [`Sim::queued_sum`]'s sum and count: the runqueue's
    /// min_vruntime when it is empty.
    pub(super) fn avg_of(&self, cpu: u32, sum: u128, n: u128) -> u64 {
        sum.checked_div(n)
            .map_or(self.cpus[cpu as usize].min_vruntime, |avg| avg as u64)
    }

    fn entities(&self, cpu: u32) -> Vec<Entity> {
        self.cpus[cpu as usize]
            .rq
            .iter()
            .map(|&t| Entity {
                id: t,
                vruntime: self.tasks[t].vruntime,
                deadline: self.tasks[t].deadline,
            })
            .collect()
    }

    /// pick_next_entity over the waiting tasks of `cpu`, removed from its queue; a
    /// delayed task picked finishes its dequeue (DELAY_ZERO drops a positive lag) and
    /// the pick goes on.
    pub(super) fn pick_eevdf(&mut self, cpu: u32) -> Option<usize> {
        loop {
            let id = pick(&self.entities(cpu), None)?;
            if self.tasks[id].delayed {
                let (sum, n) = self.queued_sum(cpu, None);
                let avg = self.avg_of(cpu, sum, n);
                let task = &mut self.tasks[id];
                task.vlag = lag(avg, task.vruntime, self.tun.base_slice).min(0);
                task.delayed = false;
            }
            let rq = &mut self.cpus[cpu as usize].rq;
            let i = rq
                .iter()
                .position(|&t| t == id)
                .expect("picked from the queue");
            rq.swap_remove(i);
            if self.tasks[id].state != State::Sleeping {
                return Some(id);
            }
        }
    }

    /// update_deadline for the running task of `cpu` (charged up to now): a new request
    /// of one slice, and no more protection.
    pub(super) fn renew_deadline(&mut self, cpu: u32, now: u64) {
        let Some(t) = self.cpus[cpu as usize].curr else {
            return;
        };
        let task = &mut self.tasks[t];
        if task.vruntime >= task.deadline {
            task.deadline = task.vruntime + self.tun.base_slice;
            task.protected = false;
        }
        let c = &mut self.cpus[cpu as usize];
        c.slice_end = now + (task.deadline - task.vruntime);
    }

    /// schedule() on `cpu` with its running task still queued: pick_eevdf may keep it.
    pub(super) fn resched_eevdf(&mut self, cpu: u32, now: u64) {
        self.charge(cpu, now);
        self.renew_deadline(cpu, now);
        let Some(t) = self.cpus[cpu as usize].curr else {
            return;
        };
        let mut queued = self.entities(cpu);
        queued.push(Entity {
            id: t,
            vruntime: self.tasks[t].vruntime,
            deadline: self.tasks[t].deadline,
        });
        if pick(&queued, self.tasks[t].protected.then_some(t)) == Some(t) {
            // It stays: its stint goes on to the (maybe new) deadline.
            self.cpus[cpu as usize].gen += 1;
            self.advance(cpu, now);
        } else {
            self.preempt(cpu, now);
        }
    }

    /// check_preempt_wakeup_fair: whether pick_eevdf, run now on `cpu`, takes the just
    /// queued `t` over the running task (whose vruntime is brought to now, its
    /// deadline renewed if it has passed).
    pub(super) fn eevdf_would_pick(&self, cpu: u32, t: usize, now: u64) -> bool {
        let c = &self.cpus[cpu as usize];
        let Some(curr) = c.curr else {
            return true;
        };
        let task = &self.tasks[curr];
        let v = self.running_vruntime(cpu, now).expect("a running task");
        let (deadline, protected) = if v >= task.deadline {
            (v + self.tun.base_slice, false)
        } else {
            (task.deadline, task.protected)
        };
        let mut queued = self.entities(cpu);
        queued.push(Entity {
            id: curr,
            vruntime: v,
            deadline,
        });
        pick(&queued, protected.then_some(curr)) == Some(t)
    }

    /// dequeue_entity for the running `t` of `cpu` going to sleep: it keeps its lag;
    /// under DELAY_DEQUEUE, if not eligible, it stays queued (delayed).
    pub(super) fn dequeue_sleeper(&mut self, cpu: u32, t: usize, now: u64) {
        let (sum, n) = self.queued_sum(cpu, self.running_vruntime(cpu, now));
        let avg = self.avg_of(cpu, sum, n);
        let v = self.tasks[t].vruntime + now.saturating_sub(self.cpus[cpu as usize].started);
        self.tasks[t].vlag = lag(avg, v, self.tun.base_slice);
        if self.opts.scheduler == Scheduler::EevdfDelayDequeue && !eligible(v, sum, n) {
            self.tasks[t].delayed = true;
            self.cpus[cpu as usize].rq.push(t);
        }
    }

    /// try_to_wake_up of a delayed task (ttwu_runnable): still queued on its CPU, it
    /// is not selected a CPU nor migrated, only put back (DELAY_ZERO: placed at the
    /// average if its lag became positive) and checked for preemption.
    pub(super) fn wake_delayed(&mut self, t: usize, by: Option<(usize, u32, bool)>, now: u64) {
        let cpu = self.tasks[t].cpu;
        let wk = self.waker(by, cpu);
        self.timer_softirq(&wk, now, true);
        let w = self.wake_payload(t, cpu);
        self.emit(now, wk.cpu, wk.pid, EventKind::Waking(w));
        self.emit(now, wk.cpu, wk.pid, EventKind::Wakeup(w));
        self.timer_softirq(&wk, now, false);
        // requeue_delayed_entity runs before update_curr: the running task counts with
        // the vruntime it was last charged, so a wakee it has since overtaken keeps its
        // place behind it, and the preemption check that follows (which does update it)
        // finds the runner past the average.
        let c = &self.cpus[cpu as usize];
        let seen = c.curr.map(|_| c.curr_vruntime_seen);
        let (sum, n) = self.queued_sum(cpu, seen);
        let avg = self.avg_of(cpu, sum, n);
        if lag(avg, self.tasks[t].vruntime, self.tun.base_slice) > 0 {
            let rq = &mut self.cpus[cpu as usize].rq;
            let i = rq
                .iter()
                .position(|&q| q == t)
                .expect("a delayed task is queued");
            rq.swap_remove(i);
            let (sum, n) = self.queued_sum(cpu, self.running_vruntime(cpu, now));
            let avg = self.avg_of(cpu, sum, n);
            self.tasks[t].vruntime = avg;
            self.tasks[t].deadline = avg + self.tun.base_slice;
            self.cpus[cpu as usize].rq.push(t);
        }
        let task = &mut self.tasks[t];
        task.delayed = false;
        task.vlag = 0;
        task.state = State::Runnable;
        task.woken_at = Some(now);
        self.result.wakeups += 1;
        self.result.placements.count(&self.m.topo, cpu, cpu);
        let v = self.tasks[t].vruntime;
        self.check_preempt_wakeup(cpu, wk.cpu, t, v, now, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::{Start, Step};
    use crate::synth::TaskSpec;

    const MS: u64 = 1_000_000;

    /// Two tasks asleep on CPU 0 of a 2-CPU machine (base slice 0.75 ms × 2), none
    /// started; task 0 pinned to CPU 0 unless `free`.
    fn sim(scheduler: Scheduler, free: bool) -> Sim {
        let tasks = (0..2)
            .map(|i| TaskSpec {
                comm: format!("t{i}"),
                pid: Some(100 + i),
                steps: vec![Step::Run(MS), Step::Sleep],
                looping: false,
                start: Start::Asleep { cpu: 0 },
                pinned: (i == 0 && !free).then_some(0),
            })
            .collect();
        let (w, mut opts) = crate::sim::tests::on_two_cpus(tasks);
        opts.wake_ipi_ns = 0;
        opts.preempt_delay_ns = 0;
        opts.scheduler = scheduler;
        opts.record = true;
        Sim::new(w, opts).unwrap()
    }

    /// Task 1 runs on CPU 0 from `now` at vruntime `v`, just picked (protected).
    fn running(sim: &mut Sim, v: u64, now: u64) {
        let slice = sim.tun.base_slice;
        let t = &mut sim.tasks[1];
        (t.vruntime, t.deadline, t.protected) = (v, v + slice, true);
        t.state = State::Running;
        t.cpu = 0;
        let c = &mut sim.cpus[0];
        (c.curr, c.started, c.slice_end) = (Some(1), now, now + slice);
    }

    #[test]
    fn a_wakee_without_lag_does_not_preempt_a_task_running_to_parity() {
        let mut sim = sim(Scheduler::Eevdf, false);
        let v = VRUNTIME_BASE + 50 * MS;
        running(&mut sim, v, 0);
        sim.wake(0, None, 100_000);
        // Placed at the average, 0.1 ms past the runner's start: its deadline is
        // later than the runner's, which keeps the CPU.
        assert_eq!(sim.tasks[0].vruntime, v + 100_000);
        assert_eq!(sim.cpus[0].curr, Some(1));
        assert_eq!(sim.cpus[0].rq, [0]);
    }

    #[test]
    fn a_wakee_owed_time_makes_the_runner_ineligible_and_preempts_it() {
        let mut sim = sim(Scheduler::Eevdf, false);
        let v = VRUNTIME_BASE + 50 * MS;
        running(&mut sim, v, 0);
        sim.tasks[0].vlag = MS as i64;
        sim.wake(0, None, 0);
        // Placed 1 ms · 2/1 behind the runner: the average is 1 ms behind it, so the
        // runner is not eligible and its protection does not count.
        assert_eq!(sim.tasks[0].vruntime, v - 2 * MS);
        assert_eq!(sim.cpus[0].curr, Some(0));
        assert_eq!(sim.tasks[1].state, State::Runnable);
    }

    #[test]
    fn a_task_blocking_ahead_stays_queued_and_wakes_on_its_cpu_without_selection() {
        let mut sim = sim(Scheduler::EevdfDelayDequeue, true);
        let v = VRUNTIME_BASE + 50 * MS;
        running(&mut sim, v + 3 * MS, 0);
        // Task 0 waits on CPU 0, 3 ms behind; CPU 1 is idle.
        let t0 = &mut sim.tasks[0];
        (t0.vruntime, t0.deadline, t0.state, t0.cpu) = (v, v + MS, State::Runnable, 0);
        sim.cpus[0].rq.push(0);
        // Task 1 blocks: the average is 1.5 ms behind it, so it is not eligible.
        sim.dequeue_sleeper(0, 1, 0);
        sim.tasks[1].state = State::Sleeping;
        assert!(sim.tasks[1].delayed);
        assert_eq!(sim.tasks[1].vlag, -(3 * MS as i64) / 2);
        assert!(sim.cpus[0].rq.contains(&1));
        sim.cpus[0].curr = None;
        // Woken by a timer before CPU 0 picked it: back on CPU 0, though CPU 1 is
        // idle, with no migration and where it was (its lag is negative).
        sim.wake(1, None, 10_000);
        assert!(!sim.tasks[1].delayed);
        assert_eq!(sim.tasks[1].state, State::Runnable);
        assert_eq!(sim.tasks[1].cpu, 0);
        assert_eq!(sim.tasks[1].vruntime, v + 3 * MS);
        assert!(!sim
            .events
            .iter()
            .any(|e| matches!(e.kind, EventKind::Migrate { .. })));
        let woke_on: Vec<i32> = (sim.events.iter())
            .filter_map(|e| match &e.kind {
                EventKind::Wakeup(w) => Some(w.target_cpu),
                _ => None,
            })
            .collect();
        assert_eq!(woke_on, [0]);
    }

    #[test]
    fn a_delayed_wakee_the_runner_has_overtaken_keeps_its_place_and_preempts() {
        let mut sim = sim(Scheduler::EevdfDelayDequeue, true);
        let v = VRUNTIME_BASE + 50 * MS;
        // Task 1 was picked at v (deadline v + 1.5 ms); task 0 blocked 0.2 ms ahead of
        // it and stayed queued.
        running(&mut sim, v, 0);
        sim.cpus[0].curr_vruntime_seen = v;
        let t0 = &mut sim.tasks[0];
        (t0.vruntime, t0.deadline, t0.delayed, t0.cpu) = (v + 200_000, v + 2 * MS, true, 0);
        t0.state = State::Sleeping;
        sim.cpus[0].rq.push(0);
        // 0.6 ms later task 1 wakes it. requeue_delayed_entity sees task 1 still at v,
        // so task 0 (lag −0.1 ms) keeps its vruntime; the preemption check then brings
        // task 1 to v + 0.6 ms, past the average (v + 0.4 ms): it is not eligible, its
        // parity protection lapses, and task 0 runs. Had the requeue seen v + 0.6 ms,
        // task 0 (lag +0.2 ms) would have been placed at the others' average, v + 0.6
        // ms, and the protected task 1 kept the CPU.
        sim.wake(0, Some((1, 0, true)), 600_000);
        assert_eq!(sim.tasks[0].vruntime, v + 200_000);
        assert_eq!(sim.cpus[0].curr, Some(0));
        assert_eq!(sim.tasks[1].state, State::Runnable);
    }

    #[test]
    fn a_delayed_task_picked_finishes_its_dequeue_and_is_skipped() {
        let mut sim = sim(Scheduler::EevdfDelayDequeue, true);
        let v = VRUNTIME_BASE + 50 * MS;
        for (t, dv, delayed) in [(0, 0, true), (1, MS, false)] {
            let task = &mut sim.tasks[t];
            (task.vruntime, task.deadline, task.delayed) = (v + dv, v + dv + MS, delayed);
            task.state = if delayed {
                State::Sleeping
            } else {
                State::Runnable
            };
            sim.cpus[0].rq.push(t);
        }
        // Task 0 is the eligible one with the earliest deadline, but it is delayed: its
        // dequeue ends (lag 0.5 ms, dropped by DELAY_ZERO) and task 1 runs.
        assert_eq!(sim.pick_eevdf(0), Some(1));
        assert!(!sim.tasks[0].delayed);
        assert_eq!(sim.tasks[0].vlag, 0);
        assert!(sim.cpus[0].rq.is_empty());
    }

    #[test]
    fn releases_map_to_their_scheduler() {
        assert_eq!(
            Scheduler::of_release(Some("6.1.0-57-amd64")),
            Scheduler::Cfs
        );
        assert_eq!(Scheduler::of_release(Some("5.19.0")), Scheduler::Cfs);
        assert_eq!(Scheduler::of_release(Some("6.6.30")), Scheduler::Eevdf);
        assert_eq!(Scheduler::of_release(Some("6.11.2")), Scheduler::Eevdf);
        assert_eq!(
            Scheduler::of_release(Some("6.12.118-rig-sis-stats")),
            Scheduler::EevdfDelayDequeue
        );
        assert_eq!(
            Scheduler::of_release(Some("6.18.44-fc-v1045")),
            Scheduler::EevdfDelayDequeue
        );
        assert_eq!(Scheduler::of_release(None), Scheduler::Cfs);
    }

    #[test]
    fn eligibility_is_against_the_exact_average() {
        // vruntimes 10, 11, 13: average 11.33; 11 is eligible, 13 is not.
        let sum = 10 + 11 + 13;
        assert!(eligible(11, sum, 3));
        assert!(!eligible(12, sum, 3));
        assert_eq!(avg_vruntime([10, 11, 13].into_iter(), 0), 11);
        assert_eq!(avg_vruntime(std::iter::empty(), 7), 7);
    }

    #[test]
    fn lag_is_bounded_by_two_slices_or_a_tick() {
        // Slice 3 ms: the bound is 6 ms; slice 1.5 ms: the tick's 4 ms.
        assert_eq!(lag(100 * MS, 90 * MS, 3 * MS), 6 * MS as i64);
        assert_eq!(lag(100 * MS, 99 * MS, 3 * MS), MS as i64);
        assert_eq!(lag(100 * MS, 110 * MS, 1_500_000), -4 * MS as i64);
    }

    #[test]
    fn placement_scales_the_lag_so_the_new_average_keeps_it() {
        // Two queued at average 100; a task owed 6 is placed 6·3/2 = 9 behind, and
        // the new average, (2·100 + 91) / 3 = 97, is 6 ahead of it.
        let v = place(100, 6, 2);
        assert_eq!(v, 91);
        assert_eq!(avg_vruntime([100, 100, v].into_iter(), 0) - v, 6);
        assert_eq!(place(100, 6, 0), 100);
        assert_eq!(place(100, -4, 1), 108);
    }

    #[test]
    fn pick_takes_the_earliest_eligible_deadline_and_honours_parity() {
        let e = |id, vruntime, deadline| Entity {
            id,
            vruntime,
            deadline,
        };
        // Average 20: 0 (v 10) and 1 (v 20) are eligible, 2 (v 30) is not despite
        // its earliest deadline.
        let q = [e(0, 10, 50), e(1, 20, 40), e(2, 30, 35)];
        assert_eq!(pick(&q, None), Some(1));
        // A protected, eligible running task stays.
        assert_eq!(pick(&q, Some(0)), Some(0));
        // Protection ends when it is not eligible any more.
        assert_eq!(pick(&q, Some(2)), Some(1));
        assert_eq!(pick(&[], None), None);
    }
}
