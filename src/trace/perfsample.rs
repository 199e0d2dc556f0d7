//! Where the fields sisreplay reads sit in a perf.data record, worked out once per event
//! attribute from its sample_type and read_format (the layouts of
//! include/uapi/linux/perf_event.h): a sample's time, CPU and raw tracepoint payload,
//! and the time and CPU in the sample_id trailer of other records.

use linux_perf_data::linux_perf_event_reader::{ReadFormat, SampleFormat};

/// PERF_FORMAT_LOST (Linux 6.0): a lost count after each value of a read.
const FORMAT_LOST: u64 = 1 << 4;

/// The fields of one sample record that the reader needs.
#[derive(Debug, Clone, Copy)]
pub struct Sample<'a> {
    pub time: Option<u64>,
    pub cpu: Option<u32>,
    /// PERF_SAMPLE_RAW's bytes (the tracepoint's record), when sampled.
    pub raw: Option<&'a [u8]>,
}

/// What of an event attribute decides its records' layout, and its event ids.
#[derive(Debug, Clone)]
pub struct Attr {
    pub sample_type: SampleFormat,
    pub read_format: ReadFormat,
    pub sample_id_all: bool,
    pub ids: Vec<u64>,
}

/// The time and CPU of a non-sample record, from its sample_id trailer.
#[derive(Debug, Clone, Copy, Default)]
pub struct SampleId {
    pub time: Option<u64>,
    pub cpu: Option<u32>,
}

/// What PERF_SAMPLE_READ adds to a sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Read {
    Fixed(usize),
    /// A group: `head` bytes, then a u64 count's worth of `each` bytes (the count is the
    /// head's first u64).
    Group {
        head: usize,
        each: usize,
    },
}

/// One attribute's record layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Layout {
    /// Sample: offsets of TIME and CPU, and where the fixed fields end.
    time: Option<usize>,
    cpu: Option<usize>,
    fixed: usize,
    read: Option<Read>,
    callchain: bool,
    raw: bool,
    /// sample_id trailer (with sample_id_all): its length and, from its start, the
    /// offsets of TIME and CPU.
    trailer: Option<(usize, Option<usize>, Option<usize>)>,
}

fn bytes(b: &[u8], at: usize, n: usize) -> Option<&[u8]> {
    b.get(at..at.checked_add(n)?)
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    bytes(b, at, 8).map(|s| u64::from_le_bytes(s.try_into().unwrap()))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    bytes(b, at, 4).map(|s| u32::from_le_bytes(s.try_into().unwrap()))
}

impl Layout {
    fn of(attr: &Attr) -> Layout {
        let st = attr.sample_type;
        let has = |f: SampleFormat| st.contains(f);
        let mut at = 0;
        let mut field = |f: SampleFormat, n: usize| {
            has(f).then(|| {
                at += n;
                at - n
            })
        };
        field(SampleFormat::IDENTIFIER, 8);
        field(SampleFormat::IP, 8);
        field(SampleFormat::TID, 8);
        let time = field(SampleFormat::TIME, 8);
        field(SampleFormat::ADDR, 8);
        field(SampleFormat::ID, 8);
        field(SampleFormat::STREAM_ID, 8);
        let cpu = field(SampleFormat::CPU, 8);
        field(SampleFormat::PERIOD, 8);
        let rf = attr.read_format;
        let words = |fs: &[bool]| fs.iter().filter(|&&f| f).count() * 8;
        let lost = rf.bits() & FORMAT_LOST != 0;
        let read = has(SampleFormat::READ).then(|| {
            let times = [
                rf.contains(ReadFormat::TOTAL_TIME_ENABLED),
                rf.contains(ReadFormat::TOTAL_TIME_RUNNING),
            ];
            if rf.contains(ReadFormat::GROUP) {
                Read::Group {
                    head: 8 + words(&times),
                    each: 8 + words(&[rf.contains(ReadFormat::ID), lost]),
                }
            } else {
                Read::Fixed(8 + words(&times) + words(&[rf.contains(ReadFormat::ID), lost]))
            }
        });
        let trailer = attr.sample_id_all.then(|| {
            let mut at = 0;
            let mut field = |f: SampleFormat| {
                has(f).then(|| {
                    at += 8;
                    at - 8
                })
            };
            field(SampleFormat::TID);
            let time = field(SampleFormat::TIME);
            field(SampleFormat::ID);
            field(SampleFormat::STREAM_ID);
            let cpu = field(SampleFormat::CPU);
            field(SampleFormat::IDENTIFIER);
            (at, time, cpu)
        });
        Layout {
            time,
            cpu,
            fixed: at,
            read,
            callchain: has(SampleFormat::CALLCHAIN),
            raw: has(SampleFormat::RAW),
            trailer,
        }
    }

    /// A sample's fields; the error says which one runs past the record.
    #[inline]
    fn sample<'a>(&self, b: &'a [u8]) -> Result<Sample<'a>, &'static str> {
        if b.len() < self.fixed {
            return Err("its fixed fields run past the record");
        }
        let time = self.time.and_then(|at| u64_at(b, at));
        let cpu = self.cpu.and_then(|at| u32_at(b, at));
        if !self.raw {
            return Ok(Sample {
                time,
                cpu,
                raw: None,
            });
        }
        let mut at = self.fixed;
        match self.read {
            None => {}
            Some(Read::Fixed(n)) => at += n,
            Some(Read::Group { head, each }) => {
                let nr = u64_at(b, at).ok_or("its read values run past the record")?;
                at = (nr as usize)
                    .checked_mul(each)
                    .and_then(|n| n.checked_add(at + head))
                    .ok_or("its read values run past the record")?;
            }
        }
        if self.callchain {
            let nr = u64_at(b, at).ok_or("its callchain runs past the record")?;
            at = (nr as usize)
                .checked_mul(8)
                .and_then(|n| n.checked_add(at + 8))
                .ok_or("its callchain runs past the record")?;
        }
        let size = u32_at(b, at).ok_or("its raw data size runs past the record")?;
        let raw = bytes(b, at + 4, size as usize).ok_or("its raw data runs past the record")?;
        Ok(Sample {
            time,
            cpu,
            raw: Some(raw),
        })
    }

    fn sample_id(&self, b: &[u8]) -> SampleId {
        let Some((len, time, cpu)) = self.trailer else {
            return SampleId::default();
        };
        let Some(start) = b.len().checked_sub(len) else {
            return SampleId::default();
        };
        SampleId {
            time: time.and_then(|t| u64_at(b, start + t)),
            cpu: cpu.and_then(|c| u32_at(b, start + c)),
        }
    }
}

/// Event id → attribute index, looked up for every sample of a file whose attributes
/// differ: a table indexed by the id when the ids are close together (perf numbers a
/// session's events consecutively), else a sorted list.
#[derive(Debug, Clone)]
enum Ids {
    Dense { first: u64, index: Vec<u16> },
    Sorted(Vec<(u64, usize)>),
}

/// The most ids a dense table spans.
const DENSE_SPAN: u64 = 1 << 16;

impl Ids {
    fn new(pairs: impl Iterator<Item = (u64, usize)>) -> Ids {
        let mut v: Vec<(u64, usize)> = pairs.collect();
        v.sort_unstable();
        v.dedup_by_key(|p| p.0);
        let (Some(first), Some(last)) = (v.first(), v.last()) else {
            return Ids::Sorted(v);
        };
        let (first, span) = (first.0, last.0 - first.0 + 1);
        if span > DENSE_SPAN || v.iter().any(|p| p.1 >= u16::MAX as usize) {
            return Ids::Sorted(v);
        }
        let mut index = vec![u16::MAX; span as usize];
        for (id, i) in v {
            index[(id - first) as usize] = i as u16;
        }
        Ids::Dense { first, index }
    }

    #[inline]
    fn get(&self, id: u64) -> Option<usize> {
        match self {
            Ids::Dense { first, index } => {
                let i = *index.get(id.wrapping_sub(*first) as usize)?;
                (i != u16::MAX).then_some(i as usize)
            }
            Ids::Sorted(v) => v.binary_search_by_key(&id, |p| p.0).ok().map(|at| v[at].1),
        }
    }
}

/// The layouts of a file's attributes and how to tell which a record belongs to.
#[derive(Debug, Clone)]
pub struct Layouts {
    layouts: Vec<Layout>,
    /// Event id → attribute, when they differ (every attribute then has
    /// PERF_SAMPLE_IDENTIFIER: the first u64 of a sample, the last of a trailer).
    by_id: Ids,
}

impl Layouts {
    /// The layouts of `attrs` (with each one's event ids). Files whose attributes differ
    /// without an identifier on every record cannot be read.
    pub fn new(attrs: &[Attr]) -> Result<Layouts, String> {
        let layouts: Vec<Layout> = attrs.iter().map(Layout::of).collect();
        let Some(first) = layouts.first() else {
            return Err("perf.data has no event attributes".into());
        };
        if layouts.iter().all(|l| l == first) {
            return Ok(Layouts {
                layouts: vec![*first],
                by_id: Ids::Sorted(Vec::new()),
            });
        }
        let all_identified = attrs.iter().all(|a| {
            a.sample_type.contains(SampleFormat::IDENTIFIER)
                && a.sample_id_all == attrs[0].sample_id_all
        });
        if !all_identified {
            return Err(
                "perf.data events differ in sample layout and do not all record \
                        PERF_SAMPLE_IDENTIFIER; record with `perf record` of Linux 3.12 or later"
                    .into(),
            );
        }
        let by_id = Ids::new(
            attrs
                .iter()
                .enumerate()
                .flat_map(|(i, a)| a.ids.iter().map(move |&id| (id, i))),
        );
        Ok(Layouts { layouts, by_id })
    }

    /// The layout of the attribute whose id `id` gives (the first when none does).
    #[inline]
    fn pick(&self, id: Option<u64>) -> &Layout {
        let i = id.and_then(|id| self.by_id.get(id)).unwrap_or(0);
        &self.layouts[i]
    }

    /// The fields of a sample record's body.
    #[inline]
    pub fn sample<'a>(&self, body: &'a [u8]) -> Result<Sample<'a>, &'static str> {
        let l = if self.layouts.len() == 1 {
            &self.layouts[0]
        } else {
            self.pick(u64_at(body, 0))
        };
        l.sample(body)
    }

    /// The time and CPU of a non-sample record's body.
    pub fn sample_id(&self, body: &[u8]) -> SampleId {
        let l = if self.layouts.len() == 1 {
            &self.layouts[0]
        } else {
            self.pick(body.len().checked_sub(8).and_then(|at| u64_at(body, at)))
        };
        l.sample_id(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sample with a read group and a callchain before its raw data: the payload is
    /// found after both, and a count that runs past the record is refused.
    #[test]
    fn raw_data_after_variable_fields() {
        let attr = Attr {
            sample_type: SampleFormat::IDENTIFIER
                | SampleFormat::TIME
                | SampleFormat::CPU
                | SampleFormat::READ
                | SampleFormat::CALLCHAIN
                | SampleFormat::RAW,
            read_format: ReadFormat::GROUP | ReadFormat::ID,
            sample_id_all: true,
            ids: vec![7],
        };
        let ls = Layouts::new(&[attr]).unwrap();
        let mut b = Vec::new();
        b.extend(7u64.to_le_bytes()); // identifier
        b.extend(1234u64.to_le_bytes()); // time
        b.extend(3u32.to_le_bytes()); // cpu
        b.extend(0u32.to_le_bytes());
        b.extend(2u64.to_le_bytes()); // read: nr
        b.extend([0u8; 32]); // 2 × {value, id}
        b.extend(1u64.to_le_bytes()); // callchain: nr
        b.extend([0u8; 8]);
        b.extend(4u32.to_le_bytes());
        b.extend([1, 2, 3, 4]);
        let s = ls.sample(&b).unwrap();
        assert_eq!(
            (s.time, s.cpu, s.raw),
            (Some(1234), Some(3), Some(&[1u8, 2, 3, 4][..]))
        );
        b[24..32].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(ls.sample(&b).is_err());
    }

    /// Attributes of different layouts: each record is read with its own, found by the
    /// identifier (first in a sample, last in a trailer).
    #[test]
    fn differing_attributes_are_told_apart_by_identifier() {
        let base = SampleFormat::IDENTIFIER | SampleFormat::TIME | SampleFormat::CPU;
        let attrs = [
            Attr {
                sample_type: base | SampleFormat::RAW,
                read_format: ReadFormat::empty(),
                sample_id_all: true,
                ids: vec![1, 2],
            },
            Attr {
                sample_type: base | SampleFormat::TID,
                read_format: ReadFormat::empty(),
                sample_id_all: true,
                ids: vec![3],
            },
        ];
        // Ids close together (a table) and far apart (a sorted list).
        for far in [3u64, 1 << 40] {
            let mut attrs = attrs.clone();
            attrs[1].ids = vec![far];
            let ls = Layouts::new(&attrs).unwrap();
            // A LOST record of the second: id, lost, then {tid, time, cpu, identifier}.
            let mut b = Vec::new();
            b.extend(far.to_le_bytes());
            b.extend(5u64.to_le_bytes());
            b.extend(99u64.to_le_bytes());
            b.extend(777u64.to_le_bytes());
            b.extend(1u64.to_le_bytes());
            b.extend(far.to_le_bytes());
            let id = ls.sample_id(&b);
            assert_eq!((id.time, id.cpu), (Some(777), Some(1)), "id {far}");
        }
        // Without identifiers they cannot be told apart.
        let mut bare = attrs.clone();
        bare[1].sample_type.remove(SampleFormat::IDENTIFIER);
        assert!(Layouts::new(&bare).is_err());
    }
}
