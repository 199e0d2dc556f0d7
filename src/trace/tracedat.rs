//! Reader for trace-cmd's `trace.dat`, file versions 6 and 7 (trace-cmd.dat(5),
//! trace-cmd.dat.v7(5)). Version 7 splits the metadata into sections that may be
//! compressed (zstd or zlib, as trace-cmd 3.x writes them) and stores each CPU's ring
//! buffer as compressed chunks of whole pages. Metadata is read into memory; CPU data is
//! streamed a page (or a chunk) at a time.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::ahead::Ahead;
use super::bytes::{Bytes, FileInput, Reader};
use super::decode::Decoder;
use super::error::{Position, Result, TraceError};
use super::event::Event;
use super::format::{parse_event_format, parse_header_page, EventFormat, PageLayout};
use super::page::ByteOrder;
use super::stream::{
    CpuEvents, EventSource, FilePages, Merge, PagePos, PageSource, ReadStats, SourceInfo,
};

/// The first 10 bytes of every trace.dat: `\x17\x08D` and "tracing".
pub const MAGIC: &[u8; 10] = b"\x17\x08Dtracing";

/// Option ids shared by both versions (trace-cmd's TRACECMD_OPTION_*).
mod opt {
    pub const DONE: u16 = 0;
    pub const CPUSTAT: u16 = 2;
    pub const BUFFER: u16 = 3;
    pub const TRACECLOCK: u16 = 4;
    pub const UNAME: u16 = 5;
    pub const OFFSET: u16 = 7;
    pub const CPUCOUNT: u16 = 8;
    pub const VERSION: u16 = 9;
    pub const TIME_SHIFT: u16 = 12;
    pub const TSC2NSEC: u16 = 14;
    pub const STRINGS: u16 = 15;
    pub const HEADER_INFO: u16 = 16;
    pub const FTRACE_EVENTS: u16 = 17;
    pub const EVENT_FORMATS: u16 = 18;
    pub const CMDLINES: u16 = 21;
}

/// The compression a v7 file declares in its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    /// Sections and CPU data stored as they are (version 6, or v7 without compression).
    None,
    /// zstd, as trace-cmd 3.x writes by default.
    Zstd,
    /// zlib (deflate).
    Zlib,
}

impl Codec {
    fn name(self) -> &'static str {
        match self {
            Codec::None => "none",
            Codec::Zstd => "zstd",
            Codec::Zlib => "zlib",
        }
    }

    /// Decompresses one block, which must yield exactly `expect` bytes.
    fn decompress(self, data: &[u8], expect: usize) -> std::result::Result<Vec<u8>, BadBlock> {
        let out = match self {
            Codec::None => return Err(BadBlock::NotCompressed),
            Codec::Zstd => zstd::bulk::decompress(data, expect)?,
            Codec::Zlib => {
                let mut v = Vec::with_capacity(expect);
                flate2::read::ZlibDecoder::new(data)
                    .take(expect as u64 + 1)
                    .read_to_end(&mut v)?;
                v
            }
        };
        if out.len() != expect {
            return Err(BadBlock::Size {
                got: out.len(),
                expect,
            });
        }
        Ok(out)
    }
}

/// Why a compressed block does not decompress.
#[derive(Debug, thiserror::Error)]
enum BadBlock {
    #[error("block marked compressed in an uncompressed file")]
    NotCompressed,
    #[error("{0}")]
    Codec(#[from] std::io::Error),
    #[error("decompressed to {got} bytes, header says {expect}")]
    Size { got: usize, expect: usize },
}

/// Largest block a file may ask us to decompress into memory at once.
const MAX_BLOCK: u64 = 1 << 30;

/// One CPU's ring-buffer data in the file.
#[derive(Debug, Clone, Copy)]
struct CpuData {
    cpu: u32,
    offset: u64,
    size: u64,
}

/// Everything known about the file before its events are read.
struct Metadata {
    version: u32,
    order: ByteOrder,
    codec: Codec,
    layout: Option<PageLayout>,
    formats: Vec<EventFormat>,
    cpus: Vec<CpuData>,
    /// Whether the top instance's CPU data is stored as compressed chunks.
    data_compressed: bool,
    ts_offset: i64,
    info: SourceInfo,
}

/// Shared with perf.data, whose TRACING_DATA section has the v6 header layout.
pub(super) fn parse_header_info<R: Reader>(r: &mut R) -> Result<PageLayout> {
    if r.take(12, "\"header_page\\0\"")? != b"header_page\0" {
        return Err(r.error("expected the string \"header_page\""));
    }
    let text = r.sized(8, "header_page text")?;
    let layout = parse_header_page(&String::from_utf8_lossy(&text))
        .map_err(|e| r.error(&format!("header_page: {e}")))?;
    if r.take(13, "\"header_event\\0\"")? != b"header_event\0" {
        return Err(r.error("expected the string \"header_event\""));
    }
    r.sized(8, "header_event text")?;
    Ok(layout)
}

/// Shared with perf.data, whose TRACING_DATA section has the v6 header layout.
pub(super) fn parse_format_list<R: Reader>(
    r: &mut R,
    system: &str,
    out: &mut Vec<EventFormat>,
) -> Result<()> {
    let n = r.u32(&format!("number of {system} event formats"))?;
    for i in 0..n {
        let text = r.sized(8, &format!("{system} event format #{i}"))?;
        let f = parse_event_format(system, &String::from_utf8_lossy(&text))
            .map_err(|e| r.error(&format!("{system} event format #{i} (just read): {e}")))?;
        out.push(f);
    }
    Ok(())
}

/// Shared with perf.data, whose TRACING_DATA section has the v6 header layout.
pub(super) fn parse_event_systems<R: Reader>(r: &mut R, out: &mut Vec<EventFormat>) -> Result<()> {
    let n = r.u32("number of event systems")?;
    for _ in 0..n {
        let system = r.cstr("event system name")?;
        parse_format_list(r, &system, out)?;
    }
    Ok(())
}

/// Shared with perf.data, whose TRACING_DATA section has the v6 header layout.
pub(super) fn parse_cmdlines<R: Reader>(r: &mut R, into: &mut BTreeMap<i32, String>) -> Result<()> {
    let text = r.sized(8, "saved cmdlines")?;
    for line in String::from_utf8_lossy(&text).lines() {
        if let Some((pid, comm)) = line.trim_start().split_once(' ') {
            if let Ok(pid) = pid.parse() {
                into.insert(pid, comm.to_string());
            }
        }
    }
    Ok(())
}

fn cstring(data: &[u8]) -> String {
    let end = data.iter().position(|&b| b == 0).unwrap_or(data.len());
    String::from_utf8_lossy(&data[..end]).trim().to_string()
}

/// Reads `header` bytes: the options of both versions; returns the next options offset (v7).
fn parse_options<R: Reader>(
    r: &mut R,
    meta: &mut Metadata,
    sections: &mut Vec<(u16, u64)>,
) -> Result<u64> {
    loop {
        let id = r.u16("option id")?;
        if id == opt::DONE && meta.version < 7 {
            return Ok(0);
        }
        let size = r.u32("option size")? as u64;
        if size > r.remaining() {
            return Err(r.error(&format!(
                "option {id} claims {size} bytes, only {} remain",
                r.remaining()
            )));
        }
        let data = r.take(size as usize, "option data")?;
        let mut b = Bytes::new(&data, None, format!("option {id}"), Path::new(""));
        b.big_endian = meta.order.big_endian;
        let bad = |e: TraceError| r.error(&format!("option {id}: {e}"));
        match id {
            opt::DONE => {
                return b.u64("next options offset").map_err(bad);
            }
            opt::CPUSTAT => {
                let text = cstring(&data);
                let cpu = text
                    .lines()
                    .next()
                    .and_then(|l| l.strip_prefix("CPU: "))
                    .unwrap_or("?")
                    .to_string();
                meta.info.extra.insert(format!("cpustat.cpu{cpu}"), text);
            }
            opt::BUFFER => {
                let offset = b.u64("buffer offset").map_err(bad)?;
                let name = b.cstr("buffer name").map_err(bad)?;
                if meta.version >= 7 {
                    let clock = b.cstr("buffer clock").map_err(bad)?;
                    let _page_size = b.u32("buffer page size").map_err(bad)?;
                    let n = b.u32("buffer CPU count").map_err(bad)?;
                    if n > super::MAX_CPUS {
                        return Err(r.error(&format!("option {id}: {n} CPUs")));
                    }
                    let mut cpus = Vec::new();
                    for _ in 0..n {
                        cpus.push(CpuData {
                            cpu: b.u32("CPU id").map_err(bad)?,
                            offset: b.u64("CPU data offset").map_err(bad)?,
                            size: b.u64("CPU data size").map_err(bad)?,
                        });
                    }
                    if let Some(c) = cpus.iter().find(|c| c.cpu >= super::MAX_CPUS) {
                        return Err(r.error(&format!("option {id}: CPU id {}", c.cpu)));
                    }
                    if name.is_empty() {
                        meta.cpus = cpus;
                        meta.info.clock = Some(clock);
                        sections.push((opt::BUFFER, offset));
                    } else {
                        meta.info
                            .extra
                            .insert(format!("instance.{name}"), "present, not read".into());
                    }
                } else {
                    meta.info
                        .extra
                        .insert(format!("instance.{name}"), "present, not read".into());
                }
            }
            opt::TRACECLOCK => {
                let text = cstring(&data);
                if let Some(c) = text.split('[').nth(1).and_then(|s| s.split(']').next()) {
                    meta.info.clock.get_or_insert_with(|| c.to_string());
                }
            }
            opt::UNAME => {
                let text = cstring(&data);
                meta.info.kernel_release = text.split_whitespace().nth(2).map(str::to_string);
                meta.info.extra.insert("uname".into(), text);
            }
            opt::OFFSET => {
                let text = cstring(&data);
                meta.ts_offset = text
                    .parse()
                    .map_err(|_| r.error(&format!("OFFSET option {text:?} is not an integer")))?;
            }
            opt::CPUCOUNT => {
                let n = b.u32("CPU count").map_err(bad)?;
                if n > super::MAX_CPUS {
                    return Err(r.error(&format!("CPU count {n}")));
                }
                meta.info.nr_cpus = Some(n);
            }
            opt::VERSION => {
                meta.info.extra.insert("trace-cmd".into(), cstring(&data));
            }
            opt::TIME_SHIFT | opt::TSC2NSEC => {
                return Err(TraceError::Unsupported {
                    path: PathBuf::new(),
                    what: "host/guest time synchronisation and TSC-to-ns conversion \
                           options are not supported"
                        .into(),
                });
            }
            opt::HEADER_INFO..=opt::CMDLINES => {
                sections.push((id, b.u64("section offset").map_err(bad)?));
            }
            _ => {}
        }
    }
}

fn open_metadata(path: &Path) -> Result<(Metadata, FileInput)> {
    let mut r = FileInput::open(path)?;
    if r.file_len() == 0 {
        return Err(TraceError::malformed(
            path,
            Position::Offset(0),
            "empty file, expected a trace.dat header",
        ));
    }
    let magic = r.take(10, "trace.dat magic")?;
    if magic != MAGIC {
        return Err(TraceError::malformed(
            path,
            Position::Offset(0),
            "expected the trace.dat magic \\x17\\x08Dtracing",
        ));
    }
    let vtext = r.cstr("file version")?;
    let version: u32 = vtext
        .parse()
        .map_err(|_| r.error(&format!("file version {vtext:?} is not a number")))?;
    if !(6..=7).contains(&version) {
        return Err(TraceError::Unsupported {
            path: path.into(),
            what: format!("trace.dat file version {version} (versions 6 and 7 are read)"),
        });
    }
    let big_endian = match r.u8("endianness flag")? {
        0 => false,
        1 => true,
        e => return Err(r.error(&format!("endianness flag {e}, expected 0 or 1"))),
    };
    r.big_endian = big_endian;
    let long_size = r.u8("long size")?;
    if long_size != 4 && long_size != 8 {
        return Err(r.error(&format!("long size {long_size}, expected 4 or 8")));
    }
    let page_size = r.u32("page size")?;
    if !(512..=(1 << 20)).contains(&page_size) {
        return Err(r.error(&format!("page size {page_size} is not plausible")));
    }
    let mut meta = Metadata {
        version,
        order: ByteOrder { big_endian },
        codec: Codec::None,
        layout: None,
        formats: Vec::new(),
        cpus: Vec::new(),
        data_compressed: false,
        ts_offset: 0,
        info: SourceInfo::default(),
    };
    if version == 6 {
        read_v6(&mut r, &mut meta)?;
    } else {
        read_v7(&mut r, &mut meta)?;
    }
    meta.info.format = match meta.codec {
        Codec::None => format!("trace.dat v{version}"),
        c => format!("trace.dat v{version} ({})", c.name()),
    };
    meta.info
        .extra
        .insert("page_size".into(), page_size.to_string());
    if meta.layout.is_none() {
        return Err(r.error("file has no header_page description"));
    }
    Ok((meta, r))
}

fn read_v6(r: &mut FileInput, meta: &mut Metadata) -> Result<()> {
    meta.layout = Some(parse_header_info(r)?);
    parse_format_list(r, "ftrace", &mut meta.formats)?;
    parse_event_systems(r, &mut meta.formats)?;
    r.sized(4, "kallsyms")?;
    r.sized(4, "printk formats")?;
    parse_cmdlines(r, &mut meta.info.comms)?;
    let ncpus = r.u32("CPU count")?;
    if ncpus > super::MAX_CPUS {
        return Err(r.error(&format!(
            "CPU count {ncpus} is beyond the {} a kernel can have",
            super::MAX_CPUS
        )));
    }
    meta.info.nr_cpus = Some(ncpus);
    let mut tag = r.take(10, "section tag")?;
    if tag == b"options  \0" {
        parse_options(r, meta, &mut Vec::new())?;
        tag = r.take(10, "section tag")?;
    }
    if tag == b"latency  \0" {
        return Err(TraceError::Unsupported {
            path: r.path().into(),
            what: "latency-tracer trace.dat files hold no scheduler events".into(),
        });
    }
    if tag != b"flyrecord\0" {
        return Err(r.error("expected the tag \"flyrecord\""));
    }
    for cpu in 0..ncpus {
        let offset = r.u64("CPU data offset")?;
        let size = r.u64("CPU data size")?;
        meta.cpus.push(CpuData { cpu, offset, size });
    }
    Ok(())
}

/// Reads a v7 section header at `offset` and returns its (decompressed) content.
fn read_section(
    r: &mut FileInput,
    meta: &Metadata,
    offset: u64,
    want: u16,
) -> Result<(Vec<u8>, Option<u64>)> {
    r.seek(offset, "section")?;
    let id = r.u16("section id")?;
    if id != want {
        return Err(r.error(&format!("section id {id}, expected {want}")));
    }
    let flags = r.u16("section flags")?;
    r.u32("section description")?;
    let size = r.u64("section size")?;
    if size > r.remaining() {
        return Err(r.error(&format!(
            "section claims {size} bytes, only {} remain",
            r.remaining()
        )));
    }
    if flags & 1 == 0 {
        let base = r.pos();
        return Ok((r.take(size as usize, "section content")?, Some(base)));
    }
    let at = r.pos();
    let csize = r.u32("compressed size")? as u64;
    let usize_ = r.u32("uncompressed size")? as u64;
    if csize + 8 > size || usize_ > MAX_BLOCK {
        return Err(r.error(&format!(
            "compressed section sizes {csize}/{usize_} do not fit its {size} bytes"
        )));
    }
    let data = r.take(csize as usize, "compressed section")?;
    let out = meta.codec.decompress(&data, usize_ as usize).map_err(|e| {
        TraceError::malformed(r.path(), Position::Offset(at), format!("section {id}: {e}"))
    })?;
    Ok((out, None))
}

fn read_v7(r: &mut FileInput, meta: &mut Metadata) -> Result<()> {
    let name = r.cstr("compression name")?;
    let _cversion = r.cstr("compression version")?;
    meta.codec = match name.as_str() {
        "none" | "" => Codec::None,
        "zstd" => Codec::Zstd,
        "zlib" => Codec::Zlib,
        other => {
            return Err(TraceError::Unsupported {
                path: r.path().into(),
                what: format!("compression {other:?} (zstd and zlib are read)"),
            })
        }
    };
    let mut next = r.u64("first options offset")?;
    let mut sections = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut options_end = 0;
    while next != 0 {
        if !seen.insert(next) {
            return Err(r.error(&format!("options sections loop back to {next:#x}")));
        }
        let (data, base) = read_section(r, meta, next, opt::DONE)?;
        let path = r.path().to_path_buf();
        let mut b = Bytes::new(&data, base, format!("options section at {next:#x}"), &path);
        b.big_endian = meta.order.big_endian;
        next = parse_options(&mut b, meta, &mut sections).map_err(|e| relabel(e, r.path()))?;
        options_end = options_end.max(r.pos());
    }
    // trace-cmd writes the section-description strings last, right after the final
    // options section. Nothing here needs them, but reading them is what tells a file
    // cut short in its last bytes from a whole one.
    if r.file_len() > options_end {
        r.seek(options_end, "strings section")?;
        if r.u16("section id")? == opt::STRINGS {
            read_section(r, meta, options_end, opt::STRINGS)?;
        }
    }
    for (id, offset) in sections {
        if id == opt::BUFFER {
            r.seek(offset, "buffer section")?;
            r.u16("buffer section id")?;
            meta.data_compressed = r.u16("buffer section flags")? & 1 != 0;
            continue;
        }
        let (data, base) = read_section(r, meta, offset, id)?;
        let path = r.path().to_path_buf();
        let mut b = Bytes::new(&data, base, format!("section {id} at {offset:#x}"), &path);
        b.big_endian = meta.order.big_endian;
        match id {
            opt::HEADER_INFO => meta.layout = Some(parse_header_info(&mut b)?),
            opt::FTRACE_EVENTS => parse_format_list(&mut b, "ftrace", &mut meta.formats)?,
            opt::EVENT_FORMATS => parse_event_systems(&mut b, &mut meta.formats)?,
            opt::CMDLINES => parse_cmdlines(&mut b, &mut meta.info.comms)?,
            _ => {}
        }
    }
    Ok(())
}

/// Errors raised inside an option block carry no path; give them the file's.
fn relabel(e: TraceError, path: &Path) -> TraceError {
    match e {
        TraceError::Unsupported { what, .. } => TraceError::Unsupported {
            path: path.into(),
            what,
        },
        TraceError::Malformed { pos, what, .. } => TraceError::Malformed {
            path: path.into(),
            pos,
            what,
        },
        e => e,
    }
}

/// Compressed CPU data: a chunk count, then chunks of whole pages.
struct ChunkPages {
    file: BufReader<File>,
    path: PathBuf,
    codec: Codec,
    pos: u64,
    end: u64,
    chunks_left: u32,
    chunk: Vec<u8>,
    chunk_at: u64,
    next_in_chunk: usize,
    page_size: usize,
}

impl ChunkPages {
    fn err(&self, at: u64, what: String) -> TraceError {
        TraceError::malformed(&self.path, Position::Offset(at), what)
    }

    fn read_u32(&mut self, what: &str) -> Result<u32> {
        if self.pos + 4 > self.end {
            return Err(self.err(
                self.pos,
                format!("expected {what}, CPU data ends at {:#x}", self.end),
            ));
        }
        let mut b = [0u8; 4];
        self.file
            .read_exact(&mut b)
            .map_err(|e| TraceError::io(&self.path, e))?;
        self.pos += 4;
        Ok(u32::from_le_bytes(b))
    }
}

impl PageSource for ChunkPages {
    fn next_page(&mut self, page: &mut Vec<u8>) -> Result<Option<PagePos>> {
        while self.next_in_chunk + self.page_size > self.chunk.len() {
            if self.chunks_left == 0 {
                return Ok(None);
            }
            self.chunks_left -= 1;
            self.chunk_at = self.pos;
            let csize = self.read_u32("chunk compressed size")? as u64;
            let usize_ = self.read_u32("chunk uncompressed size")? as u64;
            if self.pos + csize > self.end || usize_ > MAX_BLOCK {
                return Err(self.err(
                    self.chunk_at,
                    format!(
                        "chunk of {csize} compressed bytes runs past the CPU data end at {:#x}",
                        self.end
                    ),
                ));
            }
            let mut data = vec![0u8; csize as usize];
            self.file
                .read_exact(&mut data)
                .map_err(|e| TraceError::io(&self.path, e))?;
            self.pos += csize;
            self.chunk = self
                .codec
                .decompress(&data, usize_ as usize)
                .map_err(|e| self.err(self.chunk_at, format!("chunk: {e}")))?;
            self.next_in_chunk = 0;
        }
        let at = self.next_in_chunk;
        self.next_in_chunk += self.page_size;
        page.clear();
        page.extend_from_slice(&self.chunk[at..at + self.page_size]);
        Ok(Some(PagePos::Chunk {
            chunk: self.chunk_at,
            within: at,
        }))
    }
}

/// An opened trace.dat: metadata read, events streamed on demand.
pub struct TraceDat {
    info: SourceInfo,
    /// Each CPU's pages decompressed and decoded on a thread of its own.
    merge: Merge<Ahead>,
    ts_offset: i64,
    /// The event formats of the file, for readers of its records.
    pub decoder: Arc<Decoder>,
}

impl TraceDat {
    /// Reads the metadata of `path` and positions one page stream per CPU on its data.
    pub fn open(path: &Path) -> Result<TraceDat> {
        let (meta, input) = open_metadata(path)?;
        let layout = meta.layout.expect("checked in open_metadata");
        let file_len = input.file_len();
        drop(input);
        let decoder = Arc::new(Decoder::new(&meta.formats, meta.order.big_endian));
        let mut cpus = Vec::new();
        for c in &meta.cpus {
            if c.size == 0 {
                continue;
            }
            if c.offset
                .checked_add(c.size)
                .is_none_or(|end| end > file_len)
            {
                return Err(TraceError::malformed(
                    path,
                    Position::Offset(c.offset),
                    format!(
                        "CPU {} data ({} bytes) runs past the end of the file at {file_len:#x}; \
                         the file is truncated",
                        c.cpu, c.size
                    ),
                ));
            }
            let mut f = File::open(path).map_err(|e| TraceError::io(path, e))?;
            f.seek(SeekFrom::Start(c.offset))
                .map_err(|e| TraceError::io(path, e))?;
            let file = BufReader::with_capacity(1 << 18, f);
            let pages: Box<dyn PageSource> = if meta.data_compressed {
                let mut p = ChunkPages {
                    file,
                    path: path.into(),
                    codec: meta.codec,
                    pos: c.offset,
                    // trace-cmd records the size of the chunks, not counting the chunk
                    // count word in front of them.
                    end: (c.offset + 4 + c.size).min(file_len),
                    chunks_left: 0,
                    chunk: Vec::new(),
                    chunk_at: c.offset,
                    next_in_chunk: 0,
                    page_size: layout.page_size(),
                };
                p.chunks_left = p.read_u32("chunk count")?;
                Box::new(p)
            } else {
                Box::new(FilePages::new(
                    file,
                    path,
                    c.offset,
                    c.offset + c.size,
                    layout.page_size(),
                ))
            };
            cpus.push(CpuEvents::new(
                c.cpu,
                path.into(),
                pages,
                decoder.clone(),
                layout,
                meta.order,
            ));
        }
        let cpus = cpus.into_iter().map(|c| Ahead::spawn(c, path)).collect();
        Ok(TraceDat {
            info: meta.info,
            merge: Merge::new(cpus),
            ts_offset: meta.ts_offset,
            decoder,
        })
    }
}

impl EventSource for TraceDat {
    fn info(&self) -> &SourceInfo {
        &self.info
    }

    fn next_event(&mut self) -> Result<Option<Event>> {
        let mut e = self.merge.next_event()?;
        if self.ts_offset != 0 {
            if let Some(e) = e.as_mut() {
                e.ts = e.ts.wrapping_add_signed(self.ts_offset);
            }
        }
        Ok(e)
    }

    fn next_batch(&mut self, out: &mut Vec<Event>, max: usize) -> Result<usize> {
        let start = out.len();
        let n = self.merge.next_batch(out, max)?;
        if self.ts_offset != 0 {
            for e in &mut out[start..] {
                e.ts = e.ts.wrapping_add_signed(self.ts_offset);
            }
        }
        Ok(n)
    }

    fn stats(&self) -> ReadStats {
        self.merge.stats()
    }
}
