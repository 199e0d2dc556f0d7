//! How long a woken task waits for a CPU that nothing else holds, drawn from what a
//! trace measured rather than one constant.
//!
//! An idle CPU's exit latency is not a number: it depends on the C-state it reached, and
//! under a hypervisor on whether the vCPU thread runs at all (the rig's TCG guests stall
//! for milliseconds when their host is busy). A single median reproduces a trace's
//! typical wakeup and none of its tail, so a re-run of a trace draws each delay from
//! that trace's own samples of the same kind of wakeup. What follows the delay (the wait
//! behind other tasks, preemption decisions) is still the simulator's.

use std::sync::Arc;

/// A wakeup kind needs this many traced samples before its delay is drawn from them.
pub const MIN_SAMPLES: usize = 50;

/// Samples of waking-to-running time (ns, sorted), by the kind of wakeup whose wait
/// depends on the machine rather than on the scheduler.
#[derive(Debug, Clone, Default)]
pub struct WakeDelays {
    /// Onto another CPU that was idle: the IPI and the idle exit.
    pub remote_idle: Arc<[u32]>,
    /// Onto the idle CPU the waking ran on (a timer or an interrupt there): the return
    /// from the interrupt into the scheduler.
    pub local_idle: Arc<[u32]>,
    /// A wakee that preempted its waker: the rest of the waker's system call and the
    /// context switch.
    pub preempt: Arc<[u32]>,
}

impl WakeDelays {
    /// The delays from the trace's samples (in any order); a kind with fewer than
    /// [`MIN_SAMPLES`] samples stays empty and falls back to the simulator's constant.
    pub fn from_samples(
        mut remote_idle: Vec<u32>,
        mut local_idle: Vec<u32>,
        mut preempt: Vec<u32>,
    ) -> WakeDelays {
        let keep = |v: &mut Vec<u32>| -> Arc<[u32]> {
            if v.len() < MIN_SAMPLES {
                return Arc::from(Vec::new());
            }
            v.sort_unstable();
            Arc::from(std::mem::take(v))
        };
        WakeDelays {
            remote_idle: keep(&mut remote_idle),
            local_idle: keep(&mut local_idle),
            preempt: keep(&mut preempt),
        }
    }

    /// Whether any kind has samples to draw from.
    pub fn any(&self) -> bool {
        !(self.remote_idle.is_empty() && self.local_idle.is_empty() && self.preempt.is_empty())
    }
}

/// One of `samples` chosen uniformly, or None when there are none.
pub fn draw(samples: &[u32], rng: &mut fastrand::Rng) -> Option<u64> {
    if samples.is_empty() {
        return None;
    }
    Some(samples[rng.usize(..samples.len())] as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_keep_the_traced_tail() {
        // 99 wakeups at 18 us and one at 5 ms: a one-in-a-hundred stall.
        let mut remote: Vec<u32> = vec![18_000; 990];
        remote.extend([5_000_000; 10]);
        let d = WakeDelays::from_samples(remote, vec![1; 10], Vec::new());
        assert!(
            d.local_idle.is_empty(),
            "10 samples are too few to draw from"
        );
        assert!(d.preempt.is_empty());
        let mut rng = fastrand::Rng::with_seed(7);
        let drawn: Vec<u64> = (0..100_000)
            .map(|_| draw(&d.remote_idle, &mut rng).unwrap())
            .collect();
        let stalls = drawn.iter().filter(|&&ns| ns == 5_000_000).count();
        // 1 % of 100,000 is 1,000; a binomial's sd is about 31.
        assert!((850..1150).contains(&stalls), "{stalls} stalls drawn");
        assert!(drawn.iter().all(|&ns| ns == 18_000 || ns == 5_000_000));
        assert_eq!(draw(&d.preempt, &mut rng), None);
    }
}
