//! The part of select_task_rq_fair before the idle search, on the reconstructed machine:
//! record_wakee, wake_wide, wake_affine (idle rules, then the load comparison) choose the
//! target that select_idle_sibling starts from; and, after the search, the update of the
//! wakee's recent_used_cpu. Shared by decision replay and the simulator, so both place
//! wakeups through the same code.

use crate::state::Machine;
use crate::wakeup::affine::{self, wake_wide, Affine, IdleView, WeightView};
use crate::wakeup::sis::Wakee;

/// One wakeup as select_task_rq_fair is called for it.
#[derive(Debug, Clone, Copy)]
pub struct Waking {
    /// When the wakeup happens (ns): trace time in replay, virtual time in simulation.
    pub now: u64,
    /// The CPU the wakeup runs on (smp_processor_id in select_task_rq_fair).
    pub waker_cpu: u32,
    /// The task running on the waker's CPU (0 for the idle task or an interrupt of it).
    pub waker: i32,
    /// The wakee's pid.
    pub wakee: i32,
    /// prev_cpu: the wakee's CPU when it was woken (p->wake_cpu).
    pub prev: u32,
    /// WF_SYNC: in replay from the probe's wake_flags, else taken as `in_task`; in
    /// simulation from the workload's step.
    pub sync: bool,
    /// The waker runs in task context (not an interrupt).
    pub in_task: bool,
}

/// The target the search starts from and how it was chosen.
pub struct Target {
    /// What select_idle_sibling needs: prev, target (wake_affine's choice, or prev), the
    /// waker's kind and the wakee's recent_used_cpu.
    pub wakee: Wakee,
    /// Which step chose it: wake_wide, wake_affine_idle, wake_affine_weight, or "waker
    /// is prev".
    pub stage: &'static str,
    /// The waker's and the wakee's wakee_flips as wake_wide compared them (after
    /// record_wakee counted this wakeup for the waker).
    pub flips: (u32, u32),
    /// With `explain`: the inputs of each step, in words.
    pub steps: Vec<String>,
}

/// record_wakee, then wake_wide and wake_affine as v5.18–v7.1 run them.
pub fn choose_target(m: &mut Machine, w: &Waking, explain: bool) -> Target {
    let Waking {
        now,
        waker_cpu,
        waker,
        wakee: pid,
        prev,
        sync,
        in_task,
    } = *w;
    let waker_flips = crate::state::machine::flips_key(waker, waker_cpu);
    m.record_wakee(waker_flips, pid, now);
    let flips = |p: i32| m.wakee_flips(p, now);
    let llc_size = m.topo.llc_span(waker_cpu).len() as u32;
    let compared = (flips(waker_flips), flips(pid));
    let want_affine = !wake_wide(compared.0, compared.1, llc_size);
    let mut steps = Vec::new();
    if explain {
        steps.push(format!(
            "wake_wide: flips waker {} wakee {}, LLC {llc_size} -> {}",
            compared.0,
            compared.1,
            if want_affine { "affine" } else { "wide" }
        ));
    }
    let (target, stage) = if want_affine && waker_cpu != prev {
        let idle = IdleView {
            this_idle: m.is_idle(waker_cpu),
            prev_idle: m.is_idle(prev),
            share_llc: m.topo.share_cache(waker_cpu, prev),
            sync,
            this_nr_running: m.cpus.get(waker_cpu as usize).map_or(0, |c| c.nr_running()),
        };
        let load = |p: i32| m.tasks.get(&p).map_or(0, |t| t.avg.load_avg) as i64;
        let weight = WeightView {
            this_load: m.cpu_load(waker_cpu) as i64,
            prev_load: m.cpu_load(prev) as i64,
            waker_h_load: load(waker),
            wakee_h_load: load(pid),
            this_capacity: 1024,
            prev_capacity: 1024,
            sync,
            imbalance_pct: if m.topo.same_core(waker_cpu, prev) {
                110
            } else {
                117
            },
        };
        if explain {
            steps.extend(affine::explain(&idle, &weight));
        }
        let (choice, stage) = match affine::wake_affine_idle(&idle) {
            Some(a) => (a, "wake_affine_idle"),
            None => (
                affine::wake_affine_weight(&weight).unwrap_or(Affine::Prev),
                "wake_affine_weight",
            ),
        };
        match choice {
            Affine::This => (waker_cpu, stage),
            Affine::Prev => (prev, stage),
        }
    } else if want_affine {
        (prev, "waker is prev")
    } else {
        (prev, "wake_wide")
    };
    Target {
        wakee: Wakee {
            prev,
            target,
            waker_cpu,
            waker_is_percpu_kthread: m.tasks.get(&waker).is_some_and(|t| t.is_percpu_kthread()),
            in_task,
            recent_used_cpu: m.tasks.get(&pid).and_then(|t| t.recent_used_cpu),
            now_ns: now,
        },
        stage,
        flips: compared,
        steps,
    }
}

/// select_idle_sibling sets recent_used_cpu = prev once it gets past target, prev and
/// kthread stacking: machine state decides that, not the policy, so every policy (and
/// every replay thread) sees the same.
pub fn note_recent_used(m: &mut Machine, pid: i32, wakee: &Wakee) {
    let (prev, target) = (wakee.prev, wakee.target);
    let stops_early = m.is_idle(target)
        || (prev != target && m.topo.share_cache(prev, target) && m.is_idle(prev))
        || (wakee.waker_is_percpu_kthread
            && wakee.in_task
            && prev == wakee.waker_cpu
            && m.cpus
                .get(prev as usize)
                .is_some_and(|c| c.nr_running() <= 1));
    if !stops_early {
        if let Some(t) = m.tasks.get_mut(&pid) {
            t.recent_used_cpu = Some(prev);
        }
    }
}
