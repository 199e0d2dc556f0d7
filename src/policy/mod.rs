//! Idle-CPU search policies: one file per policy, each stating the kernel release or
//! patch it follows, with its parameters and defaults; and the registry of their names.
//!
//! A policy decides how far `select_idle_cpu` may scan (its [`Budget`]) from what it has
//! seen of the machine ([`LlcBalance`] snapshots at periodic load balance, idle-time
//! estimates at scan time), and may refuse idle CPUs it considers too weak (CAS). The
//! select_idle_sibling walk they all share is in `wakeup::sis`.

pub mod cas;
pub mod newidle_llc;
pub mod no_limit;
pub mod params;
pub mod sis_prop;
pub mod sis_util;
pub mod sis_util_idle_hint;
pub mod sis_util_small_llc;
pub mod sis_util_v3;

use serde::Serialize;

pub use params::{ParamError, ParamInfo, ParamKind, Params};

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
    /// Target's LLC id: its lowest CPU, as the kernel's sd_llc_id.
    pub llc: u32,
    /// CPUs in target's LLC (sd_llc_size), inactive ones included.
    pub llc_size: u32,
    /// The waking CPU, whose rq SIS_PROP reads.
    pub waker_cpu: u32,
    /// The waking CPU's LLC id (SIS_PROP keeps avg_scan_cost there).
    pub waker_llc: u32,
    /// Trace time of the wakeup (ns); SIS_PROP ages its idle estimate by it.
    pub now_ns: u64,
    /// The LLC has an idle core: select_idle_cpu scans for cores, unbounded, and
    /// SIS_PROP does not apply.
    pub idle_core: bool,
}

/// Everything the registry says about a policy.
#[derive(Debug, Clone, Serialize)]
pub struct PolicyInfo {
    /// The name `--policy` takes and results are keyed by, e.g. `sis_util`.
    pub name: &'static str,
    /// Other names accepted for it (`vanilla` for `sis_prop`).
    pub aliases: &'static [&'static str],
    /// Kernel release or patch the model follows.
    pub follows: &'static str,
    /// One line on what it does, for `sisreplay policies`.
    pub summary: &'static str,
    /// The parameters it takes, with ranges and defaults; empty when none.
    pub params: &'static [ParamInfo],
    /// Decision replay can run it; false for policies that change only load balancing.
    pub replayable: bool,
}

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

/// One idle-search policy, with its state: it is told what the machine did (periodic
/// balances, idle periods, capacity changes) and answers how far select_idle_cpu may scan.
/// All times are trace time in ns.
pub trait Policy: Send {
    /// The registry's description of this policy (for CAS, of the variant it was built as).
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

/// One line of the registry: a policy's description, how to build it, and the sched
/// features a stock kernel runs it under.
pub struct Entry {
    /// The policy's name, parameters and what it follows.
    pub info: &'static PolicyInfo,
    /// Builds the policy from parameters already checked against `info`.
    pub build: fn(&Params) -> Box<dyn Policy>,
    /// The debugfs sched/features words that select this policy on v6.0–v6.6 kernels, or
    /// None when no stock kernel runs it.
    pub features: Option<&'static str>,
}

/// The policies, in the order `sisreplay policies` lists them. Adding a policy is a file
/// in this folder and a line here.
pub static REGISTRY: &[Entry] = &[
    Entry {
        info: &sis_prop::INFO,
        build: sis_prop::build,
        features: Some("SIS_PROP NO_SIS_UTIL"),
    },
    Entry {
        info: &sis_util::INFO,
        build: sis_util::build,
        features: Some("NO_SIS_PROP SIS_UTIL"),
    },
    Entry {
        info: &sis_util_v3::INFO,
        build: sis_util_v3::build,
        features: None,
    },
    Entry {
        info: &no_limit::INFO,
        build: no_limit::build,
        features: Some("NO_SIS_PROP NO_SIS_UTIL"),
    },
    Entry {
        info: &cas::INFO,
        build: cas::build,
        features: None,
    },
    Entry {
        info: &cas::STATIC_INFO,
        build: cas::build_static,
        features: None,
    },
    Entry {
        info: &sis_util_idle_hint::INFO,
        build: sis_util_idle_hint::build,
        features: None,
    },
    Entry {
        info: &sis_util_small_llc::INFO,
        build: sis_util_small_llc::build,
        features: None,
    },
    Entry {
        info: &newidle_llc::INFO,
        build: newidle_llc::build,
        features: None,
    },
];

/// The policies' descriptions, in the registry's order.
pub fn registry() -> impl Iterator<Item = &'static PolicyInfo> {
    REGISTRY.iter().map(|e| e.info)
}

/// Finds a policy's entry by name or alias.
pub fn entry(name: &str) -> Option<&'static Entry> {
    REGISTRY
        .iter()
        .find(|e| e.info.name == name || e.info.aliases.contains(&name))
}

/// Finds a policy by name or alias.
pub fn lookup(name: &str) -> Option<&'static PolicyInfo> {
    entry(name).map(|e| e.info)
}

/// A policy spec that cannot be built or cannot run where it was asked for.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// No policy has this name or alias (the name as given).
    #[error("unknown policy {0:?}{hint}; `sisreplay policies` lists them", hint = did_you_mean(.0))]
    Unknown(String),
    /// A parameter is unknown, malformed or out of range.
    #[error("{0}")]
    Param(#[from] ParamError),
    /// The policy changes load balancing only, so decision replay cannot run it (its spec).
    #[error("{0} changes load balancing, not the wakeup search: it runs in `simulate`, not in decision replay")]
    NotReplayable(String),
}

/// ", did you mean X?" for the registered name or alias closest to `name`, when one is
/// close enough to be a slip (a Jaro-Winkler similarity of 0.8 or more).
fn did_you_mean(name: &str) -> String {
    REGISTRY
        .iter()
        .flat_map(|e| std::iter::once(e.info.name).chain(e.info.aliases.iter().copied()))
        .map(|n| (strsim::jaro_winkler(name, n), n))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, n)| format!(", did you mean {n:?}?"))
        .unwrap_or_default()
}

/// A policy as named on the command line, `name[:key=value[:key=value...]]`, checked
/// once: the name is in the registry and every parameter is declared and in range.
#[derive(Debug, Clone)]
pub struct PolicySpec {
    /// The text as given: results are keyed by it.
    text: String,
    entry: &'static Entry,
    params: Params,
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("info", &self.info.name)
            .finish()
    }
}

impl PolicySpec {
    /// Parses `name[:key=value...]`: the name or alias must be registered and every
    /// parameter declared by that policy and within its range; the rest keep their
    /// defaults.
    pub fn parse(text: &str) -> Result<PolicySpec, PolicyError> {
        let (name, rest) = text.split_once(':').unwrap_or((text, ""));
        let entry = entry(name).ok_or_else(|| PolicyError::Unknown(name.to_string()))?;
        Ok(PolicySpec {
            text: text.to_string(),
            entry,
            params: Params::parse(entry.info, rest)?,
        })
    }

    /// The registry's description of the named policy.
    pub fn info(&self) -> &'static PolicyInfo {
        self.entry.info
    }

    /// The sched features a stock kernel runs this policy under, if any.
    pub fn features(&self) -> Option<&'static str> {
        self.entry.features
    }

    /// The parameter values in force, defaults filled in.
    pub fn params(&self) -> &Params {
        &self.params
    }

    /// The spec as given.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether this is the policy `name` (a name or spec) as a kernel runs it: the same
    /// text, or the same policy under an alias with every parameter at its default
    /// (`vanilla` is `sis_prop`).
    pub fn is(&self, name: &str) -> bool {
        self.text == name
            || (self.entry.info.name == name
                && self.params.in_force() == Params::defaults(self.entry.info).in_force())
    }

    /// A fresh policy, with no state yet.
    pub fn build(&self) -> Box<dyn Policy> {
        (self.entry.build)(&self.params)
    }
}

impl std::fmt::Display for PolicySpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::str::FromStr for PolicySpec {
    type Err = PolicyError;
    fn from_str(s: &str) -> Result<PolicySpec, PolicyError> {
        PolicySpec::parse(s)
    }
}

/// Builds a policy from `name[:key=value[:key=value...]]`, e.g. `sis_util:pct=117`.
pub fn build(spec: &str) -> Result<Box<dyn Policy>, PolicyError> {
    Ok(PolicySpec::parse(spec)?.build())
}

/// The policy a kernel ran, from its debugfs sched/features when they were read: the
/// registry's policy all of whose feature words are set, where `NO_X` is set when the
/// kernel lists it or has no feature X at all (v6.7 removed SIS_PROP). None when the
/// features name none of the words (then the release decides).
pub fn from_features(features: &str) -> Option<&'static PolicyInfo> {
    let has = |word: &str| features.split_whitespace().any(|t| t == word);
    let set = |word: &str| match word.strip_prefix("NO_") {
        Some(x) => has(word) || !has(x),
        None => has(word),
    };
    let named = |word: &str| has(word) || has(word.strip_prefix("NO_").unwrap_or(word));
    REGISTRY
        .iter()
        .filter_map(|e| Some((e.info, e.features?)))
        .find(|(_, f)| f.split_whitespace().any(named) && f.split_whitespace().all(set))
        .map(|(info, _)| info)
}

/// One row of a budget curve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BudgetPoint {
    /// Average utilisation of the LLC's CPUs the periodic balance saw, % (0, 5, …, 100).
    pub util_pct: u32,
    /// CPUs the next select_idle_cpu may examine in idle-CPU mode, capped at the LLC size.
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
