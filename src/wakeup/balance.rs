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
//! The groups are the SMT cores; a cluster level (whose groups would be clusters) is not
//! modelled.

use crate::policy::{LlcBalance, Policy};
use crate::state::Machine;

/// sd->busy_factor: a busy CPU balances this many times less often.
const BUSY_FACTOR: u64 = 16;

/// One balancing group of an LLC domain and when it balances next.
struct Group {
    llc: usize,
    cpus: Vec<u32>,
    /// Its place among the LLC's groups, and how many there are: spreads the phases.
    index: u64,
    of: u64,
    /// None until the first event: the schedule starts with the trace.
    next: Option<u64>,
}

/// When each group balances next, and whether the trace's own SCHED_SOFTIRQs say when
/// balances run (then the modelled schedule only says which are due).
#[derive(Debug, Clone, Default)]
pub struct Schedule {
    next: Vec<Option<u64>>,
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
            next: self.groups.iter().map(|g| g.next).collect(),
            trace_driven: self.trace_driven,
        }
    }

    /// Takes over a schedule another balancer kept over the events before these.
    pub fn set_schedule(&mut self, s: &Schedule) {
        for (g, n) in self.groups.iter_mut().zip(&s.next) {
            g.next = *n;
        }
        self.trace_driven = s.trace_driven;
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

    /// Keeps the schedule alone, as [`Balancer::tick`] moves it, with `is_idle` telling
    /// which CPUs are idle: a cheap pass that only follows when the balances come.
    pub fn advance(&mut self, now: u64, is_idle: impl Fn(u32) -> bool) {
        if !self.due(now) {
            return;
        }
        for gi in 0..self.groups.len() {
            self.take_due(gi, now, &is_idle);
        }
        self.refresh_earliest();
    }

    /// The groups a SCHED softirq on `cpu` at `now` balances, their schedule moved on:
    /// run_rebalance_domains balances `cpu`'s own group when it is due, and, run by the
    /// idle-balance CPU, the groups whose CPUs are all idle (tickless, balanced on their
    /// behalf) when they are due. From the first such softirq on, balances run only
    /// where the trace shows them.
    pub fn sched_softirq(
        &mut self,
        cpu: u32,
        now: u64,
        is_idle: impl Fn(u32) -> bool,
    ) -> Vec<usize> {
        self.trace_driven = true;
        let mut due = Vec::new();
        for gi in 0..self.groups.len() {
            let g = &self.groups[gi];
            let on_behalf = g.cpus.iter().all(|&c| c != cpu && is_idle(c));
            if (g.cpus.contains(&cpu) || on_behalf) && self.take_due(gi, now, &is_idle) {
                due.push(gi);
            }
        }
        due
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
        for gi in self.sched_softirq(cpu, now, |c| m.is_idle(c)) {
            let own = self.groups[gi].cpus.contains(&cpu);
            if own {
                m.refresh(cpu, now);
            }
            self.balance(gi, m, &mut policies, now, !own);
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
        // The core's first sight: no balance due.
        b.softirq(&mut m, Vec::new(), 0, 5 * MS);
        // Due (an LLC of 2: 2 ms on): the core balances, and as both its CPUs are busy,
        // next 16 times that later.
        b.softirq(&mut m, Vec::new(), 0, 8 * MS);
        assert!(m.cpus[0].avg.last_update_ns > 8 * MS - 1024);
        assert_eq!(m.cpus[1].removed.nr, 1);
        assert!(m.cpus[1].avg.last_update_ns <= 3 * MS);
        // CPU 1's own softirq, the core's balance due again, takes its removed load off.
        b.softirq(&mut m, Vec::new(), 1, 39 * MS);
        assert_eq!(m.cpus[1].removed.nr, 1);
        b.softirq(&mut m, Vec::new(), 1, 40 * MS);
        assert_eq!(m.cpus[1].removed.nr, 0);
    }

    /// A trace with SCHED softirqs says when balances run: the CPU's own group when due,
    /// and the all-idle groups (balanced on their behalf) when due; the modelled
    /// schedule stops. Four single-CPU groups (LLC of 4: 4 ms idle, 64 ms busy), phases
    /// 0, 16, 32 and 48 ms; CPUs 0 and 1 busy, 2 and 3 idle.
    #[test]
    fn the_traces_sched_softirqs_run_the_balances() {
        let mut m = Machine::new(Topo::new(&crate::topology::Topology::flat(4), 4));
        for e in [switch(0, 0, 0, 0, 10), switch(0, 1, 0, 0, 11)] {
            m.apply(&e);
        }
        let idle = |c: u32| c >= 2;
        let mut b = Balancer::new(&m);
        assert!(b.due(0));
        // First sight of groups 0, 2 and 3: first balances at 4, 4 + 32 and 4 + 48 ms.
        assert!(b.sched_softirq(0, 0, idle).is_empty());
        assert!(!b.due(10_000 * MS), "the modelled schedule has stopped");
        assert_eq!(b.sched_softirq(0, 5 * MS, idle), vec![0]);
        // Group 0 is busy: next at 5 + 64 ms. CPU 1's group is not CPU 0's to balance.
        assert!(b.sched_softirq(0, 30 * MS, idle).is_empty());
        assert_eq!(b.sched_softirq(0, 37 * MS, idle), vec![2]);
        // CPU 1's group seen first now (due at 53 + 4 + 16 ms); group 2 due again (idle:
        // every 4 ms), group 3 due for the first time.
        assert_eq!(b.sched_softirq(1, 53 * MS, idle), vec![2, 3]);
        // At 69 ms CPU 0's own (busy) group, and the idle ones again (next at 57 ms).
        assert_eq!(b.sched_softirq(0, 69 * MS, idle), vec![0, 2, 3]);
        // The schedule is handed over with the mode.
        let mut other = Balancer::new(&m);
        other.set_schedule(&b.schedule());
        assert!(!other.due(10_000 * MS));
    }
}
