//! One error type for every trace reader: each variant names the file and where in it
//! the input stopped making sense, so a user can find the bad byte or line.

use std::path::PathBuf;

/// Where in an input the problem is: a byte offset for binary formats, a line for text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Position {
    Offset(u64),
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

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {pos}: {what}", path.display())]
    Malformed {
        path: PathBuf,
        pos: Position,
        what: String,
    },
    #[error("{}: {what}", path.display())]
    Unsupported { path: PathBuf, what: String },
}

impl TraceError {
    pub fn malformed(path: impl Into<PathBuf>, pos: Position, what: impl Into<String>) -> Self {
        TraceError::Malformed {
            path: path.into(),
            pos,
            what: what.into(),
        }
    }

    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        TraceError::Io {
            path: path.into(),
            source,
        }
    }
}

pub type Result<T> = std::result::Result<T, TraceError>;
