//! Bounds-checked readers for the metadata of binary trace files, over a file or over
//! decompressed bytes, that know where their bytes came from, so every "ran out of data"
//! error names the file and offset.

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use super::error::{Position, Result, TraceError};

/// The reads the metadata parsers need; `take` and `error` are all an input provides.
pub trait Reader {
    /// Whether multi-byte integers are big-endian (set from the file's header).
    fn big_endian(&self) -> bool;
    /// Reads exactly `n` bytes; `what` names them for the error message.
    fn take(&mut self, n: usize, what: &str) -> Result<Vec<u8>>;
    /// An error at the current position.
    fn error(&self, what: &str) -> TraceError;
    /// Bytes left, to reject absurd lengths before allocating for them.
    fn remaining(&self) -> u64;

    /// One byte.
    fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.take(1, what)?[0])
    }
    /// A u16 in the input's byte order.
    fn u16(&mut self, what: &str) -> Result<u16> {
        let b: [u8; 2] = self.take(2, what)?.try_into().unwrap();
        Ok(if self.big_endian() {
            u16::from_be_bytes(b)
        } else {
            u16::from_le_bytes(b)
        })
    }
    /// A u32 in the input's byte order.
    fn u32(&mut self, what: &str) -> Result<u32> {
        let b: [u8; 4] = self.take(4, what)?.try_into().unwrap();
        Ok(if self.big_endian() {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        })
    }
    /// A u64 in the input's byte order.
    fn u64(&mut self, what: &str) -> Result<u64> {
        let b: [u8; 8] = self.take(8, what)?.try_into().unwrap();
        Ok(if self.big_endian() {
            u64::from_be_bytes(b)
        } else {
            u64::from_le_bytes(b)
        })
    }
    /// A NUL-terminated string (at most 4 KiB, longer is not a name).
    fn cstr(&mut self, what: &str) -> Result<String> {
        let mut s = Vec::new();
        loop {
            let b = self.u8(what)?;
            if b == 0 {
                break;
            }
            s.push(b);
            if s.len() > 4096 {
                return Err(self.error(&format!("{what}: no NUL within 4096 bytes")));
            }
        }
        String::from_utf8(s).map_err(|_| self.error(&format!("{what} is not UTF-8")))
    }
    /// A block preceded by its length as a u32 (`len_bytes` 4) or u64 (8).
    fn sized(&mut self, len_bytes: usize, what: &str) -> Result<Vec<u8>> {
        let n = if len_bytes == 4 {
            self.u32(what)? as u64
        } else {
            self.u64(what)?
        };
        if n > self.remaining() {
            return Err(self.error(&format!(
                "{what} claims {n} bytes, only {} remain",
                self.remaining()
            )));
        }
        self.take(n as usize, what)
    }
}

/// Reads from bytes in memory: a decompressed section, or a whole small input.
pub struct Bytes<'a> {
    data: &'a [u8],
    pos: usize,
    /// File offset of `data[0]`, or None when the bytes were decompressed.
    base: Option<u64>,
    /// What the bytes are, for errors in decompressed data.
    origin: String,
    path: &'a Path,
    /// Byte order of the integers; little-endian until the header says otherwise.
    pub big_endian: bool,
}

impl<'a> Bytes<'a> {
    /// A reader over `data`; `base` is its file offset (None for decompressed bytes, then
    /// `origin` names them in errors); `path` is the file errors name.
    pub fn new(data: &'a [u8], base: Option<u64>, origin: String, path: &'a Path) -> Bytes<'a> {
        Bytes {
            data,
            pos: 0,
            base,
            origin,
            path,
            big_endian: false,
        }
    }

    /// Whether every byte has been read.
    pub fn at_end(&self) -> bool {
        self.pos >= self.data.len()
    }
}

impl Reader for Bytes<'_> {
    fn big_endian(&self) -> bool {
        self.big_endian
    }
    fn remaining(&self) -> u64 {
        (self.data.len() - self.pos) as u64
    }
    fn take(&mut self, n: usize, what: &str) -> Result<Vec<u8>> {
        if self.data.len() - self.pos < n {
            return Err(self.error(&format!(
                "expected {what} ({n} bytes), found {} bytes before the end",
                self.data.len() - self.pos
            )));
        }
        let s = self.data[self.pos..self.pos + n].to_vec();
        self.pos += n;
        Ok(s)
    }
    fn error(&self, what: &str) -> TraceError {
        match self.base {
            Some(b) => {
                TraceError::malformed(self.path, Position::Offset(b + self.pos as u64), what)
            }
            None => TraceError::malformed(
                self.path,
                Position::Offset(self.pos as u64),
                format!("in the decompressed {}: {what}", self.origin),
            ),
        }
    }
}

/// Reads a file sequentially, seeking where the format points.
pub struct FileInput {
    r: BufReader<File>,
    pos: u64,
    len: u64,
    path: PathBuf,
    /// Byte order of the integers; little-endian until the header says otherwise.
    pub big_endian: bool,
}

impl FileInput {
    /// Opens `path` for reading from offset 0.
    pub fn open(path: &Path) -> Result<FileInput> {
        let f = File::open(path).map_err(|e| TraceError::io(path, e))?;
        let len = f.metadata().map_err(|e| TraceError::io(path, e))?.len();
        Ok(FileInput {
            r: BufReader::with_capacity(1 << 16, f),
            pos: 0,
            len,
            path: path.to_path_buf(),
            big_endian: false,
        })
    }

    /// The file's size in bytes.
    pub fn file_len(&self) -> u64 {
        self.len
    }

    /// The offset of the next byte to read.
    pub fn pos(&self) -> u64 {
        self.pos
    }

    /// The file being read.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Moves to offset `pos`; an offset past the end is a malformed file, named by `what`.
    pub fn seek(&mut self, pos: u64, what: &str) -> Result<()> {
        if pos > self.len {
            return Err(self.error(&format!(
                "{what} at offset {pos:#x} is beyond the end of the file ({:#x})",
                self.len
            )));
        }
        self.r
            .seek(SeekFrom::Start(pos))
            .map_err(|e| TraceError::io(&self.path, e))?;
        self.pos = pos;
        Ok(())
    }
}

impl Reader for FileInput {
    fn big_endian(&self) -> bool {
        self.big_endian
    }
    fn remaining(&self) -> u64 {
        self.len.saturating_sub(self.pos)
    }
    fn take(&mut self, n: usize, what: &str) -> Result<Vec<u8>> {
        if self.remaining() < n as u64 {
            return Err(self.error(&format!(
                "expected {what} ({n} bytes), but the file ends after {} bytes",
                self.remaining()
            )));
        }
        let mut v = vec![0u8; n];
        self.r
            .read_exact(&mut v)
            .map_err(|e| TraceError::io(&self.path, e))?;
        self.pos += n as u64;
        Ok(v)
    }
    fn error(&self, what: &str) -> TraceError {
        TraceError::malformed(&self.path, Position::Offset(self.pos), what)
    }
}
