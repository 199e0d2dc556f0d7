//! util_est as 6.1's fair.c keeps it: a task's utilisation when it last slept and an
//! EWMA of it, so that a CPU holding tasks that are queued but not running (a wakee
//! waiting for its CPU) reports their expected utilisation before PELT has caught up.
//! cpu_util_cfs, and so SIS_UTIL's sum over the LLC, is max(util_avg, Σ estimates of the
//! enqueued tasks).
//!
//! 6.12 keeps only the EWMA (its _task_util_est drops the last sample) and skips the
//! EWMA's update while the task waited to run; both differ from this by at most the
//! 1 % margin below, or only on contended CPUs.

/// UTIL_EST_MARGIN: changes within 1 % of capacity do not move the estimate.
const MARGIN: i64 = 1024 / 100;
/// UTIL_EST_WEIGHT_SHIFT: each sample weighs ¼ in the EWMA.
const WEIGHT_SHIFT: u32 = 2;

/// p->se.avg.util_est.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UtilEst {
    /// util_avg at the last sleep that updated the estimate (ue.enqueued).
    pub enqueued: u64,
    /// The EWMA of those samples, following increases at once (UTIL_EST_FASTUP).
    pub ewma: u64,
    /// UTIL_AVG_UNCHANGED: set by an update, cleared once PELT recomputes util_avg
    /// (a period boundary crossed); a sleep while it is set leaves the estimate alone.
    unchanged: bool,
}

impl UtilEst {
    /// _task_util_est: what the task adds to its CPU's estimate while enqueued.
    pub fn value(&self) -> u64 {
        self.ewma.max(self.enqueued)
    }

    /// cfs_se_util_change: the task's util_avg was recomputed.
    pub fn pelt_changed(&mut self) {
        self.unchanged = false;
    }

    /// util_est_update at a dequeue to sleep, with the task's util_avg then and its
    /// CPU's original capacity.
    pub fn sleep(&mut self, util: u64, capacity: u64) {
        if self.unchanged {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn increases_are_taken_at_once_and_decreases_a_quarter_at_a_time() {
        let mut u = UtilEst::default();
        u.sleep(400, 1024);
        assert_eq!((u.enqueued, u.ewma, u.value()), (400, 400, 400));
        // No period crossed since: the same sleep again changes nothing.
        u.sleep(100, 1024);
        assert_eq!(u.value(), 400);
        u.pelt_changed();
        // ewma·4 + (100 − 400), then / 4: (1600 − 300) / 4 = 325; the last sample 100
        // is below it, so the estimate is the EWMA.
        u.sleep(100, 1024);
        assert_eq!((u.enqueued, u.ewma, u.value()), (100, 325, 325));
        u.pelt_changed();
        // (1300 − 225) / 4 = 268 (268.75 floored).
        u.sleep(100, 1024);
        assert_eq!(u.ewma, 268);
        u.pelt_changed();
        u.sleep(900, 1024);
        assert_eq!((u.ewma, u.value()), (900, 900));
    }

    #[test]
    fn samples_within_one_percent_are_not_written() {
        let mut u = UtilEst::default();
        u.sleep(500, 1024);
        u.pelt_changed();
        // 495: within 10 of both the EWMA and the last sample, nothing written, and the
        // flag stays clear, so the next sleep is taken.
        u.sleep(495, 1024);
        assert_eq!((u.enqueued, u.ewma), (500, 500));
        // Within 10 of the EWMA but not of the last sample: the sample is written, the
        // EWMA stays.
        u.enqueued = 520;
        u.sleep(495, 1024);
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
        u.sleep(900, 800);
        assert_eq!((u.enqueued, u.ewma), (1024, 1024));
    }
}
