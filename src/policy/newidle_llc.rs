//! Seed 002 ("Restrict newidle balance to LLC domain", SMT_BUDDY_ASSIST): with the feature
//! on, sched_balance_newidle skips every domain with SD_NUMA; the patch's title reads as
//! "do not newidle-balance above the LLC", which differs on machines with several LLCs
//! per node (the PKG level has no SD_NUMA). `stop_above=llc` models the title, the
//! default `stop_above=numa` the code. It changes load balancing only: the wakeup search
//! is the kernel default (merged SIS_UTIL), and it runs in the closed-loop simulation.

use super::sis_util::SisUtil;
use super::{
    Budget, LlcBalance, NewidleReach, ParamInfo, ParamKind, Params, Policy, PolicyInfo, ScanContext,
};

/// Builds `newidle_llc` from checked parameters.
pub fn build(p: &Params) -> Box<dyn Policy> {
    Box::new(NewidleLlc::from_params(p))
}

/// Registry entry of `newidle_llc` (simulation only: `replayable` is false).
pub static INFO: PolicyInfo = PolicyInfo {
    name: "newidle_llc",
    aliases: &[],
    follows: "seed 002 (SMT_BUDDY_ASSIST RFC)",
    summary: "newidle balance skips NUMA domains (or everything above the LLC); simulation only",
    params: &[ParamInfo {
        name: "stop_above",
        kind: ParamKind::Choice {
            default: "numa",
            options: &["numa", "llc"],
        },
        doc: "numa: skip SD_NUMA domains (the patch's code); llc: skip all above the LLC",
    }],
    replayable: false,
};

/// Which newidle domains the policy skips.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopAbove {
    /// Skip domains with SD_NUMA, as the patch's code does (PKG is still balanced).
    Numa,
    /// Skip every domain above the LLC, as the patch's title reads.
    Llc,
}

/// Seed 002's newidle restriction, with the merged SIS_UTIL wakeup search.
pub struct NewidleLlc {
    /// The `stop_above` parameter.
    pub stop_above: StopAbove,
    search: SisUtil,
}

impl NewidleLlc {
    /// From checked parameters; the search uses the default imbalance_pct (117).
    pub fn from_params(p: &Params) -> NewidleLlc {
        NewidleLlc {
            stop_above: match p.choice("stop_above") {
                "llc" => StopAbove::Llc,
                _ => StopAbove::Numa,
            },
            search: SisUtil::new(super::sis_util::DEFAULT_PCT),
        }
    }
}

impl Policy for NewidleLlc {
    fn info(&self) -> &'static PolicyInfo {
        &INFO
    }
    fn newidle_reach(&self) -> NewidleReach {
        match self.stop_above {
            StopAbove::Numa => NewidleReach::BelowNuma,
            StopAbove::Llc => NewidleReach::Llc,
        }
    }
    fn on_llc_balance(&mut self, llc: u32, seen: &LlcBalance) {
        self.search.on_llc_balance(llc, seen)
    }
    fn budget(&mut self, ctx: &ScanContext) -> Budget {
        self.search.budget(ctx)
    }
}
