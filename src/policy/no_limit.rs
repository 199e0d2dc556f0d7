//! Neither SIS_PROP nor SIS_UTIL (`NO_SIS_PROP NO_SIS_UTIL` on v6.0–v6.6, `NO_SIS_UTIL`
//! from v6.7): select_idle_cpu's budget stays INT_MAX and the whole LLC is scanned.

use super::{Budget, ParamInfo, Params, Policy, PolicyInfo, ScanContext};

/// Builds `no_limit` (it takes no parameters).
pub fn build(_: &Params) -> Box<dyn Policy> {
    Box::new(NoLimit)
}

/// Registry entry of `no_limit`.
pub static INFO: PolicyInfo = PolicyInfo {
    name: "no_limit",
    aliases: &[],
    follows: "Linux v6.0+ with NO_SIS_UTIL (and NO_SIS_PROP where it exists)",
    summary: "scan the whole LLC",
    params: &[] as &[ParamInfo],
    replayable: true,
};

/// The whole LLC every time: the budget is always [`Budget::Unlimited`].
pub struct NoLimit;

impl Policy for NoLimit {
    fn info(&self) -> &'static PolicyInfo {
        &INFO
    }
    fn budget(&mut self, _ctx: &ScanContext) -> Budget {
        Budget::Unlimited
    }
}
