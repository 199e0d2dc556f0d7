//! The events of a bundle as a Parquet file: one row per event, one column per field,
//! named after the tracepoint fields, null where an event type has no such field.
//! Readable by Python polars, DuckDB or pyarrow with no sisreplay code.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, Int32Builder, Int64Builder, StringBuilder, UInt32Builder, UInt64Builder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReader,
    ParquetRecordBatchReaderBuilder,
};
use parquet::arrow::{ArrowWriter, ProjectionMask};
use parquet::basic::{Compression, ZstdLevel};
use parquet::errors::ParquetError;
use parquet::file::properties::WriterProperties;

use super::decode::{Columns, RowChecks, Unread};
use super::error::{EventsError, Problem};
use crate::trace::{Comm, Event, EventKind, Wake};

/// The Parquet file of a bundle's events.
pub const EVENTS_FILE: &str = "events.parquet";
const BATCH: usize = 64 * 1024;

/// Column names, types and nullability, in file order. The README documents the same list.
pub(super) const COLUMNS: [(&str, DataType, bool); 28] = [
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
            // The scan's start and its result, in the same column.
            EventKind::IdleScanEnter { target: t } | EventKind::IdleScanExit { cpu: t } => {
                target = Some(*t)
            }
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
    path: PathBuf,
    writer: ArrowWriter<File>,
    builders: Builders,
    pending: usize,
    schema: SchemaRef,
}

impl EventWriter {
    /// Creates `path` for writing, zstd-compressed, in row groups of up to 2^20 events.
    pub fn create(path: &Path) -> Result<EventWriter, EventsError> {
        let file = File::create(path).map_err(|e| EventsError::file(path, e))?;
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::default()))
            .set_max_row_group_row_count(Some(1 << 20))
            .build();
        let schema = schema();
        let writer = ArrowWriter::try_new(file, schema.clone(), Some(props))
            .map_err(|e| EventsError::file(path, e))?;
        Ok(EventWriter {
            path: path.into(),
            writer,
            builders: Builders::default(),
            pending: 0,
            schema,
        })
    }

    /// Appends one event; full batches of 65536 go to the file.
    pub fn push(&mut self, e: &Event) -> Result<(), EventsError> {
        self.builders.push(e);
        self.pending += 1;
        if self.pending == BATCH {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), EventsError> {
        if self.pending == 0 {
            return Ok(());
        }
        let batch = RecordBatch::try_new(self.schema.clone(), self.builders.finish())
            .map_err(|e| EventsError::file(&self.path, e))?;
        self.writer
            .write(&batch)
            .map_err(|e| EventsError::file(&self.path, e))?;
        self.pending = 0;
        Ok(())
    }

    /// Writes what is pending and the footer, and syncs the file to disk.
    pub fn finish(mut self) -> Result<(), EventsError> {
        self.flush()?;
        // into_inner writes the footer and flushes.
        let file = self
            .writer
            .into_inner()
            .map_err(|e| EventsError::file(&self.path, e))?;
        file.sync_all()
            .map_err(|e| EventsError::file(&self.path, e))
    }
}

/// Rows the Parquet reader decodes at a time: a batch's columns (some 60 bytes a row)
/// stay in cache while its events are built from them.
const READ_BATCH: usize = 16 * 1024;

/// Reads a bundle's events back, in file order (which is time order), a record batch at
/// a time.
pub struct EventReader {
    path: PathBuf,
    batches: ParquetRecordBatchReader,
    /// The current batch's columns.
    columns: Option<Columns>,
    /// Rows of the current batch handed out.
    row: usize,
    /// Rows in the batches before the current one.
    base: u64,
    checks: RowChecks,
    /// Columns not read, all null.
    unread: Unread,
    /// Why the Parquet reader panicked, once it has: it is in no state to go on.
    failed: Option<String>,
}

/// A string column's type as the writer makes it or another Arrow writer might (polars
/// writes string views or large strings, and categoricals as dictionaries).
fn is_string(t: &DataType) -> bool {
    match t {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => true,
        DataType::Dictionary(_, v) => is_string(v),
        _ => false,
    }
}

/// The reader's next batch. An error or a panic in it is the batch's, named from its
/// first row since the damage may be anywhere in it; a reader that panicked is not called
/// again (`failed` keeps why).
pub(super) fn next_batch(
    batches: &mut ParquetRecordBatchReader,
    failed: &mut Option<String>,
) -> Result<Option<RecordBatch>, Problem> {
    let in_batch = |p: Problem| Problem::Batch(Box::new(p));
    if let Some(why) = failed {
        return Err(in_batch(Problem::ReaderPanicked(why.clone())));
    }
    match contained(|| batches.next()) {
        Ok(None) => Ok(None),
        Ok(Some(Ok(batch))) => Ok(Some(batch)),
        Ok(Some(Err(e))) => Err(in_batch(e.into())),
        Err(problem) => {
            if let Problem::ReaderPanicked(why) = &problem {
                *failed = Some(why.clone());
            }
            Err(in_batch(problem))
        }
    }
}

/// Opens `path`, making sure it ends in Parquet's closing magic: a file cut short (an
/// interrupted copy) is named as such at its end, not as a corrupt footer.
pub(super) fn open_parquet(path: &Path) -> Result<File, EventsError> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = File::open(path).map_err(|e| EventsError::file(path, e))?;
    let len = file
        .metadata()
        .map_err(|e| EventsError::file(path, e))?
        .len();
    let truncated = || EventsError::Truncated {
        path: path.into(),
        len,
    };
    // The smallest Parquet file: PAR1, a 4-byte footer length and PAR1.
    if len < 12 {
        return Err(truncated());
    }
    let mut magic = [0u8; 4];
    file.seek(SeekFrom::End(-4))
        .and_then(|_| file.read_exact(&mut magic))
        .map_err(|e| EventsError::file(path, e))?;
    if &magic != b"PAR1" {
        return Err(truncated());
    }
    file.seek(SeekFrom::Start(0))
        .map_err(|e| EventsError::file(path, e))?;
    Ok(file)
}

/// The Parquet reader over the columns of schema() that `wanted` takes (by place; a file
/// may carry more) less those the file's statistics say hold only nulls (the columns of
/// event types the trace does not have), string columns kept as dictionaries so that
/// each distinct name is decoded once a batch. Also which columns are left unread as all
/// null.
pub(super) fn record_batches(
    file: File,
    wanted: impl Fn(usize) -> bool,
) -> Result<(ParquetRecordBatchReader, Unread), ParquetError> {
    let meta = ArrowReaderMetadata::load(&file, ArrowReaderOptions::new())?;
    let ours = |f: &Field| {
        COLUMNS
            .iter()
            .find(|c| c.0 == f.name())
            .map(|c| c.1.clone())
    };
    let dictionaries = Schema::new(
        meta.schema()
            .fields()
            .iter()
            .map(|f| match ours(f) {
                Some(DataType::Utf8) if is_string(f.data_type()) => {
                    Arc::new(f.as_ref().clone().with_data_type(DataType::Dictionary(
                        Box::new(DataType::Int32),
                        Box::new(DataType::Utf8),
                    )))
                }
                _ => f.clone(),
            })
            .collect::<Vec<_>>(),
    );
    // Where the file does not take the hint it is read as it is: the decoder takes every
    // string form.
    let meta = ArrowReaderMetadata::try_new(
        meta.metadata().clone(),
        ArrowReaderOptions::new().with_schema(Arc::new(dictionaries)),
    )
    .unwrap_or(meta);
    let mut unread = [false; COLUMNS.len()];
    let mut read = Vec::new();
    for (i, f) in meta.schema().fields().iter().enumerate() {
        let Some(c) = COLUMNS
            .iter()
            .position(|c| c.0 == f.name())
            .filter(|c| wanted(*c))
        else {
            continue;
        };
        // A column of the wrong type is read, to be named in the error.
        let typed = match &COLUMNS[c].1 {
            DataType::Utf8 => is_string(f.data_type()),
            t => f.data_type() == t,
        };
        // Fields are the file's root columns, flat, one leaf each.
        let all_null = meta.parquet_schema().num_columns() == meta.schema().fields().len()
            && meta.metadata().row_groups().iter().all(|g| {
                g.column(i)
                    .statistics()
                    .and_then(|s| s.null_count_opt())
                    .is_some_and(|n| n == g.num_rows() as u64)
            });
        if typed && all_null {
            unread[c] = true;
        } else {
            read.push(i);
        }
    }
    let projection = ProjectionMask::roots(meta.parquet_schema(), read);
    let reader = ParquetRecordBatchReaderBuilder::new_with_metadata(file, meta)
        .with_projection(projection)
        .with_batch_size(READ_BATCH)
        .build()?;
    Ok((reader, unread))
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
/// The error carries the panic's message.
pub(super) fn contained<T>(f: impl FnOnce() -> T) -> Result<T, Problem> {
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
        Problem::ReaderPanicked(
            p.downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no message".into()),
        )
    })
}

// Each column's place in schema() (a test holds them to it).
pub(super) const C_TS_NS: usize = 0;
pub(super) const C_CPU: usize = 1;
pub(super) const C_EVENT: usize = 2;
pub(super) const C_COMMON_PID: usize = 3;
pub(super) const C_COMM: usize = 4;
pub(super) const C_PID: usize = 5;
pub(super) const C_PRIO: usize = 6;
pub(super) const C_TARGET_CPU: usize = 7;
pub(super) const C_PREV_COMM: usize = 8;
pub(super) const C_PREV_PID: usize = 9;
pub(super) const C_PREV_PRIO: usize = 10;
pub(super) const C_PREV_STATE: usize = 11;
pub(super) const C_NEXT_COMM: usize = 12;
pub(super) const C_NEXT_PID: usize = 13;
pub(super) const C_NEXT_PRIO: usize = 14;
pub(super) const C_ORIG_CPU: usize = 15;
pub(super) const C_DEST_CPU: usize = 16;
pub(super) const C_PARENT_COMM: usize = 17;
pub(super) const C_PARENT_PID: usize = 18;
pub(super) const C_CHILD_COMM: usize = 19;
pub(super) const C_CHILD_PID: usize = 20;
pub(super) const C_GROUP_DEAD: usize = 21;
pub(super) const C_IRQ: usize = 22;
pub(super) const C_NAME: usize = 23;
pub(super) const C_RET: usize = 24;
pub(super) const C_VEC: usize = 25;
pub(super) const C_PREV_CPU: usize = 26;
pub(super) const C_WAKE_FLAGS: usize = 27;

impl EventReader {
    /// Opens `path` and reads its Parquet footer; a damaged file is an error, here or at
    /// the row it breaks, never a panic.
    pub fn open(path: &Path) -> Result<EventReader, EventsError> {
        let file = open_parquet(path)?;
        let (batches, unread) = contained(|| record_batches(file, |_| true))
            .map_err(|problem| EventsError::file(path, problem))?
            .map_err(|e| EventsError::file(path, e))?;
        Ok(EventReader {
            path: path.into(),
            batches,
            columns: None,
            row: 0,
            base: 0,
            checks: RowChecks::default(),
            unread,
            failed: None,
        })
    }

    /// Makes rows on CPU `nr_cpus` or beyond, and rows earlier than the row before them,
    /// errors: every consumer relies on time order and on the CPU count, and a file
    /// edited outside sisreplay may break either.
    pub fn checked(mut self, nr_cpus: u32) -> EventReader {
        self.checks.nr_cpus = Some(nr_cpus);
        self.checks.time_order = true;
        self
    }

    /// The row the next event comes from, counting from 0 over the whole file.
    pub fn row(&self) -> u64 {
        self.base + self.row as u64
    }

    fn at_row(&self, row: u64, problem: impl Into<Problem>) -> EventsError {
        EventsError::Row {
            path: self.path.clone(),
            row,
            problem: problem.into(),
        }
    }

    /// Makes sure the current batch has rows left, reading the next one if not; false at
    /// the end of the file.
    fn fill(&mut self) -> Result<bool, EventsError> {
        loop {
            if self.columns.as_ref().is_some_and(|c| self.row < c.rows()) {
                return Ok(true);
            }
            let next = next_batch(&mut self.batches, &mut self.failed);
            let Some(batch) = next.map_err(|p| self.at_row(self.row(), p))? else {
                return Ok(false);
            };
            let columns =
                Columns::of(&batch, &self.unread).map_err(|p| self.at_row(self.row(), p))?;
            self.base = self.row();
            self.columns = Some(columns);
            self.row = 0;
        }
    }

    /// Appends up to `max` events to `out` and returns how many; 0 at the end. A bad row
    /// ends a batch early; the next call gives its error.
    pub fn next_batch(&mut self, out: &mut Vec<Event>, max: usize) -> Result<usize, EventsError> {
        let mut n = 0;
        while n < max && self.fill()? {
            let columns = self.columns.as_ref().expect("filled");
            let to = columns.rows().min(self.row + (max - n));
            let before = out.len();
            let decoded = columns.decode(self.row, to, &mut self.checks, out);
            let k = out.len() - before;
            self.row += k;
            n += k;
            if let Err((i, problem)) = decoded {
                if n > 0 {
                    break;
                }
                return Err(self.at_row(self.base + i as u64, problem));
            }
        }
        Ok(n)
    }

    /// The event of the next row, or None after the last.
    pub fn next_event(&mut self) -> Result<Option<Event>, EventsError> {
        if !self.fill()? {
            return Ok(None);
        }
        let columns = self.columns.as_ref().expect("filled");
        let e = columns
            .decode_one(self.row, &mut self.checks)
            .map_err(|p| self.at_row(self.row(), p))?;
        self.row += 1;
        Ok(Some(e))
    }
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
