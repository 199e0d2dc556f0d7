//! The follow-up seed 000 proposes for its limitation \[3\] (Prateek Nayak): "we should scan
//! aggressively in an LLC domain with 16 CPUs. Because the cost to search for an idle one
//! among 16 CPUs is negligible." LLCs of at most `max_llc` CPUs are scanned whole; larger
//! ones use merged SIS_UTIL. Not in any kernel.

use super::sis_util::SisUtil;
use super::{Budget, LlcBalance, ParamInfo, ParamKind, Params, Policy, PolicyInfo, ScanContext};

/// Builds `sis_util_small_llc` from checked parameters.
pub fn build(p: &Params) -> Box<dyn Policy> {
    Box::new(SisUtilSmallLlc::from_params(p))
}

/// Registry entry of `sis_util_small_llc`.
pub static INFO: PolicyInfo = PolicyInfo {
    name: "sis_util_small_llc",
    aliases: &[],
    follows: "seed 000 limitation [3] (proposal, unmerged)",
    summary: "scan LLCs of at most max_llc CPUs whole, SIS_UTIL for larger ones",
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
            name: "max_llc",
            kind: ParamKind::Int {
                default: 16,
                min: 0,
                max: 4096,
            },
            doc: "largest LLC that is always scanned whole",
        },
    ],
    replayable: true,
};

/// Whole-LLC scans up to `max_llc` CPUs, merged SIS_UTIL above.
pub struct SisUtilSmallLlc {
    max_llc: u32,
    /// Merged SIS_UTIL, for the larger LLCs.
    large: SisUtil,
}

impl SisUtilSmallLlc {
    /// From checked parameters (`pct`, `max_llc`).
    pub fn from_params(p: &Params) -> SisUtilSmallLlc {
        SisUtilSmallLlc {
            max_llc: p.int("max_llc") as u32,
            large: SisUtil::new(p.int("pct")),
        }
    }
}

impl Policy for SisUtilSmallLlc {
    fn info(&self) -> &'static PolicyInfo {
        &INFO
    }
    fn on_llc_balance(&mut self, llc: u32, seen: &LlcBalance) {
        self.large.on_llc_balance(llc, seen)
    }
    fn budget(&mut self, ctx: &ScanContext) -> Budget {
        if ctx.llc_size <= self.max_llc {
            return Budget::Unlimited;
        }
        self.large.budget(ctx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_llcs_are_scanned_whole_even_when_busy() {
        let mut p = SisUtilSmallLlc::from_params(&Params::parse(&INFO, "").unwrap());
        p.on_llc_balance(
            0,
            &LlcBalance {
                weight: 16,
                sum_util: 16 * 1024,
                idle_cpus: 0,
            },
        );
        assert_eq!(
            p.budget(&ScanContext {
                llc: 0,
                llc_size: 16,
                ..Default::default()
            }),
            Budget::Unlimited
        );
        p.on_llc_balance(
            1,
            &LlcBalance {
                weight: 112,
                sum_util: 112 * 1024,
                idle_cpus: 0,
            },
        );
        assert_eq!(
            p.budget(&ScanContext {
                llc: 1,
                llc_size: 112,
                ..Default::default()
            }),
            Budget::Cpus(0)
        );
    }
}
