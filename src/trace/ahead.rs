//! One CPU's events decoded ahead, on a thread of its own: each CPU's pages are read,
//! decompressed and decoded while the merge takes events in time order, so a trace of
//! several CPUs is read on as many cores as there are.

use std::collections::BTreeMap;
use std::sync::mpsc::{sync_channel, Receiver};

use super::error::Result;
use super::stream::{CpuStream, LostWindow};
use super::Event;

/// Events handed over at once: enough to keep the channel's cost per event small.
const BATCH: usize = 1024;
/// Batches decoded ahead of the merge, per CPU.
const DEPTH: usize = 4;

/// What the decoding thread hands over.
enum Msg {
    /// The next events, in order, with the losses seen so far when they changed.
    Events(Vec<Event>, Option<Vec<LostWindow>>),
    /// The stream ended: its losses and skipped events.
    Done(Vec<LostWindow>, BTreeMap<String, u64>),
    /// Decoding failed here; the events before it were handed over.
    Failed(super::TraceError),
}

/// A [`CpuStream`] whose decoding runs on its own thread, ahead of its consumer.
pub struct Ahead {
    cpu: u32,
    path: std::path::PathBuf,
    rx: Receiver<Msg>,
    batch: std::vec::IntoIter<Event>,
    head: Option<Event>,
    lost: Vec<LostWindow>,
    unknown: BTreeMap<String, u64>,
    done: bool,
    failed: Option<super::TraceError>,
}

impl Ahead {
    /// Starts decoding `stream` on a thread; it stops when the stream ends, fails, or
    /// this is dropped.
    /// `path` names the input should the thread die.
    pub fn spawn<S: CpuStream + 'static>(mut stream: S, path: &std::path::Path) -> Ahead {
        let cpu = stream.cpu();
        let (tx, rx) = sync_channel(DEPTH);
        std::thread::spawn(move || {
            let mut seen_lost = 0;
            loop {
                let mut events = Vec::with_capacity(BATCH);
                let mut end = false;
                while events.len() < BATCH {
                    match stream.peek_ts().and_then(|t| match t {
                        Some(_) => stream.take().map(Some),
                        None => Ok(None),
                    }) {
                        Ok(Some(e)) => events.push(e),
                        Ok(None) => {
                            end = true;
                            break;
                        }
                        Err(e) => {
                            let _ = tx.send(Msg::Events(events, Some(stream.lost().to_vec())));
                            let _ = tx.send(Msg::Failed(e));
                            return;
                        }
                    }
                }
                let lost = stream.lost();
                let changed = (lost.len() != seen_lost).then(|| lost.to_vec());
                seen_lost = lost.len();
                if !events.is_empty() && tx.send(Msg::Events(events, changed)).is_err() {
                    return;
                }
                if end {
                    let mut unknown = BTreeMap::new();
                    stream.unknown_counts(&mut unknown);
                    let _ = tx.send(Msg::Done(stream.lost().to_vec(), unknown));
                    return;
                }
            }
        });
        Ahead {
            cpu,
            path: path.into(),
            rx,
            batch: Vec::new().into_iter(),
            head: None,
            lost: Vec::new(),
            unknown: BTreeMap::new(),
            done: false,
            failed: None,
        }
    }

    /// Brings the next event to `head`, receiving a batch when the last is used up.
    fn fill(&mut self) -> Result<()> {
        while self.head.is_none() {
            if let Some(e) = self.batch.next() {
                self.head = Some(e);
                return Ok(());
            }
            if let Some(e) = self.failed.take() {
                return Err(e);
            }
            if self.done {
                return Ok(());
            }
            match self.rx.recv() {
                Ok(Msg::Events(events, lost)) => {
                    self.batch = events.into_iter();
                    if let Some(l) = lost {
                        self.lost = l;
                    }
                }
                Ok(Msg::Done(lost, unknown)) => {
                    (self.lost, self.unknown, self.done) = (lost, unknown, true);
                }
                Ok(Msg::Failed(e)) => self.failed = Some(e),
                // The thread is gone without saying why: it panicked.
                Err(_) => {
                    return Err(super::TraceError::io(
                        &self.path,
                        std::io::Error::other(format!("the reader of CPU {} stopped", self.cpu)),
                    ))
                }
            }
        }
        Ok(())
    }
}

impl CpuStream for Ahead {
    fn cpu(&self) -> u32 {
        self.cpu
    }

    fn peek_ts(&mut self) -> Result<Option<u64>> {
        self.fill()?;
        Ok(self.head.as_ref().map(|e| e.ts))
    }

    fn take(&mut self) -> Result<Event> {
        self.fill()?;
        Ok(self.head.take().expect("peek_ts saw an event"))
    }

    fn lost(&self) -> &[LostWindow] {
        &self.lost
    }

    fn unknown_counts(&self, into: &mut BTreeMap<String, u64>) {
        for (k, v) in &self.unknown {
            *into.entry(k.clone()).or_default() += v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{EventKind, TraceError};

    /// A CPU's stream of `n` events, failing after `fail_after` if set, with one loss
    /// after the first event and one skipped event type.
    struct Fake {
        n: u64,
        next: u64,
        fail_after: Option<u64>,
        lost: Vec<LostWindow>,
    }

    impl CpuStream for Fake {
        fn cpu(&self) -> u32 {
            3
        }
        fn peek_ts(&mut self) -> Result<Option<u64>> {
            if self.fail_after == Some(self.next) {
                return Err(TraceError::malformed(
                    "f.dat",
                    crate::trace::error::Position::Offset(self.next),
                    "bad page",
                ));
            }
            Ok((self.next < self.n).then_some(self.next * 10))
        }
        fn take(&mut self) -> Result<Event> {
            let e = Event {
                ts: self.next * 10,
                cpu: 3,
                common_pid: self.next as i32,
                kind: EventKind::SoftirqEntry { vec: 1 },
            };
            self.next += 1;
            if self.next == 1 {
                self.lost.push(LostWindow {
                    cpu: 3,
                    after_ts: Some(0),
                    before_ts: None,
                    count: Some(7),
                });
            }
            Ok(e)
        }
        fn lost(&self) -> &[LostWindow] {
            &self.lost
        }
        fn unknown_counts(&self, into: &mut BTreeMap<String, u64>) {
            *into.entry("x:y".into()).or_default() += 2;
        }
    }

    fn fake(n: u64, fail_after: Option<u64>) -> Fake {
        Fake {
            n,
            next: 0,
            fail_after,
            lost: Vec::new(),
        }
    }

    /// Across batch boundaries every event comes out once and in order, then the end;
    /// the losses and skipped events are the stream's.
    #[test]
    fn events_come_out_in_order_across_batches() {
        let n = 2 * BATCH as u64 + 17;
        let mut a = Ahead::spawn(fake(n, None), std::path::Path::new("f.dat"));
        for i in 0..n {
            assert_eq!(a.peek_ts().unwrap(), Some(i * 10));
            assert_eq!(a.take().unwrap().common_pid, i as i32);
        }
        assert_eq!(a.peek_ts().unwrap(), None);
        assert_eq!(a.lost().len(), 1);
        let mut u = BTreeMap::new();
        a.unknown_counts(&mut u);
        assert_eq!(u["x:y"], 2);
    }

    /// A failure comes after the events decoded before it, with the stream's own error.
    #[test]
    fn a_failure_follows_the_events_before_it() {
        let mut a = Ahead::spawn(fake(5000, Some(1500)), std::path::Path::new("f.dat"));
        for i in 0..1500 {
            assert_eq!(a.take().unwrap().ts, i * 10);
        }
        let e = a.peek_ts().unwrap_err().to_string();
        assert!(e.contains("f.dat") && e.contains("bad page"), "{e}");
    }

    /// A consumer that stops early drops the stream without waiting for the thread, which
    /// ends at its next hand-over.
    #[test]
    fn dropping_early_ends_the_thread() {
        let mut a = Ahead::spawn(fake(1_000_000, None), std::path::Path::new("f.dat"));
        assert_eq!(a.take().unwrap().ts, 0);
        drop(a);
    }
}
