//! Reader for `perf.data` files from `perf record -e sched:...` and `perf sched record`,
//! compressed (`-z`) or not. The `linux-perf-data` crate reads the records in timestamp
//! order; the tracepoint payloads are decoded with the event formats from the file's
//! TRACING_DATA feature section, which has the layout of a trace.dat v6 header.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use linux_perf_data::linux_perf_event_reader::{
    EventRecord, PerfEventType, RecordType, SampleFormat,
};
use linux_perf_data::{Feature, PerfFileReader, PerfFileRecord};

use super::bytes::{Bytes, Reader};
use super::decode::{Decoded, Decoder};
use super::error::{Position, Result, TraceError};
use super::event::Event;
use super::format::EventFormat;
use super::stream::{EventSource, LostWindow, ReadStats, SourceInfo};
use super::tracedat::MAGIC;

pub const PERF_MAGIC: &[u8; 8] = b"PERFILE2";
/// Feature bit of HEADER_EVENT_DESC (perf's header.h).
const EVENT_DESC_BIT: usize = 12;
/// The fixed part of the perf.data header: magic, size, attr_size and three sections.
const HEADER_LEN: u64 = 104;

/// Checks the header's own numbers against the file, so that a truncated or damaged file
/// is reported with the offset that is wrong rather than as a parse failure deep inside.
fn check_header(path: &Path) -> Result<()> {
    let mut f = File::open(path).map_err(|e| TraceError::io(path, e))?;
    let len = f.metadata().map_err(|e| TraceError::io(path, e))?.len();
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
    let u64_at = |o: usize| u64::from_le_bytes(h[o..o + 8].try_into().unwrap());
    for (name, at) in [("attrs", 24usize), ("data", 40), ("event types", 56)] {
        let (off, size) = (u64_at(at), u64_at(at + 8));
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
    // Feature sections: one (offset, size) pair per feature bit, right after the data.
    let features = h[72..104]
        .iter()
        .map(|b| b.count_ones() as u64)
        .sum::<u64>();
    let table = u64_at(40) + u64_at(48);
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
    // HEADER_EVENT_DESC's entry, if present: its index among the set feature bits.
    let bit_set = |b: usize| h[72 + b / 8] & (1 << (b % 8)) != 0;
    let event_desc =
        bit_set(EVENT_DESC_BIT).then(|| (0..EVENT_DESC_BIT).filter(|&b| bit_set(b)).count());
    for (i, e) in entries.chunks(16).enumerate() {
        let off = u64::from_le_bytes(e[0..8].try_into().unwrap());
        let size = u64::from_le_bytes(e[8..16].try_into().unwrap());
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

pub struct PerfData {
    path: PathBuf,
    info: SourceInfo,
    reader: PerfFileReader<BufReader<File>>,
    decoder: Arc<Decoder>,
    lost: Vec<LostWindow>,
    unknown: BTreeMap<String, u64>,
    last_ts: Vec<Option<u64>>,
    records: u64,
}

/// An error from the perf.data crate, which does not say where in the file it was.
fn perf_err(path: &Path, records: u64, e: linux_perf_data::Error) -> TraceError {
    TraceError::malformed(path, Position::Record(records), format!("perf.data: {e}"))
}

impl PerfData {
    pub fn open(path: &Path) -> Result<PerfData> {
        check_header(path)?;
        let f = File::open(path).map_err(|e| TraceError::io(path, e))?;
        let reader = PerfFileReader::parse_file(BufReader::with_capacity(1 << 18, f))
            .map_err(|e| perf_err(path, 0, e))?;
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
        let (formats, big, comms) = parse_tracing_data(path, tracing)?;
        let mut info = SourceInfo {
            format: match pf.compression_info().ok().flatten() {
                Some(_) => "perf.data (zstd)".into(),
                None => "perf.data".into(),
            },
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
        Ok(PerfData {
            path: path.into(),
            info,
            reader,
            decoder: Arc::new(Decoder::new(&formats, big)),
            lost: Vec::new(),
            unknown: BTreeMap::new(),
            last_ts: Vec::new(),
            records: 0,
        })
    }

    fn note_ts(&mut self, cpu: u32, ts: u64) {
        // Callers check cpu < MAX_CPUS.
        let i = cpu as usize;
        if self.last_ts.len() <= i {
            self.last_ts.resize(i + 1, None);
        }
        self.last_ts[i] = Some(ts);
    }
}

impl EventSource for PerfData {
    fn info(&self) -> &SourceInfo {
        &self.info
    }

    fn next_event(&mut self) -> Result<Option<Event>> {
        loop {
            let PerfFileReader {
                perf_file,
                record_iter,
            } = &mut self.reader;
            let rec = record_iter
                .next_record(perf_file)
                .map_err(|e| perf_err(&self.path, self.records, e))?;
            self.records += 1;
            let Some(rec) = rec else { return Ok(None) };
            let PerfFileRecord::EventRecord { record, .. } = rec else {
                continue;
            };
            let rtype = record.record_type;
            if rtype == RecordType::LOST || rtype == RecordType::LOST_SAMPLES {
                let common = record.common_data().ok();
                let cpu = common
                    .as_ref()
                    .and_then(|c| c.cpu)
                    .filter(|&c| c < super::MAX_CPUS)
                    .unwrap_or(u32::MAX);
                let count = match record.parse() {
                    Ok(EventRecord::Lost(l)) => Some(l.count),
                    _ => None,
                };
                let after = self.last_ts.get(cpu as usize).copied().flatten();
                self.lost.push(LostWindow {
                    cpu,
                    after_ts: after,
                    before_ts: common.and_then(|c| c.timestamp),
                    count,
                });
                continue;
            }
            if rtype == RecordType::COMM {
                if let Ok(EventRecord::Comm(c)) = record.parse() {
                    let name = String::from_utf8_lossy(&c.name.as_slice()).into_owned();
                    self.info.comms.insert(c.tid, name);
                }
                continue;
            }
            if rtype != RecordType::SAMPLE {
                continue;
            }
            let sample = match record.parse() {
                Ok(EventRecord::Sample(s)) => s,
                Ok(_) => continue,
                Err(e) => {
                    return Err(TraceError::malformed(
                        &self.path,
                        Position::Record(self.records),
                        format!("sample record: {e}"),
                    ))
                }
            };
            let (Some(raw), Some(ts), Some(cpu)) = (sample.raw, sample.timestamp, sample.cpu)
            else {
                continue;
            };
            if cpu >= super::MAX_CPUS {
                return Err(TraceError::malformed(
                    &self.path,
                    Position::Record(self.records),
                    format!(
                        "sample on CPU {cpu}, beyond the {} CPUs a kernel can have",
                        super::MAX_CPUS
                    ),
                ));
            }
            let raw = raw.as_slice();
            let decoded = self.decoder.decode(&raw).map_err(|e| {
                TraceError::malformed(
                    &self.path,
                    Position::Record(self.records),
                    format!("tracepoint payload of the sample: {}", e.0),
                )
            })?;
            match decoded {
                Decoded::Known { common_pid, kind } => {
                    self.note_ts(cpu, ts);
                    return Ok(Some(Event {
                        ts,
                        cpu,
                        common_pid,
                        kind,
                    }));
                }
                Decoded::Unknown { id } => {
                    let name = self
                        .decoder
                        .name_of(id)
                        .map(str::to_string)
                        .unwrap_or_else(|| format!("unknown id {id}"));
                    *self.unknown.entry(name).or_default() += 1;
                }
            }
        }
    }

    fn stats(&self) -> ReadStats {
        ReadStats {
            lost: self.lost.clone(),
            unknown: self.unknown.clone(),
            ties: None,
        }
    }
}
