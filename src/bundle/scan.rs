//! A bundle's events as typed columns, a record batch at a time, for commands that count
//! over the tasks' events instead of replaying them (`info`): only the columns of the
//! task fields are read (no priorities, IRQs or probe fields), and no event is built.
//! Rows are checked as [`super::EventReader`] checks them (time order, the bundle's
//! CPUs, a known event type) and each field a caller reads is checked not null; an error
//! names the file and the row.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::types::{Int32Type, Int64Type, UInt32Type, UInt64Type};
use parquet::arrow::arrow_reader::ParquetRecordBatchReader;

use super::columns::*;
use super::decode::{comm, Fault, Numbers, RowChecks, Strings, Unread};
use super::error::{EventsError, Problem};
use crate::trace::{Comm, EventType};

/// The columns a [`TaskBatch`] holds, by place in schema().
const TASK_COLUMNS: [usize; 18] = [
    C_TS_NS,
    C_CPU,
    C_EVENT,
    C_COMMON_PID,
    C_COMM,
    C_PID,
    C_TARGET_CPU,
    C_PREV_COMM,
    C_PREV_PID,
    C_PREV_STATE,
    C_NEXT_COMM,
    C_NEXT_PID,
    C_ORIG_CPU,
    C_DEST_CPU,
    C_PARENT_COMM,
    C_PARENT_PID,
    C_CHILD_COMM,
    C_CHILD_PID,
];

/// The names of the columns a [`TaskScan`] reads, in schema() order.
pub fn task_column_names() -> impl Iterator<Item = &'static str> {
    TASK_COLUMNS.into_iter().map(|c| COLUMNS[c].0)
}

/// A null field a row's event type needs: the column's name.
#[derive(Debug, Clone, Copy)]
pub struct Null(&'static str);

/// Reads a bundle's events.parquet as [`TaskBatch`]es.
pub struct TaskScan {
    path: Arc<Path>,
    batches: ParquetRecordBatchReader,
    unread: Unread,
    checks: RowChecks,
    /// Rows in the batches handed out so far.
    rows: u64,
    /// Why the Parquet reader panicked, once it has: it is in no state to go on.
    failed: Option<String>,
    /// A batch stopped at a bad row: its error, given after the rows before it.
    done: bool,
}

impl TaskScan {
    /// Opens `path`, the events of a bundle of `nr_cpus` CPUs.
    pub fn open(path: &Path, nr_cpus: u32) -> Result<TaskScan, EventsError> {
        let file = open_parquet(path)?;
        let (batches, unread) = contained(|| record_batches(file, |c| TASK_COLUMNS.contains(&c)))
            .map_err(|problem| EventsError::file(path, problem))?
            .map_err(|e| EventsError::file(path, e))?;
        Ok(TaskScan {
            path: path.into(),
            batches,
            unread,
            checks: RowChecks {
                nr_cpus: Some(nr_cpus),
                time_order: true,
                last_ts: 0,
            },
            rows: 0,
            failed: None,
            done: false,
        })
    }

    fn at_row(&self, row: u64, problem: impl Into<Problem>) -> EventsError {
        EventsError::Row {
            path: self.path.to_path_buf(),
            row,
            problem: problem.into(),
        }
    }

    /// The next batch; None after the last. Its rows are checked up to the first bad
    /// one, whose error [`TaskBatch::end`] gives.
    pub fn next_batch(&mut self) -> Result<Option<TaskBatch>, EventsError> {
        if self.done {
            return Ok(None);
        }
        let next = next_batch(&mut self.batches, &mut self.failed);
        let Some(batch) = next.map_err(|p| self.at_row(self.rows, p))? else {
            return Ok(None);
        };
        let b = TaskBatch::of(&batch, &self.unread, self.path.clone(), self.rows)
            .map_err(|p| self.at_row(self.rows, p));
        let mut b = b?;
        b.check(&mut self.checks);
        self.done = b.bad.is_some();
        self.rows += b.rows as u64;
        Ok(Some(b))
    }
}

/// One record batch of task columns. Rows before [`TaskBatch::checked`] have a known
/// event type, a timestamp and CPU that pass the bundle's checks.
pub struct TaskBatch {
    path: Arc<Path>,
    /// The row of the file this batch starts at.
    first_row: u64,
    rows: usize,
    /// Rows before the first bad one.
    checked: usize,
    /// The first bad row's index in the batch and what is wrong with it.
    bad: Option<(usize, Problem)>,
    types: Vec<EventType>,
    ts: Numbers<UInt64Type>,
    cpu: Numbers<UInt32Type>,
    event: Strings<Result<EventType, Box<str>>>,
    common_pid: Numbers<Int32Type>,
    comm: Strings<Comm>,
    pid: Numbers<Int32Type>,
    target_cpu: Numbers<Int32Type>,
    prev_comm: Strings<Comm>,
    prev_pid: Numbers<Int32Type>,
    prev_state: Numbers<Int64Type>,
    next_comm: Strings<Comm>,
    next_pid: Numbers<Int32Type>,
    orig_cpu: Numbers<Int32Type>,
    dest_cpu: Numbers<Int32Type>,
    parent_comm: Strings<Comm>,
    parent_pid: Numbers<Int32Type>,
    child_comm: Strings<Comm>,
    child_pid: Numbers<Int32Type>,
}

/// A number field of a row, its null an error.
macro_rules! field {
    ($name:ident, $t:ty) => {
        #[doc = concat!("Row i's `", stringify!($name), "`.")]
        #[inline]
        pub fn $name(&self, i: usize) -> Result<$t, Null> {
            self.$name.get(i).map_err(null)
        }
    };
}

/// A comm field of a row, its null an error.
macro_rules! comm_field {
    ($name:ident) => {
        #[doc = concat!("Row i's `", stringify!($name), "`.")]
        #[inline]
        pub fn $name(&self, i: usize) -> Result<&Comm, Null> {
            self.$name.value(i).map_err(null)
        }
    };
}

fn null(f: Fault) -> Null {
    match f {
        Fault::Null(name) => Null(name),
        _ => unreachable!("a field read only finds nulls"),
    }
}

impl TaskBatch {
    fn of(
        b: &arrow_array::RecordBatch,
        unread: &Unread,
        path: Arc<Path>,
        first_row: u64,
    ) -> Result<TaskBatch, Problem> {
        Ok(TaskBatch {
            path,
            first_row,
            rows: b.num_rows(),
            checked: 0,
            bad: None,
            types: Vec::with_capacity(b.num_rows()),
            ts: Numbers::of(b, C_TS_NS, unread)?,
            cpu: Numbers::of(b, C_CPU, unread)?,
            event: Strings::of(b, C_EVENT, unread, |s| {
                EventType::from_name(s).ok_or_else(|| s.into())
            })?,
            common_pid: Numbers::of(b, C_COMMON_PID, unread)?,
            comm: Strings::of(b, C_COMM, unread, comm)?,
            pid: Numbers::of(b, C_PID, unread)?,
            target_cpu: Numbers::of(b, C_TARGET_CPU, unread)?,
            prev_comm: Strings::of(b, C_PREV_COMM, unread, comm)?,
            prev_pid: Numbers::of(b, C_PREV_PID, unread)?,
            prev_state: Numbers::of(b, C_PREV_STATE, unread)?,
            next_comm: Strings::of(b, C_NEXT_COMM, unread, comm)?,
            next_pid: Numbers::of(b, C_NEXT_PID, unread)?,
            orig_cpu: Numbers::of(b, C_ORIG_CPU, unread)?,
            dest_cpu: Numbers::of(b, C_DEST_CPU, unread)?,
            parent_comm: Strings::of(b, C_PARENT_COMM, unread, comm)?,
            parent_pid: Numbers::of(b, C_PARENT_PID, unread)?,
            child_comm: Strings::of(b, C_CHILD_COMM, unread, comm)?,
            child_pid: Numbers::of(b, C_CHILD_PID, unread)?,
        })
    }

    /// Decodes the event types and checks each row's type, timestamp and CPU, up to the
    /// first bad row.
    fn check(&mut self, checks: &mut RowChecks) {
        self.check_written(checks);
        for i in self.types.len()..self.rows {
            match self.row_type(i, checks) {
                Ok(t) => self.types.push(t),
                Err(f) => {
                    let unknown = || match self.event.get(i) {
                        Some(Err(name)) => name.clone(),
                        _ => unreachable!("only an unknown name is an unknown event"),
                    };
                    self.bad = Some((i, f.problem(unknown)));
                    break;
                }
            }
        }
        self.checked = self.types.len();
    }

    /// Checks rows as the writer makes them (no null timestamp, CPU or event; the event
    /// a dictionary) from the slices, up to the first row that is not a known event
    /// passing the checks, which `check` then looks at a field at a time.
    fn check_written(&mut self, checks: &mut RowChecks) {
        let Some((keys, names)) = self.event.keys() else {
            return;
        };
        if self.ts.null_count() > 0 || self.cpu.null_count() > 0 {
            return;
        }
        let types: Vec<Option<EventType>> = names
            .iter()
            .map(|n| n.as_ref().and_then(|t| t.as_ref().ok().copied()))
            .collect();
        let (ts, cpus) = (self.ts.values(), self.cpu.values());
        for ((&k, &ts), &cpu) in keys.iter().zip(ts).zip(cpus) {
            let t = usize::try_from(k)
                .ok()
                .and_then(|k| types.get(k).copied().flatten());
            match t {
                Some(t) if checks.check_at(ts, cpu).is_ok() => self.types.push(t),
                _ => return,
            }
        }
    }

    /// Row i's event type, its timestamp and CPU checked.
    #[inline]
    fn row_type(&self, i: usize, checks: &mut RowChecks) -> Result<EventType, Fault> {
        let t = match self.event.value(i)? {
            Ok(t) => *t,
            Err(_) => return Err(Fault::UnknownEvent),
        };
        checks.check_at(self.ts.get(i)?, self.cpu.get(i)?)?;
        Ok(t)
    }

    /// Rows checked: those before the first bad row, or all.
    pub fn checked(&self) -> usize {
        self.checked
    }

    /// The event types of the checked rows.
    pub fn types(&self) -> &[EventType] {
        &self.types
    }

    /// The timestamps of the rows (those of checked rows are valid).
    pub fn ts(&self) -> &[u64] {
        self.ts.values()
    }

    /// The CPUs of the rows (those of checked rows are valid).
    pub fn cpus(&self) -> &[u32] {
        self.cpu.values()
    }

    field!(common_pid, i32);
    field!(pid, i32);
    field!(target_cpu, i32);
    field!(prev_pid, i32);
    field!(prev_state, i64);
    field!(next_pid, i32);
    field!(orig_cpu, i32);
    field!(dest_cpu, i32);
    field!(parent_pid, i32);
    field!(child_pid, i32);
    comm_field!(comm);
    comm_field!(prev_comm);
    comm_field!(next_comm);
    comm_field!(parent_comm);
    comm_field!(child_comm);

    /// The error of row i, whose field was null.
    pub fn null_at(&self, i: usize, n: Null) -> EventsError {
        EventsError::Row {
            path: PathBuf::from(&*self.path),
            row: self.first_row + i as u64,
            problem: Problem::Null(n.0),
        }
    }

    /// The error of the first bad row, if there is one: after its batch, reading ends.
    pub fn end(self) -> Result<(), EventsError> {
        match self.bad {
            None => Ok(()),
            Some((i, problem)) => Err(EventsError::Row {
                path: PathBuf::from(&*self.path),
                row: self.first_row + i as u64,
                problem,
            }),
        }
    }
}
