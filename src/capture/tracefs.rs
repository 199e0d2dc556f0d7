//! The tracefs backend: a private instance (`instances/sisreplay-PID`) so the top-level
//! buffer and other tracing users are left alone, the chosen events enabled there, and
//! one reader per CPU copying binary pages from `per_cpu/cpuN/trace_pipe_raw` into a
//! spool file. The spool is decoded afterwards by the same page decoder as trace.dat.

use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, ErrorKind, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::trace::format::{parse_event_format, parse_header_page, EventFormat, PageLayout};

use super::CaptureError;

/// Where tracefs is mounted on current kernels (debugfs's `tracing/` is the old path).
pub const TRACEFS: &str = "/sys/kernel/tracing";

fn io_err(path: &Path, e: std::io::Error) -> CaptureError {
    CaptureError::Tracefs(format!("{}: {e}", path.display()))
}

fn write_file(path: &Path, value: &str) -> Result<(), CaptureError> {
    fs::write(path, value).map_err(|e| io_err(path, e))
}

/// Reads a tracefs file with large reads. Some of them (events/header_page) do not keep
/// their position across short reads and end after the first one, and the standard
/// library's read_to_string starts with a 32-byte probe for files that report size 0.
pub fn read_kernel_text(path: &Path) -> std::io::Result<String> {
    let mut f = File::open(path)?;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    String::from_utf8(out).map_err(|e| std::io::Error::new(ErrorKind::InvalidData, e))
}

fn read_file(path: &Path) -> Result<String, CaptureError> {
    read_kernel_text(path).map_err(|e| io_err(path, e))
}

/// tracefs, mounted for the session if it was not; unmounted again on drop if so.
pub struct Mount {
    /// The mount point.
    pub root: PathBuf,
    mounted_here: bool,
}

impl Mount {
    /// Mounts tracefs at `root` unless it is already there (its `events/` exists).
    pub fn ensure(root: &Path) -> Result<Mount, CaptureError> {
        let mut mounted_here = false;
        if !root.join("events").exists() {
            let out = Command::new("mount")
                .args(["-t", "tracefs", "nodev"])
                .arg(root)
                .output()
                .map_err(|e| CaptureError::Tracefs(format!("mount: {e}")))?;
            if !out.status.success() {
                return Err(CaptureError::Tracefs(format!(
                    "tracefs is not mounted at {} and mounting it failed: {}",
                    root.display(),
                    String::from_utf8_lossy(&out.stderr).trim()
                )));
            }
            mounted_here = true;
        }
        Ok(Mount {
            root: root.into(),
            mounted_here,
        })
    }

    /// Whether this process mounted tracefs (and will unmount it).
    pub fn mounted_here(&self) -> bool {
        self.mounted_here
    }

    /// The page layout and the formats of `system/name` events, from the kernel; names
    /// the event that does not exist.
    pub fn formats(
        &self,
        events: &[String],
    ) -> Result<(PageLayout, Vec<EventFormat>), CaptureError> {
        let hp = self.root.join("events/header_page");
        let layout = parse_header_page(&read_file(&hp)?)
            .map_err(|e| CaptureError::Tracefs(format!("{}: {e}", hp.display())))?;
        let mut formats = Vec::new();
        for e in events {
            let p = self.root.join("events").join(e).join("format");
            if !p.exists() {
                return Err(CaptureError::Usage(format!(
                    "event {e} does not exist on this kernel (no {})",
                    p.display()
                )));
            }
            let system = e.split('/').next().unwrap_or("");
            let f = parse_event_format(system, &read_file(&p)?)
                .map_err(|err| CaptureError::Tracefs(format!("{}: {err}", p.display())))?;
            formats.push(f);
        }
        Ok((layout, formats))
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if self.mounted_here {
            let _ = Command::new("umount").arg(&self.root).output();
        }
    }
}

/// The trace clocks that give every CPU's events one time line, in the order a capture
/// prefers them: `mono` (the fast CLOCK_MONOTONIC, cheap) and `global` (kept in step
/// across CPUs at some cost). The usual default, `local`, is each CPU's own sched_clock,
/// which an emulator or an unstable TSC lets drift apart between CPUs, and the replay
/// orders events of different CPUs by their times.
pub const CONSISTENT_CLOCKS: [&str; 2] = ["mono", "global"];

/// Which clock to write to `trace_clock`, whose text (`[local] global counter ...`)
/// lists the clocks offered: `wanted` when offered (Err with the list when not), else the
/// first of [`CONSISTENT_CLOCKS`] offered; None leaves the kernel's.
pub fn choose_clock(offered: &str, wanted: Option<&str>) -> Result<Option<String>, String> {
    let names: Vec<&str> = offered
        .split_whitespace()
        .map(|c| c.trim_start_matches('[').trim_end_matches(']'))
        .collect();
    match wanted {
        Some(w) if names.contains(&w) => Ok(Some(w.to_string())),
        Some(_) => Err(names.join(" ")),
        None => Ok(CONSISTENT_CLOCKS
            .iter()
            .find(|c| names.contains(c))
            .map(|c| c.to_string())),
    }
}

/// A private tracefs instance with events enabled. Dropping it disables the events and
/// removes the instance.
pub struct Instance {
    /// The tracefs mount point the instance lives under.
    pub root: PathBuf,
    /// The instance's directory, `instances/sisreplay-PID`.
    pub dir: PathBuf,
    events: Vec<String>,
}

impl Instance {
    /// Creates the instance with the given per-CPU buffer under a mounted tracefs.
    pub fn create(mount: &Mount, buffer_kb: u32) -> Result<Instance, CaptureError> {
        let root = &mount.root;
        let dir = root
            .join("instances")
            .join(instance_name(std::process::id()));
        fs::create_dir(&dir).map_err(|e| io_err(&dir, e))?;
        let inst = Instance {
            root: root.clone(),
            dir,
            events: Vec::new(),
        };
        write_file(&inst.dir.join("tracing_on"), "0")?;
        write_file(&inst.dir.join("buffer_size_kb"), &buffer_kb.to_string())?;
        Ok(inst)
    }

    /// Enables `system/name` events in the instance; names the missing one otherwise.
    pub fn enable(&mut self, events: &[String]) -> Result<(), CaptureError> {
        for e in events {
            let p = self.dir.join("events").join(e).join("enable");
            if !p.exists() {
                return Err(CaptureError::Usage(format!(
                    "event {e} does not exist on this kernel (no {})",
                    p.display()
                )));
            }
            write_file(&p, "1")?;
            self.events.push(e.clone());
        }
        Ok(())
    }

    /// Writes the instance's `tracing_on`: starts (true) or stops (false) recording.
    pub fn set_tracing(&self, on: bool) -> Result<(), CaptureError> {
        write_file(&self.dir.join("tracing_on"), if on { "1" } else { "0" })
    }

    /// Sets the instance's trace clock to `wanted`, or by default to the first of
    /// [`CONSISTENT_CLOCKS`] this kernel offers (the kernel's own clock otherwise); an
    /// error names the clocks offered when `wanted` is not among them.
    pub fn set_clock(&self, wanted: Option<&str>) -> Result<(), CaptureError> {
        let path = self.dir.join("trace_clock");
        let offered = read_kernel_text(&path).map_err(|e| io_err(&path, e))?;
        match choose_clock(&offered, wanted) {
            Ok(Some(clock)) => write_file(&path, &clock),
            Ok(None) => Ok(()),
            Err(offered) => Err(CaptureError::Usage(format!(
                "trace clock {} is not one this kernel offers ({offered})",
                wanted.unwrap_or_default()
            ))),
        }
    }

    /// The instance's trace clock, the bracketed entry of `trace_clock`; None if unreadable.
    pub fn clock(&self) -> Option<String> {
        let t = read_kernel_text(&self.dir.join("trace_clock")).ok()?;
        t.split('[').nth(1)?.split(']').next().map(str::to_string)
    }

    /// The instance's per-CPU statistics file, as text.
    pub fn cpu_stats(&self, cpu: u32) -> Option<String> {
        read_kernel_text(&self.dir.join(format!("per_cpu/cpu{cpu}/stats"))).ok()
    }

    /// The `trace_pipe_raw` file of `cpu`: whole ring-buffer pages, consumed as read.
    pub fn pipe(&self, cpu: u32) -> PathBuf {
        self.dir.join(format!("per_cpu/cpu{cpu}/trace_pipe_raw"))
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = self.set_tracing(false);
        for e in &self.events {
            let _ = fs::write(self.dir.join("events").join(e).join("enable"), "0");
        }
        remove_instance(&self.dir);
    }
}

/// Stops an instance's tracing, disables its events and removes it (which frees its
/// buffers), retrying briefly while readers close. Whether it is gone.
fn remove_instance(dir: &Path) -> bool {
    let _ = fs::write(dir.join("tracing_on"), "0");
    let _ = fs::write(dir.join("events/enable"), "0");
    for _ in 0..100 {
        if fs::remove_dir(dir).is_ok() || !dir.exists() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// The name of this process's instance.
fn instance_name(pid: u32) -> String {
    format!("sisreplay-{pid}")
}

/// Removes what the capture of process `pid` made in tracefs: its instance and its probe
/// events. Returns a line for each thing removed (or that could not be).
pub fn remove_leftovers_of(root: &Path, pid: u32) -> Vec<String> {
    let mut done = Vec::new();
    let inst = root.join("instances").join(instance_name(pid));
    if inst.exists() {
        done.push(if remove_instance(&inst) {
            format!("removed tracefs instance {}", inst.display())
        } else {
            format!("could not remove tracefs instance {}", inst.display())
        });
    }
    let file = root.join("kprobe_events");
    let defined = read_kernel_text(&file).unwrap_or_default();
    for line in defined.lines() {
        // `p:sisreplay/select_task_rq_enter_1234 select_task_rq_fair ...`
        let Some(name) = line
            .split_whitespace()
            .next()
            .and_then(|t| t.split_once(':'))
            .and_then(|(_, n)| n.strip_prefix(PROBE_GROUP))
            .and_then(|n| n.strip_prefix('/'))
        else {
            continue;
        };
        if crate::stale::pid_suffix(name, '_') != Some(pid as i32) {
            continue;
        }
        let _ = fs::write(
            root.join("events")
                .join(PROBE_GROUP)
                .join(name)
                .join("enable"),
            "0",
        );
        let removed = (0..100).any(|_| {
            let ok = OpenOptions::new()
                .append(true)
                .open(&file)
                .and_then(|mut f| f.write_all(format!("-:{PROBE_GROUP}/{name}\n").as_bytes()))
                .is_ok();
            if !ok {
                std::thread::sleep(Duration::from_millis(20));
            }
            ok
        });
        done.push(if removed {
            format!("removed kprobe event {PROBE_GROUP}/{name}")
        } else {
            format!("could not remove kprobe event {PROBE_GROUP}/{name}")
        });
    }
    done
}

/// Finds what captures that are no longer running left in tracefs (an instance
/// `sisreplay-PID`, probe events `sisreplay/..._PID`, matched by the PID in the name),
/// and removes it, warning for each. A live capture's are left alone.
pub fn recover(root: &Path) {
    let mut pids = std::collections::BTreeSet::new();
    if let Ok(d) = fs::read_dir(root.join("instances")) {
        for e in d.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(pid) = name
                .strip_prefix("sisreplay-")
                .and_then(|p| p.parse::<i32>().ok())
            {
                pids.insert(pid);
            }
        }
    }
    if let Ok(d) = fs::read_dir(root.join("events").join(PROBE_GROUP)) {
        for e in d.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(pid) = crate::stale::pid_suffix(&name, '_') {
                pids.insert(pid);
            }
        }
    }
    for pid in pids {
        if !crate::stale::left_by_dead(pid) {
            continue;
        }
        for what in remove_leftovers_of(root, pid as u32) {
            eprintln!(
                "sisreplay: warning: {what}, left by capture process {pid}, which is no \
                 longer running"
            );
        }
    }
}

/// One number from a per_cpu stats file, e.g. `overrun` or `read events`.
pub fn stat(text: &str, key: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
}

/// A thread copying one CPU's pages into its spool file until told to stop, then
/// draining what is left.
pub struct Reader {
    /// The CPU whose pages it copies.
    pub cpu: u32,
    /// The spool file it writes, whole pages back to back.
    pub spool: PathBuf,
    handle: JoinHandle<Result<u64, CaptureError>>,
}

impl Reader {
    /// Opens `pipe` non-blocking and starts the copying thread; `page_size` is the
    /// sub-buffer size from header_page, `stop` ends it after a final drain.
    pub fn start(
        cpu: u32,
        pipe: PathBuf,
        spool: PathBuf,
        page_size: usize,
        stop: Arc<AtomicBool>,
    ) -> Result<Reader, CaptureError> {
        let mut input = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&pipe)
            .map_err(|e| io_err(&pipe, e))?;
        let out = File::create(&spool).map_err(|e| io_err(&spool, e))?;
        let spool_path = spool.clone();
        let handle = std::thread::spawn(move || -> Result<u64, CaptureError> {
            let mut out = BufWriter::with_capacity(1 << 20, out);
            let mut page = vec![0u8; page_size];
            let mut pages = 0u64;
            loop {
                // Read until the buffer is empty, then look at the stop flag: a stop seen
                // before an empty read still gets everything written before it.
                let stopping = stop.load(Ordering::Acquire);
                match input.read(&mut page) {
                    Ok(0) => {}
                    Ok(n) => {
                        // A short read is a partial page: keep the page layout.
                        page[n..].fill(0);
                        out.write_all(&page).map_err(|e| io_err(&spool_path, e))?;
                        pages += 1;
                        continue;
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(e) => return Err(io_err(&pipe, e)),
                }
                if stopping {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            out.flush().map_err(|e| io_err(&spool_path, e))?;
            Ok(pages)
        });
        Ok(Reader { cpu, spool, handle })
    }

    /// Waits for the reader to drain; returns the pages it wrote.
    pub fn finish(self) -> Result<u64, CaptureError> {
        self.handle
            .join()
            .map_err(|_| CaptureError::Tracefs(format!("reader of CPU {} panicked", self.cpu)))?
    }
}

/// The kprobe group `--search-latency` creates; its events decode as
/// [`crate::trace::EventType::SelectEnter`] and `SelectExit`.
pub const PROBE_GROUP: &str = "sisreplay";
/// The probed function: select_idle_sibling and select_idle_cpu are inlined into it on
/// the kernels seen (6.1 Debian), so its duration is the closest to the idle search that
/// a probe can see. Its arguments are (p, prev_cpu, wake_flags).
pub const PROBED: &str = "select_task_rq_fair";

/// The LLC scan, probed too where the kernel keeps it out of line (the rig's `noinline`
/// patch; inlined into select_task_rq_fair on stock 6.1 and 6.18). Its arguments are
/// (p, sd, has_idle_core, target).
pub const IDLE_SCAN: &str = "select_idle_cpu";

/// The registers holding the second, third and fourth argument at function entry.
#[cfg(target_arch = "x86_64")]
const ARGS: (&str, &str, &str) = ("%si", "%dx", "%cx");
#[cfg(target_arch = "aarch64")]
const ARGS: (&str, &str, &str) = ("%x1", "%x2", "%x3");
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const ARGS: (&str, &str, &str) = ("$arg2", "$arg3", "$arg4");

/// Kprobes on select_task_rq_fair (entry, and return with durations) and, where asked,
/// on select_idle_cpu (entry and return), defined in `kprobe_events` for the session and
/// removed on drop. The events themselves are enabled like any other, in the instance
/// or through perf.
pub struct Probes {
    file: PathBuf,
    /// The events defined so far.
    names: Vec<String>,
}

impl Probes {
    /// The names of the probe events, with this process's PID so that a dead capture's
    /// are recognised: select_task_rq_fair's entry, its return with `duration`, and
    /// select_idle_cpu's entry and return with `idle_scan`.
    pub fn names(duration: bool, idle_scan: bool) -> Vec<String> {
        let pid = std::process::id();
        let mut v = vec![format!("select_task_rq_enter_{pid}")];
        if duration {
            v.push(format!("select_task_rq_exit_{pid}"));
        }
        if idle_scan {
            v.push(format!("select_idle_cpu_enter_{pid}"));
            v.push(format!("select_idle_cpu_exit_{pid}"));
        }
        v
    }

    /// The `system/name` of the probe events defined.
    pub fn events(&self) -> Vec<String> {
        self.names
            .iter()
            .map(|n| format!("{PROBE_GROUP}/{n}"))
            .collect()
    }

    /// Defines the entry probe, with `duration` the return probe too, and with
    /// `idle_scan` the pair on select_idle_cpu.
    pub fn create(root: &Path, duration: bool, idle_scan: bool) -> Result<Probes, CaptureError> {
        let file = root.join("kprobe_events");
        let names = Probes::names(duration, idle_scan);
        if let Some(n) = names
            .iter()
            .find(|n| root.join("events").join(PROBE_GROUP).join(n).exists())
        {
            return Err(CaptureError::Tracefs(format!(
                "kprobe event {PROBE_GROUP}/{n} already exists (`echo '-:{PROBE_GROUP}/{n}' >> {}` \
                 removes it)",
                file.display()
            )));
        }
        let mut probes = Probes {
            file,
            names: Vec::new(),
        };
        let (prev, flags, target) = ARGS;
        let mut lines = vec![format!(
            "p:{PROBE_GROUP}/{} {PROBED} prev_cpu={prev}:s32 wake_flags={flags}:u32",
            names[0]
        )];
        let mut rest = names[1..].iter();
        if duration {
            let n = rest.next().expect("named above");
            lines.push(format!("r:{PROBE_GROUP}/{n} {PROBED} cpu=$retval:s32"));
        }
        if idle_scan {
            let (enter, exit) = (rest.next(), rest.next());
            let (enter, exit) = (enter.expect("named above"), exit.expect("named above"));
            lines.push(format!(
                "p:{PROBE_GROUP}/{enter} {IDLE_SCAN} target={target}:s32"
            ));
            lines.push(format!(
                "r:{PROBE_GROUP}/{exit} {IDLE_SCAN} cpu=$retval:s32"
            ));
        }
        for (line, name) in lines.iter().zip(&names) {
            probes.append(line)?;
            probes.names.push(name.clone());
        }
        Ok(probes)
    }

    fn append(&self, line: &str) -> Result<(), CaptureError> {
        let mut f = OpenOptions::new()
            .append(true)
            .open(&self.file)
            .map_err(|e| io_err(&self.file, e))?;
        f.write_all(format!("{line}\n").as_bytes())
            .map_err(|e| io_err(&self.file, e))
    }
}

impl Drop for Probes {
    fn drop(&mut self) {
        // Removal fails while an event is still enabled somewhere; the instance and perf
        // fds are gone by now, but perf releases them asynchronously, so retry briefly.
        let events = self.file.with_file_name("events").join(PROBE_GROUP);
        for name in self.names.iter().rev() {
            for _ in 0..50 {
                if !events.join(name).exists()
                    || self.append(&format!("-:{PROBE_GROUP}/{name}")).is_ok()
                {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The clock a capture asks for, from `trace_clock` as 6.18 and an older kernel
    /// write it.
    #[test]
    fn the_capture_prefers_a_clock_consistent_across_cpus() {
        let v618 = "[local] global counter uptime perf mono mono_raw boot tai x86-tsc\n";
        assert_eq!(choose_clock(v618, None), Ok(Some("mono".into())));
        let old = "[local] global counter uptime perf\n";
        assert_eq!(choose_clock(old, None), Ok(Some("global".into())));
        assert_eq!(choose_clock("[local] counter", None), Ok(None));
        // Asked for: taken when offered, the current one included.
        assert_eq!(choose_clock(v618, Some("local")), Ok(Some("local".into())));
        assert_eq!(
            choose_clock(old, Some("boot")),
            Err("local global counter uptime perf".into())
        );
    }

    /// Probe events are found by the PID in their name and removed through
    /// kprobe_events only when that PID is not running (a stand-in tracefs directory: the
    /// machines here have no kprobe_events to try it on).
    #[test]
    fn probes_of_dead_captures_are_removed() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        let mut c = std::process::Command::new("true").spawn().unwrap();
        let dead = c.id();
        c.wait().unwrap();
        let me = std::process::id();
        let defined = format!(
            "p:{PROBE_GROUP}/select_task_rq_enter_{dead} select_task_rq_fair prev_cpu=%si:s32\n\
             r:{PROBE_GROUP}/select_task_rq_exit_{dead} select_task_rq_fair cpu=$retval:s32\n\
             p:{PROBE_GROUP}/select_task_rq_enter_{me} select_task_rq_fair prev_cpu=%si:s32\n\
             p:other/select_task_rq_enter_{dead} select_task_rq_fair\n"
        );
        fs::write(r.join("kprobe_events"), &defined).unwrap();
        for n in [
            format!("select_task_rq_enter_{dead}"),
            format!("select_task_rq_exit_{dead}"),
            format!("select_task_rq_enter_{me}"),
        ] {
            fs::create_dir_all(r.join("events").join(PROBE_GROUP).join(n)).unwrap();
        }
        fs::create_dir_all(r.join("instances")).unwrap();
        recover(r);
        let after = fs::read_to_string(r.join("kprobe_events")).unwrap();
        let appended: Vec<&str> = after[defined.len()..].lines().collect();
        assert_eq!(
            appended,
            vec![
                format!("-:{PROBE_GROUP}/select_task_rq_enter_{dead}"),
                format!("-:{PROBE_GROUP}/select_task_rq_exit_{dead}"),
            ]
        );
        // The names decode as the probe events.
        assert_eq!(
            crate::trace::EventType::from_name(&format!("select_task_rq_exit_{dead}")),
            Some(crate::trace::EventType::SelectExit)
        );
        assert_eq!(crate::trace::EventType::from_name("sched_switch_12"), None);
    }

    /// With durations and an out-of-line select_idle_cpu, four probes are defined, in the
    /// kprobe_events syntax (target is select_idle_cpu's fourth argument), enabled as
    /// four events of the group, and their names decode as the four probe types; without
    /// durations only the entry probe of select_task_rq_fair.
    #[test]
    fn the_idle_scan_is_probed_where_it_is_out_of_line() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        fs::write(r.join("kprobe_events"), "").unwrap();
        let me = std::process::id();
        let p = Probes::create(r, true, true).unwrap();
        let (prev, flags, target) = ARGS;
        assert_eq!(
            fs::read_to_string(r.join("kprobe_events")).unwrap(),
            format!(
                "p:{PROBE_GROUP}/select_task_rq_enter_{me} select_task_rq_fair prev_cpu={prev}:s32 wake_flags={flags}:u32\n\
                 r:{PROBE_GROUP}/select_task_rq_exit_{me} select_task_rq_fair cpu=$retval:s32\n\
                 p:{PROBE_GROUP}/select_idle_cpu_enter_{me} select_idle_cpu target={target}:s32\n\
                 r:{PROBE_GROUP}/select_idle_cpu_exit_{me} select_idle_cpu cpu=$retval:s32\n"
            )
        );
        use crate::trace::EventType;
        let types: Vec<_> = p
            .events()
            .iter()
            .map(|e| EventType::from_name(e.strip_prefix("sisreplay/").unwrap()))
            .collect();
        assert_eq!(
            types,
            [
                EventType::SelectEnter,
                EventType::SelectExit,
                EventType::IdleScanEnter,
                EventType::IdleScanExit
            ]
            .map(Some)
        );
        std::mem::forget(p);
        fs::write(r.join("kprobe_events"), "").unwrap();
        let p = Probes::create(r, false, false).unwrap();
        assert_eq!(
            p.events(),
            vec![format!("sisreplay/select_task_rq_enter_{me}")]
        );
        std::mem::forget(p);
    }
}
