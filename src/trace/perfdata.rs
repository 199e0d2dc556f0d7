//! Reader for `perf.data` files from `perf record -e sched:...` and `perf sched record`,
//! compressed (`-z`) or not. The `linux-perf-data` crate reads the header and feature
//! sections; the data section's records are walked in place ([`super::perfrecords`]),
//! each sample's tracepoint payload decoded with the event formats from the file's
//! TRACING_DATA feature section (which has the layout of a trace.dat v6 header), and the
//! events put in time order a round at a time ([`super::perfrounds`]), all on a thread
//! of their own ahead of the consumer.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use linux_perf_data::linux_perf_event_reader::{AttrFlags, PerfEventType, SampleFormat};
use linux_perf_data::{Feature, PerfFileReader};

use super::bytes::{Bytes, Reader};
use super::decode::{Decoded, Decoder};
use super::error::{Position, Result, TraceError};
use super::event::Event;
use super::format::EventFormat;
use super::perfrecords::{Record, Records};
use super::perfrounds::Rounds;
use super::perfsample::{Attr, Layouts};
use super::stream::{EventSource, LostWindow, ReadStats, SourceInfo};
use super::tracedat::MAGIC;

/// The first 8 bytes of a perf.data file (version 2 header, little-endian writer).
pub const PERF_MAGIC: &[u8; 8] = b"PERFILE2";
/// Feature bit of HEADER_EVENT_DESC (perf's header.h).
const EVENT_DESC_BIT: usize = 12;
/// Feature bit of HEADER_NRCPUS: {nr_cpus_available, nr_cpus_online}, two u32.
const NRCPUS_BIT: usize = 7;
/// Record types read: PERF_RECORD_LOST, _COMM, _SAMPLE and _LOST_SAMPLES.
const RECORD_LOST: u32 = 2;
const RECORD_COMM: u32 = 3;
const RECORD_SAMPLE: u32 = 9;
const RECORD_LOST_SAMPLES: u32 = 13;
/// The fixed part of the perf.data header: magic, size, attr_size and three sections.
const HEADER_LEN: u64 = 104;

/// Checks the header's own numbers against the file, so that a truncated or damaged file
/// is reported with the offset that is wrong rather than as a parse failure deep inside.
/// Returns the data section as (offset, size).
fn check_header(path: &Path) -> Result<(u64, u64)> {
    let mut f = File::open(path).map_err(|e| TraceError::io(path, e))?;
    let len = f.metadata().map_err(|e| TraceError::io(path, e))?.len();
    let h = read_fixed_header(&mut f, path, len)?;
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

/// A record waiting for its round to end.
enum Pending {
    Event(Event),
    /// PERF_RECORD_LOST or _LOST_SAMPLES: the CPU and time of its sample_id, and the count.
    Lost {
        cpu: u32,
        ts: Option<u64>,
        count: Option<u64>,
    },
    /// PERF_RECORD_COMM: a thread's new name.
    Comm(i32, String),
}

/// Where what reading produced goes, in time order.
struct Output<'a> {
    events: &'a mut Vec<Event>,
    lost: &'a mut Vec<LostWindow>,
    comms: &'a mut Vec<(i32, String)>,
}

/// Turns records into what waits for the round's end: decodes samples, checks their CPU.
struct Samples {
    path: PathBuf,
    layouts: Layouts,
    decoder: Arc<Decoder>,
    /// NRCPUS' nr_cpus_available: no sample is on a CPU beyond it.
    cpus_available: Option<u32>,
    /// Samples of events outside the model, by event id.
    unknown: Vec<u64>,
}

impl Samples {
    #[inline]
    fn record(&mut self, rec: Record<'_>, rounds: &mut Rounds<Pending>) -> Result<()> {
        match rec.kind {
            RECORD_SAMPLE => self.sample(rec, rounds),
            RECORD_LOST | RECORD_LOST_SAMPLES => {
                let id = self.layouts.sample_id(rec.body);
                // LOST: {id, lost}; LOST_SAMPLES: {lost}.
                let at = if rec.kind == RECORD_LOST { 8 } else { 0 };
                let count = rec
                    .body
                    .get(at..at + 8)
                    .map(|b| u64::from_le_bytes(b.try_into().unwrap()));
                let cpu = id.cpu.filter(|&c| c < super::MAX_CPUS).unwrap_or(u32::MAX);
                let pending = Pending::Lost {
                    cpu,
                    ts: id.time,
                    count,
                };
                rounds.push(
                    cpu.min(super::MAX_CPUS) as usize,
                    id.time.unwrap_or(0),
                    pending,
                );
                Ok(())
            }
            RECORD_COMM => {
                // {pid, tid, comm[] NUL-terminated}, then the sample_id.
                let Some(tid) = rec.body.get(4..8) else {
                    return Ok(());
                };
                let tid = i32::from_le_bytes(tid.try_into().unwrap());
                let name = &rec.body[8.min(rec.body.len())..];
                let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
                let id = self.layouts.sample_id(rec.body);
                let queue = id.cpu.unwrap_or(0).min(super::MAX_CPUS) as usize;
                let name = String::from_utf8_lossy(name).into_owned();
                rounds.push(queue, id.time.unwrap_or(0), Pending::Comm(tid, name));
                Ok(())
            }
            _ => Ok(()),
        }
    }

    #[inline]
    fn sample(&mut self, rec: Record<'_>, rounds: &mut Rounds<Pending>) -> Result<()> {
        let s = match self.layouts.sample(rec.body) {
            Ok(s) => s,
            Err(what) => {
                return Err(rec
                    .origin
                    .error(&self.path, format!("sample record: {what}")))
            }
        };
        let (Some(raw), Some(ts), Some(cpu)) = (s.raw, s.time, s.cpu) else {
            return Ok(());
        };
        if cpu >= super::MAX_CPUS {
            let what = format!(
                "sample on CPU {cpu}, beyond the {} CPUs a kernel can have",
                super::MAX_CPUS
            );
            return Err(rec.origin.error(&self.path, what));
        }
        if let Some(n) = self.cpus_available.filter(|&n| cpu >= n) {
            let what =
                format!("sample on CPU {cpu}, but the NRCPUS header says {n} CPUs available");
            return Err(rec.origin.error(&self.path, what));
        }
        match self.decoder.decode(raw) {
            Ok(Decoded::Known { common_pid, kind }) => {
                let e = Event {
                    ts,
                    cpu,
                    common_pid,
                    kind,
                };
                rounds.push(cpu as usize, ts, Pending::Event(e));
            }
            Ok(Decoded::Unknown { id }) => {
                let i = id as usize;
                if self.unknown.len() <= i {
                    self.unknown.resize(i + 1, 0);
                }
                self.unknown[i] += 1;
            }
            Err(e) => {
                let what = format!("tracepoint payload of the sample: {}", e.0);
                return Err(rec.origin.error(&self.path, what));
            }
        }
        Ok(())
    }

    /// The unknown events' counts by name.
    fn unknown_by_name(&self) -> BTreeMap<String, u64> {
        let mut m = BTreeMap::new();
        for (id, &n) in self.unknown.iter().enumerate().filter(|(_, &n)| n > 0) {
            let name = self
                .decoder
                .name_of(id as u16)
                .map(str::to_string)
                .unwrap_or_else(|| format!("unknown id {id}"));
            *m.entry(name).or_default() += n;
        }
        m
    }
}

/// Reads the data section and hands out events in time order.
struct DataReader {
    records: Records,
    samples: Samples,
    rounds: Rounds<Pending>,
    /// Per CPU, the timestamp of its last event handed out (for lost windows).
    last_ts: Vec<Option<u64>>,
    ended: bool,
}

impl DataReader {
    /// Appends the next events in time order to `out` (with the losses and thread names
    /// among them), up to `max` events; false once everything was handed out.
    fn next(&mut self, out: Output<'_>, max: usize) -> Result<bool> {
        let mut n = 0;
        loop {
            while let Some(p) = self.rounds.pop() {
                match p {
                    Pending::Event(e) => {
                        // Decoding checked cpu < MAX_CPUS.
                        let i = e.cpu as usize;
                        if self.last_ts.len() <= i {
                            self.last_ts.resize(i + 1, None);
                        }
                        self.last_ts[i] = Some(e.ts);
                        out.events.push(e);
                        n += 1;
                        if n == max {
                            return Ok(true);
                        }
                    }
                    Pending::Lost { cpu, ts, count } => out.lost.push(LostWindow {
                        cpu,
                        after_ts: self.last_ts.get(cpu as usize).copied().flatten(),
                        before_ts: ts,
                        count,
                    }),
                    Pending::Comm(tid, name) => out.comms.push((tid, name)),
                }
            }
            if self.ended {
                return Ok(n > 0);
            }
            let (samples, rounds) = (&mut self.samples, &mut self.rounds);
            if self.records.round(&mut |rec| samples.record(rec, rounds))? {
                self.rounds.finish_round();
            } else {
                self.rounds.finish();
                self.ended = true;
            }
        }
    }
}

/// An opened perf.data: header and tracepoint formats read, samples streamed in time order.
pub struct PerfData {
    info: SourceInfo,
    reader: DataReader,
    lost: Vec<LostWindow>,
    comms: Vec<(i32, String)>,
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
        let samples = Samples {
            path: path.into(),
            layouts,
            decoder: Arc::new(Decoder::new(&formats, big)),
            cpus_available: info.nr_cpus,
            unknown: Vec::new(),
        };
        let reader = DataReader {
            records: Records::new(path, data)?,
            samples,
            rounds: Rounds::default(),
            last_ts: Vec::new(),
            ended: false,
        };
        Ok(PerfData {
            info,
            reader,
            lost: Vec::new(),
            comms: Vec::new(),
        })
    }
}

impl EventSource for PerfData {
    fn info(&self) -> &SourceInfo {
        &self.info
    }

    fn next_event(&mut self) -> Result<Option<Event>> {
        let mut one = Vec::with_capacity(1);
        self.next_batch(&mut one, 1)?;
        Ok(one.pop())
    }

    fn next_batch(&mut self, out: &mut Vec<Event>, max: usize) -> Result<usize> {
        let before = out.len();
        let sink = Output {
            events: out,
            lost: &mut self.lost,
            comms: &mut self.comms,
        };
        self.reader.next(sink, max)?;
        for (tid, name) in self.comms.drain(..) {
            self.info.comms.insert(tid, name);
        }
        Ok(out.len() - before)
    }

    fn stats(&self) -> ReadStats {
        ReadStats {
            lost: self.lost.clone(),
            unknown: self.reader.samples.unknown_by_name(),
            ties: None,
        }
    }
}
