//! SIS_UTIL as merged in v6.0 (70fb5ccf2ebb, Chen Yu) and unchanged through v7.1.
//!
//! Producer, at the end of update_sd_lb_stats for the LLC domain during periodic and
//! idle balancing (never newidle), integer arithmetic with SCHED_CAPACITY_SCALE = 1024:
//!
//!   x   = ⌊sum_util / llc_weight⌋                      (average CPU util, 0..1024)
//!   tmp = min(⌊x² · pct² / (10000 · 1024)⌋, 1024)      pct = the LLC's imbalance_pct
//!   nr_idle_scan = ⌊(1024 − tmp) · llc_weight / 1024⌋
//!
//! i.e. nr = W·(1 − (x/1024)²·(pct/100)²), reaching 0 at 85.5 % with pct = 117.
//! Consumer, select_idle_cpu: nr_idle_scan == 0 returns before any scan, the idle-core
//! scan included; otherwise at most nr_idle_scan CPUs are examined in idle-CPU mode.
//! nr_idle_scan starts at 0 after a domain rebuild (the shared struct is kzalloc'ed).

use std::collections::HashMap;

use super::{Budget, LlcBalance, ParamInfo, ParamKind, Params, Policy, PolicyInfo, ScanContext};

/// The LLC domain's imbalance_pct (sd_init: 117 for MC).
pub const DEFAULT_PCT: u64 = 117;

/// Builds `sis_util` from checked parameters.
pub fn build(p: &Params) -> Box<dyn Policy> {
    Box::new(SisUtil::from_params(p))
}

/// Registry entry of `sis_util`.
pub static INFO: PolicyInfo = PolicyInfo {
    name: "sis_util",
    aliases: &[],
    follows: "Linux v6.0 (70fb5ccf2ebb) to v7.1",
    summary: "scan budget from the LLC's summed utilisation at the last periodic balance",
    params: &[ParamInfo {
        name: "pct",
        kind: ParamKind::Int {
            default: DEFAULT_PCT,
            min: 100,
            max: 200,
        },
        doc: "the LLC domain's imbalance_pct",
    }],
    replayable: true,
};

/// nr_idle_scan for one LLC snapshot, as update_idle_cpu_scan computes it.
pub fn nr_idle_scan(sum_util: u64, llc_weight: u32, pct: u64) -> u32 {
    if llc_weight == 0 {
        return 0;
    }
    let x = sum_util / llc_weight as u64;
    let tmp = (x * x * pct * pct / (10_000 * 1024)).min(1024);
    ((1024 - tmp) * llc_weight as u64 / 1024) as u32
}

/// Merged SIS_UTIL: the last nr_idle_scan of each LLC (sd_llc_shared->nr_idle_scan).
pub struct SisUtil {
    pct: u64,
    /// Per LLC id: the last nr_idle_scan written (absent = 0, as after boot).
    nr_idle_scan: HashMap<u32, u32>,
}

impl SisUtil {
    /// SIS_UTIL with the LLC domain's imbalance_pct `pct`.
    pub fn new(pct: u64) -> SisUtil {
        SisUtil {
            pct,
            nr_idle_scan: HashMap::new(),
        }
    }

    /// From checked parameters (`pct`).
    pub fn from_params(p: &Params) -> SisUtil {
        SisUtil::new(p.int("pct"))
    }
}

impl Policy for SisUtil {
    fn info(&self) -> &'static PolicyInfo {
        &INFO
    }
    fn on_llc_balance(&mut self, llc: u32, seen: &LlcBalance) {
        self.nr_idle_scan
            .insert(llc, nr_idle_scan(seen.sum_util, seen.weight, self.pct));
    }
    fn budget(&mut self, ctx: &ScanContext) -> Budget {
        Budget::Cpus(self.nr_idle_scan.get(&ctx.llc).copied().unwrap_or(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worked_example_of_the_kernel_model() {
        // W = 16, x = 512: tmp = 512²·117²/10240000 = 350, y = 674, nr = ⌊674·16/1024⌋ = 10.
        assert_eq!(nr_idle_scan(512 * 16, 16, 117), 10);
    }

    #[test]
    fn merged_formula_on_the_seed_table_inputs_for_112_cpus() {
        // sum_util = ⌈u % · 112 · 1024⌉, so x = ⌊sum_util/112⌋ = 0, 51, 153, 256, 358, 460,
        // 563, 665, 768, 870; tmp = ⌊x²·13689/10240000⌋ = 0, 3, 31, 87, 171, 282, 423, 591,
        // 788, 1011; nr = ⌊(1024 − tmp)·112/1024⌋.
        let expect = [112, 111, 108, 102, 93, 81, 65, 47, 25, 1];
        for (u, want) in [0u64, 5, 15, 25, 35, 45, 55, 65, 75, 85].iter().zip(expect) {
            let sum = (u * 112 * 1024).div_ceil(100);
            assert_eq!(nr_idle_scan(sum, 112, 117), want, "{u}%");
        }
        // Full load: no scan at all.
        assert_eq!(nr_idle_scan(112 * 1024, 112, 117), 0);
    }

    #[test]
    fn starts_at_zero_until_a_balance() {
        let mut p = SisUtil::from_params(&Params::parse(&INFO, "").unwrap());
        let ctx = ScanContext {
            llc: 3,
            llc_size: 8,
            ..Default::default()
        };
        assert_eq!(p.budget(&ctx), Budget::Cpus(0));
        p.on_llc_balance(
            3,
            &LlcBalance {
                weight: 8,
                sum_util: 0,
                idle_cpus: 8,
            },
        );
        assert_eq!(p.budget(&ctx), Budget::Cpus(8));
    }
}
