//! SIS_UTIL as posted in v3 (seed 000, Chen Yu, April 2022), before the merged form.
//!
//!   llc_util_pct = ⌊sum_util · 100 / (nr_llc · 1024)⌋
//!   nr_scan = max(⌊(100 − ⌊llc_util_pct² / 72⌋) · nr_llc / 100⌋, 0)
//!
//! i.e. y = 100 − x²/72 percent of the LLC, 0 from 85 % on. The consumer is the same as
//! the merged one: nr_scan == 0 stops select_idle_cpu before any scan.

use std::collections::HashMap;

use super::{Budget, LlcBalance, ParamInfo, ParamKind, Params, Policy, PolicyInfo, ScanContext};

/// Builds `sis_util_v3` from checked parameters.
pub fn build(p: &Params) -> Box<dyn Policy> {
    Box::new(SisUtilV3::from_params(p))
}

/// Registry entry of `sis_util_v3`.
pub static INFO: PolicyInfo = PolicyInfo {
    name: "sis_util_v3",
    aliases: &[],
    follows: "SIS_UTIL v3 as posted (seed 000)",
    summary: "scan 100 − x²/72 % of the LLC, x the LLC's utilisation %; stop at 85 %",
    params: &[ParamInfo {
        name: "div",
        kind: ParamKind::Int {
            default: 72,
            min: 1,
            max: 10_000,
        },
        doc: "the divisor of x²: 72 puts the stop at 85 %",
    }],
    replayable: true,
};

/// v3's nr_scan for one LLC snapshot: `sum_util` (1024 per busy CPU) over `nr_llc` CPUs,
/// with `div` the divisor of x² (72 as posted). 0 for an empty LLC.
pub fn nr_scan(sum_util: u64, nr_llc: u32, div: i64) -> u32 {
    if nr_llc == 0 {
        return 0;
    }
    let pct = (sum_util * 100 / (nr_llc as u64 * 1024)) as i64;
    ((100 - pct * pct / div) * nr_llc as i64 / 100).max(0) as u32
}

/// SIS_UTIL v3: the last nr_scan of each LLC (0 before its first periodic balance).
pub struct SisUtilV3 {
    div: i64,
    nr_scan: HashMap<u32, u32>,
}

impl SisUtilV3 {
    /// From checked parameters (`div`).
    pub fn from_params(p: &Params) -> SisUtilV3 {
        SisUtilV3 {
            div: p.int("div") as i64,
            nr_scan: HashMap::new(),
        }
    }
}

impl Policy for SisUtilV3 {
    fn info(&self) -> &'static PolicyInfo {
        &INFO
    }
    fn on_llc_balance(&mut self, llc: u32, seen: &LlcBalance) {
        self.nr_scan
            .insert(llc, nr_scan(seen.sum_util, seen.weight, self.div));
    }
    fn budget(&mut self, ctx: &ScanContext) -> Budget {
        Budget::Cpus(self.nr_scan.get(&ctx.llc).copied().unwrap_or(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seed_table_for_112_cpus() {
        // "sum_util%   0    5   15   25  35  45  55   65   75   85
        //  scan_ns   112  112  108  103  92  80  64   47   24    0"
        let utils = [0u64, 5, 15, 25, 35, 45, 55, 65, 75, 85];
        let seed = [112, 112, 108, 103, 92, 80, 64, 47, 24, 0];
        for (u, want) in utils.iter().zip(seed) {
            let sum = (u * 112 * 1024).div_ceil(100);
            assert_eq!(nr_scan(sum, 112, 72), want, "{u}%");
        }
    }
}
