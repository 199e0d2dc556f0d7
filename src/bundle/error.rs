//! Why events.parquet could not be written or read: each error names the file, and a
//! read error the row it stopped at, so a user can find the row in polars or DuckDB.

use std::path::PathBuf;

use arrow_schema::{ArrowError, DataType};
use parquet::errors::ParquetError;

use crate::trace::{Position, TraceError};

/// Why events.parquet could not be written or read, and where.
#[derive(Debug, thiserror::Error)]
pub enum EventsError {
    /// Creating, opening, writing or syncing the file failed.
    #[error("{}: {problem}", path.display())]
    File {
        /// The events.parquet concerned.
        path: PathBuf,
        /// What went wrong.
        problem: Problem,
    },
    /// The file ends before Parquet's closing magic: cut short, or not Parquet at all.
    #[error(
        "{}: offset {len:#x}: the file ends there without Parquet's closing PAR1 magic: \
         truncated, or not a Parquet file",
        path.display()
    )]
    Truncated {
        /// The events.parquet concerned.
        path: PathBuf,
        /// Its length, bytes.
        len: u64,
    },
    /// The row, or the batch of rows starting at it, is not an event this reader knows.
    #[error("{}: row {row}: {problem}", path.display())]
    Row {
        /// The events.parquet concerned.
        path: PathBuf,
        /// The row, counting from 0 over the whole file.
        row: u64,
        /// What is wrong with it.
        problem: Problem,
    },
}

/// What was wrong, without where.
#[derive(Debug, thiserror::Error)]
pub enum Problem {
    /// The file system refused.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The Parquet library refused the file or a batch of it.
    #[error("{0}")]
    Parquet(#[from] ParquetError),
    /// The Arrow library refused a batch.
    #[error("{0}")]
    Arrow(#[from] ArrowError),
    /// arrow-rs and parquet panic on some damaged files instead of returning an error.
    #[error("the Parquet reader failed on damaged data ({0})")]
    ReaderPanicked(String),
    /// The batch of rows that starts at the error's row could not be read: the damage is
    /// somewhere in it, not necessarily at its first row.
    #[error("the batch of rows from this one is damaged: {0}")]
    Batch(Box<Problem>),
    /// A column of schema() is not in the file.
    #[error("column {0} missing")]
    MissingColumn(&'static str),
    /// A column has a type the reader cannot take as schema()'s.
    #[error(
        "column {name} has type {found}, expected {want}{}",
        if *want == DataType::Utf8 { " (or a large, view or dictionary string)" } else { "" }
    )]
    ColumnType {
        /// The column.
        name: &'static str,
        /// Its type in the file.
        found: DataType,
        /// The type schema() has.
        want: DataType,
    },
    /// The row's event needs this column, and it is null.
    #[error("{0} is null")]
    Null(&'static str),
    /// The event column names no event type sisreplay knows.
    #[error("unknown event {0}")]
    UnknownEvent(Box<str>),
    /// The row's CPU is beyond the bundle's CPU count.
    #[error("event on CPU {cpu}, but meta.json says the trace has {nr_cpus} CPUs")]
    CpuBeyond {
        /// The row's CPU.
        cpu: u32,
        /// meta.json's nr_cpus.
        nr_cpus: u32,
    },
    /// The row is earlier than the row before it.
    #[error(
        "ts_ns {ts} is before the previous row's {previous}: rows must be in time order \
         (sort by ts_ns, stably, before writing a bundle)"
    )]
    BackInTime {
        /// The row's ts_ns.
        ts: u64,
        /// The previous row's.
        previous: u64,
    },
}

impl EventsError {
    pub(crate) fn file(path: impl Into<PathBuf>, problem: impl Into<Problem>) -> EventsError {
        EventsError::File {
            path: path.into(),
            problem: problem.into(),
        }
    }
}

/// A read error as every trace reader reports one: a row error is malformed input at
/// that row; the message is the same text.
impl From<EventsError> for TraceError {
    fn from(e: EventsError) -> TraceError {
        match e {
            EventsError::Row { path, row, problem } => {
                TraceError::malformed(path, Position::Row(row), problem.to_string())
            }
            EventsError::Truncated { path, len } => TraceError::malformed(
                path,
                Position::Offset(len),
                "the file ends there without Parquet's closing PAR1 magic: truncated, or not \
                 a Parquet file",
            ),
            EventsError::File {
                path,
                problem: Problem::Io(source),
            } => TraceError::Io { path, source },
            EventsError::File { path, problem } => TraceError::Unsupported {
                path,
                what: problem.to_string(),
            },
        }
    }
}
