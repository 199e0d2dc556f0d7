//! The words the report uses, one line each, and the kernel patch threads ("seeds") its
//! policies, metrics and machines come from, with the definitions as the seeds give them.

/// Term → one-line definition, in the order a reader meets them.
pub const TERMS: &[(&str, &str)] = &[
    (
        "se_eff% (search efficiency)",
        "seed 000: \"a ratio expressed as a percentage of runqueues scanned versus idle CPUs \
         found\"; 100 % when target, prev or recent was idle. Computed as \
         100·(search − failed)/scanned (Chen Yu's schedstat_parse.py).",
    ),
    (
        "success rate %",
        "seed 000: \"percentage of scans that found an idle CPU\": 100·(search − failed)/search.",
    ),
    (
        "path failed",
        "select_idle_sibling found no idle CPU and fell back to the target (sis_failed).",
    ),
    (
        "scanned",
        "sis_scanned: 1 per call for target, prev or recent, plus 1 per CPU the SMT, core \
         and CPU scans examined.",
    ),
    (
        "probed",
        "runqueues select_idle_cpu and select_idle_smt examined in one wakeup; the modelled \
         search time is entry + probed × cost per runqueue.",
    ),
    (
        "cross-LLC",
        "the wakee was placed on a CPU that shares no last-level cache with its previous CPU.",
    ),
    (
        "IPI wakeup",
        "the kernel queued the wakeup on the target CPU's wakelist (TTWU_QUEUE) and woke it \
         by an inter-processor interrupt; the enqueue is recorded on the target later.",
    ),
    (
        "agreement, fidelity",
        "share of replayed wakeups where the model of the traced kernel's policy picked the \
         CPU the kernel picked: trust strong at ≥ 95 %, moderate at ≥ 90 %, weak below; \
         at most moderate when always keeping each task on its previous CPU would have \
         agreed as often.",
    ),
    (
        "self-fidelity",
        "a traced workload re-run in the simulator under the traced kernel's policy, checked \
         against its trace; its counterfactuals are trusted only when the checks pass.",
    ),
    (
        "seed NNN",
        "a kernel patch thread the report's policies, metrics and machines are taken from, \
         numbered as below.",
    ),
];

/// Seed number, the thread's subject, who wrote the message, and what the report takes
/// from it.
pub const SEEDS: &[(&str, &str, &str, &str)] = &[
    (
        "000",
        "Re: [PATCH v3] sched/fair: Introduce SIS_UTIL to search idle CPU based on sum of \
         util_avg",
        "Yicong Yang, quoting Chen Yu's patch",
        "SIS_UTIL v3, its search-time histogram and se_eff/success-rate tables.",
    ),
    (
        "001",
        "Re: [PATCH v3] sched/fair: Introduce SIS_UTIL to search idle CPU based on sum of \
         util_avg",
        "Chen Yu, answering the review",
        "SIS_UTIL on by default, its scan depth updated at load balance.",
    ),
    (
        "002",
        "[RFC PATCH 4/6] sched/fair: Restrict newidle balance to LLC domain",
        "Li kunyu",
        "newidle balance kept within the LLC.",
    ),
    (
        "004",
        "[PATCH] sched: Introduce scaled capacity awareness in enqueue",
        "Rohit Jain",
        "capacity-aware idle selection, CAS: skip CPUs whose capacity IRQ/RT work reduced.",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_seed_is_listed_with_its_subject() {
        let ids: Vec<&str> = SEEDS.iter().map(|s| s.0).collect();
        assert_eq!(ids, ["000", "001", "002", "004"]);
        assert!(SEEDS.iter().all(|s| s.1.contains("sched")));
        assert!(TERMS.iter().all(|t| !t.1.contains('\n')));
    }
}
