//! SIS_PROP as in v5.18 select_idle_cpu (the `vanilla` baseline of the SIS_UTIL, newidle
//! and CAS threads; default off from v6.0, removed in v6.7 by 984ffb6a4366). Since v5.14
//! (94aafc3ee31d) the idle estimate is aged per jiffy:
//!
//! At scan time, on the waking CPU's rq:
//!   while wake_stamp < jiffies and wake_avg_idle > 0: wake_stamp += 1, wake_avg_idle /= 2
//!   avg_cost = avg_scan_cost(waker's LLC) + 1
//!   span_avg = llc_weight(target's LLC) · wake_avg_idle
//!   nr = span_avg / avg_cost  if span_avg > 4 · avg_cost,  else 4
//! The budget is decremented before each CPU is examined, so at most nr − 1 CPUs are
//! examined (the minimum of 4 means 3). After a scan that found a CPU or exhausted the
//! LLC (not one that ran out of budget, and never after an idle-core scan):
//!   wake_avg_idle −= min(wake_avg_idle, cost);  avg_scan_cost += (cost − avg_scan_cost)/8
//! Whenever the rq records an idle period: wake_avg_idle = avg_idle / 2, wake_stamp =
//! jiffies. Initial avg_idle is 2 · sysctl_sched_migration_cost = 1 ms.

use std::collections::HashMap;

use super::{Budget, ParamInfo, ParamKind, Params, Policy, PolicyInfo, ScanContext};

/// 2 · sysctl_sched_migration_cost: every rq's avg_idle at boot.
pub const DEFAULT_AVG_IDLE_NS: u64 = 1_000_000;

/// Builds `sis_prop` from checked parameters.
pub fn build(p: &Params) -> Box<dyn Policy> {
    Box::new(SisProp::from_params(p))
}

/// Registry entry of `sis_prop` (alias `vanilla`).
pub static INFO: PolicyInfo = PolicyInfo {
    name: "sis_prop",
    aliases: &["vanilla"],
    follows: "Linux v5.18 (SIS_PROP with the v5.14 aging)",
    summary: "scan budget proportional to the waker's aged idle time over the scan cost",
    params: &[
        ParamInfo {
            name: "hz",
            kind: ParamKind::Int {
                default: 250,
                min: 100,
                max: 1000,
            },
            doc: "CONFIG_HZ: the aging halves the idle estimate once per jiffy",
        },
        ParamInfo {
            name: "avg_idle_ns",
            kind: ParamKind::Int {
                default: DEFAULT_AVG_IDLE_NS,
                min: 0,
                max: u64::MAX / 1024,
            },
            doc: "initial avg_idle of every rq (2 × sched_migration_cost)",
        },
    ],
    replayable: true,
};

/// The budget `nr` of v5.18 for one scan (CPUs examined is nr − 1).
pub fn nr(llc_weight: u32, avg_idle_ns: u64, avg_scan_cost_ns: u64) -> u64 {
    let avg_cost = avg_scan_cost_ns + 1;
    let span_avg = llc_weight as u64 * avg_idle_ns;
    if span_avg > 4 * avg_cost {
        span_avg / avg_cost
    } else {
        4
    }
}

#[derive(Debug, Clone, Copy)]
struct RqIdle {
    wake_avg_idle: u64,
    wake_stamp: u64,
}

/// v5.18 SIS_PROP: each rq's aged idle estimate (wake_avg_idle, wake_stamp) and each LLC's
/// avg_scan_cost, created on first use.
pub struct SisProp {
    jiffy_ns: u64,
    initial_avg_idle: u64,
    rqs: HashMap<u32, RqIdle>,
    /// Per LLC id: avg_scan_cost (ns), signed EWMA as the kernel keeps it.
    avg_scan_cost: HashMap<u32, i64>,
}

impl SisProp {
    /// SIS_PROP at CONFIG_HZ `hz`, every rq's avg_idle starting at `initial_avg_idle`.
    pub fn new(hz: u64, initial_avg_idle: u64) -> SisProp {
        SisProp {
            jiffy_ns: 1_000_000_000 / hz,
            initial_avg_idle,
            rqs: HashMap::new(),
            avg_scan_cost: HashMap::new(),
        }
    }

    /// From checked parameters (`hz`, `avg_idle_ns`).
    pub fn from_params(p: &Params) -> SisProp {
        SisProp::new(p.int("hz"), p.int("avg_idle_ns"))
    }

    fn rq(&mut self, cpu: u32) -> &mut RqIdle {
        let init = self.initial_avg_idle;
        self.rqs.entry(cpu).or_insert(RqIdle {
            wake_avg_idle: init,
            wake_stamp: 0,
        })
    }
}

impl Policy for SisProp {
    fn info(&self) -> &'static PolicyInfo {
        &INFO
    }

    fn on_avg_idle(&mut self, cpu: u32, avg_idle_ns: u64, now_ns: u64) {
        let jiffies = now_ns / self.jiffy_ns;
        let rq = self.rq(cpu);
        rq.wake_avg_idle = avg_idle_ns / 2;
        rq.wake_stamp = jiffies;
    }

    fn budget(&mut self, ctx: &ScanContext) -> Budget {
        if ctx.idle_core {
            return Budget::Unlimited;
        }
        let jiffies = ctx.now_ns / self.jiffy_ns;
        let cost = self
            .avg_scan_cost
            .get(&ctx.waker_llc)
            .copied()
            .unwrap_or(0)
            .max(0) as u64;
        let rq = self.rq(ctx.waker_cpu);
        if rq.wake_stamp < jiffies {
            // Halve once per elapsed jiffy; past 64 halvings nothing is left.
            let n = (jiffies - rq.wake_stamp).min(64);
            rq.wake_avg_idle = rq.wake_avg_idle.checked_shr(n as u32).unwrap_or(0);
            rq.wake_stamp = jiffies;
        }
        let nr = nr(ctx.llc_size, rq.wake_avg_idle, cost);
        Budget::Cpus((nr - 1).min(u32::MAX as u64) as u32)
    }

    fn after_scan(&mut self, ctx: &ScanContext, cost_ns: u64) {
        let rq = self.rq(ctx.waker_cpu);
        rq.wake_avg_idle -= rq.wake_avg_idle.min(cost_ns);
        let avg = self.avg_scan_cost.entry(ctx.waker_llc).or_insert(0);
        *avg += (cost_ns as i64 - *avg) / 8;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proportional_budget_and_its_minimum() {
        // 112 CPUs, 10 µs idle, 999 ns cost: avg_cost 1000, span_avg 1 120 000 > 4000.
        assert_eq!(nr(112, 10_000, 999), 1120);
        // 8 CPUs, 100 ns idle: span_avg 800 is not above 4 · 1000, so the minimum 4.
        assert_eq!(nr(8, 100, 999), 4);
        // Exactly 4 · avg_cost is not above it either.
        assert_eq!(nr(4, 1000, 999), 4);
        assert_eq!(nr(5, 1000, 999), 5);
    }

    #[test]
    fn minimum_of_four_examines_three_cpus_and_aging_halves_per_jiffy() {
        let mut p = SisProp::from_params(&Params::parse(&INFO, "hz=1000").unwrap());
        let ctx = |now| ScanContext {
            llc: 0,
            llc_size: 16,
            waker_cpu: 1,
            waker_llc: 0,
            now_ns: now,
            idle_core: false,
        };
        // avg_idle 8 µs recorded at t = 0: wake_avg_idle = 4 µs; cost 0 → avg_cost 1.
        p.on_avg_idle(1, 8_000, 0);
        assert_eq!(p.budget(&ctx(0)), Budget::Cpus(16 * 4_000 - 1));
        // Three jiffies later: 4000 / 8 = 500 ns → nr = 16 · 500 = 8000.
        assert_eq!(p.budget(&ctx(3_000_000)), Budget::Cpus(8_000 - 1));
        // A scan costing 1 µs: wake_avg_idle 0 and avg_scan_cost 125 → minimum budget.
        p.after_scan(&ctx(3_000_000), 1_000);
        assert_eq!(p.budget(&ctx(3_000_000)), Budget::Cpus(3));
    }
}
