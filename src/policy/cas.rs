//! Capacity-aware idle selection (CAS), seed 004: Rohit Jain, "sched: Introduce scaled
//! capacity awareness in enqueue", May 2017 (unmerged).
//!
//! capload(c) = capacity_of(c) · 1024 / max_cpu_capacity, clamped to 1023. Per-CPU
//! caploads are counted in 128 buckets of width 8; every LOAD_FREQ (5 s + 1 tick, from
//! calc_global_load) the threshold is recomputed by walking buckets from the top until
//! ⌊online · 820 / 1024⌋ CPUs are covered:
//!
//! ```text
//!   count = 0; b = 127
//!   while count < ⌊online·820/1024⌋ and b ≥ 0: count += buckets[b]; b −= 1
//!   threshold = b << 3                        (unsigned: b = −1 makes every CPU low)
//! ```
//!
//! so the bucket just below the last one counted is still "not low"; a CPU is low when
//! capload < threshold. target and prev are taken only when idle and not low; the
//! idle-core, SMT and CPU scans take the first idle CPU that is not low and otherwise
//! fall back to the idle low-capacity CPU with the highest capload. The 2017 patch sat on
//! the SIS_PROP scan of its day; here the budget is v5.18 SIS_PROP's, or SIS_UTIL's
//! (`budget=sis_util`): ported to a v6.1 kernel, the patch's rules apply under whichever
//! scan limit the kernel's features select.
//!
//! `cas_static` is the review's alternative (Peter Zijlstra): a fixed per-CPU cutoff
//! instead of global state: low when capload < `cutoff` (default 768, ¾ of capacity).

use super::sis_prop::{SisProp, DEFAULT_AVG_IDLE_NS};
use super::sis_util::SisUtil;
use super::{Budget, LlcBalance, ParamInfo, ParamKind, Params, Policy, PolicyInfo, ScanContext};

/// The scan limit CAS's search runs under.
const BUDGET: ParamInfo = ParamInfo {
    name: "budget",
    kind: ParamKind::Choice {
        default: "sis_prop",
        options: &["sis_prop", "sis_util"],
    },
    doc: "the scan limit under the capacity rules: v5.18 SIS_PROP's, or SIS_UTIL's (imbalance_pct 117)",
};

/// Builds `cas` (the percentile threshold) from checked parameters.
pub fn build(p: &Params) -> Box<dyn Policy> {
    Box::new(Cas::from_params(p, false))
}

/// Builds `cas_static` (the fixed cutoff) from checked parameters.
pub fn build_static(p: &Params) -> Box<dyn Policy> {
    Box::new(Cas::from_params(p, true))
}

/// Registry entry of `cas`: the patch as posted, a global 80th-percentile threshold.
pub static INFO: PolicyInfo = PolicyInfo {
    name: "cas",
    aliases: &[],
    follows: "seed 004 (CAS, May 2017), over v5.18 SIS_PROP",
    summary: "skip idle CPUs below the 80th percentile of capacity left by RT/IRQ, keeping the best as backup",
    params: &[
        ParamInfo {
            name: "threshold",
            kind: ParamKind::Int { default: 820, min: 0, max: 1024 },
            doc: "share of online CPUs (of 1024) the not-low buckets must cover",
        },
        ParamInfo { name: "hz",
            kind: ParamKind::Int { default: 250, min: 100, max: 1000 }, doc: "CONFIG_HZ, for LOAD_FREQ and SIS_PROP aging" },
        BUDGET,
    ],
    replayable: true,
};

/// Registry entry of `cas_static`: the review's fixed per-CPU cutoff.
pub static STATIC_INFO: PolicyInfo = PolicyInfo {
    name: "cas_static",
    aliases: &[],
    follows: "seed 004 review: a static per-CPU cutoff instead of the global percentile",
    summary: "skip idle CPUs whose capload is below a fixed cutoff, keeping the best as backup",
    params: &[
        ParamInfo {
            name: "cutoff",
            kind: ParamKind::Int {
                default: 768,
                min: 0,
                max: 1024,
            },
            doc: "capload (of 1024) below which a CPU is low",
        },
        ParamInfo {
            name: "hz",
            kind: ParamKind::Int {
                default: 250,
                min: 100,
                max: 1000,
            },
            doc: "CONFIG_HZ, for SIS_PROP aging",
        },
        BUDGET,
    ],
    replayable: true,
};

/// Capload buckets, each 8 wide, covering 0..1023.
pub const BUCKETS: usize = 128;

/// capload of a CPU: its capacity on a 0..1023 scale against the largest capacity.
pub fn capload(capacity: u64, max_capacity: u64) -> u32 {
    if max_capacity == 0 {
        return 1023;
    }
    (capacity * 1024 / max_capacity).min(1023) as u32
}

/// update_capacity_threshold over bucket counts.
pub fn threshold(buckets: &[u32; BUCKETS], online: u32, thrs_pct: u32) -> u32 {
    let need = (online as u64 * thrs_pct as u64) >> 10;
    let mut count = 0u64;
    let mut b: i32 = BUCKETS as i32 - 1;
    while count < need && b >= 0 {
        count += buckets[b as usize] as u64;
        b -= 1;
    }
    (b << 3) as u32
}

/// How many CPUs fall in each capload bucket (bucket = capload / 8, capload capped at
/// 1023).
pub fn buckets_of(caploads: &[u32]) -> [u32; BUCKETS] {
    let mut b = [0u32; BUCKETS];
    for &c in caploads {
        b[(c.min(1023) >> 3) as usize] += 1;
    }
    b
}

/// CAS over a scan budget (v5.18 SIS_PROP's or SIS_UTIL's): `cas` (global percentile
/// threshold, recomputed every LOAD_FREQ) or `cas_static` (fixed cutoff).
pub struct Cas {
    /// Some(cutoff) for cas_static.
    cutoff: Option<u32>,
    thrs_pct: u32,
    load_freq_ns: u64,
    next_update_ns: u64,
    threshold: u32,
    /// The policy whose budget limits the scan.
    search: Box<dyn Policy>,
}

impl Cas {
    /// `cas_static` when `is_static`, otherwise `cas`, from checked parameters; the
    /// threshold starts at 0 (no CPU is low) as after init_capacity_buckets.
    pub fn from_params(p: &Params, is_static: bool) -> Cas {
        let hz = p.int("hz");
        Cas {
            cutoff: is_static.then(|| p.int("cutoff") as u32),
            thrs_pct: if is_static {
                820
            } else {
                p.int("threshold") as u32
            },
            load_freq_ns: (5 * hz + 1) * 1_000_000_000 / hz,
            next_update_ns: 0,
            // init_capacity_buckets puts every CPU at capload 1023: nothing is low.
            threshold: 0,
            search: match p.choice("budget") {
                "sis_util" => Box::new(SisUtil::new(super::sis_util::DEFAULT_PCT)),
                _ => Box::new(SisProp::new(hz, DEFAULT_AVG_IDLE_NS)),
            },
        }
    }

    /// The percentile threshold now in force (cas).
    pub fn threshold(&self) -> u32 {
        self.threshold
    }
}

impl Policy for Cas {
    fn info(&self) -> &'static PolicyInfo {
        if self.cutoff.is_some() {
            &STATIC_INFO
        } else {
            &INFO
        }
    }
    fn on_avg_idle(&mut self, cpu: u32, avg_idle_ns: u64, now_ns: u64) {
        self.search.on_avg_idle(cpu, avg_idle_ns, now_ns)
    }
    fn on_llc_balance(&mut self, llc: u32, seen: &LlcBalance) {
        self.search.on_llc_balance(llc, seen)
    }
    fn on_capacities(&mut self, caploads: &[u32], now_ns: u64) {
        if self.cutoff.is_none() && now_ns >= self.next_update_ns {
            self.threshold = threshold(&buckets_of(caploads), caploads.len() as u32, self.thrs_pct);
            self.next_update_ns = now_ns - now_ns % self.load_freq_ns + self.load_freq_ns;
        }
    }
    fn budget(&mut self, ctx: &ScanContext) -> Budget {
        self.search.budget(ctx)
    }
    fn after_scan(&mut self, ctx: &ScanContext, cost_ns: u64) {
        self.search.after_scan(ctx, cost_ns)
    }
    fn accepts(&self, _cpu: u32, capload: u32) -> bool {
        match self.cutoff {
            Some(c) => capload >= c,
            None => capload >= self.threshold,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(counts: &[(usize, u32)]) -> [u32; BUCKETS] {
        let mut b = [0; BUCKETS];
        for &(i, n) in counts {
            b[i] = n;
        }
        b
    }

    #[test]
    fn thresholds_for_given_bucket_counts() {
        // 10 CPUs at full capacity: need ⌊10·820/1024⌋ = 8, bucket 127 covers 10, b = 126.
        assert_eq!(threshold(&with(&[(127, 10)]), 10, 820), 126 << 3);
        // 8 full, 2 at capload 400 (bucket 50): those two are low.
        let t = threshold(&with(&[(127, 8), (50, 2)]), 10, 820);
        assert_eq!(t, 1008);
        assert!(400 < t);
        // 5 full, 5 in bucket 100: count reaches 10 at b = 100, b = 99: threshold 792, so
        // bucket 100 (800..807) is not low; the walk's quirk keeps one bucket more.
        assert_eq!(threshold(&with(&[(127, 5), (100, 5)]), 10, 820), 792);
        // One CPU: need = 0, the walk never starts: threshold 1016, a 1010 CPU is low.
        assert_eq!(threshold(&with(&[(126, 1)]), 1, 820), 1016);
    }

    #[test]
    fn caploads_and_the_static_cutoff() {
        assert_eq!(capload(1024, 1024), 1023);
        assert_eq!(capload(512, 1024), 512);
        assert_eq!(capload(700, 1000), 716);
        let p = Cas::from_params(&Params::parse(&STATIC_INFO, "").unwrap(), true);
        assert!(!p.accepts(0, 767));
        assert!(p.accepts(0, 768));
    }

    #[test]
    fn percentile_threshold_is_refreshed_every_load_freq() {
        let mut p = Cas::from_params(&Params::parse(&INFO, "hz=1000").unwrap(), false);
        let mut loads = vec![1023u32; 8];
        loads[0] = 300;
        loads[1] = 310;
        p.on_capacities(&loads, 0);
        // need ⌊8·820/1024⌋ = 6: bucket 127 has 6, b = 126: threshold 1008.
        assert_eq!(p.threshold(), 1008);
        assert!(!p.accepts(0, 300));
        // Within the same LOAD_FREQ window nothing changes, even if capacities recover.
        p.on_capacities(&[1023; 8], 1_000_000_000);
        assert_eq!(p.threshold(), 1008);
        // LOAD_FREQ = 5 s + 1 jiffy later it is recomputed.
        p.on_capacities(&[200; 8], 5_001_000_000);
        assert_eq!(p.threshold(), 192);
    }

    #[test]
    fn the_budget_is_sis_utils_when_asked_for() {
        let ctx = ScanContext {
            llc: 0,
            llc_size: 16,
            ..Default::default()
        };
        let half_busy = LlcBalance {
            weight: 16,
            sum_util: 512 * 16,
            idle_cpus: 8,
        };
        // SIS_UTIL's worked example: x = 512 over 16 CPUs scans 10.
        let mut p = Cas::from_params(&Params::parse(&INFO, "budget=sis_util").unwrap(), false);
        p.on_llc_balance(0, &half_busy);
        assert_eq!(p.budget(&ctx), Budget::Cpus(10));
        let mut p = Cas::from_params(
            &Params::parse(&STATIC_INFO, "budget=sis_util").unwrap(),
            true,
        );
        p.on_llc_balance(0, &half_busy);
        assert_eq!(p.budget(&ctx), Budget::Cpus(10));
        // SIS_PROP's ignores the LLC's utilisation.
        let mut p = Cas::from_params(&Params::parse(&INFO, "").unwrap(), false);
        let before = p.budget(&ctx);
        p.on_llc_balance(0, &half_busy);
        assert_eq!(p.budget(&ctx), before);
        assert_ne!(before, Budget::Cpus(10));
    }
}
