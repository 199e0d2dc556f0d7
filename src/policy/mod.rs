//! Idle-CPU search policies: one file per policy, each stating the kernel release or
//! patch it follows, with its parameters and defaults; and the registry of their names.
//!
//! A policy decides how far `select_idle_cpu` may scan (its [`Budget`]) from what it has
//! seen of the machine ([`LlcBalance`] snapshots at periodic load balance, idle-time
//! estimates at scan time), and may refuse idle CPUs it considers too weak (CAS). The
//! select_idle_sibling walk they all share is in `sis.rs`.

pub mod affine;
pub mod cas;
pub mod newidle_llc;
pub mod no_limit;
pub mod params;
pub mod sis;
pub mod sis_prop;
pub mod sis_util;
pub mod sis_util_idle_hint;
pub mod sis_util_small_llc;
pub mod sis_util_v3;

use serde::Serialize;

pub use params::{ParamError, Params};

/// How many CPUs `select_idle_cpu` may examine in idle-CPU mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Budget {
    /// No limit: the whole LLC (no_limit, or an idle-core scan).
    Unlimited,
    /// Examine at most this many CPUs. 0 means return before scanning, which for
    /// SIS_UTIL also skips the idle-core scan.
    Cpus(u32),
}

impl Budget {
    /// The CPUs that can be examined in an LLC of `llc_size`.
    pub fn cpus(self, llc_size: u32) -> u32 {
        match self {
            Budget::Unlimited => llc_size,
            Budget::Cpus(n) => n.min(llc_size),
        }
    }
}

/// What a periodic load balance of an LLC domain sees (update_sd_lb_stats).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LlcBalance {
    /// LLC span weight (inactive CPUs included).
    pub weight: u32,
    /// Σ cpu_util_cfs over the LLC's active CPUs, 1024 per fully busy CPU.
    pub sum_util: u64,
    /// CPUs the balance found idle.
    pub idle_cpus: u32,
}

/// What a policy knows at the moment of a scan.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ScanContext {
    /// Target's LLC id and size.
    pub llc: u32,
    pub llc_size: u32,
    /// The waking CPU, whose rq SIS_PROP reads.
    pub waker_cpu: u32,
    /// The waking CPU's LLC id (SIS_PROP keeps avg_scan_cost there).
    pub waker_llc: u32,
    pub now_ns: u64,
    /// The LLC has an idle core: select_idle_cpu scans for cores, unbounded, and
    /// SIS_PROP does not apply.
    pub idle_core: bool,
}

/// Everything the registry says about a policy.
#[derive(Debug, Clone, Serialize)]
pub struct PolicyInfo {
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    /// Kernel release or patch the model follows.
    pub follows: &'static str,
    pub summary: &'static str,
    pub params: &'static [ParamInfo],
    /// Decision replay can run it; false for policies that change only load balancing.
    pub replayable: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct ParamInfo {
    pub name: &'static str,
    pub default: &'static str,
    pub doc: &'static str,
}

/// One idle-search policy, with its state.
/// How far newidle balance may look for a task to pull (seed 002 restricts it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NewidleReach {
    /// Every domain, as the kernel does.
    All,
    /// Domains without SD_NUMA: within the NUMA node.
    BelowNuma,
    /// The LLC and below.
    Llc,
}

pub trait Policy: Send {
    fn info(&self) -> &'static PolicyInfo;

    /// How far newidle balance may pull from under this policy (simulation).
    fn newidle_reach(&self) -> NewidleReach {
        NewidleReach::All
    }

    /// A periodic (not newidle) load balance of `llc` finished its statistics.
    fn on_llc_balance(&mut self, _llc: u32, _seen: &LlcBalance) {}

    /// The rq of `cpu` just recorded an idle period: its new avg_idle (ns).
    fn on_avg_idle(&mut self, _cpu: u32, _avg_idle_ns: u64, _now_ns: u64) {}

    /// Every CPU's capload (0..1023, index = CPU) after capacities were recomputed.
    fn on_capacities(&mut self, _caploads: &[u32], _now_ns: u64) {}

    /// How far the next scan of `ctx.llc` may go.
    fn budget(&mut self, ctx: &ScanContext) -> Budget;

    /// A scan in idle-CPU mode ended by success or by exhausting the mask (not by running
    /// out of budget), having cost `cost_ns`.
    fn after_scan(&mut self, _ctx: &ScanContext, _cost_ns: u64) {}

    /// Whether an idle CPU is good enough to take at once (CAS refuses low-capacity
    /// ones, keeping the best as a fallback). `capload` is on a 0..1023 scale.
    fn accepts(&self, _cpu: u32, _capload: u32) -> bool {
        true
    }
}

/// The policies, in the order `sisreplay policies` lists them.
pub fn registry() -> Vec<&'static PolicyInfo> {
    vec![
        &sis_prop::INFO,
        &sis_util::INFO,
        &sis_util_v3::INFO,
        &no_limit::INFO,
        &cas::INFO,
        &cas::STATIC_INFO,
        &sis_util_idle_hint::INFO,
        &sis_util_small_llc::INFO,
        &newidle_llc::INFO,
    ]
}

/// Finds a policy by name or alias.
pub fn lookup(name: &str) -> Option<&'static PolicyInfo> {
    registry()
        .into_iter()
        .find(|i| i.name == name || i.aliases.contains(&name))
}

#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("unknown policy {0:?}; `sisreplay policies` lists them")]
    Unknown(String),
    #[error("{0}")]
    Param(#[from] ParamError),
    #[error("{0} changes load balancing, not the wakeup search: it runs in `simulate`, not in decision replay")]
    NotReplayable(String),
}

/// Builds a policy from `name[:key=value[:key=value...]]`, e.g. `sis_util:pct=117`.
pub fn build(spec: &str) -> Result<Box<dyn Policy>, PolicyError> {
    let (name, rest) = spec.split_once(':').unwrap_or((spec, ""));
    let info = lookup(name).ok_or_else(|| PolicyError::Unknown(name.to_string()))?;
    let params = Params::parse(info, rest)?;
    Ok(match info.name {
        "sis_prop" => Box::new(sis_prop::SisProp::new(&params)?),
        "sis_util" => Box::new(sis_util::SisUtil::new(&params)?),
        "sis_util_v3" => Box::new(sis_util_v3::SisUtilV3::new(&params)?),
        "no_limit" => Box::new(no_limit::NoLimit),
        "cas" => Box::new(cas::Cas::new(&params, false)?),
        "cas_static" => Box::new(cas::Cas::new(&params, true)?),
        "sis_util_idle_hint" => Box::new(sis_util_idle_hint::SisUtilIdleHint::new(&params)?),
        "sis_util_small_llc" => Box::new(sis_util_small_llc::SisUtilSmallLlc::new(&params)?),
        "newidle_llc" => Box::new(newidle_llc::NewidleLlc::new(&params)?),
        other => return Err(PolicyError::Unknown(other.to_string())),
    })
}

/// One row of a budget curve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BudgetPoint {
    pub util_pct: u32,
    pub nr_scan: u32,
}

/// The scan budget after a periodic balance that saw an average LLC utilisation of
/// 0, 5, ..., 100 %, as seed 000 tabulates SIS_UTIL. The balance is assumed to see the
/// CPUs a uniform load leaves idle (⌊(100 − util) % × size⌋). Policies that do not scale
/// with utilisation give their fixed budget at every row.
pub fn budget_curve(spec: &str, llc_size: u32) -> Result<Vec<BudgetPoint>, PolicyError> {
    let mut out = Vec::new();
    for util_pct in (0..=100).step_by(5) {
        let mut p = build(spec)?;
        // Round up so that the LLC's average util percentage is exactly util_pct.
        let sum_util = (util_pct as u64 * llc_size as u64 * 1024).div_ceil(100);
        let idle = ((100 - util_pct) * llc_size) / 100;
        p.on_llc_balance(
            0,
            &LlcBalance {
                weight: llc_size,
                sum_util,
                idle_cpus: idle,
            },
        );
        let b = p.budget(&ScanContext {
            llc: 0,
            llc_size,
            ..Default::default()
        });
        out.push(BudgetPoint {
            util_pct,
            nr_scan: b.cpus(llc_size),
        });
    }
    Ok(out)
}
