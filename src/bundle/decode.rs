//! One record batch of events.parquet turned into events. Each column is downcast once
//! per batch and a string column's distinct values (its dictionary) are decoded once, so
//! building a row's event is a few loads and bit tests: no lookups by name, no string
//! comparisons, no allocation (but an IRQ's name, which the event owns).

use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type, UInt32Type, UInt64Type};
use arrow_array::{
    Array, ArrayRef, ArrowPrimitiveType, BooleanArray, Int32Array, PrimitiveArray, RecordBatch,
};
use arrow_schema::DataType;

use super::columns::*;
use super::error::Problem;
use crate::trace::{Comm, Event, EventKind, EventType, Wake};

/// A number column.
pub(super) struct Numbers<T: ArrowPrimitiveType> {
    name: &'static str,
    array: PrimitiveArray<T>,
}

impl<T: ArrowPrimitiveType> Numbers<T> {
    pub(super) fn of(b: &RecordBatch, c: usize, unread: &Unread) -> Result<Self, Problem> {
        let (name, want, _) = &COLUMNS[c];
        let Some(a) = column(b, c, unread)? else {
            return Ok(Numbers {
                name,
                array: PrimitiveArray::new_null(b.num_rows()),
            });
        };
        let p = a
            .as_primitive_opt::<T>()
            .filter(|_| a.data_type() == want)
            .ok_or_else(|| Problem::ColumnType {
                name,
                found: a.data_type().clone(),
                want: want.clone(),
            })?;
        Ok(Numbers {
            name,
            array: p.clone(),
        })
    }

    /// Every row's value (a null row's is meaningless).
    pub(super) fn values(&self) -> &[T::Native] {
        self.array.values()
    }

    /// Null rows.
    pub(super) fn null_count(&self) -> usize {
        self.array.null_count()
    }

    #[inline]
    pub(super) fn get(&self, i: usize) -> Result<T::Native, Fault> {
        if self.array.is_null(i) {
            return Err(Fault::Null(self.name));
        }
        Ok(self.array.values()[i])
    }
}

/// Which of a string column's decoded values each row has.
enum Keys {
    /// Every row is null.
    Null,
    /// Row i has value i.
    Rows,
    /// Dictionary keys as the Parquet reader gives them (Int32).
    Int32(Int32Array),
    /// Dictionary keys of another width, as indices, and the dictionary (for its nulls).
    Other(Vec<usize>, ArrayRef),
}

/// A string column decoded into `T` once per distinct value where it is a dictionary,
/// once per row otherwise (string forms other writers use: large strings, views).
pub(super) struct Strings<T> {
    name: &'static str,
    keys: Keys,
    values: Vec<Option<T>>,
}

impl<T> Strings<T> {
    pub(super) fn of(
        b: &RecordBatch,
        c: usize,
        unread: &Unread,
        decode: impl Fn(&str) -> T,
    ) -> Result<Self, Problem> {
        let name = COLUMNS[c].0;
        let Some(a) = column(b, c, unread)? else {
            return Ok(Strings {
                name,
                keys: Keys::Null,
                values: Vec::new(),
            });
        };
        let wrong = || Problem::ColumnType {
            name,
            found: a.data_type().clone(),
            want: DataType::Utf8,
        };
        let (keys, values) = match a.data_type() {
            DataType::Dictionary(_, _) => {
                let d = a.as_any_dictionary();
                let values = decode_each(d.values(), &decode).ok_or_else(wrong)?;
                let keys = match a.as_dictionary_opt::<Int32Type>() {
                    Some(d) => Keys::Int32(d.keys().clone()),
                    None => Keys::Other(d.normalized_keys(), a.clone()),
                };
                (keys, values)
            }
            _ => (Keys::Rows, decode_each(a, &decode).ok_or_else(wrong)?),
        };
        Ok(Strings { name, keys, values })
    }

    /// Every row's dictionary key and the decoded values they index, where the column is
    /// a dictionary of Int32 keys with no null key (as the writer makes it).
    pub(super) fn keys(&self) -> Option<(&[i32], &[Option<T>])> {
        match &self.keys {
            Keys::Int32(k) if k.null_count() == 0 => Some((k.values(), &self.values)),
            _ => None,
        }
    }

    /// Row i's value, None where it is null (or a damaged key points nowhere).
    #[inline]
    pub(super) fn get(&self, i: usize) -> Option<&T> {
        let k = match &self.keys {
            Keys::Null => return None,
            Keys::Rows => i,
            Keys::Int32(k) => {
                if k.is_null(i) {
                    return None;
                }
                usize::try_from(k.values()[i]).ok()?
            }
            Keys::Other(k, a) => {
                if a.is_null(i) {
                    return None;
                }
                k[i]
            }
        };
        self.values.get(k)?.as_ref()
    }

    #[inline]
    pub(super) fn value(&self, i: usize) -> Result<&T, Fault> {
        self.get(i).ok_or(Fault::Null(self.name))
    }
}

/// Every value of a plain string column, decoded; None for a column of another type.
fn decode_each<T>(a: &ArrayRef, decode: &impl Fn(&str) -> T) -> Option<Vec<Option<T>>> {
    Some(match a.data_type() {
        DataType::Utf8 => a.as_string::<i32>().iter().map(|s| s.map(decode)).collect(),
        DataType::LargeUtf8 => a.as_string::<i64>().iter().map(|s| s.map(decode)).collect(),
        DataType::Utf8View => a.as_string_view().iter().map(|s| s.map(decode)).collect(),
        _ => return None,
    })
}

fn booleans(b: &RecordBatch, c: usize, unread: &Unread) -> Result<BooleanArray, Problem> {
    let Some(a) = column(b, c, unread)? else {
        return Ok(BooleanArray::new_null(b.num_rows()));
    };
    a.as_boolean_opt()
        .cloned()
        .ok_or_else(|| Problem::ColumnType {
            name: COLUMNS[c].0,
            found: a.data_type().clone(),
            want: DataType::Boolean,
        })
}

/// The columns of schema() left unread because they hold only nulls (the file's
/// statistics say so), by place in schema().
pub(super) type Unread = [bool; COLUMNS.len()];

/// Column `c` of schema() in a batch read with any projection or column order; None for
/// a column left unread, all null.
fn column<'b>(
    b: &'b RecordBatch,
    c: usize,
    unread: &Unread,
) -> Result<Option<&'b ArrayRef>, Problem> {
    let name = COLUMNS[c].0;
    match b.column_by_name(name) {
        Some(a) => Ok(Some(a)),
        None if unread[c] => Ok(None),
        None => Err(Problem::MissingColumn(name)),
    }
}

/// What is wrong with a row, small enough to pass back from every field read cheaply;
/// [`Columns::problem`] makes it a [`Problem`].
#[derive(Debug, Clone, Copy)]
pub(super) enum Fault {
    Null(&'static str),
    UnknownEvent,
    CpuBeyond { cpu: u32, nr_cpus: u32 },
    BackInTime { ts: u64, previous: u64 },
}

/// What rows must satisfy beyond being events.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct RowChecks {
    /// Rows on this CPU or beyond are errors.
    pub nr_cpus: Option<u32>,
    /// Check time order, from this time on.
    pub time_order: bool,
    pub last_ts: u64,
}

impl RowChecks {
    #[inline]
    fn check(&mut self, e: &Event) -> Result<(), Fault> {
        self.check_at(e.ts, e.cpu)
    }

    /// Checks a row at `ts` on `cpu`.
    #[inline]
    pub(super) fn check_at(&mut self, ts: u64, cpu: u32) -> Result<(), Fault> {
        if let Some(n) = self.nr_cpus {
            if cpu >= n {
                return Err(Fault::CpuBeyond { cpu, nr_cpus: n });
            }
        }
        if self.time_order {
            if ts < self.last_ts {
                return Err(Fault::BackInTime {
                    ts,
                    previous: self.last_ts,
                });
            }
            self.last_ts = ts;
        }
        Ok(())
    }
}

impl Fault {
    /// What is wrong, in full; an unknown event's name is the caller's to give.
    pub(super) fn problem(self, unknown: impl FnOnce() -> Box<str>) -> Problem {
        match self {
            Fault::Null(name) => Problem::Null(name),
            Fault::UnknownEvent => Problem::UnknownEvent(unknown()),
            Fault::CpuBeyond { cpu, nr_cpus } => Problem::CpuBeyond { cpu, nr_cpus },
            Fault::BackInTime { ts, previous } => Problem::BackInTime { ts, previous },
        }
    }
}

/// A batch's columns, typed, in the order of schema().
pub(super) struct Columns {
    rows: usize,
    ts: Numbers<UInt64Type>,
    cpu: Numbers<UInt32Type>,
    /// The event type, or the unknown name.
    event: Strings<Result<EventType, Box<str>>>,
    common_pid: Numbers<Int32Type>,
    comm: Strings<Comm>,
    pid: Numbers<Int32Type>,
    prio: Numbers<Int32Type>,
    target_cpu: Numbers<Int32Type>,
    prev_comm: Strings<Comm>,
    prev_pid: Numbers<Int32Type>,
    prev_prio: Numbers<Int32Type>,
    prev_state: Numbers<Int64Type>,
    next_comm: Strings<Comm>,
    next_pid: Numbers<Int32Type>,
    next_prio: Numbers<Int32Type>,
    orig_cpu: Numbers<Int32Type>,
    dest_cpu: Numbers<Int32Type>,
    parent_comm: Strings<Comm>,
    parent_pid: Numbers<Int32Type>,
    child_comm: Strings<Comm>,
    child_pid: Numbers<Int32Type>,
    group_dead: BooleanArray,
    irq: Numbers<Int32Type>,
    name: Strings<Box<str>>,
    ret: Numbers<Int32Type>,
    vec: Numbers<UInt32Type>,
    prev_cpu: Numbers<Int32Type>,
    wake_flags: Numbers<UInt32Type>,
}

pub(super) fn comm(s: &str) -> Comm {
    Comm::from_bytes(s.as_bytes())
}

impl Columns {
    /// The batch's columns, checked for presence and type in schema() order (the first
    /// missing or mistyped one is the error).
    pub fn of(b: &RecordBatch, unread: &Unread) -> Result<Columns, Problem> {
        Ok(Columns {
            rows: b.num_rows(),
            ts: Numbers::of(b, C_TS_NS, unread)?,
            cpu: Numbers::of(b, C_CPU, unread)?,
            event: Strings::of(b, C_EVENT, unread, |s| {
                EventType::from_name(s).ok_or_else(|| s.into())
            })?,
            common_pid: Numbers::of(b, C_COMMON_PID, unread)?,
            comm: Strings::of(b, C_COMM, unread, comm)?,
            pid: Numbers::of(b, C_PID, unread)?,
            prio: Numbers::of(b, C_PRIO, unread)?,
            target_cpu: Numbers::of(b, C_TARGET_CPU, unread)?,
            prev_comm: Strings::of(b, C_PREV_COMM, unread, comm)?,
            prev_pid: Numbers::of(b, C_PREV_PID, unread)?,
            prev_prio: Numbers::of(b, C_PREV_PRIO, unread)?,
            prev_state: Numbers::of(b, C_PREV_STATE, unread)?,
            next_comm: Strings::of(b, C_NEXT_COMM, unread, comm)?,
            next_pid: Numbers::of(b, C_NEXT_PID, unread)?,
            next_prio: Numbers::of(b, C_NEXT_PRIO, unread)?,
            orig_cpu: Numbers::of(b, C_ORIG_CPU, unread)?,
            dest_cpu: Numbers::of(b, C_DEST_CPU, unread)?,
            parent_comm: Strings::of(b, C_PARENT_COMM, unread, comm)?,
            parent_pid: Numbers::of(b, C_PARENT_PID, unread)?,
            child_comm: Strings::of(b, C_CHILD_COMM, unread, comm)?,
            child_pid: Numbers::of(b, C_CHILD_PID, unread)?,
            group_dead: booleans(b, C_GROUP_DEAD, unread)?,
            irq: Numbers::of(b, C_IRQ, unread)?,
            name: Strings::of(b, C_NAME, unread, |s| Box::from(s))?,
            ret: Numbers::of(b, C_RET, unread)?,
            vec: Numbers::of(b, C_VEC, unread)?,
            prev_cpu: Numbers::of(b, C_PREV_CPU, unread)?,
            wake_flags: Numbers::of(b, C_WAKE_FLAGS, unread)?,
        })
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Appends the events of rows `from..to` to `out`, checked; stops at the first bad
    /// row with its index and what is wrong, the events before it appended.
    pub fn decode(
        &self,
        from: usize,
        to: usize,
        checks: &mut RowChecks,
        out: &mut Vec<Event>,
    ) -> Result<(), (usize, Problem)> {
        out.reserve(to - from);
        for i in from..to {
            let e = self
                .event(i)
                .and_then(|e| checks.check(&e).map(|()| e))
                .map_err(|f| (i, self.problem(i, f)))?;
            out.push(e);
        }
        Ok(())
    }

    /// Row i's event, checked.
    pub fn decode_one(&self, i: usize, checks: &mut RowChecks) -> Result<Event, Problem> {
        self.event(i)
            .and_then(|e| checks.check(&e).map(|()| e))
            .map_err(|f| self.problem(i, f))
    }

    /// What is wrong with row i, in full.
    fn problem(&self, i: usize, fault: Fault) -> Problem {
        match fault {
            Fault::Null(name) => Problem::Null(name),
            Fault::UnknownEvent => match self.event.get(i) {
                Some(Err(name)) => Problem::UnknownEvent(name.clone()),
                _ => unreachable!("only an unknown name is an unknown event"),
            },
            Fault::CpuBeyond { cpu, nr_cpus } => Problem::CpuBeyond { cpu, nr_cpus },
            Fault::BackInTime { ts, previous } => Problem::BackInTime { ts, previous },
        }
    }

    /// Row i's event. Fields are checked in the order the event names them, the common
    /// fields last.
    #[inline]
    fn event(&self, i: usize) -> Result<Event, Fault> {
        let t = match self.event.value(i)? {
            Ok(t) => *t,
            Err(_) => return Err(Fault::UnknownEvent),
        };
        let wake = || -> Result<Wake, Fault> {
            Ok(Wake {
                comm: *self.comm.value(i)?,
                pid: self.pid.get(i)?,
                prio: self.prio.get(i)?,
                target_cpu: self.target_cpu.get(i)?,
            })
        };
        let kind = match t {
            EventType::SchedSwitch => EventKind::Switch {
                prev_comm: *self.prev_comm.value(i)?,
                prev_pid: self.prev_pid.get(i)?,
                prev_prio: self.prev_prio.get(i)?,
                prev_state: self.prev_state.get(i)?,
                next_comm: *self.next_comm.value(i)?,
                next_pid: self.next_pid.get(i)?,
                next_prio: self.next_prio.get(i)?,
            },
            EventType::SchedWaking => EventKind::Waking(wake()?),
            EventType::SchedWakeup => EventKind::Wakeup(wake()?),
            EventType::SchedWakeupNew => EventKind::WakeupNew(wake()?),
            EventType::SchedMigrateTask => EventKind::Migrate {
                comm: *self.comm.value(i)?,
                pid: self.pid.get(i)?,
                prio: self.prio.get(i)?,
                orig_cpu: self.orig_cpu.get(i)?,
                dest_cpu: self.dest_cpu.get(i)?,
            },
            EventType::SchedProcessFork => EventKind::Fork {
                parent_comm: *self.parent_comm.value(i)?,
                parent_pid: self.parent_pid.get(i)?,
                child_comm: *self.child_comm.value(i)?,
                child_pid: self.child_pid.get(i)?,
            },
            EventType::SchedProcessExit => EventKind::Exit {
                comm: *self.comm.value(i)?,
                pid: self.pid.get(i)?,
                prio: self.prio.get(i)?,
                group_dead: self
                    .group_dead
                    .is_valid(i)
                    .then(|| self.group_dead.value(i)),
            },
            EventType::IrqHandlerEntry => EventKind::IrqEntry {
                irq: self.irq.get(i)?,
                name: self.name.value(i)?.clone(),
            },
            EventType::IrqHandlerExit => EventKind::IrqExit {
                irq: self.irq.get(i)?,
                ret: self.ret.get(i)?,
            },
            EventType::SoftirqEntry => EventKind::SoftirqEntry {
                vec: self.vec.get(i)?,
            },
            EventType::SoftirqExit => EventKind::SoftirqExit {
                vec: self.vec.get(i)?,
            },
            EventType::SelectEnter => EventKind::SelectEnter {
                prev_cpu: self.prev_cpu.get(i)?,
                wake_flags: self.wake_flags.get(i)?,
            },
            EventType::SelectExit => EventKind::SelectExit {
                cpu: self.target_cpu.get(i)?,
            },
            EventType::IdleScanEnter => EventKind::IdleScanEnter {
                target: self.target_cpu.get(i)?,
            },
            EventType::IdleScanExit => EventKind::IdleScanExit {
                cpu: self.target_cpu.get(i)?,
            },
        };
        Ok(Event {
            ts: self.ts.get(i)?,
            cpu: self.cpu.get(i)?,
            common_pid: self.common_pid.get(i)?,
            kind,
        })
    }
}
