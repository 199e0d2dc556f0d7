//! The periodic load balance of each LLC as the policies see it. Only the designated CPU
//! of each local group of the LLC domain balances it (should_we_balance runs before the
//! statistics are gathered), each group at its own interval: the LLC's weight in ms when
//! the group has an idle CPU, busy_factor 16 times that when it has none. So an LLC of G
//! cores sees G updates per interval, not one. Each update reads the LLC's utilisation
//! and idle count (what SIS_UTIL's update_idle_cpu_scan reads) and, with
//! update_cpu_capacity, every CPU's capload (what CAS reads). Only the balancing CPU's
//! PELT signal is brought up to date first, as run_rebalance_domains does (on the
//! modelled schedule, which does not say which CPU of the group runs it, the group's;
//! on behalf of idle CPUs, each of theirs); the rest of the LLC is read as it stands.
//! Shared by decision replay and the simulator, so a policy's state evolves the same
//! way in both.
//!
//! Where the trace shows the SCHED softirqs (run_rebalance_domains), a group balances in
//! a softirq of one of its own CPUs, as the kernel's record of its balances shows
//! (`traces/rig/rig.sh --kernel-state`: find_busiest_group on the 2x4 periodic load, 1,167
//! of 1,178 LLC balances in the trace's span ran on the balancing CPU itself, 11 on behalf
//! of a tickless one). Whether that CPU is busy is what its tick found (rq->idle_balance),
//! before the wakeups the same interrupt makes: whether it was running a task, not
//! whether one is queued there now. The busy interval is a jiffy short of 16 times the
//! idle one, as get_sd_balance_interval makes it.
//!
//! The groups are the SMT cores; a cluster level (whose groups would be clusters) is not
//! modelled.

use crate::policy::{LlcBalance, Policy};
use crate::state::Machine;

/// sd->busy_factor: a busy CPU balances this many times less often.
const BUSY_FACTOR: u64 = 16;

/// One jiffy at CONFIG_HZ=250 (Debian's): get_sd_balance_interval takes one off a busy
/// interval, so that the domains' balances do not keep coinciding.
const JIFFY_NS: u64 = 4_000_000;

/// One balancing group of an LLC domain and when it balances next.
struct Group {
    llc: usize,
    cpus: Vec<u32>,
    /// Its place among the LLC's groups, and how many there are: spreads the phases.
    index: u64,
    of: u64,
    /// None until the first event: the schedule starts with the trace.
    next: Option<u64>,
    /// sd->last_balance, where the trace's SCHED softirqs say when balances run; None
    /// until the group's first softirq.
    last: Option<u64>,
}

/// When each group balances next (or last balanced, where the trace's own SCHED_SOFTIRQs
/// say when balances run), which CPUs run a task, and whether the softirqs decide.
#[derive(Debug, Clone, Default)]
pub struct Schedule {
    next: Vec<(Option<u64>, Option<u64>)>,
    running: Vec<bool>,
    trace_driven: bool,
}

/// The schedule of every LLC's periodic balances, and the caploads the last one computed.
pub struct Balancer {
    llcs: Vec<(u32, Vec<u32>)>,
    groups: Vec<Group>,
    /// The soonest of the groups' `next`: callers check it per event before anything else.
    earliest: u64,
    /// The trace shows run_rebalance_domains (softirq SCHED): balances run there only.
    trace_driven: bool,
    /// Every CPU's capload after the last balance (0..1023).
    pub caploads: Vec<u32>,
    /// Which CPUs run a task, as the trace's last switch on each says: what a CPU's tick
    /// finds (rq->idle_balance), before the wakeups of the interrupt it comes in. Kept
    /// here, handed over with the schedule, so that a replay starting partway knows it
    /// for CPUs it has not yet seen switch.
    running: Vec<bool>,
}

impl Balancer {
    /// One balancing group per SMT core of each LLC of `m`, none scheduled until the first
    /// event.
    pub fn new(m: &Machine) -> Balancer {
        let llcs: Vec<(u32, Vec<u32>)> = m
            .topo
            .llc_cpus
            .iter()
            .map(|(k, v)| (*k, v.clone()))
            .collect();
        let mut groups = Vec::new();
        for (i, (_, cpus)) in llcs.iter().enumerate() {
            let mut seen: Vec<u32> = Vec::new();
            for &c in cpus {
                if seen.contains(&c) {
                    continue;
                }
                let mut core: Vec<u32> = m
                    .topo
                    .smt
                    .get(c as usize)
                    .map_or_else(|| vec![c], |s| s.clone())
                    .into_iter()
                    .filter(|x| cpus.contains(x))
                    .collect();
                if core.is_empty() {
                    core.push(c);
                }
                core.sort_unstable();
                seen.extend(&core);
                groups.push(Group {
                    llc: i,
                    cpus: core,
                    index: 0,
                    of: 0,
                    next: None,
                    last: None,
                });
            }
        }
        for i in 0..llcs.len() {
            let of = groups.iter().filter(|g| g.llc == i).count() as u64;
            for (index, g) in groups.iter_mut().filter(|g| g.llc == i).enumerate() {
                (g.index, g.of) = (index as u64, of);
            }
        }
        Balancer {
            llcs,
            groups,
            earliest: 0,
            trace_driven: false,
            caploads: vec![1023; m.topo.nr_cpus as usize],
            running: vec![false; m.topo.nr_cpus as usize],
        }
    }

    /// Whether some group's balance is due at `now` on the modelled schedule (cheap, for
    /// every event); never once the trace shows when balances run.
    pub fn due(&self, now: u64) -> bool {
        !self.trace_driven && now >= self.earliest
    }

    /// When each group balances next: what a replay starting partway through the trace
    /// takes over (see [`Balancer::set_schedule`]).
    pub fn schedule(&self) -> Schedule {
        Schedule {
            next: self.groups.iter().map(|g| (g.next, g.last)).collect(),
            running: self.running.clone(),
            trace_driven: self.trace_driven,
        }
    }

    /// Takes over a schedule another balancer kept over the events before these.
    pub fn set_schedule(&mut self, s: &Schedule) {
        for (g, &(next, last)) in self.groups.iter_mut().zip(&s.next) {
            (g.next, g.last) = (next, last);
        }
        self.trace_driven = s.trace_driven;
        if s.running.len() == self.running.len() {
            self.running.clone_from(&s.running);
        }
        self.earliest = self.groups.iter().filter_map(|g| g.next).min().unwrap_or(0);
    }

    /// Whether group `gi` is due at `now` (its first balance one interval after the
    /// start, as a domain's last_balance starts when it is built, the groups' phases
    /// spread over the busy interval, as a long-running busy machine's have drifted
    /// apart); if so its next balance is scheduled: the LLC's weight in ms on, 16 times
    /// that when the group has no idle CPU.
    fn take_due(&mut self, gi: usize, now: u64, is_idle: &impl Fn(u32) -> bool) -> bool {
        let weight = self.llcs[self.groups[gi].llc].1.len() as u64;
        let interval = weight * 1_000_000;
        let g = &mut self.groups[gi];
        let due = *g
            .next
            .get_or_insert(now + interval + BUSY_FACTOR * interval * g.index / g.of.max(1));
        if now < due {
            return false;
        }
        let busy = !g.cpus.iter().any(|&c| is_idle(c));
        g.next = Some(now + interval * if busy { BUSY_FACTOR } else { 1 });
        true
    }

    fn refresh_earliest(&mut self) {
        self.earliest = self
            .groups
            .iter()
            .filter_map(|g| g.next)
            .min()
            .unwrap_or(u64::MAX);
    }

    /// Keeps the schedule alone, as [`Balancer::tick`] moves it, with a CPU taken as idle
    /// when the switches say it runs its idle task: a cheap pass that only follows when
    /// the balances come.
    pub fn advance(&mut self, now: u64) {
        if !self.due(now) {
            return;
        }
        let running = self.running.clone();
        let is_idle = |c: u32| !running.get(c as usize).copied().unwrap_or(false);
        for gi in 0..self.groups.len() {
            self.take_due(gi, now, &is_idle);
        }
        self.refresh_earliest();
    }

    /// A sched_switch on `cpu` to `next_pid` (0: its idle task).
    pub fn switched(&mut self, cpu: u32, next_pid: i32) {
        if let Some(r) = self.running.get_mut(cpu as usize) {
            *r = next_pid != 0;
        }
    }

    /// The group a SCHED softirq on `cpu` at `now` balances, if its balance is due, its
    /// schedule moved on: rebalance_domains balances `cpu`'s own group once the interval
    /// since the group's last balance has passed: the LLC's weight in ms when `cpu` was
    /// idle at its tick, busy_factor times that less a jiffy when it was running a task
    /// (the group's first softirq only starts the count). From the first such softirq
    /// on, balances run only where the trace shows them.
    pub fn sched_softirq(&mut self, cpu: u32, now: u64) -> Option<usize> {
        self.trace_driven = true;
        let idle_at_tick = !self.running.get(cpu as usize).copied().unwrap_or(false);
        let gi = self.groups.iter().position(|g| g.cpus.contains(&cpu))?;
        let weight = self.llcs[self.groups[gi].llc].1.len() as u64;
        let idle_ns = weight * 1_000_000;
        let interval = if idle_at_tick {
            idle_ns
        } else {
            (BUSY_FACTOR * idle_ns)
                .saturating_sub(JIFFY_NS)
                .max(idle_ns)
        };
        let g = &mut self.groups[gi];
        let last = *g.last.get_or_insert(now);
        if now < last + interval {
            return None;
        }
        g.last = Some(now);
        Some(gi)
    }

    /// Runs every balance due at `now` on the modelled schedule, telling each policy.
    pub fn tick(&mut self, m: &mut Machine, mut policies: Vec<&mut Box<dyn Policy>>, now: u64) {
        for gi in 0..self.groups.len() {
            if self.take_due(gi, now, &|c| m.is_idle(c)) {
                self.balance(gi, m, &mut policies, now, true);
            }
        }
        self.refresh_earliest();
    }

    /// Runs the balances of a SCHED softirq on `cpu` (see [`Balancer::sched_softirq`]).
    pub fn softirq(
        &mut self,
        m: &mut Machine,
        mut policies: Vec<&mut Box<dyn Policy>>,
        cpu: u32,
        now: u64,
    ) {
        // A due balance of its own group: run_rebalance_domains updates the blocked
        // averages of its own CPU only (update_blocked_averages(this_cpu)); an SMT
        // sibling's signal, and what its removed load still holds, stay as its own
        // last update left them (a stalled vCPU's for tens of ms).
        if let Some(gi) = self.sched_softirq(cpu, now) {
            m.refresh(cpu, now);
            self.balance(gi, m, &mut policies, now, false);
        }
    }

    /// Group `gi` balances its LLC: it reads the LLC's utilisation and idle count and
    /// every CPU's capload, and tells the policies. With `refresh`, the group's CPUs'
    /// signals are brought up to date first: a balance on the modelled schedule, or one
    /// run on behalf of idle CPUs (nohz, which updates each one's blocked averages).
    fn balance(
        &mut self,
        gi: usize,
        m: &mut Machine,
        policies: &mut [&mut Box<dyn Policy>],
        now: u64,
        refresh: bool,
    ) {
        let llc = self.groups[gi].llc;
        // The other CPUs' signals are read as their last update left them, and so is
        // what their removed load still holds.
        let (llc_id, cpus) = &self.llcs[llc];
        if refresh {
            for &c in &self.groups[gi].cpus {
                m.refresh(c, now);
            }
        }
        let idle = cpus.iter().filter(|&&c| m.is_idle(c)).count() as u32;
        let seen = LlcBalance {
            weight: cpus.len() as u32,
            sum_util: cpus.iter().map(|&c| m.cpu_util(c)).sum(),
            idle_cpus: idle,
        };
        let max_cap = (0..m.topo.nr_cpus)
            .map(|c| m.capacity(c))
            .max()
            .unwrap_or(1024);
        for (c, cl) in self.caploads.iter_mut().enumerate() {
            *cl = crate::policy::cas::capload(m.capacity(c as u32), 1024.max(max_cap));
        }
        for p in policies.iter_mut() {
            p.on_llc_balance(*llc_id, &seen);
            p.on_capacities(&self.caploads, now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Topo;
    use crate::trace::event::build::{migrate, switch, wakeup, waking};

    const MS: u64 = 1_000_000;

    /// Two CPUs of `topo`: task 5 slept on CPU 1 and was pulled to CPU 0 by task 7's
    /// wakeup at 4 ms, so CPU 1 holds its load as removed; task 6 runs on CPU 1.
    fn pulled_off_cpu_1(topo: &crate::topology::Topology) -> Machine {
        let mut m = Machine::new(Topo::new(topo, 2));
        for e in [
            switch(0, 1, 0, 0, 5),
            switch(3 * MS, 1, 5, 1, 6),
            switch(0, 0, 0, 0, 7),
            waking(4 * MS, 0, 7, 5, 1),
            migrate(4 * MS, 0, 5, 1, 0),
            wakeup(4 * MS, 0, 7, 5, 0),
        ] {
            m.apply(&e);
        }
        m
    }

    /// CPU 0's group balances first (its phase comes first); that brings CPU 0's signal
    /// up to date, not CPU 1's, whose removed load waits for its own update.
    #[test]
    fn a_balance_updates_its_own_cpus_only() {
        let mut m = pulled_off_cpu_1(&crate::topology::Topology::flat(2));
        assert_eq!(m.cpus[1].removed.nr, 1);
        let mut b = Balancer::new(&m);
        b.tick(&mut m, Vec::new(), 4 * MS);
        // The LLC of 2 balances every 2 ms per idle group, CPU 0's group first.
        b.tick(&mut m, Vec::new(), 6 * MS);
        // (PELT time moves in 1024-ns steps.)
        assert!(m.cpus[0].avg.last_update_ns > 6 * MS - 1024);
        assert_eq!(m.cpus[1].removed.nr, 1);
        assert!(m.cpus[1].avg.last_update_ns <= 3 * MS);
    }

    /// On a trace with SCHED softirqs, the CPU that runs one brings its own signal up to
    /// date, not its SMT sibling's: CPUs 0 and 1 share a core, and CPU 1's removed load
    /// waits there.
    #[test]
    fn a_sched_softirq_updates_its_own_cpu_not_its_sibling() {
        let mut topo = crate::topology::Topology::flat(2);
        for c in &mut topo.cpus {
            (c.core, c.smt_siblings) = (0, vec![0, 1]);
        }
        let mut m = pulled_off_cpu_1(&topo);
        let mut b = Balancer::new(&m);
        b.switched(0, 7);
        b.switched(1, 6);
        // The core's first softirq starts the count. Both CPUs run a task: an LLC of 2
        // balances every 16 * 2 ms less a jiffy, 28 ms.
        b.softirq(&mut m, Vec::new(), 0, 5 * MS);
        b.softirq(&mut m, Vec::new(), 0, 32 * MS);
        assert!(m.cpus[0].avg.last_update_ns <= 4 * MS);
        b.softirq(&mut m, Vec::new(), 0, 33 * MS);
        assert!(m.cpus[0].avg.last_update_ns > 33 * MS - 1024);
        assert_eq!(m.cpus[1].removed.nr, 1);
        assert!(m.cpus[1].avg.last_update_ns <= 3 * MS);
        // CPU 1's own softirq, the core's balance due again, takes its removed load off.
        b.softirq(&mut m, Vec::new(), 1, 60 * MS);
        assert_eq!(m.cpus[1].removed.nr, 1);
        b.softirq(&mut m, Vec::new(), 1, 61 * MS);
        assert_eq!(m.cpus[1].removed.nr, 0);
    }

    /// A trace with SCHED softirqs says when balances run: a CPU's softirq balances its
    /// own group once the interval has passed, by whether the CPU was running a task;
    /// the modelled schedule stops. Four single-CPU groups, an LLC of 4: 4 ms idle, 64 ms
    /// less a jiffy (60 ms) busy.
    #[test]
    fn the_traces_sched_softirqs_run_the_balances() {
        let m = Machine::new(Topo::new(&crate::topology::Topology::flat(4), 4));
        let mut b = Balancer::new(&m);
        assert!(b.due(0));
        // CPU 0 runs task 10: its first softirq starts the count.
        b.switched(0, 10);
        assert_eq!(b.sched_softirq(0, 0), None);
        assert!(!b.due(10_000 * MS), "the modelled schedule has stopped");
        assert_eq!(b.sched_softirq(0, 5 * MS), None);
        assert_eq!(b.sched_softirq(0, 59 * MS), None);
        assert_eq!(b.sched_softirq(0, 60 * MS), Some(0));
        // CPU 2, idle: every 4 ms; an idle CPU's softirq balances no other group.
        assert_eq!(b.sched_softirq(2, 10 * MS), None);
        assert_eq!(b.sched_softirq(2, 13 * MS), None);
        assert_eq!(b.sched_softirq(2, 14 * MS), Some(2));
        // CPU 0 idle since: its group is due 4 ms after its last balance.
        b.switched(0, 0);
        assert_eq!(b.sched_softirq(0, 63 * MS), None);
        assert_eq!(b.sched_softirq(0, 64 * MS), Some(0));
        // The schedule, and which CPUs run a task, are handed over with the mode.
        b.switched(2, 11);
        let mut other = Balancer::new(&m);
        other.set_schedule(&b.schedule());
        assert!(!other.due(10_000 * MS));
        assert_eq!(other.sched_softirq(2, 18 * MS), None, "CPU 2 runs task 11");
        assert_eq!(other.sched_softirq(2, 74 * MS), Some(2));
    }

    /// Whether the softirq's CPU is busy is what its tick found: a CPU running its idle
    /// task is idle to the balance though a wakeup in the same interrupt has queued a
    /// task there. CPU 1 idle, task 9 woken onto it at 11 ms, before the softirq at 12.
    #[test]
    fn a_cpu_idle_at_its_tick_balances_at_the_idle_interval() {
        let mut m = Machine::new(Topo::new(&crate::topology::Topology::flat(4), 4));
        for e in [
            switch(0, 1, 0, 0, 9),
            switch(MS, 1, 9, 1, 0),
            waking(11 * MS, 1, 0, 9, 1),
            wakeup(11 * MS, 1, 0, 9, 1),
        ] {
            m.apply(&e);
        }
        assert!(!m.is_idle(1), "task 9 is queued on CPU 1");
        assert!(m.cpus[1].avg.last_update_ns <= 11 * MS);
        let mut b = Balancer::new(&m);
        b.switched(1, 9);
        b.switched(1, 0);
        b.softirq(&mut m, Vec::new(), 1, 6 * MS);
        b.softirq(&mut m, Vec::new(), 1, 12 * MS);
        assert!(m.cpus[1].avg.last_update_ns > 12 * MS - 1024);
    }
}
