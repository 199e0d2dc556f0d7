//! A bundle's events decoded on a thread of their own, a few chunks ahead of the command
//! that consumes them: Parquet decoding and event building then overlap the consumer's
//! work (replay, info) instead of adding to it. Events, errors and their order are the
//! reader's own: the thread hands on exactly what [`EventReader::next_batch`] returns.

use std::collections::VecDeque;
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender};
use std::thread::JoinHandle;

use super::columns::EventReader;
use super::error::EventsError;
use crate::trace::Event;

/// Events per chunk handed from the reading thread.
const CHUNK: usize = 8 * 1024;
/// Chunks decoded ahead of the consumer.
const AHEAD: usize = 4;

type Chunk = Result<Vec<Event>, EventsError>;

pub(super) struct ReadAhead {
    /// None once dropping, so that the thread's next send fails and it ends.
    chunks: Option<Receiver<Chunk>>,
    /// Emptied chunks going back to be filled again.
    spare: Sender<Vec<Event>>,
    current: VecDeque<Event>,
    /// An error met after some events of a call: the next call gives it.
    pending: Option<EventsError>,
    thread: Option<JoinHandle<()>>,
}

impl ReadAhead {
    pub fn start(mut reader: EventReader) -> ReadAhead {
        let (send, chunks) = sync_channel::<Chunk>(AHEAD);
        let (spare, spares) = channel::<Vec<Event>>();
        let thread = std::thread::Builder::new()
            .name("bundle-read".into())
            .spawn(move || loop {
                let mut chunk = spares
                    .try_recv()
                    .unwrap_or_else(|_| Vec::with_capacity(CHUNK));
                chunk.clear();
                let got = reader.next_batch(&mut chunk, CHUNK);
                let end = matches!(got, Ok(0));
                // A reader that failed goes on giving its error, as it would to a caller
                // that asked again; the consumer going away ends the thread.
                if send.send(got.map(|_| chunk)).is_err() || end {
                    return;
                }
            })
            .expect("a thread to read the bundle");
        ReadAhead {
            chunks: Some(chunks),
            spare,
            current: VecDeque::new(),
            pending: None,
            thread: Some(thread),
        }
    }

    /// As [`EventReader::next_batch`].
    pub fn next_batch(&mut self, out: &mut Vec<Event>, max: usize) -> Result<usize, EventsError> {
        let mut n = 0;
        while n < max {
            match self.refill() {
                Ok(true) => {}
                Ok(false) => break,
                // The events before an error go first.
                Err(e) if n > 0 => {
                    self.pending = Some(e);
                    break;
                }
                Err(e) => return Err(e),
            }
            let k = (max - n).min(self.current.len());
            out.extend(self.current.drain(..k));
            n += k;
        }
        Ok(n)
    }

    pub fn next_event(&mut self) -> Result<Option<Event>, EventsError> {
        Ok(match self.refill()? {
            true => self.current.pop_front(),
            false => None,
        })
    }

    /// Makes sure events are at hand; false at the end.
    fn refill(&mut self) -> Result<bool, EventsError> {
        if let Some(e) = self.pending.take() {
            return Err(e);
        }
        while self.current.is_empty() {
            match self.receive() {
                Some(Ok(chunk)) if chunk.is_empty() => return Ok(false),
                Some(Ok(chunk)) => {
                    let used = std::mem::replace(&mut self.current, VecDeque::from(chunk));
                    if used.capacity() > 0 {
                        let _ = self.spare.send(Vec::from(used));
                    }
                }
                Some(Err(e)) => return Err(e),
                None => return Ok(false),
            }
        }
        Ok(true)
    }

    /// The next chunk; None once the thread has ended after the last. A panic on the
    /// thread (a bug: the Parquet reader's own are errors) is raised here.
    fn receive(&mut self) -> Option<Chunk> {
        let got = self.chunks.as_ref()?.recv().ok();
        if got.is_none() {
            if let Some(Err(panic)) = self.thread.take().map(JoinHandle::join) {
                std::panic::resume_unwind(panic);
            }
        }
        got
    }
}

impl Drop for ReadAhead {
    fn drop(&mut self) {
        // The thread's next send fails, and it ends after the batch at hand.
        self.chunks = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
