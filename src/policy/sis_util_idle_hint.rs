//! The follow-up seed 000 proposes for its limitation \[2\]: "the nr_scan should be
//! increased if idle CPUs are detected during periodic load balance". With tasks pinned
//! to 7 of 8 CPUs the LLC is 87.5 % utilised, merged SIS_UTIL stops scanning and the idle
//! CPU is never found. Here the merged budget is kept, but when the last periodic
//! balance of the LLC saw idle CPUs, at least `min_pct` % of the LLC is scanned.
//! Not in any kernel; the default (100 %) scans until the idle CPU is found.

use std::collections::HashMap;

use super::sis_util::nr_idle_scan;
use super::{Budget, LlcBalance, ParamInfo, ParamKind, Params, Policy, PolicyInfo, ScanContext};

/// Builds `sis_util_idle_hint` from checked parameters.
pub fn build(p: &Params) -> Box<dyn Policy> {
    Box::new(SisUtilIdleHint::from_params(p))
}

/// Registry entry of `sis_util_idle_hint`.
pub static INFO: PolicyInfo = PolicyInfo {
    name: "sis_util_idle_hint",
    aliases: &[],
    follows: "seed 000 limitation [2] (proposal, unmerged)",
    summary: "SIS_UTIL, but scan at least min_pct % of the LLC when balancing saw idle CPUs",
    params: &[
        ParamInfo {
            name: "pct",
            kind: ParamKind::Int {
                default: super::sis_util::DEFAULT_PCT,
                min: 100,
                max: 200,
            },
            doc: "the LLC domain's imbalance_pct",
        },
        ParamInfo {
            name: "min_pct",
            kind: ParamKind::Int {
                default: 100,
                min: 0,
                max: 100,
            },
            doc: "share of the LLC always scanned after a balance that saw an idle CPU",
        },
    ],
    replayable: true,
};

/// Merged SIS_UTIL with a floor of `min_pct` % of the LLC (rounded up) after a periodic
/// balance that saw an idle CPU; per LLC, the last budget computed (0 before any balance).
pub struct SisUtilIdleHint {
    pct: u64,
    min_pct: u32,
    nr: HashMap<u32, u32>,
}

impl SisUtilIdleHint {
    /// From checked parameters (`pct`, `min_pct`).
    pub fn from_params(p: &Params) -> SisUtilIdleHint {
        SisUtilIdleHint {
            pct: p.int("pct"),
            min_pct: p.int("min_pct") as u32,
            nr: HashMap::new(),
        }
    }
}

impl Policy for SisUtilIdleHint {
    fn info(&self) -> &'static PolicyInfo {
        &INFO
    }
    fn on_llc_balance(&mut self, llc: u32, seen: &LlcBalance) {
        let mut nr = nr_idle_scan(seen.sum_util, seen.weight, self.pct);
        if seen.idle_cpus > 0 {
            nr = nr.max((seen.weight * self.min_pct).div_ceil(100));
        }
        self.nr.insert(llc, nr);
    }
    fn budget(&mut self, ctx: &ScanContext) -> Budget {
        Budget::Cpus(self.nr.get(&ctx.llc).copied().unwrap_or(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seven_pinned_busy_cpus_and_one_idle() {
        // Seed 000 limitation [2]: util 7 × 1024 over 8 CPUs = 87.5 %.
        let seen = LlcBalance {
            weight: 8,
            sum_util: 7 * 1024,
            idle_cpus: 1,
        };
        assert_eq!(nr_idle_scan(seen.sum_util, 8, 117), 0);
        let mut p = SisUtilIdleHint::from_params(&Params::parse(&INFO, "").unwrap());
        p.on_llc_balance(0, &seen);
        assert_eq!(
            p.budget(&ScanContext {
                llc_size: 8,
                ..Default::default()
            }),
            Budget::Cpus(8)
        );
        let mut half = SisUtilIdleHint::from_params(&Params::parse(&INFO, "min_pct=50").unwrap());
        half.on_llc_balance(0, &seen);
        assert_eq!(
            half.budget(&ScanContext {
                llc_size: 8,
                ..Default::default()
            }),
            Budget::Cpus(4)
        );
    }
}
