//! The part of select_task_rq_fair every policy shares, v5.18–v7.1: whether the wakee
//! goes wide, and wake_affine's choice between the waker's CPU and prev.
//!
//! wake_wide: F = sd_llc_size of the waker's CPU, M = max(waker.wakee_flips,
//! wakee.wakee_flips), S = the min; wide iff S ≥ F and M ≥ S·F.
//!
//! wake_affine_idle (WA_IDLE): this idle and sharing the LLC with prev → prev if prev is
//! idle, else this; sync and this runs exactly one task → this; prev idle → prev; else
//! no decision. wake_affine_weight (WA_WEIGHT, WA_BIAS), on PELT load_avg:
//!   this_eff = load(this); if sync: this_eff −= h_load(waker), or choose this if the
//!   waker's load exceeds it;  this_eff += h_load(p);  prev_eff = load(prev) − h_load(p)
//!   this_eff ·= 100 · capacity(prev);  prev_eff ·= (100 + (pct − 100)/2) · capacity(this)
//!   if sync: prev_eff += 1;  choose this iff this_eff < prev_eff.
//! No decision means prev.

/// True when the wakee should not be pulled to the waker (wake_wide).
pub fn wake_wide(waker_flips: u32, wakee_flips: u32, llc_size: u32) -> bool {
    let (master, slave) = if waker_flips >= wakee_flips {
        (waker_flips, wakee_flips)
    } else {
        (wakee_flips, waker_flips)
    };
    let factor = llc_size;
    !(slave < factor || (master as u64) < slave as u64 * factor as u64)
}

/// What wake_affine_idle sees.
#[derive(Debug, Clone, Copy)]
pub struct IdleView {
    /// available_idle_cpu(this): the waker's CPU is idle.
    pub this_idle: bool,
    /// available_idle_cpu(prev): prev_cpu is idle.
    pub prev_idle: bool,
    /// cpus_share_cache(this, prev).
    pub share_llc: bool,
    /// WF_SYNC, and the waker is not exiting.
    pub sync: bool,
    /// nr_running of the waker's rq (v6.12+ without delayed-dequeue tasks).
    pub this_nr_running: u32,
}

/// wake_affine's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Affine {
    /// The waker's CPU (`this_cpu`).
    This,
    /// The wakee's prev_cpu.
    Prev,
}

/// wake_affine_idle (WA_IDLE); None when it makes no decision.
pub fn wake_affine_idle(v: &IdleView) -> Option<Affine> {
    if v.this_idle && v.share_llc {
        return Some(if v.prev_idle {
            Affine::Prev
        } else {
            Affine::This
        });
    }
    if v.sync && v.this_nr_running == 1 {
        return Some(Affine::This);
    }
    if v.prev_idle {
        return Some(Affine::Prev);
    }
    None
}

/// What wake_affine_weight sees: PELT loads (load_avg) and capacities.
#[derive(Debug, Clone, Copy)]
pub struct WeightView {
    /// cpu_load(this): the waker's rq's cfs load_avg.
    pub this_load: i64,
    /// cpu_load(prev): prev_cpu's rq's cfs load_avg.
    pub prev_load: i64,
    /// task_h_load(current): the waker's load_avg (no cgroup scaling modelled).
    pub waker_h_load: i64,
    /// task_h_load(p): the wakee's load_avg (no cgroup scaling modelled).
    pub wakee_h_load: i64,
    /// capacity_of(this): 1024 less what RT and IRQ take (the callers pass 1024).
    pub this_capacity: i64,
    /// capacity_of(prev): 1024 less what RT and IRQ take (the callers pass 1024).
    pub prev_capacity: i64,
    /// WF_SYNC, and the waker is not exiting.
    pub sync: bool,
    /// imbalance_pct of the lowest common SD_WAKE_AFFINE domain.
    pub imbalance_pct: i64,
}

/// wake_affine_weight (WA_WEIGHT with WA_BIAS): Some(This) or no decision (None), never
/// Prev.
pub fn wake_affine_weight(v: &WeightView) -> Option<Affine> {
    let mut this_eff = v.this_load;
    if v.sync {
        if v.waker_h_load > this_eff {
            return Some(Affine::This);
        }
        this_eff -= v.waker_h_load;
    }
    this_eff += v.wakee_h_load;
    let mut prev_eff = v.prev_load - v.wakee_h_load;
    this_eff *= 100 * v.prev_capacity;
    prev_eff *= (100 + (v.imbalance_pct - 100) / 2) * v.this_capacity;
    if v.sync {
        prev_eff += 1;
    }
    (this_eff < prev_eff).then_some(Affine::This)
}

/// The steps of wake_affine in words, for `replay --explain`.
pub fn explain(idle: &IdleView, weight: &WeightView) -> Vec<String> {
    let mut steps = vec![format!(
        "wake_affine_idle: this idle {}, prev idle {}, share LLC {}, sync {}, this nr_running {} -> {:?}",
        idle.this_idle,
        idle.prev_idle,
        idle.share_llc,
        idle.sync,
        idle.this_nr_running,
        wake_affine_idle(idle)
    )];
    if wake_affine_idle(idle).is_none() {
        steps.push(format!(
            "wake_affine_weight: load this {} prev {}, h_load waker {} wakee {}, pct {} -> {:?}",
            weight.this_load,
            weight.prev_load,
            weight.waker_h_load,
            weight.wakee_h_load,
            weight.imbalance_pct,
            wake_affine_weight(weight)
        ));
    }
    steps
}

/// wake_affine: idle first, then weight; no decision is prev.
pub fn wake_affine(idle: &IdleView, weight: &WeightView) -> Affine {
    wake_affine_idle(idle)
        .or_else(|| wake_affine_weight(weight))
        .unwrap_or(Affine::Prev)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wake_wide_decisions() {
        // LLC of 8: both must flip at least 8 times and the busier 8× the other.
        assert!(!wake_wide(7, 100, 8)); // slave below the factor
        assert!(!wake_wide(8, 63, 8)); // master below slave · factor
        assert!(wake_wide(8, 64, 8));
        assert!(wake_wide(64, 8, 8));
        assert!(!wake_wide(0, 0, 1)); // no flips: affine
        assert!(wake_wide(0, 0, 0)); // a degenerate factor of 0 is wide, as in the kernel
    }

    #[test]
    fn wake_affine_idle_rules() {
        let v = |this_idle, prev_idle, share_llc, sync, n| IdleView {
            this_idle,
            prev_idle,
            share_llc,
            sync,
            this_nr_running: n,
        };
        assert_eq!(
            wake_affine_idle(&v(true, true, true, false, 0)),
            Some(Affine::Prev)
        );
        assert_eq!(
            wake_affine_idle(&v(true, false, true, false, 0)),
            Some(Affine::This)
        );
        // this idle but another LLC: falls to the later rules.
        assert_eq!(wake_affine_idle(&v(true, false, false, false, 0)), None);
        assert_eq!(
            wake_affine_idle(&v(false, false, true, true, 1)),
            Some(Affine::This)
        );
        assert_eq!(
            wake_affine_idle(&v(false, true, true, true, 2)),
            Some(Affine::Prev)
        );
        assert_eq!(wake_affine_idle(&v(false, false, true, true, 2)), None);
    }

    #[test]
    fn wake_affine_weight_with_bias() {
        let base = WeightView {
            this_load: 1000,
            prev_load: 1100,
            waker_h_load: 0,
            wakee_h_load: 100,
            this_capacity: 1024,
            prev_capacity: 1024,
            sync: false,
            imbalance_pct: 117,
        };
        // this_eff = 1100·100·1024; prev_eff = 1000·108·1024: 110000 > 108000 → no.
        assert_eq!(wake_affine_weight(&base), None);
        // A lighter waker CPU: 1000·100 < 1000·108 (prev 1100 − 100): this.
        assert_eq!(
            wake_affine_weight(&WeightView {
                this_load: 900,
                ..base
            }),
            Some(Affine::This)
        );
        // Sync: the waker's own load is discounted; a waker heavier than its CPU wins.
        let sync = WeightView {
            sync: true,
            waker_h_load: 200,
            ..base
        };
        // this_eff = (1000 − 200 + 100)·100 = 90000 < 1000·108 + … → this.
        assert_eq!(wake_affine_weight(&sync), Some(Affine::This));
        assert_eq!(
            wake_affine_weight(&WeightView {
                sync: true,
                waker_h_load: 1001,
                ..base
            }),
            Some(Affine::This)
        );
        // SMT domain (pct 110) biases by 105.
        let smt = WeightView {
            this_load: 1040,
            prev_load: 1100,
            imbalance_pct: 110,
            ..base
        };
        // this 1140·100 = 114000 vs prev 1000·105 = 105000 → no.
        assert_eq!(wake_affine_weight(&smt), None);
    }
}
