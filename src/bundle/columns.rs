//! The events of a bundle as a Parquet file: one row per event, one column per field,
//! named after the tracepoint fields, null where an event type has no such field.
//! Readable by Python polars, DuckDB or pyarrow with no sisreplay code.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, Int32Builder, Int64Builder, StringBuilder, UInt32Builder, UInt64Builder,
};
use arrow_array::cast::AsArray;
use arrow_array::{
    Array, ArrayRef, BooleanArray, Int32Array, Int64Array, RecordBatch, StringArray, UInt32Array,
    UInt64Array,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::arrow_reader::{ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use crate::trace::{Comm, Event, EventKind, EventType, Wake};

/// The Parquet file of a bundle's events.
pub const EVENTS_FILE: &str = "events.parquet";
const BATCH: usize = 64 * 1024;

/// Column names, types and nullability, in file order. The README documents the same list.
const COLUMNS: [(&str, DataType, bool); 28] = [
    ("ts_ns", DataType::UInt64, false),
    ("cpu", DataType::UInt32, false),
    ("event", DataType::Utf8, false),
    ("common_pid", DataType::Int32, false),
    ("comm", DataType::Utf8, true),
    ("pid", DataType::Int32, true),
    ("prio", DataType::Int32, true),
    ("target_cpu", DataType::Int32, true),
    ("prev_comm", DataType::Utf8, true),
    ("prev_pid", DataType::Int32, true),
    ("prev_prio", DataType::Int32, true),
    ("prev_state", DataType::Int64, true),
    ("next_comm", DataType::Utf8, true),
    ("next_pid", DataType::Int32, true),
    ("next_prio", DataType::Int32, true),
    ("orig_cpu", DataType::Int32, true),
    ("dest_cpu", DataType::Int32, true),
    ("parent_comm", DataType::Utf8, true),
    ("parent_pid", DataType::Int32, true),
    ("child_comm", DataType::Utf8, true),
    ("child_pid", DataType::Int32, true),
    ("group_dead", DataType::Boolean, true),
    ("irq", DataType::Int32, true),
    ("name", DataType::Utf8, true),
    ("ret", DataType::Int32, true),
    ("vec", DataType::UInt32, true),
    ("prev_cpu", DataType::Int32, true),
    ("wake_flags", DataType::UInt32, true),
];

/// The Arrow schema of events.parquet: 28 columns, `ts_ns`, `cpu`, `event`, `common_pid`
/// never null, the tracepoint fields null where the event type lacks them.
pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(
        COLUMNS
            .iter()
            .map(|(n, t, null)| Field::new(*n, t.clone(), *null))
            .collect::<Vec<_>>(),
    ))
}

#[derive(Default)]
struct Builders {
    ts: UInt64Builder,
    cpu: UInt32Builder,
    event: StringBuilder,
    common_pid: Int32Builder,
    comm: StringBuilder,
    pid: Int32Builder,
    prio: Int32Builder,
    target_cpu: Int32Builder,
    prev_comm: StringBuilder,
    prev_pid: Int32Builder,
    prev_prio: Int32Builder,
    prev_state: Int64Builder,
    next_comm: StringBuilder,
    next_pid: Int32Builder,
    next_prio: Int32Builder,
    orig_cpu: Int32Builder,
    dest_cpu: Int32Builder,
    parent_comm: StringBuilder,
    parent_pid: Int32Builder,
    child_comm: StringBuilder,
    child_pid: Int32Builder,
    group_dead: BooleanBuilder,
    irq: Int32Builder,
    name: StringBuilder,
    ret: Int32Builder,
    vec: UInt32Builder,
    prev_cpu: Int32Builder,
    wake_flags: UInt32Builder,
}

fn comm_str(c: &Comm) -> std::borrow::Cow<'_, str> {
    c.to_str_lossy()
}

impl Builders {
    fn push(&mut self, e: &Event) {
        self.ts.append_value(e.ts);
        self.cpu.append_value(e.cpu);
        self.event.append_value(e.kind.event_type().name());
        self.common_pid.append_value(e.common_pid);
        // Each event fills its own columns; all others get a null.
        let mut task: Option<(&Comm, i32, i32)> = None;
        let mut target = None;
        let mut switch = None;
        let mut migrate = None;
        let mut fork = None;
        let mut group_dead = None;
        let mut irq = None;
        let mut name = None;
        let mut ret = None;
        let mut vec = None;
        let mut select = None;
        match &e.kind {
            EventKind::Waking(w) | EventKind::Wakeup(w) | EventKind::WakeupNew(w) => {
                let Wake {
                    comm,
                    pid,
                    prio,
                    target_cpu,
                } = w;
                task = Some((comm, *pid, *prio));
                target = Some(*target_cpu);
            }
            EventKind::Switch {
                prev_comm,
                prev_pid,
                prev_prio,
                prev_state,
                next_comm,
                next_pid,
                next_prio,
            } => {
                switch = Some((
                    prev_comm,
                    *prev_pid,
                    *prev_prio,
                    *prev_state,
                    next_comm,
                    *next_pid,
                    *next_prio,
                ))
            }
            EventKind::Migrate {
                comm,
                pid,
                prio,
                orig_cpu,
                dest_cpu,
            } => {
                task = Some((comm, *pid, *prio));
                migrate = Some((*orig_cpu, *dest_cpu));
            }
            EventKind::Fork {
                parent_comm,
                parent_pid,
                child_comm,
                child_pid,
            } => fork = Some((parent_comm, *parent_pid, child_comm, *child_pid)),
            EventKind::Exit {
                comm,
                pid,
                prio,
                group_dead: g,
            } => {
                task = Some((comm, *pid, *prio));
                group_dead = *g;
            }
            EventKind::IrqEntry { irq: i, name: n } => {
                irq = Some(*i);
                name = Some(n.as_ref());
            }
            EventKind::IrqExit { irq: i, ret: r } => {
                irq = Some(*i);
                ret = Some(*r);
            }
            EventKind::SoftirqEntry { vec: v } | EventKind::SoftirqExit { vec: v } => {
                vec = Some(*v)
            }
            EventKind::SelectEnter {
                prev_cpu,
                wake_flags,
            } => select = Some((*prev_cpu, *wake_flags)),
            // The CPU chosen, as sched_wakeup's target_cpu.
            EventKind::SelectExit { cpu } => target = Some(*cpu),
        }
        self.comm.append_option(task.map(|t| comm_str(t.0)));
        self.pid.append_option(task.map(|t| t.1));
        self.prio.append_option(task.map(|t| t.2));
        self.target_cpu.append_option(target);
        self.prev_comm.append_option(switch.map(|s| comm_str(s.0)));
        self.prev_pid.append_option(switch.map(|s| s.1));
        self.prev_prio.append_option(switch.map(|s| s.2));
        self.prev_state.append_option(switch.map(|s| s.3));
        self.next_comm.append_option(switch.map(|s| comm_str(s.4)));
        self.next_pid.append_option(switch.map(|s| s.5));
        self.next_prio.append_option(switch.map(|s| s.6));
        self.orig_cpu.append_option(migrate.map(|m| m.0));
        self.dest_cpu.append_option(migrate.map(|m| m.1));
        self.parent_comm.append_option(fork.map(|f| comm_str(f.0)));
        self.parent_pid.append_option(fork.map(|f| f.1));
        self.child_comm.append_option(fork.map(|f| comm_str(f.2)));
        self.child_pid.append_option(fork.map(|f| f.3));
        self.group_dead.append_option(group_dead);
        self.irq.append_option(irq);
        self.name.append_option(name);
        self.ret.append_option(ret);
        self.vec.append_option(vec);
        self.prev_cpu.append_option(select.map(|s| s.0));
        self.wake_flags.append_option(select.map(|s| s.1));
    }

    fn finish(&mut self) -> Vec<ArrayRef> {
        vec![
            Arc::new(self.ts.finish()),
            Arc::new(self.cpu.finish()),
            Arc::new(self.event.finish()),
            Arc::new(self.common_pid.finish()),
            Arc::new(self.comm.finish()),
            Arc::new(self.pid.finish()),
            Arc::new(self.prio.finish()),
            Arc::new(self.target_cpu.finish()),
            Arc::new(self.prev_comm.finish()),
            Arc::new(self.prev_pid.finish()),
            Arc::new(self.prev_prio.finish()),
            Arc::new(self.prev_state.finish()),
            Arc::new(self.next_comm.finish()),
            Arc::new(self.next_pid.finish()),
            Arc::new(self.next_prio.finish()),
            Arc::new(self.orig_cpu.finish()),
            Arc::new(self.dest_cpu.finish()),
            Arc::new(self.parent_comm.finish()),
            Arc::new(self.parent_pid.finish()),
            Arc::new(self.child_comm.finish()),
            Arc::new(self.child_pid.finish()),
            Arc::new(self.group_dead.finish()),
            Arc::new(self.irq.finish()),
            Arc::new(self.name.finish()),
            Arc::new(self.ret.finish()),
            Arc::new(self.vec.finish()),
            Arc::new(self.prev_cpu.finish()),
            Arc::new(self.wake_flags.finish()),
        ]
    }
}

/// Streams events into a Parquet file, a batch at a time.
pub struct EventWriter {
    writer: ArrowWriter<File>,
    builders: Builders,
    pending: usize,
    schema: SchemaRef,
}

impl EventWriter {
    /// Creates `path` for writing, zstd-compressed, in row groups of up to 2^20 events.
    pub fn create(path: &Path) -> Result<EventWriter, String> {
        let file = File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::default()))
            .set_max_row_group_row_count(Some(1 << 20))
            .build();
        let schema = schema();
        let writer = ArrowWriter::try_new(file, schema.clone(), Some(props))
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(EventWriter {
            writer,
            builders: Builders::default(),
            pending: 0,
            schema,
        })
    }

    /// Appends one event; full batches of 65536 go to the file.
    pub fn push(&mut self, e: &Event) -> Result<(), String> {
        self.builders.push(e);
        self.pending += 1;
        if self.pending == BATCH {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), String> {
        if self.pending == 0 {
            return Ok(());
        }
        let batch = RecordBatch::try_new(self.schema.clone(), self.builders.finish())
            .map_err(|e| e.to_string())?;
        self.writer.write(&batch).map_err(|e| e.to_string())?;
        self.pending = 0;
        Ok(())
    }

    /// Writes what is pending and the footer, and syncs the file to disk.
    pub fn finish(mut self) -> Result<(), String> {
        self.flush()?;
        // into_inner writes the footer and flushes.
        let file = self.writer.into_inner().map_err(|e| e.to_string())?;
        file.sync_all().map_err(|e| e.to_string())
    }
}

/// Reads a bundle's events back, in file order (which is time order).
pub struct EventReader {
    batches: ParquetRecordBatchReader,
    /// The current batch's columns in schema() order, looked up by name once per batch
    /// (a lookup per field and row cost more than decoding).
    columns: Vec<ArrayRef>,
    rows: usize,
    row: usize,
    /// Rows in the batches before the current one.
    base: u64,
    /// Set when the Parquet reader panicked.
    failed: Option<String>,
}

/// A string column as the writer makes it (Utf8), from the other string forms Arrow
/// writers use: polars writes string views or large strings, and dictionary-encoded
/// (categorical) columns. None for anything else.
fn as_utf8(a: &ArrayRef) -> Option<ArrayRef> {
    Some(match a.data_type() {
        DataType::Utf8 => a.clone(),
        DataType::LargeUtf8 => Arc::new(a.as_string::<i64>().iter().collect::<StringArray>()),
        DataType::Utf8View => Arc::new(a.as_string_view().iter().collect::<StringArray>()),
        DataType::Dictionary(_, _) => {
            let d = a.as_any_dictionary();
            let values = as_utf8(d.values())?;
            let values = values.as_string::<i32>();
            let keys = d.normalized_keys();
            let out: StringArray = (0..a.len())
                .map(|i| {
                    let k = keys[i];
                    (a.is_valid(i) && k < values.len() && values.is_valid(k))
                        .then(|| values.value(k))
                })
                .collect();
            Arc::new(out)
        }
        _ => return None,
    })
}

/// Column `i` of a batch as schema() has it: the same type, or a string column in
/// another string form.
fn conform(name: &str, want: &DataType, a: &ArrayRef) -> Result<ArrayRef, String> {
    if a.data_type() == want {
        return Ok(a.clone());
    }
    let converted = match want {
        DataType::Utf8 => as_utf8(a),
        _ => None,
    };
    converted.ok_or_else(|| {
        format!(
            "column {name} has type {}, expected {want}{}",
            a.data_type(),
            if *want == DataType::Utf8 {
                " (or a large, view or dictionary string)"
            } else {
                ""
            }
        )
    })
}

thread_local! {
    /// Set while the Parquet reader runs under [`contained`]: its panics are errors then,
    /// and not printed.
    static CONTAINED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs the Parquet reader, turning a panic into an error. arrow-rs and parquet 60
/// panic on some damaged files (an `offset + len out of bounds` assertion on a corrupt
/// definition-level run, found by the `bundle` fuzz target: tests/fixtures) instead of
/// returning an error; a damaged bundle must give one line and exit 2 like any bad input.
fn contained<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !CONTAINED.with(|c| c.get()) {
                prev(info)
            }
        }));
    });
    CONTAINED.with(|c| c.set(true));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    CONTAINED.with(|c| c.set(false));
    r.map_err(|p| {
        let why = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".into());
        format!("the Parquet reader failed on damaged data ({why})")
    })
}

/// Column `i` of a batch laid out in schema() order, as its type.
fn col<T: 'static>(columns: &[ArrayRef], i: usize) -> Result<&T, String> {
    columns[i]
        .as_any()
        .downcast_ref::<T>()
        .ok_or_else(|| format!("column {} has an unexpected type", COLUMNS[i].0))
}

// Each column's place in schema() (a test holds them to it).
const C_TS_NS: usize = 0;
const C_CPU: usize = 1;
const C_EVENT: usize = 2;
const C_COMMON_PID: usize = 3;
const C_COMM: usize = 4;
const C_PID: usize = 5;
const C_PRIO: usize = 6;
const C_TARGET_CPU: usize = 7;
const C_PREV_COMM: usize = 8;
const C_PREV_PID: usize = 9;
const C_PREV_PRIO: usize = 10;
const C_PREV_STATE: usize = 11;
const C_NEXT_COMM: usize = 12;
const C_NEXT_PID: usize = 13;
const C_NEXT_PRIO: usize = 14;
const C_ORIG_CPU: usize = 15;
const C_DEST_CPU: usize = 16;
const C_PARENT_COMM: usize = 17;
const C_PARENT_PID: usize = 18;
const C_CHILD_COMM: usize = 19;
const C_CHILD_PID: usize = 20;
const C_GROUP_DEAD: usize = 21;
const C_IRQ: usize = 22;
const C_NAME: usize = 23;
const C_RET: usize = 24;
const C_VEC: usize = 25;
const C_PREV_CPU: usize = 26;
const C_WAKE_FLAGS: usize = 27;

impl EventReader {
    /// Opens `path` and reads its Parquet footer; a damaged file is an error, here or at
    /// the row it breaks, never a panic.
    pub fn open(path: &Path) -> Result<EventReader, String> {
        let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let batches = contained(|| {
            ParquetRecordBatchReaderBuilder::try_new(file)
                .and_then(|b| b.with_batch_size(BATCH).build())
        })
        .and_then(|r| r.map_err(|e| e.to_string()))
        .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(EventReader {
            batches,
            columns: Vec::new(),
            rows: 0,
            row: 0,
            base: 0,
            failed: None,
        })
    }

    /// The row the next event comes from, counting from 0 over the whole file.
    pub fn row(&self) -> u64 {
        self.base + self.row as u64
    }

    /// The event of the next row, or None after the last.
    pub fn next_event(&mut self) -> Result<Option<Event>, String> {
        loop {
            if self.row < self.rows {
                // Errors are about row(), which the caller names.
                let e = row_event(&self.columns, self.row)?;
                self.row += 1;
                return Ok(Some(e));
            }
            if let Some(e) = &self.failed {
                return Err(e.clone());
            }
            let next = contained(|| self.batches.next()).inspect_err(|e| {
                // A reader that panicked is in no state to go on.
                self.failed = Some(e.clone());
            })?;
            match next {
                None => return Ok(None),
                Some(b) => {
                    let b = b.map_err(|e| e.to_string())?;
                    self.columns = COLUMNS
                        .iter()
                        .map(|(n, t, _)| {
                            b.column_by_name(n)
                                .ok_or_else(|| format!("column {n} missing"))
                                .and_then(|c| conform(n, t, c))
                        })
                        .collect::<Result<_, _>>()?;
                    self.base += self.rows as u64;
                    self.rows = b.num_rows();
                    self.row = 0;
                }
            }
        }
    }
}

fn row_event(b: &[ArrayRef], i: usize) -> Result<Event, String> {
    let s = |n: usize| -> Result<&str, String> {
        let a = col::<StringArray>(b, n)?;
        if a.is_null(i) {
            return Err(format!("{} is null", COLUMNS[n].0));
        }
        Ok(a.value(i))
    };
    let i32c = |n: usize| -> Result<i32, String> {
        let a = col::<Int32Array>(b, n)?;
        if a.is_null(i) {
            return Err(format!("{} is null", COLUMNS[n].0));
        }
        Ok(a.value(i))
    };
    // The other columns' values, null checked.
    fn val<T: 'static + Array>(b: &[ArrayRef], n: usize, i: usize) -> Result<&T, String> {
        let a = col::<T>(b, n)?;
        if a.is_null(i) {
            return Err(format!("{} is null", COLUMNS[n].0));
        }
        Ok(a)
    }
    let comm = |n: usize| -> Result<Comm, String> { Ok(Comm::from_bytes(s(n)?.as_bytes())) };
    let event = s(C_EVENT)?;
    let t = EventType::from_name(event).ok_or_else(|| format!("unknown event {event}"))?;
    let wake = || -> Result<Wake, String> {
        Ok(Wake {
            comm: comm(C_COMM)?,
            pid: i32c(C_PID)?,
            prio: i32c(C_PRIO)?,
            target_cpu: i32c(C_TARGET_CPU)?,
        })
    };
    let kind = match t {
        EventType::SchedSwitch => EventKind::Switch {
            prev_comm: comm(C_PREV_COMM)?,
            prev_pid: i32c(C_PREV_PID)?,
            prev_prio: i32c(C_PREV_PRIO)?,
            prev_state: val::<Int64Array>(b, C_PREV_STATE, i)?.value(i),
            next_comm: comm(C_NEXT_COMM)?,
            next_pid: i32c(C_NEXT_PID)?,
            next_prio: i32c(C_NEXT_PRIO)?,
        },
        EventType::SchedWaking => EventKind::Waking(wake()?),
        EventType::SchedWakeup => EventKind::Wakeup(wake()?),
        EventType::SchedWakeupNew => EventKind::WakeupNew(wake()?),
        EventType::SchedMigrateTask => EventKind::Migrate {
            comm: comm(C_COMM)?,
            pid: i32c(C_PID)?,
            prio: i32c(C_PRIO)?,
            orig_cpu: i32c(C_ORIG_CPU)?,
            dest_cpu: i32c(C_DEST_CPU)?,
        },
        EventType::SchedProcessFork => EventKind::Fork {
            parent_comm: comm(C_PARENT_COMM)?,
            parent_pid: i32c(C_PARENT_PID)?,
            child_comm: comm(C_CHILD_COMM)?,
            child_pid: i32c(C_CHILD_PID)?,
        },
        EventType::SchedProcessExit => {
            let g = col::<BooleanArray>(b, C_GROUP_DEAD)?;
            EventKind::Exit {
                comm: comm(C_COMM)?,
                pid: i32c(C_PID)?,
                prio: i32c(C_PRIO)?,
                group_dead: (!g.is_null(i)).then(|| g.value(i)),
            }
        }
        EventType::IrqHandlerEntry => EventKind::IrqEntry {
            irq: i32c(C_IRQ)?,
            name: s(C_NAME)?.into(),
        },
        EventType::IrqHandlerExit => EventKind::IrqExit {
            irq: i32c(C_IRQ)?,
            ret: i32c(C_RET)?,
        },
        EventType::SoftirqEntry | EventType::SoftirqExit => {
            let vec = val::<UInt32Array>(b, C_VEC, i)?.value(i);
            if t == EventType::SoftirqEntry {
                EventKind::SoftirqEntry { vec }
            } else {
                EventKind::SoftirqExit { vec }
            }
        }
        EventType::SelectEnter => EventKind::SelectEnter {
            prev_cpu: i32c(C_PREV_CPU)?,
            wake_flags: val::<UInt32Array>(b, C_WAKE_FLAGS, i)?.value(i),
        },
        EventType::SelectExit => EventKind::SelectExit {
            cpu: i32c(C_TARGET_CPU)?,
        },
    };
    Ok(Event {
        ts: val::<UInt64Array>(b, C_TS_NS, i)?.value(i),
        cpu: val::<UInt32Array>(b, C_CPU, i)?.value(i),
        common_pid: i32c(C_COMMON_PID)?,
        kind,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_places_follow_the_schema() {
        let names: Vec<String> = schema().fields().iter().map(|f| f.name().clone()).collect();
        assert_eq!(names.len(), COLUMNS.len());
        assert_eq!(names[C_WAKE_FLAGS], "wake_flags");
        assert_eq!(names[C_PREV_STATE], "prev_state");
    }
}
