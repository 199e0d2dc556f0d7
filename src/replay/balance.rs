//! The periodic load balance of each LLC as the policies see it: at the LLC domain's
//! interval (its weight in ms with an idle CPU, busy_factor 16 times that without), the
//! LLC's utilisation and idle count (what SIS_UTIL's update_idle_cpu_scan reads) and,
//! with update_cpu_capacity, every CPU's capload (what CAS reads). Shared by decision
//! replay and the simulator, so a policy's state evolves the same way in both.

use std::collections::BTreeMap;

use crate::policy::{LlcBalance, Policy};
use crate::state::Machine;

pub struct Balancer {
    llcs: Vec<(u32, Vec<u32>)>,
    next: BTreeMap<u32, u64>,
    /// The soonest of `next`: callers check it per event before anything else.
    earliest: u64,
    /// Every CPU's capload after the last balance (0..1023).
    pub caploads: Vec<u32>,
}

impl Balancer {
    pub fn new(m: &Machine) -> Balancer {
        Balancer {
            llcs: m
                .topo
                .llc_cpus
                .iter()
                .map(|(k, v)| (*k, v.clone()))
                .collect(),
            next: BTreeMap::new(),
            earliest: 0,
            caploads: vec![1023; m.topo.nr_cpus as usize],
        }
    }

    /// Whether some LLC's balance is due at `now` (cheap, for every event).
    pub fn due(&self, now: u64) -> bool {
        now >= self.earliest
    }

    /// Runs every balance due at `now`, telling each policy.
    pub fn tick(&mut self, m: &mut Machine, mut policies: Vec<&mut Box<dyn Policy>>, now: u64) {
        for (llc, cpus) in &self.llcs {
            // The first balance comes one interval after the start, as a domain's
            // last_balance starts when it is built: statistics of PELT signals that
            // have only begun to accrue would mislead SIS_UTIL for a whole interval.
            let due = self
                .next
                .entry(*llc)
                .or_insert(now + cpus.len() as u64 * 1_000_000);
            if now < *due {
                continue;
            }
            for &c in cpus {
                m.refresh(c, now);
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
                p.on_llc_balance(*llc, &seen);
                p.on_capacities(&self.caploads, now);
            }
            let ms = cpus.len() as u64 * if idle > 0 { 1 } else { 16 };
            *due = now + ms * 1_000_000;
        }
        self.earliest = self.next.values().copied().min().unwrap_or(u64::MAX);
    }
}
