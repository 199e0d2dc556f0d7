//! The one event stream every reader produces, and the machinery shared by the readers
//! of ring-buffer pages (trace.dat and live capture): per-CPU page sources decoded into
//! events, merged across CPUs by timestamp.

use std::collections::{BTreeMap, BinaryHeap};
use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::decode::{Decoded, Decoder};
use super::error::{Position, Result, TraceError};
use super::event::Event;
use super::format::PageLayout;
use super::page::{ByteOrder, Missed, PageIter};

/// Events lost on one CPU between two recorded events.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LostWindow {
    pub cpu: u32,
    /// Timestamp of the last event seen before the loss (None: loss before the first).
    pub after_ts: Option<u64>,
    /// Timestamp of the first event seen after the loss.
    pub before_ts: Option<u64>,
    /// How many, when the kernel recorded it.
    pub count: Option<u64>,
}

/// What a source says about itself, known once it is opened.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SourceInfo {
    /// e.g. "trace.dat v7 (zstd)", "perf.data", "trace-cmd report text".
    pub format: String,
    /// Number of CPUs of the traced machine, when recorded.
    pub nr_cpus: Option<u32>,
    /// `uname -r` of the traced kernel, when recorded.
    pub kernel_release: Option<String>,
    /// Trace clock (local, global, mono, ...), when recorded.
    pub clock: Option<String>,
    /// pid → comm from the source's own table (saved_cmdlines, perf COMM records).
    pub comms: BTreeMap<i32, String>,
    /// Other facts worth keeping (tool version, hostname, per-CPU buffer stats).
    pub extra: BTreeMap<String, String>,
}

/// What was seen while reading, beyond the events themselves.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ReadStats {
    pub lost: Vec<LostWindow>,
    /// Events outside the model, by `system:name`.
    pub unknown: BTreeMap<String, u64>,
}

/// A time-ordered stream of events.
pub trait EventSource {
    fn info(&self) -> &SourceInfo;
    fn next_event(&mut self) -> Result<Option<Event>>;
    /// Losses and skipped events seen so far; complete once `next_event` returned None.
    fn stats(&self) -> ReadStats;
}

/// Where a page came from, so an error inside it can point at the right bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PagePos {
    /// The page starts at this file offset.
    File(u64),
    /// The page was decompressed from the chunk at `chunk`, starting `within` bytes in.
    Chunk { chunk: u64, within: usize },
}

impl PagePos {
    /// The position of byte `off` of the page, and words that say so for compressed data.
    fn locate(self, off: usize) -> (Position, String) {
        match self {
            PagePos::File(o) => (Position::Offset(o + off as u64), String::new()),
            PagePos::Chunk { chunk, within } => (
                Position::Offset(chunk),
                format!(" (compressed chunk, decompressed byte {:#x})", within + off),
            ),
        }
    }
}

/// Delivers the raw pages of one CPU's ring buffer in order.
pub trait PageSource: Send {
    /// The next page and where it came from (for error messages), or None at the end.
    fn next_page(&mut self) -> Result<Option<(&[u8], PagePos)>>;
}

/// One CPU's events, decoded a page at a time.
pub struct CpuEvents {
    cpu: u32,
    path: PathBuf,
    pages: Box<dyn PageSource>,
    decoder: Arc<Decoder>,
    layout: PageLayout,
    order: ByteOrder,
    buf: Vec<Event>,
    next: usize,
    last_ts: Option<u64>,
    /// A loss seen in a page header, waiting for the page's first event timestamp.
    pending_loss: Option<Option<u64>>,
    lost: Vec<LostWindow>,
    unknown: Vec<u64>,
}

impl CpuEvents {
    pub fn new(
        cpu: u32,
        path: PathBuf,
        pages: Box<dyn PageSource>,
        decoder: Arc<Decoder>,
        layout: PageLayout,
        order: ByteOrder,
    ) -> CpuEvents {
        CpuEvents {
            cpu,
            path,
            pages,
            decoder,
            layout,
            order,
            buf: Vec::with_capacity(128),
            next: 0,
            last_ts: None,
            pending_loss: None,
            lost: Vec::new(),
            unknown: Vec::new(),
        }
    }

    /// Decodes pages until one yields events or the source ends.
    fn fill(&mut self) -> Result<bool> {
        self.buf.clear();
        self.next = 0;
        while self.buf.is_empty() {
            let Some((page, pos)) = self.pages.next_page()? else {
                if let Some(count) = self.pending_loss.take() {
                    self.lost.push(LostWindow {
                        cpu: self.cpu,
                        after_ts: self.last_ts,
                        before_ts: None,
                        count,
                    });
                }
                return Ok(false);
            };
            let cpu = self.cpu;
            let path = &self.path;
            let fail = |off: usize, part: &str, what: &str| {
                let (at, note) = pos.locate(off);
                TraceError::malformed(path, at, format!("CPU {cpu} {part}{note}: {what}"))
            };
            let (header, mut records) = PageIter::new(page, &self.layout, self.order)
                .map_err(|e| fail(e.offset, "page header", &e.what))?;
            match header.missed {
                Missed::None => {}
                Missed::Unknown => self.pending_loss = Some(None),
                Missed::Count(n) => self.pending_loss = Some(Some(n)),
            }
            loop {
                let rec = records
                    .next_record()
                    .map_err(|e| fail(e.offset, "record", &e.what))?;
                let Some(rec) = rec else { break };
                let decoded = self
                    .decoder
                    .decode(rec.data)
                    .map_err(|e| fail(rec.offset, "event", &e.0))?;
                match decoded {
                    Decoded::Known { common_pid, kind } => {
                        if let Some(count) = self.pending_loss.take() {
                            self.lost.push(LostWindow {
                                cpu: self.cpu,
                                after_ts: self.last_ts,
                                before_ts: Some(rec.ts),
                                count,
                            });
                        }
                        self.buf.push(Event {
                            ts: rec.ts,
                            cpu: self.cpu,
                            common_pid,
                            kind,
                        });
                    }
                    Decoded::Unknown { id } => {
                        let i = id as usize;
                        if self.unknown.len() <= i {
                            self.unknown.resize(i + 1, 0);
                        }
                        self.unknown[i] += 1;
                    }
                }
            }
        }
        self.last_ts = self.buf.last().map(|e| e.ts);
        Ok(true)
    }

    fn peek_ts(&mut self) -> Result<Option<u64>> {
        if self.next >= self.buf.len() && !self.fill()? {
            return Ok(None);
        }
        Ok(Some(self.buf[self.next].ts))
    }

    fn take(&mut self) -> Event {
        let i = self.next;
        self.next += 1;
        // Events are moved out by swapping in a cheap placeholder; the buffer is cleared on
        // the next fill.
        std::mem::replace(
            &mut self.buf[i],
            Event {
                ts: 0,
                cpu: 0,
                common_pid: 0,
                kind: super::event::EventKind::SoftirqExit { vec: 0 },
            },
        )
    }

    pub fn lost(&self) -> &[LostWindow] {
        &self.lost
    }

    /// Unknown-event counts by `system:name`.
    pub fn unknown_counts(&self, into: &mut BTreeMap<String, u64>) {
        for (id, &n) in self.unknown.iter().enumerate() {
            if n > 0 {
                let name = self
                    .decoder
                    .name_of(id as u16)
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("unknown id {id}"));
                *into.entry(name).or_default() += n;
            }
        }
    }
}

/// Merges per-CPU streams by timestamp. Ties go to the lower CPU, as `trace-cmd report`
/// orders them.
pub struct Merge {
    cpus: Vec<CpuEvents>,
    heap: BinaryHeap<std::cmp::Reverse<(u64, usize)>>,
    started: bool,
}

impl Merge {
    pub fn new(mut cpus: Vec<CpuEvents>) -> Merge {
        cpus.sort_by_key(|c| c.cpu);
        Merge {
            cpus,
            heap: BinaryHeap::new(),
            started: false,
        }
    }

    pub fn next_event(&mut self) -> Result<Option<Event>> {
        if !self.started {
            self.started = true;
            for i in 0..self.cpus.len() {
                if let Some(ts) = self.cpus[i].peek_ts()? {
                    self.heap.push(std::cmp::Reverse((ts, i)));
                }
            }
        }
        let Some(std::cmp::Reverse((_, i))) = self.heap.pop() else {
            return Ok(None);
        };
        let ev = self.cpus[i].take();
        if let Some(ts) = self.cpus[i].peek_ts()? {
            self.heap.push(std::cmp::Reverse((ts, i)));
        }
        Ok(Some(ev))
    }

    pub fn stats(&self) -> ReadStats {
        let mut s = ReadStats::default();
        for c in &self.cpus {
            s.lost.extend_from_slice(c.lost());
            c.unknown_counts(&mut s.unknown);
        }
        s
    }
}
