//! The records of a perf.data data section in file order, one round at a time, with the
//! records inside zstd-compressed ones (`perf record -z`) expanded in place. Plain
//! records are handed over as slices of the read buffer and compressed ones are
//! decompressed straight into a reused buffer: nothing is allocated or copied per record.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use zstd::stream::raw::{Decoder as ZstdDecoder, InBuffer, Operation, OutBuffer};

use super::error::{Position, Result, TraceError};

/// PERF_RECORD_FINISHED_ROUND: every record written after it is no earlier than the
/// latest of those written before the previous one.
const FINISHED_ROUND: u32 = 68;
/// PERF_RECORD_COMPRESSED and PERF_RECORD_COMPRESSED2: zstd data, the whole body or
/// after a u64 size.
const COMPRESSED: u32 = 81;
const COMPRESSED2: u32 = 83;
/// How much of the file is read at once.
const CHUNK: usize = 1 << 20;
/// Decompressed bytes made room for at once.
const ZSTD_STEP: usize = 1 << 18;

/// Where a record is in the file, for error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The record's header is at this file offset.
    File(u64),
    /// The record was decompressed: it starts in the compressed record at `record`, at
    /// byte `within` of the whole decompressed stream.
    Zstd {
        /// File offset of the compressed record.
        record: u64,
        /// Offset in the decompressed stream.
        within: u64,
    },
}

impl Origin {
    /// An error about this record.
    pub fn error(self, path: &Path, what: impl std::fmt::Display) -> TraceError {
        match self {
            Origin::File(at) => TraceError::malformed(path, Position::Offset(at), what.to_string()),
            Origin::Zstd { record, within } => TraceError::malformed(
                path,
                Position::Offset(record),
                format!(
                    "{what} (in the zstd-compressed record at this offset; the record starts \
                     at byte {within:#x} of the decompressed data)"
                ),
            ),
        }
    }
}

/// One record: its type and body (after the 8-byte header).
pub struct Record<'a> {
    pub kind: u32,
    pub body: &'a [u8],
    pub origin: Origin,
}

/// Reads a data section's records.
pub struct Records {
    path: PathBuf,
    file: File,
    /// File bytes read and not yet walked: `buf[pos..end]`, whose first is at offset
    /// `at`. The buffer is zeroed once and read into again and again.
    buf: Vec<u8>,
    end: usize,
    pos: usize,
    at: u64,
    /// Bytes of the data section not yet read into `buf`.
    unread: u64,
    zstd: Option<ZstdDecoder<'static>>,
    /// Decompressed bytes not yet walked (a record cut by the end of a compressed record
    /// waits here for the rest), the stream offset of the first, and the compressed
    /// record it came from.
    inner: Vec<u8>,
    inner_at: u64,
    inner_from: u64,
}

fn le_u16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn le_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

impl Records {
    /// The records of the data section `data` (offset, size) of `path`.
    pub fn new(path: &Path, data: (u64, u64)) -> Result<Records> {
        use std::io::{Seek, SeekFrom};
        let mut file = File::open(path).map_err(|e| TraceError::io(path, e))?;
        file.seek(SeekFrom::Start(data.0))
            .map_err(|e| TraceError::io(path, e))?;
        Ok(Records {
            path: path.into(),
            file,
            buf: vec![0; CHUNK],
            end: 0,
            pos: 0,
            at: data.0,
            unread: data.1,
            zstd: None,
            inner: Vec::new(),
            inner_at: 0,
            inner_from: 0,
        })
    }

    /// Makes at least `n` unwalked bytes available in `buf`, reading more of the data
    /// section; false when the section ends first.
    fn ensure(&mut self, n: usize) -> Result<bool> {
        if self.end - self.pos >= n {
            return Ok(true);
        }
        self.buf.copy_within(self.pos..self.end, 0);
        self.end -= self.pos;
        self.pos = 0;
        if self.buf.len() < n {
            self.buf.resize(n, 0);
        }
        while self.end < n && self.unread > 0 {
            let want = (self.buf.len() - self.end).min(self.unread as usize);
            let got = self
                .file
                .read(&mut self.buf[self.end..self.end + want])
                .map_err(|e| TraceError::io(&self.path, e))?;
            if got == 0 {
                return Err(TraceError::malformed(
                    &self.path,
                    Position::Offset(self.at + self.end as u64),
                    "the file ends inside its data section; the file is truncated",
                ));
            }
            self.end += got;
            self.unread -= got as u64;
        }
        Ok(self.end >= n)
    }

    /// Hands every record up to the next FINISHED_ROUND (not included) to `each`, in file
    /// order. Returns false when the data section ended instead.
    pub fn round(&mut self, each: &mut dyn FnMut(Record<'_>) -> Result<()>) -> Result<bool> {
        loop {
            if !self.ensure(8)? {
                if self.end > self.pos {
                    return Err(TraceError::malformed(
                        &self.path,
                        Position::Offset(self.at),
                        format!(
                            "the data section ends {} bytes into a record header",
                            self.end - self.pos
                        ),
                    ));
                }
                return Ok(false);
            }
            let h = &self.buf[self.pos..self.pos + 8];
            let (kind, size) = (le_u32(h, 0), le_u16(h, 6) as usize);
            if size < 8 {
                return Err(TraceError::malformed(
                    &self.path,
                    Position::Offset(self.at),
                    format!("perf.data (record header): a record of {size} bytes, less than its own 8-byte header"),
                ));
            }
            if !self.ensure(size)? {
                return Err(TraceError::malformed(
                    &self.path,
                    Position::Offset(self.at),
                    format!(
                        "perf.data (record header): a record of {size} bytes runs past the \
                         end of the data section"
                    ),
                ));
            }
            let at = self.at;
            let body = &self.buf[self.pos + 8..self.pos + size];
            self.pos += size;
            self.at += size as u64;
            match kind {
                FINISHED_ROUND => return Ok(true),
                COMPRESSED | COMPRESSED2 => {
                    let payload = if kind == COMPRESSED2 {
                        let n = body
                            .get(..8)
                            .map(|b| u64::from_le_bytes(b.try_into().unwrap()));
                        match n.and_then(|n| body.get(8..8usize.checked_add(n as usize)?)) {
                            Some(p) => p,
                            None => {
                                return Err(TraceError::malformed(
                                    &self.path,
                                    Position::Offset(at),
                                    "compressed record: its data size runs past the record",
                                ))
                            }
                        }
                    } else {
                        body
                    };
                    let carried = self.inner.len();
                    decompress(&mut self.zstd, payload, &mut self.inner).map_err(|e| {
                        TraceError::malformed(
                            &self.path,
                            Position::Offset(at),
                            format!("compressed record: zstd: {e}"),
                        )
                    })?;
                    self.walk_inner(at, carried, each)?;
                }
                _ => each(Record {
                    kind,
                    body,
                    origin: Origin::File(at),
                })?,
            }
        }
    }

    /// Hands the whole records decompressed so far to `each` and keeps the cut one. The
    /// first `carried` bytes came from before the compressed record at `at`.
    fn walk_inner(
        &mut self,
        at: u64,
        carried: usize,
        each: &mut dyn FnMut(Record<'_>) -> Result<()>,
    ) -> Result<()> {
        let d = &self.inner[..];
        let mut p = 0usize;
        while p + 8 <= d.len() {
            let size = le_u16(d, p + 6) as usize;
            let origin = Origin::Zstd {
                record: if p < carried { self.inner_from } else { at },
                within: self.inner_at + p as u64,
            };
            if size < 8 {
                return Err(origin.error(
                    &self.path,
                    format!("perf.data (record header): a record of {size} bytes, less than its own 8-byte header"),
                ));
            }
            if p + size > d.len() {
                break;
            }
            // FINISHED_ROUND inside compressed data (perf writes them outside) changes
            // nothing: the records are in order once the next round outside ends.
            each(Record {
                kind: le_u32(d, p),
                body: &d[p + 8..p + size],
                origin,
            })?;
            p += size;
        }
        if p >= carried {
            self.inner_from = at;
        }
        self.inner.drain(..p);
        self.inner_at += p as u64;
        Ok(())
    }
}

/// Decompresses `input`, one compressed record's payload, onto the end of `out`, with the
/// stream's decoder (made on first use: a compressed record's output may end inside a
/// record, which the next one continues).
fn decompress(
    zstd: &mut Option<ZstdDecoder<'static>>,
    input: &[u8],
    out: &mut Vec<u8>,
) -> std::io::Result<()> {
    let dec = match zstd {
        Some(d) => d,
        None => zstd.insert(ZstdDecoder::new()?),
    };
    let mut inb = InBuffer::around(input);
    loop {
        if out.capacity() - out.len() < ZSTD_STEP / 2 {
            out.reserve(ZSTD_STEP);
        }
        let start = out.len();
        let mut outb = OutBuffer::around_pos(out, start);
        dec.run(&mut inb, &mut outb)?;
        let full = outb.pos() == outb.capacity();
        if inb.pos() == input.len() && !full {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every record of the committed samples is walked, the compressed one's expanded,
    /// and both files hold samples and rounds.
    #[test]
    fn walks_plain_and_compressed_samples() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("traces/samples");
        for file in ["hackbench-perf.data", "hackbench-perf-z.data"] {
            let p = dir.join(file);
            let d = std::fs::read(&p).unwrap();
            let data = (
                u64::from_le_bytes(d[40..48].try_into().unwrap()),
                u64::from_le_bytes(d[48..56].try_into().unwrap()),
            );
            let mut r = Records::new(&p, data).unwrap();
            let (mut samples, mut rounds, mut compressed) = (0, 0, 0);
            let mut more = true;
            while more {
                more = r
                    .round(&mut |rec| {
                        samples += (rec.kind == 9) as usize;
                        compressed += matches!(rec.origin, Origin::Zstd { .. }) as usize;
                        assert!(rec.kind != COMPRESSED && rec.kind != COMPRESSED2);
                        Ok(())
                    })
                    .unwrap();
                rounds += more as usize;
            }
            assert!(samples > 5000, "{file}: {samples} samples");
            assert!(rounds > 2, "{file}: {rounds} rounds");
            assert_eq!(compressed > 0, file.contains("-z"), "{file}");
        }
    }
}
