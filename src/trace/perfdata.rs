//! Reader for `perf.data` files from `perf record -e sched:...` and `perf sched record`,
//! compressed (`-z`) or not. The `linux-perf-data` crate reads the header and feature
//! sections; the data section's records are walked in place ([`super::perfrecords`]),
//! each sample's tracepoint payload decoded with the event formats from the file's
//! TRACING_DATA feature section (which has the layout of a trace.dat v6 header), and the
//! events put in time order a round at a time ([`super::perfrounds`]), all on a thread
//! of their own ahead of the consumer.

use std::collections::{BTreeMap, VecDeque};
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;

use linux_perf_data::linux_perf_event_reader::{AttrFlags, PerfEventType, SampleFormat};
use linux_perf_data::{Feature, PerfFileReader};

use super::bytes::{Bytes, Reader};
use super::decode::Decoder;
use super::error::{Position, Result, TraceError};
use super::event::Event;
use super::format::EventFormat;
use super::perfevents::{Output, PerfEvents, Samples};
use super::perfrecords::Records;
use super::perfsample::{Attr, Layouts};
use super::stream::{EventSource, LostWindow, ReadStats, SourceInfo};
use super::tracedat::MAGIC;

/// The first 8 bytes of a perf.data file (version 2 header, little-endian writer).
pub const PERF_MAGIC: &[u8; 8] = b"PERFILE2";
/// Feature bit of HEADER_EVENT_DESC (perf's header.h).
const EVENT_DESC_BIT: usize = 12;
/// Feature bit of HEADER_NRCPUS: {nr_cpus_available, nr_cpus_online}, two u32.
const NRCPUS_BIT: usize = 7;
/// The fixed part of the perf.data header: magic, size, attr_size and three sections.
const HEADER_LEN: u64 = 104;
/// The smallest entry of the attrs section: a perf_event_attr of its first version
/// (PERF_ATTR_SIZE_VER0, 64 bytes) and the section of its event ids (16).
const MIN_FILE_ATTR_LEN: u64 = 64 + 16;

/// Checks the header's own numbers against the file, so that a truncated or damaged file
/// is reported with the offset that is wrong rather than as a parse failure deep inside.
/// Returns the data section as (offset, size).
fn check_header(path: &Path) -> Result<(u64, u64)> {
    let mut f = File::open(path).map_err(|e| TraceError::io(path, e))?;
    let len = f.metadata().map_err(|e| TraceError::io(path, e))?.len();
    let h = read_fixed_header(&mut f, path, len)?;
    check_attr_size(path, &h)?;
    check_sections(path, &h, len)?;
    let (table, entries) = read_feature_table(&mut f, path, &h, len)?;
    check_feature_sections(&mut f, path, &h, len, table, &entries)?;
    // After the walk above, which checks the sections' bounds first.
    if let Some(i) = feature_index(&h, NRCPUS_BIT) {
        check_nrcpus(&mut f, path, table, &entries, i)?;
    }
    Ok((le_u64(&h, 40), le_u64(&h, 48)))
}

/// The little-endian u64 at `at` in `b`.
fn le_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// Reads the fixed part of the header of a file of `len` bytes: not empty, the magic
/// first, and all of it there.
fn read_fixed_header(f: &mut File, path: &Path, len: u64) -> Result<[u8; HEADER_LEN as usize]> {
    if len == 0 {
        return Err(TraceError::malformed(
            path,
            Position::Offset(0),
            "empty file, expected a perf.data header",
        ));
    }
    let mut h = [0u8; HEADER_LEN as usize];
    let n = f.read(&mut h).map_err(|e| TraceError::io(path, e))?;
    if n < 8 || h[..8] != PERF_MAGIC[..] {
        return Err(TraceError::malformed(
            path,
            Position::Offset(0),
            "expected the perf.data magic PERFILE2",
        ));
    }
    if (n as u64) < HEADER_LEN {
        return Err(TraceError::malformed(
            path,
            Position::Offset(n as u64),
            format!("expected a {HEADER_LEN}-byte perf.data header, the file ends after {n} bytes"),
        ));
    }
    Ok(h)
}

/// The size of each entry of the attrs section holds at least a first-version attr and
/// its ids (a size of 0 would leave the attrs uncountable).
fn check_attr_size(path: &Path, h: &[u8]) -> Result<()> {
    let attr_size = le_u64(h, 16);
    if attr_size < MIN_FILE_ATTR_LEN {
        return Err(TraceError::malformed(
            path,
            Position::Offset(16),
            format!(
                "the header's attr_size is {attr_size}, smaller than the {MIN_FILE_ATTR_LEN} \
                 bytes of the first perf_event_attr version and its ids"
            ),
        ));
    }
    Ok(())
}

/// The header's three sections (attrs, data, event types) end within the file.
fn check_sections(path: &Path, h: &[u8], len: u64) -> Result<()> {
    for (name, at) in [("attrs", 24usize), ("data", 40), ("event types", 56)] {
        let (off, size) = (le_u64(h, at), le_u64(h, at + 8));
        if off.checked_add(size).is_none_or(|end| end > len) {
            return Err(TraceError::malformed(
                path,
                Position::Offset(at as u64),
                format!(
                    "the {name} section ({size} bytes at {off:#x}) runs past the end of the \
                     file at {len:#x}; the file is truncated"
                ),
            ));
        }
    }
    Ok(())
}

/// Reads the feature sections' table: one (offset, size) pair per feature bit set,
/// right after the data. Returns where it is and its entries, 16 bytes each.
fn read_feature_table(f: &mut File, path: &Path, h: &[u8], len: u64) -> Result<(u64, Vec<u8>)> {
    let features = h[72..104]
        .iter()
        .map(|b| b.count_ones() as u64)
        .sum::<u64>();
    let table = le_u64(h, 40) + le_u64(h, 48);
    if table + features * 16 > len {
        return Err(TraceError::malformed(
            path,
            Position::Offset(table),
            format!(
                "expected {features} feature section entries at {table:#x}, the file ends at \
                 {len:#x}; the file is truncated"
            ),
        ));
    }
    f.seek(SeekFrom::Start(table))
        .map_err(|e| TraceError::io(path, e))?;
    let mut entries = vec![0u8; (features * 16) as usize];
    f.read_exact(&mut entries)
        .map_err(|e| TraceError::io(path, e))?;
    Ok((table, entries))
}

/// A feature's entry in the feature table, if its bit is set: its index among the set
/// feature bits.
fn feature_index(h: &[u8], bit: usize) -> Option<usize> {
    let bit_set = |b: usize| h[72 + b / 8] & (1 << (b % 8)) != 0;
    bit_set(bit).then(|| (0..bit).filter(|&b| bit_set(b)).count())
}

/// Every feature section ends within the file, and HEADER_EVENT_DESC's, if present,
/// holds together.
fn check_feature_sections(
    f: &mut File,
    path: &Path,
    h: &[u8],
    len: u64,
    table: u64,
    entries: &[u8],
) -> Result<()> {
    let event_desc = feature_index(h, EVENT_DESC_BIT);
    for (i, e) in entries.chunks(16).enumerate() {
        let (off, size) = (le_u64(e, 0), le_u64(e, 8));
        if off.checked_add(size).is_none_or(|end| end > len) {
            return Err(TraceError::malformed(
                path,
                Position::Offset(table + i as u64 * 16),
                format!(
                    "feature section #{i} ({size} bytes at {off:#x}) runs past the end of the \
                     file at {len:#x}; the file is truncated"
                ),
            ));
        }
        if Some(i) == event_desc {
            // The crate sizes vectors from the counts and lengths in this section before
            // checking them against it, so damaged ones would exhaust memory: walk the
            // section here first.
            let mut data = vec![0u8; size as usize];
            f.seek(SeekFrom::Start(off))
                .map_err(|e| TraceError::io(path, e))?;
            f.read_exact(&mut data)
                .map_err(|e| TraceError::io(path, e))?;
            if let Err((at, what)) = check_event_desc(&data) {
                return Err(TraceError::malformed(
                    path,
                    Position::Offset(off + at),
                    what,
                ));
            }
        }
    }
    Ok(())
}

/// HEADER_NRCPUS, entry `i` of the feature table: both CPU counts within what a
/// machine can have, since per-CPU tables are sized by them.
fn check_nrcpus(f: &mut File, path: &Path, table: u64, entries: &[u8], i: usize) -> Result<()> {
    let e = &entries[i * 16..i * 16 + 16];
    let (off, size) = (le_u64(e, 0), le_u64(e, 8));
    let mut d = [0u8; 8];
    if size < 8 {
        return Err(TraceError::malformed(
            path,
            Position::Offset(table + i as u64 * 16),
            format!("the NRCPUS feature section has {size} bytes, expected 8"),
        ));
    }
    f.seek(SeekFrom::Start(off))
        .map_err(|e| TraceError::io(path, e))?;
    f.read_exact(&mut d).map_err(|e| TraceError::io(path, e))?;
    for (at, what) in [(0usize, "available"), (4, "online")] {
        let n = u32::from_le_bytes(d[at..at + 4].try_into().unwrap());
        super::check_cpu_count(n as u64, &format!("the NRCPUS header ({what})")).map_err(|w| {
            TraceError::malformed(path, Position::Offset(off + at as u64), w.to_string())
        })?;
    }
    Ok(())
}

/// Walks HEADER_EVENT_DESC: {nr, attr_size, nr × {attr, nr_ids, string, ids}}, every
/// length checked against what is left. Returns the offset and words of the first fault.
fn check_event_desc(d: &[u8]) -> std::result::Result<(), (u64, String)> {
    let u32_at = |o: usize| -> std::result::Result<u64, (u64, String)> {
        d.get(o..o + 4)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap()) as u64)
            .ok_or((
                o as u64,
                "event description section ends inside a count".into(),
            ))
    };
    let nr = u32_at(0)?;
    let attr_size = u32_at(4)?;
    let mut at = 8u64;
    for i in 0..nr {
        let need = |at: u64, n: u64, what: &str| -> std::result::Result<u64, (u64, String)> {
            if at + n > d.len() as u64 {
                Err((at, format!("event description #{i}: {what} of {n} bytes runs past the section's {} bytes", d.len())))
            } else {
                Ok(at + n)
            }
        };
        at = need(at, attr_size, "attribute")?;
        let nr_ids = u32_at(at as usize)?;
        at += 4;
        let slen = u32_at(at as usize)?;
        at = need(at + 4, slen, "name")?;
        at = need(at, nr_ids * 8, "id list")?;
    }
    Ok(())
}

/// Parses the TRACING_DATA feature section: the trace.dat v6 header up to saved_cmdlines.
fn parse_tracing_data(
    path: &Path,
    data: &[u8],
) -> Result<(Vec<EventFormat>, bool, BTreeMap<i32, String>)> {
    let mut r = Bytes::new(data, None, "TRACING_DATA feature section".into(), path);
    if r.take(10, "tracing data magic")? != MAGIC {
        return Err(r.error("expected the tracing data magic \\x17\\x08Dtracing"));
    }
    let version = r.cstr("tracing data version")?;
    let big = r.u8("endianness flag")? == 1;
    r.big_endian = big;
    r.u8("long size")?;
    r.u32("page size")?;
    let mut formats = Vec::new();
    // header_page / header_event are there but the records are not ring-buffer pages.
    super::tracedat::parse_header_info(&mut r)?;
    super::tracedat::parse_format_list(&mut r, "ftrace", &mut formats)?;
    super::tracedat::parse_event_systems(&mut r, &mut formats)?;
    r.sized(4, "kallsyms")?;
    r.sized(4, "printk formats")?;
    let mut comms = BTreeMap::new();
    if version.parse::<f64>().is_ok_and(|v| v >= 0.6) && !r.at_end() {
        super::tracedat::parse_cmdlines(&mut r, &mut comms)?;
    }
    Ok((formats, big, comms))
}

/// The file as the crate reads it, counting where it is: the crate's errors do not say.
struct Tracked {
    inner: BufReader<File>,
    pos: Arc<AtomicU64>,
}

impl Read for Tracked {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.pos.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

impl Seek for Tracked {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        let p = self.inner.seek(to)?;
        self.pos.store(p, Ordering::Relaxed);
        Ok(p)
    }
}

/// An error from the perf.data crate, which does not say where in the file it was: at
/// the offset where its reading stopped.
fn perf_err(path: &Path, pos: u64, e: linux_perf_data::Error) -> TraceError {
    TraceError::malformed(
        path,
        Position::Offset(pos),
        format!("perf.data (reading stopped here): {e}"),
    )
}

/// An opened perf.data: header and tracepoint formats read, samples streamed in time order.
pub struct PerfData {
    path: PathBuf,
    info: SourceInfo,
    ahead: Ahead,
    /// The events received and not yet handed out.
    batch: VecDeque<Event>,
    lost: Vec<LostWindow>,
    unknown: BTreeMap<String, u64>,
    done: bool,
}

/// Events handed over at once: enough to keep the channel's cost per event small, and
/// what a consumer takes at once (`Ordered` asks for its consumer's batch).
const BATCH: usize = 4096;
/// Batches read ahead of the consumer. The events of a round are released together once
/// the next round has been read; room for many batches lets the consumer work through
/// one round while the thread reads the next, instead of the two taking turns.
const DEPTH: usize = 32;
/// Spent batches kept for the thread to fill again; more would only hold memory.
const RECYCLED: usize = 2;

/// What the reading thread hands over.
enum Msg {
    /// The next events in time order, with the losses and thread names among them.
    Events {
        events: Vec<Event>,
        lost: Vec<LostWindow>,
        comms: Vec<(i32, String)>,
    },
    /// The data ended: the samples of events outside the model, by name.
    Done(BTreeMap<String, u64>),
    /// Reading failed here; the events before it were handed over.
    Failed(TraceError),
}

/// The data section read, decoded and put in order on a thread of its own, ahead of the
/// consumer: on two CPUs the reading and the consumer's work overlap.
struct Ahead {
    rx: Receiver<Msg>,
    /// Emptied batches go back to the thread to be filled again.
    recycle: SyncSender<Vec<Event>>,
}

impl Ahead {
    fn spawn(mut events: PerfEvents) -> Ahead {
        let (tx, rx) = sync_channel(DEPTH);
        let (recycle, recycled) = sync_channel::<Vec<Event>>(RECYCLED);
        std::thread::spawn(move || loop {
            let mut batch = recycled
                .try_recv()
                .unwrap_or_else(|_| Vec::with_capacity(BATCH));
            batch.clear();
            let (mut lost, mut comms) = (Vec::new(), Vec::new());
            let out = Output {
                events: &mut batch,
                lost: &mut lost,
                comms: &mut comms,
            };
            let msg = match events.next(out, BATCH) {
                Ok(true) => Msg::Events {
                    events: batch,
                    lost,
                    comms,
                },
                Ok(false) => Msg::Done(events.unknown()),
                Err(e) => Msg::Failed(e),
            };
            let last = !matches!(msg, Msg::Events { .. });
            if tx.send(msg).is_err() || last {
                return;
            }
        });
        Ahead { rx, recycle }
    }
}

impl PerfData {
    /// Reads the header, feature sections and tracepoint formats of `path`; a file without
    /// raw tracepoint samples is unsupported.
    pub fn open(path: &Path) -> Result<PerfData> {
        let data = check_header(path)?;
        let f = File::open(path).map_err(|e| TraceError::io(path, e))?;
        let pos = Arc::new(AtomicU64::new(0));
        let tracked = Tracked {
            inner: BufReader::with_capacity(1 << 16, f),
            pos: pos.clone(),
        };
        let reader = PerfFileReader::parse_file(tracked)
            .map_err(|e| perf_err(path, pos.load(Ordering::Relaxed), e))?;
        let pf = &reader.perf_file;
        let tracepoints = pf
            .event_attributes()
            .iter()
            .filter(|a| {
                matches!(a.attr.type_, PerfEventType::Tracepoint(_))
                    && a.attr.sample_format.contains(SampleFormat::RAW)
            })
            .count();
        let Some(tracing) = pf.feature_section_data(Feature::TRACING_DATA) else {
            return Err(TraceError::Unsupported {
                path: path.into(),
                what: "perf.data has no tracepoint samples (no TRACING_DATA section); record \
                       with `perf record -e sched:sched_switch -e sched:sched_waking ...` or \
                       `perf sched record`"
                    .into(),
            });
        };
        if tracepoints == 0 {
            return Err(TraceError::Unsupported {
                path: path.into(),
                what: "perf.data has no tracepoint events with raw samples; record with \
                       `perf record -e sched:...` or `perf sched record`"
                    .into(),
            });
        }
        let attrs: Vec<Attr> = pf
            .event_attributes()
            .iter()
            .map(|a| Attr {
                sample_type: a.attr.sample_format,
                read_format: a.attr.read_format,
                sample_id_all: a.attr.flags.contains(AttrFlags::SAMPLE_ID_ALL),
                ids: a.event_ids.clone(),
            })
            .collect();
        let layouts = Layouts::new(&attrs).map_err(|what| TraceError::Unsupported {
            path: path.into(),
            what,
        })?;
        let (formats, big, comms) = parse_tracing_data(path, tracing)?;
        let mut info = SourceInfo {
            format: match pf.compression_info().ok().flatten() {
                Some(_) => "perf.data (zstd)".into(),
                None => "perf.data".into(),
            },
            // check_header held it to MAX_CPUS.
            nr_cpus: pf.nr_cpus().ok().flatten().map(|n| n.nr_cpus_available),
            kernel_release: pf.os_release().ok().flatten().map(str::to_string),
            clock: Some("perf".into()),
            comms,
            extra: BTreeMap::new(),
        };
        if let Ok(Some(h)) = pf.hostname() {
            info.extra.insert("hostname".into(), h.to_string());
        }
        if let Ok(Some(v)) = pf.perf_version() {
            info.extra.insert("perf".into(), v.to_string());
        }
        // The crate reserves room for the CMDLINE list's count before checking it; read
        // the list only when the count fits the section (4 bytes per string at least).
        let cmdline_fits = pf.feature_section_data(Feature::CMDLINE).is_some_and(|d| {
            d.len() >= 4 && u32::from_le_bytes(d[..4].try_into().unwrap()) as usize <= d.len() / 4
        });
        if cmdline_fits {
            if let Ok(Some(c)) = pf.cmdline() {
                info.extra.insert("perf_cmdline".into(), c.join(" "));
            }
        }
        let samples = Samples::new(
            path.into(),
            layouts,
            Arc::new(Decoder::new(&formats, big)),
            info.nr_cpus,
        );
        let events = PerfEvents::new(Records::new(path, data)?, samples);
        Ok(PerfData {
            path: path.into(),
            info,
            ahead: Ahead::spawn(events),
            batch: VecDeque::new(),
            lost: Vec::new(),
            unknown: BTreeMap::new(),
            done: false,
        })
    }
}

impl PerfData {
    /// Receives the next batch of events from the reading thread; false at the end.
    fn receive(&mut self) -> Result<bool> {
        while !self.done {
            let msg = self.ahead.rx.recv().map_err(|_| {
                TraceError::malformed(
                    &self.path,
                    Position::Offset(0),
                    "the perf.data reading thread stopped without saying why",
                )
            })?;
            match msg {
                Msg::Events {
                    events,
                    lost,
                    comms,
                } => {
                    self.lost.extend(lost);
                    self.info.comms.extend(comms);
                    let used = std::mem::replace(&mut self.batch, VecDeque::from(events));
                    // The spent batch's memory goes back to be filled again.
                    let _ = self.ahead.recycle.try_send(Vec::from(used));
                    if !self.batch.is_empty() {
                        return Ok(true);
                    }
                }
                Msg::Done(unknown) => {
                    self.unknown = unknown;
                    self.done = true;
                }
                Msg::Failed(e) => {
                    self.done = true;
                    return Err(e);
                }
            }
        }
        Ok(false)
    }
}

impl EventSource for PerfData {
    fn info(&self) -> &SourceInfo {
        &self.info
    }

    fn next_event(&mut self) -> Result<Option<Event>> {
        if self.batch.is_empty() && !self.receive()? {
            return Ok(None);
        }
        Ok(self.batch.pop_front())
    }

    fn next_batch(&mut self, out: &mut Vec<Event>, max: usize) -> Result<usize> {
        let mut n = 0;
        while n < max {
            if self.batch.is_empty() && !self.receive()? {
                break;
            }
            // A whole batch moves in one copy (a batch received whole is a Vec as it
            // came, given back to be filled again).
            if self.batch.len() <= max - n {
                n += self.batch.len();
                let mut whole = Vec::from(std::mem::take(&mut self.batch));
                out.append(&mut whole);
                let _ = self.ahead.recycle.try_send(whole);
            } else {
                let k = max - n;
                out.extend(self.batch.drain(..k));
                n += k;
            }
        }
        Ok(n)
    }

    fn stats(&self) -> ReadStats {
        ReadStats {
            lost: self.lost.clone(),
            unknown: self.unknown.clone(),
            ties: None,
        }
    }
}
