//! The events of a perf.data data section in time order: each record walked in place
//! ([`super::perfrecords`]), each sample's fields found by its attribute's layout
//! ([`super::perfsample`]) and its tracepoint payload decoded, the results merged a
//! round at a time ([`super::perfrounds`]).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use super::decode::{Decoded, Decoder};
use super::error::Result;
use super::event::Event;
use super::perfrecords::{Record, Records};
use super::perfrounds::Rounds;
use super::perfsample::Layouts;
use super::stream::LostWindow;

/// Record types read: PERF_RECORD_LOST, _COMM, _SAMPLE and _LOST_SAMPLES.
const RECORD_LOST: u32 = 2;
const RECORD_COMM: u32 = 3;
const RECORD_SAMPLE: u32 = 9;
const RECORD_LOST_SAMPLES: u32 = 13;

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
pub struct Output<'a> {
    pub events: &'a mut Vec<Event>,
    pub lost: &'a mut Vec<LostWindow>,
    pub comms: &'a mut Vec<(i32, String)>,
}

/// Turns records into what waits for the round's end: decodes samples, checks their CPU.
pub struct Samples {
    path: PathBuf,
    layouts: Layouts,
    decoder: Arc<Decoder>,
    /// NRCPUS' nr_cpus_available: no sample is on a CPU beyond it.
    cpus_available: Option<u32>,
    /// Samples of events outside the model, by event id.
    unknown: Vec<u64>,
}

impl Samples {
    /// Reads the samples of `path` with `layouts`, decoding with `decoder`, none on a CPU
    /// beyond `cpus_available`.
    pub fn new(
        path: PathBuf,
        layouts: Layouts,
        decoder: Arc<Decoder>,
        cpus_available: Option<u32>,
    ) -> Samples {
        Samples {
            path,
            layouts,
            decoder,
            cpus_available,
            unknown: Vec::new(),
        }
    }

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
    pub fn unknown_by_name(&self) -> BTreeMap<String, u64> {
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
pub struct PerfEvents {
    records: Records,
    samples: Samples,
    rounds: Rounds<Pending>,
    /// Per CPU, the timestamp of its last event handed out (for lost windows).
    last_ts: Vec<Option<u64>>,
    ended: bool,
}

impl PerfEvents {
    /// The events of the data section `records` walks.
    pub fn new(records: Records, samples: Samples) -> PerfEvents {
        PerfEvents {
            records,
            samples,
            rounds: Rounds::default(),
            last_ts: Vec::new(),
            ended: false,
        }
    }

    /// Samples of events outside the model so far, by name.
    pub fn unknown(&self) -> BTreeMap<String, u64> {
        self.samples.unknown_by_name()
    }
}

impl PerfEvents {
    /// Appends the next events in time order to `out` (with the losses and thread names
    /// among them), up to `max` events; false once everything was handed out.
    pub fn next(&mut self, out: Output<'_>, max: usize) -> Result<bool> {
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
