//! Values of the kernel's scheduler ABI that traces carry or that the models follow,
//! defined once. Each has been unchanged from v5.13 through v7.1.

/// wake_flags: a wakeup by try_to_wake_up (kernel/sched/sched.h, v6.x numbering).
pub const WF_TTWU: u32 = 0x08;
/// wake_flags: a synchronous wakeup, the waker about to sleep (kernel/sched/sched.h).
pub const WF_SYNC: u32 = 0x10;

/// sched_switch prev_state: the task was preempted while runnable (TASK_REPORT_MAX,
/// printed as `R+`).
pub const PREEMPTED: i64 = 0x100;

/// sched_switch prev_state: the task blocked uninterruptibly (TASK_UNINTERRUPTIBLE,
/// printed as `D`): a lock's or an I/O's waiter.
pub const TASK_UNINTERRUPTIBLE: i64 = 0x2;

/// sched_switch prev_state of a task's last switch: EXIT_DEAD, printed as `X`.
pub const EXIT_DEAD: i64 = 0x10;

/// sched_switch prev_state of a task that exited and awaits its parent: EXIT_ZOMBIE, `Z`.
pub const EXIT_ZOMBIE: i64 = 0x20;

/// softirq_entry's vec of SCHED_SOFTIRQ: run_rebalance_domains, the periodic (and
/// tickless idle) load balance (include/linux/interrupt.h).
pub const SCHED_SOFTIRQ: u32 = 7;

/// sysctl_sched_migration_cost (ns): a task that ran more recently is cache hot, and an
/// rq whose avg_idle is below it skips newidle balance. avg_idle starts at twice it.
pub const MIGRATION_COST_NS: u64 = 500_000;

/// The (major, minor) version of a kernel release as `uname -r` prints it
/// (`6.1.0-57-amd64` is (6, 1)); None when it does not start with two numbers.
pub fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut it = release
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty());
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// Whether a kernel release (`uname -r`) is `version` or later; an unknown one is not.
pub fn release_at_least(release: Option<&str>, version: (u32, u32)) -> bool {
    release
        .and_then(kernel_version)
        .is_some_and(|v| v >= version)
}
