//! Scheduler trace input: the event model, the readers of each on-disk format, and the
//! merged stream they all produce.

pub mod bytes;
pub mod decode;
pub mod error;
pub mod event;
pub mod format;
pub mod page;
pub mod stream;
pub mod tracedat;

pub use error::{Position, Result, TraceError};
pub use event::{Comm, Event, EventKind, EventType, Wake};
pub use stream::{EventSource, LostWindow, ReadStats, SourceInfo};
