//! How long a woken task waits for a CPU that nothing else holds, drawn from what a
//! trace measured rather than one constant.
//!
//! An idle CPU's exit latency is not a number: it depends on the C-state it reached, and
//! under a hypervisor on whether the vCPU thread runs at all (the rig's TCG guests stall
//! for milliseconds when their host is busy). A single median reproduces a trace's
//! typical wakeup and none of its tail, so a re-run of a trace takes its delays from
//! that trace. A wakeup that ends one of a traced task's sleeps takes the delay the
//! traced wakeup that ended that sleep had, when both are of the same kind: the stalls
//! stay where they were, in step with the rest of the exchange, which independent draws
//! would pull apart (a fast draw lets an answer come before its waker sleeps, and that
//! wakeup is lost). A wakeup of another
//! kind than the trace's draws from the trace's samples of its kind. What follows the
//! delay (the wait behind other tasks, preemption decisions) is still the simulator's.

use std::collections::HashMap;
use std::sync::Arc;

/// A wakeup kind needs this many traced samples before its delay is drawn from them.
pub const MIN_SAMPLES: usize = 50;

/// The kinds of wakeup whose wait depends on the machine rather than on the scheduler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DelayKind {
    /// Onto another CPU that was idle.
    RemoteIdle,
    /// Onto the idle CPU the waking ran on.
    LocalIdle,
    /// A wakee that preempted its waker on the waker's CPU.
    Preempt,
    /// Anything else (queued behind other tasks): the scheduler's, not drawn.
    Other,
}

/// One traced wakeup of a task: its kind and waking-to-running time (ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TracedWakeup {
    /// How it ran.
    pub kind: DelayKind,
    /// Waking to running, ns.
    pub ns: u32,
}

/// Samples of waking-to-running time (ns, sorted), by the kind of wakeup whose wait
/// depends on the machine rather than on the scheduler, and each task's traced wakeups
/// in order.
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
    /// Each task's traced wakeups, by pid: the index of the sleep step each ended (in
    /// increasing order) and its wait.
    pub by_pid: Arc<HashMap<i32, Vec<(usize, TracedWakeup)>>>,
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
            by_pid: Arc::default(),
        }
    }

    /// The delays with each task's traced wakeups, by the sleep step each ended.
    pub fn with_wakeups(self, by_pid: HashMap<i32, Vec<(usize, TracedWakeup)>>) -> WakeDelays {
        WakeDelays {
            by_pid: Arc::new(by_pid),
            ..self
        }
    }

    /// The samples of one kind (none for [`DelayKind::Other`]).
    pub fn samples(&self, kind: DelayKind) -> &[u32] {
        match kind {
            DelayKind::RemoteIdle => &self.remote_idle,
            DelayKind::LocalIdle => &self.local_idle,
            DelayKind::Preempt => &self.preempt,
            DelayKind::Other => &[],
        }
    }

    /// The delay of the wakeup of `pid` that ends its sleep step `step`, of `kind`: the
    /// traced one when the trace's wakeup there was of the same kind, else one drawn
    /// from the kind's samples; None when the trace has no samples of it.
    pub fn of(
        &self,
        pid: i32,
        step: usize,
        kind: DelayKind,
        rng: &mut fastrand::Rng,
    ) -> Option<(u64, Source)> {
        let traced = self.by_pid.get(&pid).and_then(|w| {
            let i = w.binary_search_by_key(&step, |&(k, _)| k).ok()?;
            Some(&w[i].1)
        });
        match traced {
            Some(w) if w.kind == kind && kind != DelayKind::Other => {
                Some((w.ns as u64, Source::Traced))
            }
            _ => draw(self.samples(kind), rng).map(|ns| (ns, Source::Drawn)),
        }
    }

    /// Whether any kind has samples to draw from.
    pub fn any(&self) -> bool {
        !(self.remote_idle.is_empty()
            && self.local_idle.is_empty()
            && self.preempt.is_empty()
            && self.by_pid.is_empty())
    }
}

/// Where a wakeup's delay came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The traced wakeup that ended the same sleep, of the same kind.
    Traced,
    /// Drawn from the trace's samples of the kind.
    Drawn,
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

    #[test]
    fn a_wakeup_takes_its_traced_delay_when_of_the_same_kind() {
        let w = |kind, ns| TracedWakeup { kind, ns };
        let d = WakeDelays::from_samples(vec![7; 60], Vec::new(), Vec::new()).with_wakeups(
            HashMap::from([(
                42,
                vec![
                    (3, w(DelayKind::RemoteIdle, 5_000_000)),
                    (8, w(DelayKind::Preempt, 30)),
                ],
            )]),
        );
        let mut rng = fastrand::Rng::with_seed(1);
        let r = DelayKind::RemoteIdle;
        let (traced, drawn) = (Source::Traced, Source::Drawn);
        assert_eq!(d.of(42, 3, r, &mut rng), Some((5_000_000, traced)));
        // The wakeup that ended sleep step 8 preempted; a remote one draws.
        assert_eq!(d.of(42, 8, r, &mut rng), Some((7, drawn)));
        // A sleep the trace did not end, and a task it does not have, likewise.
        assert_eq!(d.of(42, 5, r, &mut rng), Some((7, drawn)));
        assert_eq!(d.of(43, 3, r, &mut rng), Some((7, drawn)));
        assert_eq!(
            d.of(42, 8, DelayKind::Preempt, &mut rng),
            Some((30, traced))
        );
        // No samples of a kind: no delay from the trace.
        assert_eq!(d.of(42, 3, DelayKind::Preempt, &mut rng), None);
    }
}
