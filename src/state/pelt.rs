//! PELT as kernel/sched/pelt.c computes it: time in 1024-ns units, 1024-unit periods,
//! decay y with y³² = ½, sums decayed by the 32-entry inverse table plus shifts, averages
//! refreshed only when a period boundary is crossed. Integer arithmetic throughout, so
//! the small differences that decide wake_affine_weight come out as the kernel's.

use std::sync::OnceLock;

/// Σ 1024·yⁿ, the largest a sum can reach.
pub const LOAD_AVG_MAX: u64 = 47742;
/// The divider of a sum whose current period has just begun.
const PELT_MIN_DIVIDER: u64 = LOAD_AVG_MAX - 1024;
const LOAD_AVG_PERIOD: u64 = 32;

/// runnable_avg_yN_inv: ⌊(2³² − 1)·yⁿ⌋ for n < 32, as the kernel's generator makes it.
fn inv_table() -> &'static [u32; 32] {
    static T: OnceLock<[u32; 32]> = OnceLock::new();
    T.get_or_init(|| {
        let y = 0.5f64.powf(1.0 / 32.0);
        let mut t = [0u32; 32];
        for (i, v) in t.iter_mut().enumerate() {
            *v = (((1u64 << 32) - 1) as f64 * y.powi(i as i32)) as u32;
        }
        t
    })
}

/// val · yⁿ.
pub fn decay_load(mut val: u64, n: u64) -> u64 {
    if n > LOAD_AVG_PERIOD * 63 {
        return 0;
    }
    let mut local = n;
    if local >= LOAD_AVG_PERIOD {
        val >>= local / LOAD_AVG_PERIOD;
        local %= LOAD_AVG_PERIOD;
    }
    ((val as u128 * inv_table()[local as usize] as u128) >> 32) as u64
}

fn accumulate_segments(periods: u64, d1: u64, d3: u64) -> u64 {
    let c1 = decay_load(d1, periods);
    let c2 = LOAD_AVG_MAX - decay_load(LOAD_AVG_MAX, periods) - 1024;
    c1 + c2 + d3
}

/// One sched_avg: sums, averages and the time they were brought up to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Avg {
    /// Time the sums were brought up to (ns), in whole 1024-ns units from the start.
    pub last_update_ns: u64,
    /// Decayed sum of 1024-ns units spent runnable, times the queued weight for a CPU.
    pub load_sum: u64,
    /// Decayed sum of units times the runnable count, scaled by 1024.
    pub runnable_sum: u64,
    /// Decayed sum of units spent running, scaled by 1024.
    pub util_sum: u64,
    /// Units already accrued in the current 1024-unit period (0..1023).
    pub period_contrib: u32,
    /// weight · load_sum / divider: up to the weight for a task, the queued weight
    /// averaged over time for a CPU.
    pub load_avg: u64,
    /// runnable_sum / divider: 1024 per task runnable all the time.
    pub runnable_avg: u64,
    /// util_sum / divider: 0..1024, 1024 when always running.
    pub util_avg: u64,
}

/// How post_init_entity_util_avg sizes a new task's utilisation: the CPU's util_avg
/// times the task's weight over the CPU's load_avg, at most half the capacity the CPU
/// has left (all of that half on a CPU with no utilisation). The weight it multiplies by
/// changed with the release.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum NewTaskUtil {
    /// Before v6.7: se->load.weight, scaled up 1024 times on 64-bit, so the product
    /// passes the cap on any CPU with utilisation: in effect half the capacity left.
    #[default]
    ScaledWeight,
    /// From v6.7 ("sched/fair: Fix initial util_avg calculation"; 6.12's fair.c has it,
    /// 6.1's not): se_weight, the task's share by load of the CPU's utilisation.
    SeWeight,
}

impl NewTaskUtil {
    /// The rule of a kernel release (`uname -r`); an unknown one keeps 6.1's.
    pub fn of_release(release: Option<&str>) -> NewTaskUtil {
        if crate::abi::release_at_least(release, (6, 7)) {
            NewTaskUtil::SeWeight
        } else {
            NewTaskUtil::ScaledWeight
        }
    }

    /// The util_avg of a nice-0 task starting on a CPU whose util_avg and load_avg are
    /// `cpu_util` and `cpu_load`.
    pub fn initial(self, cpu_util: u64, cpu_load: u64) -> u64 {
        let cap = 1024u64.saturating_sub(cpu_util) / 2;
        if cpu_util == 0 {
            return cap;
        }
        let weight = match self {
            NewTaskUtil::ScaledWeight => 1024 << 10,
            NewTaskUtil::SeWeight => 1024,
        };
        (cpu_util * weight / (cpu_load + 1)).min(cap)
    }
}

/// cfs_rq->removed: what tasks that left a CPU by wakeup migration took with them, to be
/// taken off that CPU's signal at its next update (remove_entity_load_avg), not at once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Removed {
    /// Tasks removed since the CPU's last update.
    pub nr: u32,
    /// Their load_avg summed.
    pub load_avg: u64,
    /// Their util_avg summed.
    pub util_avg: u64,
    /// Their runnable_avg summed.
    pub runnable_avg: u64,
}

impl Removed {
    /// A task's averages, as synced to the CPU's last update, join the removed ones.
    pub fn add(&mut self, task: &Avg) {
        self.nr += 1;
        self.load_avg += task.load_avg;
        self.util_avg += task.util_avg;
        self.runnable_avg += task.runnable_avg;
    }
}

/// sub_positive(sum, x), then keep the sum at least avg · PELT_MIN_DIVIDER, as the
/// kernel does after taking a task's share off a cfs_rq (rounding would otherwise leave
/// a sum of 0 under a non-zero average).
fn take_off(sum: &mut u64, x: u64, avg: u64) {
    *sum = sum.saturating_sub(x).max(avg * PELT_MIN_DIVIDER);
}

impl Avg {
    /// All sums and averages 0, brought up to `now_ns`.
    pub fn starting_at(now_ns: u64) -> Avg {
        Avg {
            last_update_ns: now_ns,
            ..Default::default()
        }
    }

    /// A task's signal as wake_up_new_task leaves it before attaching it:
    /// init_entity_runnable_average gives it its full `weight` as load, so that it
    /// counts as heavy until its own history builds up; `util` is
    /// post_init_entity_util_avg's ([`NewTaskUtil`]), as util_avg and runnable_avg.
    /// Only the averages are set: attaching derives the sums from them.
    pub fn forked(now_ns: u64, weight: u64, util: u64) -> Avg {
        Avg {
            last_update_ns: now_ns,
            load_avg: weight,
            util_avg: util,
            runnable_avg: util,
            ..Default::default()
        }
    }

    /// Brings the signal up to `now_ns`, the state since the last update having been:
    /// `load` (what load_sum accrues: 1 while a task is queued, the queued weight for a
    /// CPU), `runnable` (count) and `running`. The averages, refreshed only when a period
    /// boundary was crossed (the return value), use `weight` for load_avg: the task's
    /// weight for a task, 1 for a CPU, as ___update_load_avg is called.
    pub fn update(
        &mut self,
        now_ns: u64,
        load: u64,
        runnable: u64,
        running: bool,
        weight: u64,
    ) -> bool {
        if now_ns < self.last_update_ns {
            // Time went backwards (clock resync): restart from here, as the kernel does.
            self.last_update_ns = now_ns;
            return false;
        }
        let delta = (now_ns - self.last_update_ns) >> 10;
        if delta == 0 {
            return false;
        }
        self.last_update_ns += delta << 10;
        let (runnable, running) = if load == 0 {
            (0, false)
        } else {
            (runnable, running)
        };
        let periods = self.accumulate(delta, load, runnable, running);
        if periods == 0 {
            return false;
        }
        let divider = LOAD_AVG_MAX - 1024 + self.period_contrib as u64;
        self.load_avg = weight * self.load_sum / divider;
        self.runnable_avg = self.runnable_sum / divider;
        self.util_avg = self.util_sum / divider;
        true
    }

    /// get_pelt_divider.
    pub fn divider(&self) -> u64 {
        PELT_MIN_DIVIDER + self.period_contrib as u64
    }

    /// The removed averages taken off a CPU's signal, as update_cfs_rq_load_avg does
    /// before it decays the signal to now. Returns whether there were any.
    pub fn apply_removed(&mut self, r: &mut Removed) -> bool {
        if r.nr == 0 {
            return false;
        }
        let r = std::mem::take(r);
        let divider = self.divider();
        self.load_avg = self.load_avg.saturating_sub(r.load_avg);
        take_off(&mut self.load_sum, r.load_avg * divider, self.load_avg);
        self.util_avg = self.util_avg.saturating_sub(r.util_avg);
        take_off(&mut self.util_sum, r.util_avg * divider, self.util_avg);
        self.runnable_avg = self.runnable_avg.saturating_sub(r.runnable_avg);
        take_off(
            &mut self.runnable_sum,
            r.runnable_avg * divider,
            self.runnable_avg,
        );
        true
    }

    /// attach_entity_load_avg: a task of weight `weight` joins this CPU's signal. Its
    /// window is aligned to the CPU's (last update and period_contrib), its sums
    /// re-derived from its averages for that period_contrib, and both added.
    pub fn attach(&mut self, task: &mut Avg, weight: u64) {
        let divider = self.divider();
        task.last_update_ns = self.last_update_ns;
        task.period_contrib = self.period_contrib;
        task.util_sum = task.util_avg * divider;
        task.runnable_sum = task.runnable_avg * divider;
        let load_sum = task.load_avg * divider;
        task.load_sum = if weight < load_sum {
            load_sum / weight
        } else {
            1
        };
        self.load_avg += task.load_avg;
        self.load_sum += weight * task.load_sum;
        self.util_avg += task.util_avg;
        self.util_sum += task.util_sum;
        self.runnable_avg += task.runnable_avg;
        self.runnable_sum += task.runnable_sum;
    }

    /// detach_entity_load_avg: a task of weight `weight` leaves this CPU's signal at once
    /// (a load-balance move, whose dequeue brought both up to date first).
    pub fn detach(&mut self, task: &Avg, weight: u64) {
        self.load_avg = self.load_avg.saturating_sub(task.load_avg);
        take_off(&mut self.load_sum, weight * task.load_sum, self.load_avg);
        self.util_avg = self.util_avg.saturating_sub(task.util_avg);
        take_off(&mut self.util_sum, task.util_sum, self.util_avg);
        self.runnable_avg = self.runnable_avg.saturating_sub(task.runnable_avg);
        take_off(&mut self.runnable_sum, task.runnable_sum, self.runnable_avg);
    }

    fn accumulate(&mut self, delta: u64, load: u64, runnable: u64, running: bool) -> u64 {
        // Without a period boundary the contribution is just the elapsed time.
        let mut contrib = delta;
        let mut delta = delta + self.period_contrib as u64;
        let periods = delta / 1024;
        if periods > 0 {
            self.load_sum = decay_load(self.load_sum, periods);
            self.runnable_sum = decay_load(self.runnable_sum, periods);
            self.util_sum = decay_load(self.util_sum, periods);
            delta %= 1024;
            if load > 0 {
                contrib = accumulate_segments(periods, 1024 - self.period_contrib as u64, delta);
            }
        }
        self.period_contrib = delta as u32;
        if load > 0 {
            self.load_sum += load * contrib;
        }
        if runnable > 0 {
            self.runnable_sum += (runnable * contrib) << 10;
        }
        if running {
            self.util_sum += contrib << 10;
        }
        periods
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// post_init_entity_util_avg, worked by hand. On a CPU at util_avg 600, load_avg
    /// 3000 the cap is (1024 - 600) / 2 = 212. 6.1 multiplies by the scaled weight:
    /// 600 · 1048576 / 3001 = 209,646, capped to 212. 6.12 by se_weight: 600 · 1024 /
    /// 3001 = 204. On a CPU with no utilisation both give the whole cap, 512; on a
    /// full one, 0.
    #[test]
    fn a_new_task_starts_at_its_share_of_the_cpus_utilisation_at_most_half_the_spare() {
        use NewTaskUtil::*;
        assert_eq!(ScaledWeight.initial(600, 3000), 212);
        assert_eq!(SeWeight.initial(600, 3000), 204);
        assert_eq!(SeWeight.initial(100, 100), 462);
        for rule in [ScaledWeight, SeWeight] {
            assert_eq!(rule.initial(0, 0), 512);
            assert_eq!(rule.initial(1024, 5000), 0);
        }
        assert_eq!(
            NewTaskUtil::of_release(Some("6.1.0-28-amd64")),
            ScaledWeight
        );
        assert_eq!(NewTaskUtil::of_release(Some("6.12.118-rig")), SeWeight);
        assert_eq!(NewTaskUtil::of_release(None), ScaledWeight);
    }

    /// init_entity_runnable_average: a new task's load is its weight, with no sums
    /// behind it; attached to an idle CPU, it brings all of it there.
    #[test]
    fn a_forked_task_starts_at_full_load() {
        let f = Avg::forked(7, 1024, 0);
        assert_eq!((f.load_avg, f.util_avg, f.runnable_avg), (1024, 0, 0));
        assert_eq!((f.last_update_ns, f.load_sum, f.util_sum), (7, 0, 0));
        let mut idle = Avg::starting_at(0);
        let mut task = Avg::forked(0, 1024, 0);
        idle.attach(&mut task, 1024);
        assert_eq!((idle.load_avg, idle.util_avg), (1024, 0));
        // The sums follow the average: a period later, the task gone to sleep, the
        // load has decayed by about y (0.979), not dropped to nothing.
        idle.update(1024 * 1024, 0, 0, false, 1);
        assert!((990..1010).contains(&idle.load_avg), "{}", idle.load_avg);
    }

    const PERIOD_NS: u64 = 1024 * 1024;

    #[test]
    fn inverse_table_matches_the_kernel() {
        let t = inv_table();
        // The first and last entries of runnable_avg_yN_inv in kernel/sched/sched-pelt.h.
        assert_eq!(t[0], 0xffffffff);
        assert_eq!(t[1], 0xfa83b2da);
        assert_eq!(t[2], 0xf5257d14);
        assert_eq!(t[31], 0x82cd8698);
        // y³² halves, then the table's y⁰ = (2³² − 1)/2³² takes one unit off, as in the
        // kernel: decay_load(1024, 32) is 511, not 512.
        assert_eq!(decay_load(1024, 32), 511);
        assert_eq!(decay_load(1024, 64), 255);
        assert_eq!(decay_load(1 << 20, 63 * 32 + 1), 0);
    }

    #[test]
    fn continuously_running_task_approaches_1024_times_one_minus_y_to_the_n() {
        let y = 0.5f64.powf(1.0 / 32.0);
        for n in [8u64, 32, 64, 128, 345] {
            let mut a = Avg::starting_at(0);
            // Updated at every period boundary, as the tick does.
            for p in 1..=n {
                a.update(p * PERIOD_NS, 1, 1, true, 1024);
            }
            let want = 1024.0 * (1.0 - y.powi(n as i32));
            let got = a.util_avg as f64;
            assert!(
                (got - want).abs() <= 0.01 * 1024.0,
                "n={n}: {got} vs {want:.1}"
            );
        }
    }

    #[test]
    fn half_duty_cycle_settles_near_512() {
        let mut a = Avg::starting_at(0);
        let mut t = 0;
        let mut samples = Vec::new();
        for cycle in 0..400 {
            // 2 ms running, 2 ms sleeping.
            t += 2_000_000;
            a.update(t, 1, 1, true, 1024);
            t += 2_000_000;
            a.update(t, 0, 0, false, 1024);
            if cycle > 300 {
                samples.push(a.util_avg);
            }
        }
        let mean = samples.iter().sum::<u64>() as f64 / samples.len() as f64;
        assert!((mean - 512.0).abs() < 25.0, "mean util {mean}");
        assert!(
            samples.iter().all(|&u| (470..=560).contains(&u)),
            "{samples:?}"
        );
    }
}
