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
    /// The CPU whose ring buffer lost them.
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
    /// Each gap in a CPU's events where the kernel reported lost events, in read order.
    pub lost: Vec<LostWindow>,
    /// Events outside the model, by `system:name`.
    pub unknown: BTreeMap<String, u64>,
    /// What putting equal-timestamp groups in causal order did, for sources read through
    /// [`super::causal::Ordered`]; None for the others.
    #[serde(default)]
    pub ties: Option<super::causal::TieStats>,
}

/// A time-ordered stream of events.
pub trait EventSource {
    /// What the source recorded about the machine and the trace.
    fn info(&self) -> &SourceInfo;
    /// The next event in time order, or None at the end.
    fn next_event(&mut self) -> Result<Option<Event>>;
    /// Appends up to `max` events to `out` and returns how many; 0 means the end. The
    /// fast way to stream: readers that can fill a batch in place do so.
    fn next_batch(&mut self, out: &mut Vec<Event>, max: usize) -> Result<usize> {
        let mut n = 0;
        while n < max {
            match self.next_event()? {
                Some(e) => out.push(e),
                None => break,
            }
            n += 1;
        }
        Ok(n)
    }
    /// Losses and skipped events seen so far; complete once `next_event` returned None.
    fn stats(&self) -> ReadStats;
}

/// Where a page came from, so an error inside it can point at the right bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PagePos {
    /// The page starts at this file offset.
    File(u64),
    /// The page was decompressed from the chunk at `chunk`, starting `within` bytes in.
    Chunk {
        /// File offset of the compressed chunk.
        chunk: u64,
        /// Byte of the decompressed chunk where the page starts.
        within: usize,
    },
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
    /// Fills `page` with the next page and says where it came from (for error messages),
    /// or returns None at the end.
    fn next_page(&mut self, page: &mut Vec<u8>) -> Result<Option<PagePos>>;
}

/// Pages stored back to back in a file: a trace.dat CPU section, or a capture's spool.
pub struct FilePages {
    file: std::io::BufReader<std::fs::File>,
    path: PathBuf,
    pos: u64,
    end: u64,
    page_size: usize,
}

impl FilePages {
    /// Reads pages from `file`, positioned at `pos`, until `end`.
    pub fn new(
        file: std::io::BufReader<std::fs::File>,
        path: &std::path::Path,
        pos: u64,
        end: u64,
        page_size: usize,
    ) -> FilePages {
        FilePages {
            file,
            path: path.into(),
            pos,
            end,
            page_size,
        }
    }
}

impl PageSource for FilePages {
    fn next_page(&mut self, page: &mut Vec<u8>) -> Result<Option<PagePos>> {
        use std::io::Read;
        if self.pos + self.page_size as u64 > self.end {
            return Ok(None);
        }
        page.resize(self.page_size, 0);
        self.file
            .read_exact(page)
            .map_err(|e| TraceError::io(&self.path, e))?;
        let at = self.pos;
        self.pos += self.page_size as u64;
        Ok(Some(PagePos::File(at)))
    }
}

/// A data record of the current page: decoded only when taken.
#[derive(Debug, Clone, Copy)]
struct PendingRecord {
    ts: u64,
    /// Payload range within the page.
    start: u32,
    len: u32,
    /// Offset of the record header within the page, for errors.
    header: u32,
}

/// One CPU's events in time order, as the merge consumes them.
pub trait CpuStream: Send {
    /// The CPU whose buffer this is.
    fn cpu(&self) -> u32;
    /// Timestamp of the next event, or None at the end.
    fn peek_ts(&mut self) -> Result<Option<u64>>;
    /// The event `peek_ts` reported.
    fn take(&mut self) -> Result<Event>;
    /// The losses seen on this CPU so far.
    fn lost(&self) -> &[LostWindow];
    /// Adds counts of skipped events, by `system:name`.
    fn unknown_counts(&self, into: &mut BTreeMap<String, u64>);
}

impl<T: CpuStream + ?Sized> CpuStream for Box<T> {
    fn cpu(&self) -> u32 {
        (**self).cpu()
    }
    fn peek_ts(&mut self) -> Result<Option<u64>> {
        (**self).peek_ts()
    }
    fn take(&mut self) -> Result<Event> {
        (**self).take()
    }
    fn lost(&self) -> &[LostWindow] {
        (**self).lost()
    }
    fn unknown_counts(&self, into: &mut BTreeMap<String, u64>) {
        (**self).unknown_counts(into)
    }
}

/// One CPU's events, decoded a page at a time.
pub struct CpuEvents {
    cpu: u32,
    path: PathBuf,
    pages: Box<dyn PageSource>,
    decoder: Arc<Decoder>,
    layout: PageLayout,
    order: ByteOrder,
    page: Vec<u8>,
    page_pos: PagePos,
    records: Vec<PendingRecord>,
    next: usize,
    last_ts: Option<u64>,
    /// A loss seen in a page header, waiting for the page's first event timestamp.
    pending_loss: Option<Option<u64>>,
    lost: Vec<LostWindow>,
    unknown: Vec<u64>,
}

impl CpuEvents {
    /// Decodes the pages of `cpu` with `decoder`; `path` names the input in errors.
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
            page: Vec::new(),
            page_pos: PagePos::File(0),
            records: Vec::with_capacity(256),
            next: 0,
            last_ts: None,
            pending_loss: None,
            lost: Vec::new(),
            unknown: Vec::new(),
        }
    }

    /// Reads pages until one holds events of the model, or the source ends. Records are
    /// located here and decoded when taken, so the merge only ever touches timestamps.
    fn fill(&mut self) -> Result<bool> {
        self.records.clear();
        self.next = 0;
        while self.records.is_empty() {
            let Some(pos) = self.pages.next_page(&mut self.page)? else {
                self.close_loss(None);
                return Ok(false);
            };
            self.page_pos = pos;
            let (header, mut iter) = PageIter::new(&self.page, &self.layout, self.order)
                .map_err(|e| self.fail(e.offset, "page header", &e.what))?;
            match header.missed {
                Missed::None => {}
                Missed::Unknown => self.pending_loss = Some(None),
                Missed::Count(n) => self.pending_loss = Some(Some(n)),
            }
            loop {
                let rec = match iter.next_record() {
                    Ok(Some(r)) => r,
                    Ok(None) => break,
                    Err(e) => return Err(self.fail(e.offset, "record", &e.what)),
                };
                let id = match self.decoder.event_id(rec.data) {
                    Ok(id) => id,
                    Err(e) => return Err(self.fail(rec.offset, "event", &e.0)),
                };
                if !self.decoder.is_known(id) {
                    let i = id as usize;
                    if self.unknown.len() <= i {
                        self.unknown.resize(i + 1, 0);
                    }
                    self.unknown[i] += 1;
                    continue;
                }
                let start = rec.data.as_ptr() as usize - self.page.as_ptr() as usize;
                self.records.push(PendingRecord {
                    ts: rec.ts,
                    start: start as u32,
                    len: rec.data.len() as u32,
                    header: rec.offset as u32,
                });
            }
            if let Some(first) = self.records.first() {
                let ts = first.ts;
                self.close_loss(Some(ts));
            }
        }
        self.last_ts = self.records.last().map(|r| r.ts);
        Ok(true)
    }

    /// Records a loss seen in a page header, now that the first event after it (or the
    /// end) is known.
    fn close_loss(&mut self, before_ts: Option<u64>) {
        if let Some(count) = self.pending_loss.take() {
            self.lost.push(LostWindow {
                cpu: self.cpu,
                after_ts: self.last_ts,
                before_ts,
                count,
            });
        }
    }

    #[cold]
    fn fail(&self, off: usize, part: &str, what: &str) -> TraceError {
        let (at, note) = self.page_pos.locate(off);
        TraceError::malformed(
            &self.path,
            at,
            format!("CPU {} {part}{note}: {what}", self.cpu),
        )
    }
}

impl CpuStream for CpuEvents {
    fn cpu(&self) -> u32 {
        self.cpu
    }

    #[inline]
    fn peek_ts(&mut self) -> Result<Option<u64>> {
        if self.next >= self.records.len() && !self.fill()? {
            return Ok(None);
        }
        Ok(Some(self.records[self.next].ts))
    }

    /// Decodes the record `peek_ts` reported.
    #[inline]
    fn take(&mut self) -> Result<Event> {
        let r = self.records[self.next];
        self.next += 1;
        let data = &self.page[r.start as usize..(r.start + r.len) as usize];
        match self.decoder.decode(data) {
            Ok(Decoded::Known { common_pid, kind }) => Ok(Event {
                ts: r.ts,
                cpu: self.cpu,
                common_pid,
                kind,
            }),
            Ok(Decoded::Unknown { id }) => Err(self.fail(
                r.header as usize,
                "event",
                &format!("event id {id} changed meaning"),
            )),
            Err(e) => Err(self.fail(r.header as usize, "event", &e.0)),
        }
    }

    fn lost(&self) -> &[LostWindow] {
        &self.lost
    }

    /// Unknown-event counts by `system:name`.
    fn unknown_counts(&self, into: &mut BTreeMap<String, u64>) {
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
/// orders them. The CPU being drained stays out of the heap while its events are still
/// the earliest, so runs of events from one CPU cost no heap operations.
pub struct Merge<S: CpuStream = CpuEvents> {
    cpus: Vec<S>,
    heap: BinaryHeap<std::cmp::Reverse<(u64, usize)>>,
    current: Option<(u64, usize)>,
    started: bool,
}

impl<S: CpuStream> Merge<S> {
    /// Merges `cpus`, in any order (they are sorted by CPU number here).
    pub fn new(mut cpus: Vec<S>) -> Merge<S> {
        cpus.sort_by_key(|c| c.cpu());
        Merge {
            cpus,
            heap: BinaryHeap::new(),
            current: None,
            started: false,
        }
    }

    /// The earliest event of all CPUs, or None when every CPU is drained.
    pub fn next_event(&mut self) -> Result<Option<Event>> {
        if !self.started {
            self.started = true;
            for i in 0..self.cpus.len() {
                if let Some(ts) = self.cpus[i].peek_ts()? {
                    self.heap.push(std::cmp::Reverse((ts, i)));
                }
            }
            self.current = self.heap.pop().map(|r| r.0);
        }
        let Some((_, i)) = self.current else {
            return Ok(None);
        };
        let ev = self.cpus[i].take()?;
        self.current = match self.cpus[i].peek_ts()? {
            Some(ts) => match self.heap.peek() {
                Some(top) if top.0 < (ts, i) => {
                    let next = self.heap.pop().map(|r| r.0);
                    self.heap.push(std::cmp::Reverse((ts, i)));
                    next
                }
                _ => Some((ts, i)),
            },
            None => self.heap.pop().map(|r| r.0),
        };
        Ok(Some(ev))
    }

    /// Appends up to `max` events to `out`, draining each CPU while its events are the
    /// earliest.
    pub fn next_batch(&mut self, out: &mut Vec<Event>, max: usize) -> Result<usize> {
        let mut n = 0;
        while n < max {
            if !self.started {
                match self.next_event()? {
                    Some(e) => {
                        out.push(e);
                        n += 1;
                        continue;
                    }
                    None => break,
                }
            }
            let Some((_, i)) = self.current else { break };
            // The earliest event of any other CPU bounds how far CPU i may run ahead.
            let limit = self.heap.peek().map(|r| r.0);
            let cpu = &mut self.cpus[i];
            loop {
                out.push(cpu.take()?);
                n += 1;
                match cpu.peek_ts()? {
                    Some(ts) if n < max && limit.is_none_or(|l| (ts, i) < l) => continue,
                    Some(ts) => {
                        self.current = match limit {
                            Some(l) if l < (ts, i) => {
                                self.heap.pop();
                                self.heap.push(std::cmp::Reverse((ts, i)));
                                Some(l)
                            }
                            _ => Some((ts, i)),
                        };
                        break;
                    }
                    None => {
                        self.current = self.heap.pop().map(|r| r.0);
                        break;
                    }
                }
            }
        }
        Ok(n)
    }

    /// Losses and unknown events of every CPU so far.
    pub fn stats(&self) -> ReadStats {
        let mut s = ReadStats::default();
        for c in &self.cpus {
            s.lost.extend_from_slice(c.lost());
            c.unknown_counts(&mut s.unknown);
        }
        s
    }
}

/// Events already in memory, as a source: synthetic traces and tests.
pub struct VecSource {
    info: SourceInfo,
    events: std::vec::IntoIter<Event>,
}

impl VecSource {
    /// Events must be in time order.
    pub fn new(info: SourceInfo, events: Vec<Event>) -> VecSource {
        VecSource {
            info,
            events: events.into_iter(),
        }
    }
}

impl EventSource for VecSource {
    fn info(&self) -> &SourceInfo {
        &self.info
    }
    fn next_event(&mut self) -> Result<Option<Event>> {
        Ok(self.events.next())
    }
    fn stats(&self) -> ReadStats {
        ReadStats::default()
    }
}

/// Events already in memory, lent: each is copied out as it is read, so several
/// readers can go through one slice at once.
pub struct SliceSource<'a> {
    info: SourceInfo,
    events: std::slice::Iter<'a, Event>,
}

impl<'a> SliceSource<'a> {
    /// Events must be in time order.
    pub fn new(info: SourceInfo, events: &'a [Event]) -> SliceSource<'a> {
        SliceSource {
            info,
            events: events.iter(),
        }
    }
}

impl EventSource for SliceSource<'_> {
    fn info(&self) -> &SourceInfo {
        &self.info
    }
    fn next_event(&mut self) -> Result<Option<Event>> {
        Ok(self.events.next().cloned())
    }
    fn next_batch(&mut self, out: &mut Vec<Event>, max: usize) -> Result<usize> {
        let before = out.len();
        out.extend(self.events.by_ref().take(max).cloned());
        Ok(out.len() - before)
    }
    fn stats(&self) -> ReadStats {
        ReadStats::default()
    }
}
