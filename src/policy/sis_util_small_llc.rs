//! The follow-up seed 000 proposes for its limitation [3] (Prateek Nayak): "we should scan
//! aggressively in an LLC domain with 16 CPUs. Because the cost to search for an idle one
//! among 16 CPUs is negligible." LLCs of at most `max_llc` CPUs are scanned whole; larger
//! ones use merged SIS_UTIL. Not in any kernel.

use super::sis_util::SisUtil;
use super::{Budget, LlcBalance, ParamError, ParamInfo, Params, Policy, PolicyInfo, ScanContext};

pub static INFO: PolicyInfo = PolicyInfo {
    name: "sis_util_small_llc",
    aliases: &[],
    follows: "seed 000 limitation [3] (proposal, unmerged)",
    summary: "scan LLCs of at most max_llc CPUs whole, SIS_UTIL for larger ones",
    params: &[
        ParamInfo {
            name: "pct",
            default: "117",
            doc: "the LLC domain's imbalance_pct",
        },
        ParamInfo {
            name: "max_llc",
            default: "16",
            doc: "largest LLC that is always scanned whole",
        },
    ],
    replayable: true,
};

pub struct SisUtilSmallLlc {
    max_llc: u32,
    /// Merged SIS_UTIL, for the larger LLCs.
    large: SisUtil,
}

impl SisUtilSmallLlc {
    pub fn new(p: &Params) -> Result<SisUtilSmallLlc, ParamError> {
        let pct: u64 = p.get("pct", 100..=200)?;
        let util = Params::parse(&super::sis_util::INFO, &format!("pct={pct}"))?;
        Ok(SisUtilSmallLlc {
            max_llc: p.get("max_llc", 0..=4096)?,
            large: SisUtil::new(&util)?,
        })
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
        let mut p = SisUtilSmallLlc::new(&Params::parse(&INFO, "").unwrap()).unwrap();
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
