//! `info` of a bundle from its columns: each record batch's typed arrays go straight
//! into the counts (the same slices, causal checks and migration classes as the event
//! path, fed field by field), with no event built, per-task state in tables indexed by
//! pid, and only the task columns read (bundle::scan). Its summary equals
//! [`super::summarise`]'s of the same bundle's events read in file order (tests/info.rs
//! compares them).

use std::collections::BTreeMap;
use std::path::Path;

use super::{Counted, Runtimes, Summary};
use crate::bundle::scan::{Null, TaskBatch, TaskScan};
use crate::bundle::{Meta, EVENTS_FILE};
use crate::derived::{AwaitingWakeup, Slices};
use crate::pid_table::PidTable;
use crate::trace::causal::{CausalCheck, Step};
use crate::trace::{Comm, EventType, TraceError};

/// The counts of a bundle's events so far.
struct Counts {
    by_type: [u64; EventType::ALL.len()],
    first_ts: Option<u64>,
    last_ts: Option<u64>,
    max_cpu: Option<u32>,
    /// Per pid (0 left out), the comm of its latest event that names it.
    names: PidTable<Option<Comm>>,
    /// Per CPU: the task its last switch put on.
    last_next: Vec<Option<i32>>,
    /// Per CPU: switches whose prev_pid is not the previous switch's next_pid.
    switch_gaps: Vec<u64>,
    causal: CausalCheck,
    slices: Slices,
    awaiting: AwaitingWakeup,
    runtime: Runtimes,
    wakeup_migrations: u64,
    other_migrations: u64,
}

impl Counts {
    fn new(nr_cpus: u32) -> Counts {
        Counts {
            by_type: [0; EventType::ALL.len()],
            first_ts: None,
            last_ts: None,
            max_cpu: None,
            names: PidTable::default(),
            last_next: vec![None; nr_cpus as usize],
            switch_gaps: vec![0; nr_cpus as usize],
            causal: CausalCheck::default(),
            slices: Slices::default(),
            awaiting: AwaitingWakeup::default(),
            runtime: Runtimes::default(),
            wakeup_migrations: 0,
            other_migrations: 0,
        }
    }

    #[inline]
    fn name(&mut self, pid: i32, comm: &Comm) {
        if pid != 0 {
            self.names.replace(pid, Some(*comm));
        }
    }

    /// Counts the checked rows of a batch; the first null field a row's type needs is
    /// the error.
    fn batch(&mut self, b: &TaskBatch) -> Result<(), TraceError> {
        let n = b.checked();
        if n == 0 {
            return Ok(());
        }
        let (ts, cpus) = (&b.ts()[..n], &b.cpus()[..n]);
        self.first_ts.get_or_insert(ts[0]);
        self.last_ts = Some(ts[n - 1]);
        let max = cpus.iter().copied().max();
        self.max_cpu = self.max_cpu.max(max);
        for (i, &t) in b.types().iter().enumerate() {
            self.by_type[t.index()] += 1;
            self.row(b, i, t, ts[i], cpus[i])
                .map_err(|null| b.null_at(i, null))?;
        }
        Ok(())
    }

    /// Counts row i, of type `t`, at `ts` on `cpu`: what [`crate::bundle::Tally`],
    /// [`CausalCheck`] and [`crate::derived::Pass`] do with its event.
    #[inline]
    fn row(
        &mut self,
        b: &TaskBatch,
        i: usize,
        t: EventType,
        ts: u64,
        cpu: u32,
    ) -> Result<(), Null> {
        let step = match t {
            EventType::SchedSwitch => {
                let (prev_pid, prev_state) = (b.prev_pid(i)?, b.prev_state(i)?);
                let next_pid = b.next_pid(i)?;
                self.name(prev_pid, b.prev_comm(i)?);
                self.name(next_pid, b.next_comm(i)?);
                // Rows are checked to be on the bundle's CPUs.
                let c = cpu as usize;
                if let Some(last) = self.last_next[c].replace(next_pid) {
                    self.switch_gaps[c] += (last != prev_pid) as u64;
                }
                let ends = self.slices.switch(cpu, ts, prev_pid, prev_state, next_pid);
                for s in ends.slices() {
                    self.runtime.add(&s);
                }
                Step::Switch {
                    prev_pid,
                    prev_state,
                    next_pid,
                }
            }
            EventType::SchedWaking => {
                let pid = b.pid(i)?;
                self.name(pid, b.comm(i)?);
                self.awaiting.waking(pid);
                Step::Waking {
                    waker: b.common_pid(i)?,
                    pid,
                    target_cpu: b.target_cpu(i)?,
                }
            }
            EventType::SchedWakeup | EventType::SchedWakeupNew => {
                let pid = b.pid(i)?;
                self.name(pid, b.comm(i)?);
                self.awaiting.woken(pid);
                Step::Wakeup {
                    pid,
                    target_cpu: b.target_cpu(i)?,
                    new: t == EventType::SchedWakeupNew,
                }
            }
            EventType::SchedMigrateTask => {
                let pid = b.pid(i)?;
                self.name(pid, b.comm(i)?);
                if self.awaiting.contains(pid) {
                    self.wakeup_migrations += 1;
                } else {
                    self.other_migrations += 1;
                }
                Step::Migrate {
                    pid,
                    orig_cpu: b.orig_cpu(i)?,
                    dest_cpu: b.dest_cpu(i)?,
                }
            }
            EventType::SchedProcessFork => {
                self.name(b.parent_pid(i)?, b.parent_comm(i)?);
                self.name(b.child_pid(i)?, b.child_comm(i)?);
                Step::Other
            }
            EventType::SchedProcessExit => {
                self.name(b.pid(i)?, b.comm(i)?);
                Step::Other
            }
            _ => Step::Other,
        };
        self.causal.add_step(ts, cpu, &step);
        Ok(())
    }
}

/// Summarises the bundle at `dir`, whose meta.json is `meta`, from its columns, its rows
/// in file order, listing the `top` tasks by CPU time.
pub fn summarise_columns(dir: &Path, meta: &Meta, top: usize) -> Result<Summary, TraceError> {
    let mut scan = TaskScan::open(&dir.join(EVENTS_FILE), meta.nr_cpus)?;
    let mut c = Counts::new(meta.nr_cpus);
    while let Some(b) = scan.next_batch()? {
        c.batch(&b)?;
        b.end()?;
    }
    // Tasks still running at the end ran until the last event.
    if let Some(end) = c.last_ts {
        for s in c.slices.finish(end) {
            c.runtime.add(&s);
        }
    }
    let top_tasks = c.runtime.top(top, |pid| match c.names.get(pid) {
        Some(comm) => Some(comm.to_str_lossy().into_owned()),
        None => meta.tasks.get(&pid).cloned(),
    });
    let counts = EventType::ALL
        .into_iter()
        .filter(|t| c.by_type[t.index()] > 0)
        .map(|t| (t.name().to_string(), c.by_type[t.index()]))
        .collect();
    let switch_gaps: BTreeMap<u32, u64> = (0u32..)
        .zip(c.switch_gaps)
        .filter(|(_, n)| *n > 0)
        .collect();
    Ok(Counted {
        events: c.by_type.iter().sum(),
        first_ts: c.first_ts,
        last_ts: c.last_ts,
        max_cpu: c.max_cpu,
        counts,
        wakeups: c.by_type[EventType::SchedWakeup.index()]
            + c.by_type[EventType::SchedWakeupNew.index()],
        wakeup_migrations: c.wakeup_migrations,
        other_migrations: c.other_migrations,
        switch_gaps,
        causal: c.causal,
        top_tasks,
    }
    .summary(meta.source_info(), meta.read_stats()))
}
