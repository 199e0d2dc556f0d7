//! One error type for every trace reader: each variant names the file and where in it
//! the input stopped making sense, so a user can find the bad byte or line.

use std::path::PathBuf;

/// Where in an input the problem is: a byte offset for binary formats, a line for text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Position {
    /// A byte offset from the start of the file, shown in hex.
    Offset(u64),
    /// A line of a text trace, counting from 1.
    Line(u64),
    /// The n-th record of a stream whose reader does not report byte offsets.
    Record(u64),
    /// A bundle's events.parquet row, counting from 0.
    Row(u64),
}

impl std::fmt::Display for Position {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Position::Offset(o) => write!(f, "offset {o:#x}"),
            Position::Line(l) => write!(f, "line {l}"),
            Position::Record(r) => write!(f, "record {r}"),
            Position::Row(r) => write!(f, "row {r}"),
        }
    }
}

/// Why a trace could not be read; the message starts with the file's path.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// Reading the file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file being read.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The input breaks its format at `pos`.
    #[error("{}: {pos}: {what}", path.display())]
    Malformed {
        /// The file being read.
        path: PathBuf,
        /// Where the bad record, line or field starts.
        pos: Position,
        /// What was expected or found there.
        what: String,
    },
    /// The input is well formed but uses a format, version or option this reader does
    /// not handle.
    #[error("{}: {what}", path.display())]
    Unsupported {
        /// The file being read (empty while a reader does not know it yet).
        path: PathBuf,
        /// What is not supported.
        what: String,
    },
}

impl TraceError {
    /// A [`TraceError::Malformed`] at `pos` of `path`.
    pub fn malformed(path: impl Into<PathBuf>, pos: Position, what: impl Into<String>) -> Self {
        TraceError::Malformed {
            path: path.into(),
            pos,
            what: what.into(),
        }
    }

    /// A [`TraceError::Io`] for `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        TraceError::Io {
            path: path.into(),
            source,
        }
    }
}

/// The result of every trace reader.
pub type Result<T> = std::result::Result<T, TraceError>;
