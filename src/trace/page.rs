//! Decoder for one page (sub-buffer) of the kernel's ftrace ring buffer, the unit both
//! trace.dat's per-CPU data and tracefs' `trace_pipe_raw` are made of. Layout from
//! kernel/trace/ring_buffer.c: a page header (timestamp, commit word with the
//! missed-events flags), then 4-byte-aligned records whose 32-bit header packs a 5-bit
//! type_len and a 27-bit time delta.

use super::format::PageLayout;

/// Set in the commit word when events were lost before this page.
const MISSING_EVENTS: u64 = 1 << 31;
/// Set with MISSING_EVENTS when the count of lost events is stored after the data.
const MISSING_STORED: u64 = 1 << 30;
/// The commit word's low bits hold the bytes of data in the page.
const COMMIT_MASK: u64 = (1 << 27) - 1;

const TYPE_PADDING: u32 = 29;
const TYPE_TIME_EXTEND: u32 = 30;
const TYPE_TIME_STAMP: u32 = 31;
/// Deltas and extended times are counted in units shifted by this many bits.
const TS_SHIFT: u32 = 27;
/// An absolute TIME_STAMP carries 59 bits; the top 5 come from the running clock.
const TS_MSB: u64 = 0xf8 << 56;

/// What the page header says about events lost before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missed {
    /// No events were lost.
    None,
    /// Lost, count not recorded (the writer overran the reader).
    Unknown,
    /// This many events were lost (the count stored after the page's data).
    Count(u64),
}

/// The page header: the time base of its records and how much of it holds data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageHeader {
    /// The page's base time stamp, in trace clock units (ns for the default local clock).
    pub timestamp: u64,
    /// Bytes of records in the page.
    pub commit: usize,
    /// Events lost between the previous page of this CPU and this one.
    pub missed: Missed,
}

/// One data record in a page: its absolute timestamp and payload (common fields first).
#[derive(Debug, Clone, Copy)]
pub struct Record<'a> {
    /// The record's absolute time: the page's stamp plus every delta up to it, in clock units.
    pub ts: u64,
    /// The event payload, common fields first (common_type, flags, preempt_count, pid).
    pub data: &'a [u8],
    /// Offset of the record header from the start of the page.
    pub offset: usize,
}

/// A problem in a page, with the offset from the page start where it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageError {
    /// Byte offset from the start of the page.
    pub offset: usize,
    /// What is wrong there.
    pub what: String,
}

/// Reads the fixed-width integers of the trace's byte order.
#[derive(Debug, Clone, Copy)]
pub struct ByteOrder {
    /// True for big-endian traces.
    pub big_endian: bool,
}

impl ByteOrder {
    /// The u32 in the first 4 bytes of `b`.
    pub fn u32(self, b: &[u8]) -> u32 {
        let a = [b[0], b[1], b[2], b[3]];
        if self.big_endian {
            u32::from_be_bytes(a)
        } else {
            u32::from_le_bytes(a)
        }
    }
    /// The u64 in the first 8 bytes of `b`.
    pub fn u64(self, b: &[u8]) -> u64 {
        let a = [b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]];
        if self.big_endian {
            u64::from_be_bytes(a)
        } else {
            u64::from_le_bytes(a)
        }
    }
    /// A kernel `long` of the given width.
    pub fn long(self, b: &[u8], size: usize) -> u64 {
        if size == 8 {
            self.u64(b)
        } else {
            self.u32(b) as u64
        }
    }
}

/// Parses the header of a page.
pub fn read_header(
    page: &[u8],
    layout: &PageLayout,
    order: ByteOrder,
) -> Result<PageHeader, PageError> {
    if page.len() < layout.data_offset {
        return Err(PageError {
            offset: 0,
            what: format!(
                "page of {} bytes is shorter than its {}-byte header",
                page.len(),
                layout.data_offset
            ),
        });
    }
    let timestamp = order.u64(&page[0..8]);
    let flags = order.long(&page[8..], layout.commit_size);
    let commit = (flags & COMMIT_MASK) as usize;
    if commit > layout.data_size || layout.data_offset + commit > page.len() {
        return Err(PageError {
            offset: 8,
            what: format!(
                "page header commits {commit} bytes, more than the page's {} bytes of data",
                layout.data_size.min(page.len() - layout.data_offset)
            ),
        });
    }
    let missed = if flags & MISSING_EVENTS == 0 {
        Missed::None
    } else if flags & MISSING_STORED != 0 {
        let at = layout.data_offset + commit;
        match page.get(at..at + layout.commit_size) {
            Some(b) => Missed::Count(order.long(b, layout.commit_size)),
            None => Missed::Unknown,
        }
    } else {
        Missed::Unknown
    };
    Ok(PageHeader {
        timestamp,
        commit,
        missed,
    })
}

/// Iterates the data records of one page, applying time extends and absolute stamps.
pub struct PageIter<'a> {
    page: &'a [u8],
    order: ByteOrder,
    /// Offset of the next record header, from the page start.
    pos: usize,
    end: usize,
    ts: u64,
}

impl<'a> PageIter<'a> {
    /// Reads the page header and returns an iterator positioned on the first record.
    pub fn new(
        page: &'a [u8],
        layout: &PageLayout,
        order: ByteOrder,
    ) -> Result<(PageHeader, PageIter<'a>), PageError> {
        let header = read_header(page, layout, order)?;
        Ok((
            header,
            PageIter {
                page,
                order,
                pos: layout.data_offset,
                end: layout.data_offset + header.commit,
                ts: header.timestamp,
            },
        ))
    }

    fn err(&self, what: String) -> PageError {
        PageError {
            offset: self.pos,
            what,
        }
    }

    fn word(&self, at: usize) -> Result<u32, PageError> {
        if at + 4 > self.end {
            return Err(PageError {
                offset: at,
                what: format!(
                    "record runs past the committed end of the page at {:#x}",
                    self.end
                ),
            });
        }
        Ok(self.order.u32(&self.page[at..at + 4]))
    }

    /// The next data record, or `None` at the end of the committed data.
    pub fn next_record(&mut self) -> Result<Option<Record<'a>>, PageError> {
        loop {
            if self.pos >= self.end {
                return Ok(None);
            }
            let header = self.word(self.pos)?;
            let type_len = header & 0x1f;
            let delta = (header >> 5) as u64;
            let body = self.pos + 4;
            match type_len {
                TYPE_PADDING => {
                    // A discarded event (or the tail filler): its length is in array[0];
                    // its delta still advances the clock.
                    self.ts = self.ts.wrapping_add(delta);
                    if delta == 0 && body >= self.end {
                        return Ok(None);
                    }
                    let len = self.word(body)? as usize;
                    if len == 0 {
                        return Ok(None);
                    }
                    self.pos = body + len;
                }
                TYPE_TIME_EXTEND => {
                    let ext = self.word(body)? as u64;
                    self.ts = self.ts.wrapping_add((ext << TS_SHIFT) + delta);
                    self.pos = body + 4;
                }
                TYPE_TIME_STAMP => {
                    let ext = self.word(body)? as u64;
                    self.ts = ((ext << TS_SHIFT) + delta) | (self.ts & TS_MSB);
                    self.pos = body + 4;
                }
                0 => {
                    // Large record: array[0] holds the payload length plus its own 4 bytes.
                    let len = self.word(body)? as usize;
                    if len < 4 {
                        return Err(self.err(format!("record length word {len} is below 4")));
                    }
                    let start = body + 4;
                    let len = (len - 4 + 3) & !3;
                    return self.data(start, len, delta);
                }
                n => {
                    let len = n as usize * 4;
                    return self.data(body, len, delta);
                }
            }
        }
    }

    fn data(
        &mut self,
        start: usize,
        len: usize,
        delta: u64,
    ) -> Result<Option<Record<'a>>, PageError> {
        if start + len > self.end {
            return Err(self.err(format!(
                "record of {len} bytes runs past the committed end of the page at {:#x}",
                self.end
            )));
        }
        let offset = self.pos;
        self.ts = self.ts.wrapping_add(delta);
        self.pos = start + len;
        Ok(Some(Record {
            ts: self.ts,
            data: &self.page[start..start + len],
            offset,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAYOUT: PageLayout = PageLayout {
        commit_size: 8,
        data_offset: 16,
        data_size: 4080,
    };
    const LE: ByteOrder = ByteOrder { big_endian: false };

    /// A page assembled by hand: header, then the given 32-bit words.
    fn page(ts: u64, flags: u64, words: &[u32]) -> Vec<u8> {
        let mut p = vec![0u8; 4096];
        p[0..8].copy_from_slice(&ts.to_le_bytes());
        let commit = words.len() as u64 * 4;
        p[8..16].copy_from_slice(&(commit | flags).to_le_bytes());
        for (i, w) in words.iter().enumerate() {
            p[16 + i * 4..20 + i * 4].copy_from_slice(&w.to_le_bytes());
        }
        p
    }

    #[test]
    fn deltas_extends_and_absolute_stamps() {
        let words = [
            // 8-byte record (type_len 2), delta 5
            (5 << 5) | 2,
            0xaaaa,
            0xbbbb,
            // time extend: delta 3, array[0] = 1 -> + (1 << 27) + 3
            (3 << 5) | 30,
            1,
            // 4-byte record, delta 0
            1,
            0xcccc,
            // absolute time stamp 7 (upper bits from array[0] = 0)
            (7 << 5) | 31,
            0,
            // type_len 0 record: length word 12 => 8 bytes of payload
            (2 << 5),
            12,
            0x1111,
            0x2222,
        ];
        let p = page(1000, 0, &words);
        let (h, mut it) = PageIter::new(&p, &LAYOUT, LE).unwrap();
        assert_eq!(h.missed, Missed::None);
        let r1 = it.next_record().unwrap().unwrap();
        assert_eq!((r1.ts, r1.data.len()), (1005, 8));
        let r2 = it.next_record().unwrap().unwrap();
        assert_eq!(r2.ts, 1005 + (1 << 27) + 3);
        assert_eq!(r2.data, &0xccccu32.to_le_bytes());
        let r3 = it.next_record().unwrap().unwrap();
        assert_eq!((r3.ts, r3.data.len()), (9, 8));
        assert!(it.next_record().unwrap().is_none());
    }

    #[test]
    fn missed_events_stored_after_data() {
        let mut p = page(0, MISSING_EVENTS | MISSING_STORED, &[1, 7]);
        p[24..32].copy_from_slice(&42u64.to_le_bytes());
        let h = read_header(&p, &LAYOUT, LE).unwrap();
        assert_eq!(h.missed, Missed::Count(42));
        let p = page(0, MISSING_EVENTS, &[1, 7]);
        assert_eq!(
            read_header(&p, &LAYOUT, LE).unwrap().missed,
            Missed::Unknown
        );
    }

    #[test]
    fn commit_beyond_page_is_an_error() {
        let mut p = page(0, 0, &[]);
        p[8..16].copy_from_slice(&5000u64.to_le_bytes());
        assert_eq!(read_header(&p, &LAYOUT, LE).unwrap_err().offset, 8);
    }

    #[test]
    fn record_past_commit_is_an_error() {
        // type_len 4 claims 16 bytes but only 4 are committed after the header word.
        let p = page(0, 0, &[4, 0]);
        let (_, mut it) = PageIter::new(&p, &LAYOUT, LE).unwrap();
        let e = it.next_record().unwrap_err();
        assert_eq!(e.offset, 16);
    }
}
