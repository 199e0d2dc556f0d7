//! The perf backend: the same tracepoints through perf_event_open, one sampling event
//! per tracepoint and CPU (period 1, raw samples), all of a CPU's events writing into one
//! mmap'd ring buffer. One reader per CPU copies the records into a spool file; the
//! tracepoint payloads are decoded afterwards with the kernel's event formats, as for
//! perf.data. Useful where perf is allowed; tracefs is still read for the formats.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use perf_event_open_sys as sys;

use crate::trace::decode::{Decoded, Decoder};
use crate::trace::stream::CpuStream;
use crate::trace::{Event, LostWindow, Position, TraceError};

use super::CaptureError;

const SAMPLE_TYPE: u64 = sys::bindings::PERF_SAMPLE_IDENTIFIER as u64
    | sys::bindings::PERF_SAMPLE_TID as u64
    | sys::bindings::PERF_SAMPLE_TIME as u64
    | sys::bindings::PERF_SAMPLE_CPU as u64
    | sys::bindings::PERF_SAMPLE_RAW as u64;
const RECORD_SAMPLE: u32 = sys::bindings::PERF_RECORD_SAMPLE;
const RECORD_LOST: u32 = sys::bindings::PERF_RECORD_LOST;

fn os_err(what: String) -> CaptureError {
    CaptureError::Tracefs(format!("{what}: {}", std::io::Error::last_os_error()))
}

/// The perf events of one CPU and the ring buffer they share.
pub struct CpuRing {
    /// The CPU the events count on.
    pub cpu: u32,
    fds: Vec<i32>,
    base: *mut u8,
    map_len: usize,
    data_offset: usize,
    data_size: usize,
}

// The mapping is used by exactly one reader thread at a time.
unsafe impl Send for CpuRing {}

impl CpuRing {
    /// Opens one disabled sampling event per tracepoint id on `cpu`, all writing into
    /// the first one's ring buffer of `data_pages` pages (a power of two), stamped with
    /// CLOCK_MONOTONIC when `monotonic`, else perf's own clock.
    pub fn open(
        cpu: u32,
        ids: &[u64],
        data_pages: usize,
        monotonic: bool,
    ) -> Result<CpuRing, CaptureError> {
        let mut fds = Vec::new();
        for &id in ids {
            let mut attr: sys::bindings::perf_event_attr = unsafe { std::mem::zeroed() };
            attr.type_ = sys::bindings::PERF_TYPE_TRACEPOINT;
            attr.size = std::mem::size_of::<sys::bindings::perf_event_attr>() as u32;
            attr.config = id;
            attr.__bindgen_anon_1.sample_period = 1;
            attr.sample_type = SAMPLE_TYPE;
            attr.set_disabled(1);
            attr.set_sample_id_all(1);
            if monotonic {
                attr.set_use_clockid(1);
                attr.clockid = libc::CLOCK_MONOTONIC;
            }
            let fd = unsafe {
                sys::perf_event_open(
                    &mut attr,
                    -1,
                    cpu as i32,
                    -1,
                    sys::bindings::PERF_FLAG_FD_CLOEXEC as u64,
                )
            };
            if fd < 0 {
                let e = os_err(format!("perf_event_open(tracepoint {id}, CPU {cpu})"));
                for fd in fds {
                    unsafe { libc::close(fd) };
                }
                return Err(e);
            }
            fds.push(fd);
        }
        let page = 4096usize;
        let map_len = page * (1 + data_pages);
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fds[0],
                0,
            )
        };
        if base == libc::MAP_FAILED {
            let e = os_err(format!("mmap of CPU {cpu}'s perf buffer"));
            for fd in fds {
                unsafe { libc::close(fd) };
            }
            return Err(e);
        }
        let ring = CpuRing {
            cpu,
            fds,
            base: base as *mut u8,
            map_len,
            data_offset: page,
            data_size: page * data_pages,
        };
        for &fd in &ring.fds[1..] {
            if unsafe { sys::ioctls::SET_OUTPUT(fd, ring.fds[0]) } < 0 {
                return Err(os_err(format!("PERF_EVENT_IOC_SET_OUTPUT on CPU {cpu}")));
            }
        }
        Ok(ring)
    }

    /// Enables (true) or disables (false) every event of the ring
    /// (PERF_EVENT_IOC_ENABLE / PERF_EVENT_IOC_DISABLE).
    pub fn enable(&self, on: bool) -> Result<(), CaptureError> {
        for &fd in &self.fds {
            let r = unsafe {
                if on {
                    sys::ioctls::ENABLE(fd, 0)
                } else {
                    sys::ioctls::DISABLE(fd, 0)
                }
            };
            if r < 0 {
                return Err(os_err(format!("perf enable/disable on CPU {}", self.cpu)));
            }
        }
        Ok(())
    }

    fn header(&self) -> *mut sys::bindings::perf_event_mmap_page {
        self.base as *mut sys::bindings::perf_event_mmap_page
    }

    /// Copies every complete record between the tail and the head into `out`; returns
    /// the bytes copied.
    fn drain_into(&mut self, out: &mut impl Write) -> std::io::Result<u64> {
        let h = self.header();
        let head = unsafe { std::ptr::read_volatile(&(*h).data_head) };
        fence(Ordering::Acquire);
        let tail = unsafe { std::ptr::read_volatile(&(*h).data_tail) };
        let data =
            unsafe { std::slice::from_raw_parts(self.base.add(self.data_offset), self.data_size) };
        let (mut at, mut copied) = (tail, 0u64);
        while at < head {
            let start = (at % self.data_size as u64) as usize;
            let end = start + (head - at).min(self.data_size as u64) as usize;
            // Copy up to the wrap point, then from the start.
            let chunk_end = end.min(self.data_size);
            out.write_all(&data[start..chunk_end])?;
            let n = (chunk_end - start) as u64;
            at += n;
            copied += n;
        }
        fence(Ordering::Release);
        unsafe { std::ptr::write_volatile(&mut (*h).data_tail, head) };
        Ok(copied)
    }
}

impl Drop for CpuRing {
    fn drop(&mut self) {
        let _ = self.enable(false);
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.map_len) };
        for &fd in &self.fds {
            unsafe { libc::close(fd) };
        }
    }
}

/// A thread draining one CPU's ring into its spool until told to stop.
pub struct Reader {
    /// The CPU whose ring it drains.
    pub cpu: u32,
    /// The spool file it writes, raw perf records back to back.
    pub spool: PathBuf,
    handle: JoinHandle<Result<(CpuRing, u64), CaptureError>>,
}

impl Reader {
    /// Starts the draining thread; `stop` ends it once the ring is empty.
    pub fn start(
        mut ring: CpuRing,
        spool: PathBuf,
        stop: Arc<AtomicBool>,
    ) -> Result<Reader, CaptureError> {
        let f = File::create(&spool)
            .map_err(|e| CaptureError::Tracefs(format!("{}: {e}", spool.display())))?;
        let cpu = ring.cpu;
        let path = spool.clone();
        let handle = std::thread::spawn(move || {
            let mut out = BufWriter::with_capacity(1 << 20, f);
            let mut bytes = 0;
            let io = |e: std::io::Error| CaptureError::Tracefs(format!("{}: {e}", path.display()));
            loop {
                let stopping = stop.load(Ordering::Acquire);
                let n = ring.drain_into(&mut out).map_err(io)?;
                bytes += n;
                if stopping && n == 0 {
                    break;
                }
                if n == 0 {
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
            out.flush().map_err(io)?;
            Ok((ring, bytes))
        });
        Ok(Reader { cpu, spool, handle })
    }

    /// Waits for the drain; returns the bytes spooled (the ring is closed here).
    pub fn finish(self) -> Result<u64, CaptureError> {
        let (ring, bytes) = self.handle.join().map_err(|_| {
            CaptureError::Tracefs(format!("perf reader of CPU {} panicked", self.cpu))
        })??;
        drop(ring);
        Ok(bytes)
    }
}

/// One CPU's spooled perf records, decoded as a time-ordered stream.
pub struct SpoolEvents {
    cpu: u32,
    path: PathBuf,
    input: BufReader<File>,
    offset: u64,
    decoder: Arc<Decoder>,
    next: Option<Event>,
    last_ts: Option<u64>,
    lost: Vec<LostWindow>,
    unknown: BTreeMap<String, u64>,
    buf: Vec<u8>,
}

impl SpoolEvents {
    /// Reads the spool at `path` of `cpu`, decoding sample payloads with `decoder`.
    pub fn open(cpu: u32, path: &Path, decoder: Arc<Decoder>) -> Result<SpoolEvents, TraceError> {
        let f = File::open(path).map_err(|e| TraceError::io(path, e))?;
        Ok(SpoolEvents {
            cpu,
            path: path.into(),
            input: BufReader::with_capacity(1 << 18, f),
            offset: 0,
            decoder,
            next: None,
            last_ts: None,
            lost: Vec::new(),
            unknown: BTreeMap::new(),
            buf: Vec::new(),
        })
    }

    fn bad(&self, what: String) -> TraceError {
        TraceError::malformed(&self.path, Position::Offset(self.offset), what)
    }

    /// Reads records until the next event of the model.
    fn advance(&mut self) -> Result<Option<Event>, TraceError> {
        loop {
            let mut hdr = [0u8; 8];
            match self.input.read_exact(&mut hdr) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
                Err(e) => return Err(TraceError::io(&self.path, e)),
            }
            let rtype = u32::from_ne_bytes(hdr[0..4].try_into().unwrap());
            let size = u16::from_ne_bytes(hdr[6..8].try_into().unwrap()) as usize;
            if size < 8 {
                return Err(self.bad(format!("perf record of size {size}")));
            }
            self.buf.resize(size - 8, 0);
            self.input
                .read_exact(&mut self.buf)
                .map_err(|_| self.bad("perf record cut short".into()))?;
            let at = self.offset;
            self.offset += size as u64;
            let b = &self.buf;
            let u64_at = |o: usize| {
                b.get(o..o + 8)
                    .map(|s| u64::from_ne_bytes(s.try_into().unwrap()))
            };
            let u32_at = |o: usize| {
                b.get(o..o + 4)
                    .map(|s| u32::from_ne_bytes(s.try_into().unwrap()))
            };
            match rtype {
                RECORD_SAMPLE => {
                    // IDENTIFIER, TID (pid, tid), TIME, CPU (cpu, res), RAW (size, data).
                    let (Some(ts), Some(raw_len)) = (u64_at(16), u32_at(32)) else {
                        return Err(self.bad("sample record too short".into()));
                    };
                    let Some(raw) = b.get(36..36 + raw_len as usize) else {
                        return Err(self.bad("raw data runs past the sample".into()));
                    };
                    match self.decoder.decode(raw) {
                        Ok(Decoded::Known { common_pid, kind }) => {
                            self.last_ts = Some(ts);
                            return Ok(Some(Event {
                                ts,
                                cpu: self.cpu,
                                common_pid,
                                kind,
                            }));
                        }
                        Ok(Decoded::Unknown { id }) => {
                            let name = self.decoder.name_of(id).unwrap_or("unknown").to_string();
                            *self.unknown.entry(name).or_default() += 1;
                        }
                        Err(e) => {
                            return Err(TraceError::malformed(
                                &self.path,
                                Position::Offset(at),
                                e.0,
                            ));
                        }
                    }
                }
                RECORD_LOST => {
                    // id, lost, then the sample_id trailer: TID, TIME, CPU, IDENTIFIER.
                    let count = u64_at(8);
                    self.lost.push(LostWindow {
                        cpu: self.cpu,
                        after_ts: self.last_ts,
                        before_ts: u64_at(24),
                        count,
                    });
                }
                _ => {}
            }
        }
    }
}

impl CpuStream for SpoolEvents {
    fn cpu(&self) -> u32 {
        self.cpu
    }
    fn peek_ts(&mut self) -> crate::trace::Result<Option<u64>> {
        if self.next.is_none() {
            self.next = self.advance()?;
        }
        Ok(self.next.as_ref().map(|e| e.ts))
    }
    fn take(&mut self) -> crate::trace::Result<Event> {
        match self.next.take() {
            Some(e) => Ok(e),
            None => self
                .advance()?
                .ok_or_else(|| self.bad("no event to take".into())),
        }
    }
    fn lost(&self) -> &[LostWindow] {
        &self.lost
    }
    fn unknown_counts(&self, into: &mut BTreeMap<String, u64>) {
        for (k, v) in &self.unknown {
            *into.entry(k.clone()).or_default() += v;
        }
    }
}
