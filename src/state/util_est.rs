//! util_est as fair.c keeps it: a task's utilisation when it last slept and an EWMA of
//! it, so that a CPU holding tasks that are queued but not running (a wakee waiting for
//! its CPU) reports their expected utilisation before PELT has caught up.
//! cpu_util_cfs, and so SIS_UTIL's sum over the LLC, is max(util_avg, Σ estimates of the
//! enqueued tasks).
//!
//! Two sets of rules ([`Rules`]): 6.1's estimate is the larger of the EWMA and the last
//! sample. From v6.8 ("sched/fair: Simplify util_est", "sched/pelt: Avoid
//! underestimation of task utilization"; 6.12's fair.c has both, 6.1's neither) it is
//! the EWMA alone, and a sleep does not lower the EWMA when the task's runnable_avg
//! exceeds its util_avg by the margin: it waited to run, so its util_avg says less than
//! it wanted. A task that waits for its waker to block (a ping-pong pair on one CPU)
//! keeps its estimate high, and SIS_UTIL's budget lower than 6.1's rules give.
//!
//! 6.12's fair.c (6.12.118, the rig's) runs the update before the dequeue brings the
//! task's PELT signal to the sleep, so its sample is the task's util_avg as last updated:
//! at its switch-in or at a tick (every 4 ms) during its run. The machine state keeps no
//! ticks, so it samples at the sleep, as 6.1 does: off by the growth since the last
//! tick, at most 1 − y⁴ ≈ 8 % of the way to 1024 (sampling at the switch-in instead,
//! a long run's sample would be off by all of its growth).

/// UTIL_EST_MARGIN: changes within 1 % of capacity do not move the estimate.
const MARGIN: i64 = 1024 / 100;
/// UTIL_EST_WEIGHT_SHIFT: each sample weighs ¼ in the EWMA.
const WEIGHT_SHIFT: u32 = 2;

/// The util_est rules of a kernel release.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Rules {
    /// Before v6.8 (6.1's, with UTIL_EST_FASTUP): the larger of the EWMA and the last
    /// sample, which FASTUP keeps at or under the EWMA but for samples within the margin.
    #[default]
    LastSample,
    /// From v6.8: the EWMA alone, a sample lower than it also skipped when the task's
    /// runnable_avg exceeds it by the margin.
    EwmaOnly,
}

impl Rules {
    /// The rules of a kernel release (`uname -r`); an unknown one keeps 6.1's.
    pub fn of_release(release: Option<&str>) -> Rules {
        if crate::abi::release_at_least(release, (6, 8)) {
            Rules::EwmaOnly
        } else {
            Rules::LastSample
        }
    }
}

/// p->se.avg.util_est.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UtilEst {
    /// util_avg at the last sleep that updated the estimate (6.1's ue.enqueued; from v6.8
    /// the kernel keeps no such sample, and this stays as it was).
    pub enqueued: u64,
    /// The EWMA of those samples, following increases at once (UTIL_EST_FASTUP).
    pub ewma: u64,
    /// UTIL_AVG_UNCHANGED: set by an update, cleared once PELT recomputes util_avg
    /// (a period boundary crossed); a sleep while it is set leaves the estimate alone.
    unchanged: bool,
}

impl UtilEst {
    /// _task_util_est: what the task adds to its CPU's estimate while enqueued.
    pub fn value(&self, rules: Rules) -> u64 {
        match rules {
            Rules::LastSample => self.ewma.max(self.enqueued),
            Rules::EwmaOnly => self.ewma,
        }
    }

    /// cfs_se_util_change: the task's util_avg was recomputed.
    pub fn pelt_changed(&mut self) {
        self.unchanged = false;
    }

    /// util_est_update at a dequeue to sleep, with the task's util_avg and
    /// runnable_avg then and its CPU's original capacity.
    pub fn sleep(&mut self, util: u64, runnable: u64, capacity: u64, rules: Rules) {
        if self.unchanged {
            return;
        }
        if rules == Rules::EwmaOnly {
            self.sleep_ewma_only(util, runnable, capacity);
            return;
        }
        let mut ue = *self;
        ue.enqueued = util;
        if ue.ewma < util {
            ue.ewma = util;
        } else {
            let ewma_diff = util as i64 - ue.ewma as i64;
            let enqueued_diff = self.enqueued as i64 - util as i64;
            if ewma_diff.abs() < MARGIN {
                if enqueued_diff.abs() < MARGIN {
                    // Already within 1 % of the last sample: nothing written.
                    return;
                }
            } else {
                if util > capacity {
                    // No sign of idle time on this CPU: the sample may overestimate.
                    return;
                }
                ue.ewma = (((ue.ewma << WEIGHT_SHIFT) as i64 + ewma_diff) >> WEIGHT_SHIFT) as u64;
            }
        }
        ue.unchanged = true;
        *self = ue;
    }

    /// util_est_update from v6.8: increases taken at once; a decrease within the
    /// margin leaves the EWMA; one above capacity is not taken at all (nor marked); one
    /// the task's waiting to run explains leaves the EWMA.
    fn sleep_ewma_only(&mut self, util: u64, runnable: u64, capacity: u64) {
        if self.ewma > util {
            let diff = self.ewma - util;
            let within = (diff as i64) < MARGIN;
            if !within && util > capacity {
                return;
            }
            let waited = (util as i64 + MARGIN) < runnable as i64;
            if !within && !waited {
                self.ewma = ((self.ewma << WEIGHT_SHIFT) - diff) >> WEIGHT_SHIFT;
            }
        } else {
            self.ewma = util;
        }
        self.unchanged = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn increases_are_taken_at_once_and_decreases_a_quarter_at_a_time() {
        let mut u = UtilEst::default();
        u.sleep(400, 400, 1024, Rules::LastSample);
        assert_eq!(
            (u.enqueued, u.ewma, u.value(Rules::LastSample)),
            (400, 400, 400)
        );
        // No period crossed since: the same sleep again changes nothing.
        u.sleep(100, 100, 1024, Rules::LastSample);
        assert_eq!(u.value(Rules::LastSample), 400);
        u.pelt_changed();
        // ewma·4 + (100 − 400), then / 4: (1600 − 300) / 4 = 325; the last sample 100
        // is below it, so the estimate is the EWMA.
        u.sleep(100, 100, 1024, Rules::LastSample);
        assert_eq!(
            (u.enqueued, u.ewma, u.value(Rules::LastSample)),
            (100, 325, 325)
        );
        u.pelt_changed();
        // (1300 − 225) / 4 = 268 (268.75 floored).
        u.sleep(100, 100, 1024, Rules::LastSample);
        assert_eq!(u.ewma, 268);
        u.pelt_changed();
        u.sleep(900, 900, 1024, Rules::LastSample);
        assert_eq!((u.ewma, u.value(Rules::LastSample)), (900, 900));
    }

    #[test]
    fn samples_within_one_percent_are_not_written() {
        let mut u = UtilEst::default();
        u.sleep(500, 500, 1024, Rules::LastSample);
        u.pelt_changed();
        // 495: within 10 of both the EWMA and the last sample, nothing written, and the
        // flag stays clear, so the next sleep is taken.
        u.sleep(495, 495, 1024, Rules::LastSample);
        assert_eq!((u.enqueued, u.ewma), (500, 500));
        // Within 10 of the EWMA but not of the last sample: the sample is written, the
        // EWMA stays.
        u.enqueued = 520;
        u.sleep(495, 495, 1024, Rules::LastSample);
        assert_eq!((u.enqueued, u.ewma), (495, 500));
    }

    #[test]
    fn a_sample_above_capacity_is_not_averaged_in() {
        let mut u = UtilEst {
            enqueued: 1024,
            ewma: 1024,
            unchanged: false,
        };
        // Decreasing, but above the (reduced) capacity of 800: skipped.
        u.sleep(900, 900, 800, Rules::LastSample);
        assert_eq!((u.enqueued, u.ewma), (1024, 1024));
    }

    /// 6.12's util_est_update, worked through: an EWMA of 400 and a sample of 100.
    #[test]
    fn from_6_8_a_task_that_waited_to_run_keeps_its_estimate() {
        let at = |ewma| UtilEst {
            enqueued: ewma,
            ewma,
            unchanged: false,
        };
        // runnable_avg 300: 100 + 10 < 300, the task waited, the EWMA stays 400 (and
        // is marked, so a second sleep before PELT moves changes nothing).
        let mut u = at(400);
        u.sleep(100, 300, 1024, Rules::EwmaOnly);
        assert_eq!(u.value(Rules::EwmaOnly), 400);
        u.sleep(0, 0, 1024, Rules::EwmaOnly);
        assert_eq!(u.value(Rules::EwmaOnly), 400);
        // 6.1 takes the sample: (4·400 − 300) / 4 = 325.
        let mut u = at(400);
        u.sleep(100, 300, 1024, Rules::LastSample);
        assert_eq!(u.value(Rules::LastSample), 325);
        // runnable_avg 110 (not above 100 + 10): taken, 325 as in 6.1.
        let mut u = at(400);
        u.sleep(100, 110, 1024, Rules::EwmaOnly);
        assert_eq!(u.value(Rules::EwmaOnly), 325);
        // Increases are taken whatever the runnable: 500 at once.
        u.pelt_changed();
        u.sleep(500, 900, 1024, Rules::EwmaOnly);
        assert_eq!(u.value(Rules::EwmaOnly), 500);
        // 6.8+ reads the EWMA alone: after 500 then 495 (within the margin) 6.1's
        // value is max(EWMA, last sample) = 500 too, so the two rules part only where
        // a task waited to run.
        u.pelt_changed();
        u.sleep(495, 495, 1024, Rules::EwmaOnly);
        assert_eq!(u.value(Rules::EwmaOnly), 500);
    }

    #[test]
    fn releases_map_to_their_util_est_rules() {
        let of = |r| Rules::of_release(Some(r));
        assert_eq!(of("6.1.0-57-amd64"), Rules::LastSample);
        assert_eq!(of("6.7.12"), Rules::LastSample);
        assert_eq!(of("6.8.0"), Rules::EwmaOnly);
        assert_eq!(of("6.12.118-rig-sis-stats+noinline"), Rules::EwmaOnly);
        assert_eq!(of("6.18.0-1-amd64"), Rules::EwmaOnly);
        assert_eq!(Rules::of_release(None), Rules::LastSample);
    }
}
