//! Reader for the text forms people already have: the tracefs `trace` file,
//! `trace-cmd report` (plain, `-R` raw, `-t` nanoseconds) and `perf script`. Lines look
//! like `COMM-PID [CPU] [flags] SECS.FRAC: EVENT: FIELDS` (tracefs, trace-cmd) or
//! `COMM PID [CPU] SECS.FRAC: SYS:EVENT: FIELDS` (perf script). Fields are read by the
//! names the kernel's print formats use, and by trace-cmd's sched plugin forms.
//! Text is lossy where the printer was: microsecond timestamps unless printed in ns,
//! `ret=handled` for any non-zero irq return.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use super::error::{Position, Result, TraceError};
use super::event::{Comm, Event, EventKind, EventType, Wake};
use super::stream::{EventSource, LostWindow, ReadStats, SourceInfo};

/// The text flavour, told apart by the first event line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavour {
    /// The tracefs `trace` file: `COMM-PID [CPU] flags SECS.USECS: EVENT: FIELDS`.
    Tracefs,
    /// `trace-cmd report`: like tracefs, without the latency flags column.
    TraceCmd,
    /// `perf script`: `COMM PID[/TID] [CPU] SECS.FRAC: SYS:EVENT: FIELDS`.
    PerfScript,
}

/// A text trace, read a line at a time: header, comment and `[LOST N EVENTS]` lines are
/// taken for what they say, any other line must be an event.
pub struct TextTrace {
    path: PathBuf,
    lines: std::io::Lines<BufReader<File>>,
    lineno: u64,
    info: SourceInfo,
    stats: ReadStats,
    last_ts: BTreeMap<u32, u64>,
    flavour: Option<Flavour>,
    /// Lines read ahead by `open` while looking for the CPU count in the header.
    ahead: std::collections::VecDeque<std::io::Result<String>>,
    /// trace-cmd's `cpus=N`: the number of per-CPU buffers, so no event is on CPU N or
    /// beyond. (tracefs' `#P:N` counts the online CPUs, which need not be numbered
    /// 0..N, so it is only where the count starts.)
    buffers: Option<u32>,
}

/// Lines `open` reads looking for the header's CPU count before the first event line.
const HEADER_LINES: usize = 64;

/// The CPU count of a header line: `cpus=N` (trace-cmd report) or `... #P:N` (the
/// tracefs trace file); whether it is trace-cmd's buffer count.
fn header_cpus(line: &str) -> Option<(&str, bool)> {
    if let Some(n) = line.strip_prefix("cpus=") {
        return Some((n.trim(), true));
    }
    let at = line.strip_prefix('#')?.find("#P:")?;
    let n = &line[1 + at + 3..];
    let end = n.find(|c: char| !c.is_ascii_digit()).unwrap_or(n.len());
    Some((&n[..end], false))
}

/// Splits `prev_state` text (`S`, `R+`, `D|K`, or a raw number) into the TASK_REPORT value.
fn parse_state(s: &str) -> Option<i64> {
    if let Ok(n) = s.parse::<i64>() {
        return Some(n);
    }
    if let Some(h) = s.strip_prefix("0x") {
        return i64::from_str_radix(h, 16).ok();
    }
    let (flags, preempted) = match s.strip_suffix('+') {
        Some(f) => (f, true),
        None => (s, false),
    };
    let mut v = 0i64;
    for part in flags.split('|') {
        v |= match part {
            "R" => 0,
            "S" => 0x1,
            "D" => 0x2,
            "T" => 0x4,
            "t" => 0x8,
            "X" => 0x10,
            "Z" => 0x20,
            "P" => 0x40,
            "I" => 0x80,
            _ => return None,
        };
    }
    Some(if preempted {
        v | crate::abi::PREEMPTED
    } else {
        v
    })
}

/// Finds `key=` at the start of `s` or after a space, from `from` on.
fn find_key(s: &str, key: &str, from: usize) -> Option<usize> {
    let pat = format!("{key}=");
    let mut at = from;
    while let Some(i) = s[at..].find(&pat) {
        let i = at + i;
        if i == 0 || s.as_bytes()[i - 1] == b' ' {
            return Some(i);
        }
        at = i + 1;
    }
    None
}

/// Reads `k1=v1 k2=v2 ...` in this order; a value runs to the next key, so comms with
/// spaces survive. The last value ends at the first space.
fn fields<'a>(s: &'a str, keys: &[&str]) -> Option<Vec<&'a str>> {
    let mut out = Vec::with_capacity(keys.len());
    let mut at = find_key(s, keys[0], 0)?;
    for (i, k) in keys.iter().enumerate() {
        let vstart = at + k.len() + 1;
        let vend = match keys.get(i + 1) {
            Some(next) => {
                let n = find_key(s, next, vstart)?;
                at = n;
                n
            }
            None => s[vstart..].find(' ').map_or(s.len(), |e| vstart + e),
        };
        out.push(s[vstart..vend].trim_end());
    }
    Some(out)
}

fn num<T: std::str::FromStr>(s: &str) -> Option<T> {
    s.trim().parse().ok()
}

/// trace-cmd's sched_switch plugin names bit i of prev_state with the i-th letter of
/// "SDTtZXxW" (its own table, not the kernel's print format: 0x10 is Z, 0x80 is W) and
/// prints R when no bit is set, so the preempted bit 0x100 does not survive.
fn parse_plugin_state(s: &str) -> Option<i64> {
    if s == "R" {
        return Some(0);
    }
    let mut v = 0i64;
    for part in s.split('|') {
        let bit = "SDTtZXxW".find(part).filter(|_| part.len() == 1)?;
        v |= 1 << bit;
    }
    Some(v)
}

/// `comm:pid [prio]` as trace-cmd's sched plugin prints a task.
fn plugin_task(s: &str) -> Option<(Comm, i32, i32)> {
    let s = s.trim();
    let open = s.rfind(" [")?;
    let prio = num(s[open + 2..].strip_suffix(']')?)?;
    let (comm, pid) = s[..open].rsplit_once(':')?;
    Some((Comm::from_bytes(comm.as_bytes()), num(pid)?, prio))
}

fn wake_fields(body: &str) -> Option<Wake> {
    if let Some(v) = fields(body, &["comm", "pid", "prio", "target_cpu"]) {
        return Some(Wake {
            comm: Comm::from_bytes(v[0].as_bytes()),
            pid: num(v[1])?,
            prio: num(v[2])?,
            target_cpu: num(v[3])?,
        });
    }
    // trace-cmd plugin: `comm:pid [prio] [success=1 ]CPU:000`
    let cpu_at = body.rfind("CPU:")?;
    let mut task = body[..cpu_at].trim_end();
    if let Some(i) = task.rfind(" success=") {
        task = &task[..i];
    }
    let (comm, pid, prio) = plugin_task(task)?;
    Some(Wake {
        comm,
        pid,
        prio,
        target_cpu: num(&body[cpu_at + 4..])?,
    })
}

fn switch_fields(body: &str) -> Option<EventKind> {
    let keys = [
        "prev_comm",
        "prev_pid",
        "prev_prio",
        "prev_state",
        "next_comm",
        "next_pid",
        "next_prio",
    ];
    if let Some(v) = fields(body, &keys) {
        let state = v[3].trim_end_matches("==>").trim();
        return Some(EventKind::Switch {
            prev_comm: Comm::from_bytes(v[0].as_bytes()),
            prev_pid: num(v[1])?,
            prev_prio: num(v[2])?,
            prev_state: parse_state(state)?,
            next_comm: Comm::from_bytes(v[4].as_bytes()),
            next_pid: num(v[5])?,
            next_prio: num(v[6])?,
        });
    }
    // trace-cmd plugin: `comm:pid [prio] STATE ==> comm:pid [prio]`
    let (prev, next) = body.split_once(" ==> ")?;
    let (prev_task, state) = prev.rsplit_once(' ')?;
    let (prev_comm, prev_pid, prev_prio) = plugin_task(prev_task)?;
    let (next_comm, next_pid, next_prio) = plugin_task(next)?;
    Some(EventKind::Switch {
        prev_comm,
        prev_pid,
        prev_prio,
        prev_state: parse_plugin_state(state)?,
        next_comm,
        next_pid,
        next_prio,
    })
}

/// Decodes the field text of one event type.
fn parse_body(t: EventType, body: &str) -> Option<EventKind> {
    let comm = |s: &str| Comm::from_bytes(s.as_bytes());
    Some(match t {
        EventType::SchedSwitch => switch_fields(body)?,
        EventType::SchedWaking => EventKind::Waking(wake_fields(body)?),
        EventType::SchedWakeup => EventKind::Wakeup(wake_fields(body)?),
        EventType::SchedWakeupNew => EventKind::WakeupNew(wake_fields(body)?),
        EventType::SchedMigrateTask => {
            let v = fields(body, &["comm", "pid", "prio", "orig_cpu", "dest_cpu"])?;
            EventKind::Migrate {
                comm: comm(v[0]),
                pid: num(v[1])?,
                prio: num(v[2])?,
                orig_cpu: num(v[3])?,
                dest_cpu: num(v[4])?,
            }
        }
        EventType::SchedProcessFork => {
            let v = fields(
                body,
                &["parent_comm", "parent_pid", "child_comm", "child_pid"],
            )
            .or_else(|| fields(body, &["comm", "pid", "child_comm", "child_pid"]))?;
            EventKind::Fork {
                parent_comm: comm(v[0]),
                parent_pid: num(v[1])?,
                child_comm: comm(v[2]),
                child_pid: num(v[3])?,
            }
        }
        EventType::SchedProcessExit => {
            let (v, group_dead) = match fields(body, &["comm", "pid", "prio", "group_dead"]) {
                Some(v) => {
                    let g = match v[3] {
                        "true" | "1" => true,
                        "false" | "0" => false,
                        _ => return None,
                    };
                    (v, Some(g))
                }
                None => (fields(body, &["comm", "pid", "prio"])?, None),
            };
            EventKind::Exit {
                comm: comm(v[0]),
                pid: num(v[1])?,
                prio: num(v[2])?,
                group_dead,
            }
        }
        EventType::IrqHandlerEntry => {
            let i = find_key(body, "name", 0)?;
            let v = fields(&body[..i.saturating_sub(1)], &["irq"])?;
            EventKind::IrqEntry {
                irq: num(v[0])?,
                name: body[i + 5..].trim_end().into(),
            }
        }
        EventType::IrqHandlerExit => {
            let v = fields(body, &["irq", "ret"])?;
            EventKind::IrqExit {
                irq: num(v[0])?,
                ret: match v[1] {
                    "handled" => 1,
                    "unhandled" => 0,
                    n => num(n)?,
                },
            }
        }
        EventType::SoftirqEntry | EventType::SoftirqExit => {
            let vec = num(fields(body, &["vec"])?[0])?;
            if t == EventType::SoftirqEntry {
                EventKind::SoftirqEntry { vec }
            } else {
                EventKind::SoftirqExit { vec }
            }
        }
        // kprobe text: `(select_task_rq_fair+0x0/0x...) prev_cpu=1 wake_flags=0x8`.
        EventType::SelectEnter => {
            let v = fields(body, &["prev_cpu", "wake_flags"])?;
            EventKind::SelectEnter {
                prev_cpu: num(v[0])?,
                wake_flags: parse_flags(v[1])?,
            }
        }
        EventType::SelectExit => EventKind::SelectExit {
            cpu: num(fields(body, &["cpu"])?[0])?,
        },
        EventType::IdleScanEnter => EventKind::IdleScanEnter {
            target: num(fields(body, &["target"])?[0])?,
        },
        EventType::IdleScanExit => EventKind::IdleScanExit {
            cpu: num(fields(body, &["cpu"])?[0])?,
        },
    })
}

/// A kprobe's u32 argument as printed: hexadecimal with 0x, or decimal.
fn parse_flags(s: &str) -> Option<u32> {
    match s.strip_prefix("0x") {
        Some(h) => u32::from_str_radix(h, 16).ok(),
        None => num(s),
    }
}

/// `SECS.FRAC` to nanoseconds; FRAC has 6 digits (µs) or 9 (ns).
fn parse_ts(s: &str) -> Option<u64> {
    let (secs, frac) = s.split_once('.')?;
    let secs: u64 = secs.parse().ok()?;
    if frac.is_empty() || frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let f: u64 = frac.parse().ok()?;
    Some(secs * 1_000_000_000 + f * 10u64.pow(9 - frac.len() as u32))
}

/// One event line split into its parts.
struct Line<'a> {
    comm: &'a str,
    pid: i32,
    cpu: u32,
    ts: u64,
    event: &'a str,
    body: &'a str,
    flavour: Flavour,
}

/// Finds the `[CPU]` column: the first bracket holding only digits.
fn cpu_column(line: &str) -> Option<(usize, usize, u32)> {
    let b = line.as_bytes();
    let mut from = 0;
    while let Some(i) = line[from..].find('[') {
        let open = from + i;
        if let Some(j) = line[open..].find(']') {
            let close = open + j;
            let inner = &line[open + 1..close];
            if open > 0
                && !inner.is_empty()
                && inner.bytes().all(|c| c.is_ascii_digit())
                && b[open - 1] == b' '
            {
                let cpu: u32 = inner.parse().ok()?;
                return (cpu < super::MAX_CPUS).then_some((open, close, cpu));
            }
        }
        from = open + 1;
    }
    None
}

fn split_line(line: &str) -> Option<Line<'_>> {
    let (open, close, cpu) = cpu_column(line)?;
    let mut task = line[..open].trim();
    // record-tgid adds `(TGID)` after the task.
    if task.ends_with(')') {
        if let Some(p) = task.rfind(" (") {
            task = task[..p].trim_end();
        }
    }
    let (comm, pid, flavour) = match task.rsplit_once(char::is_whitespace) {
        Some((c, p))
            if p.split('/')
                .all(|x| !x.is_empty() && x.bytes().all(|b| b.is_ascii_digit())) =>
        {
            // perf script prints `comm pid` or `comm pid/tid`; the tid is the task.
            let tid = p.rsplit('/').next()?;
            (c.trim_end(), num(tid)?, Flavour::PerfScript)
        }
        _ => {
            let (c, p) = task.rsplit_once('-')?;
            (c, num(p)?, Flavour::TraceCmd)
        }
    };
    let rest = &line[close + 1..];
    // Optional latency flags (`d..2.`), then `SECS.FRAC:`.
    let mut at = 0;
    let mut ts = None;
    let mut flavour = flavour;
    for tok in rest.split_whitespace() {
        let pos = rest[at..].find(tok)? + at;
        at = pos + tok.len();
        if let Some(t) = tok.strip_suffix(':').and_then(parse_ts) {
            ts = Some(t);
            break;
        }
        if flavour == Flavour::TraceCmd {
            flavour = Flavour::Tracefs;
        }
    }
    let ts = ts?;
    let rest = rest[at..].trim_start();
    let colon = rest
        .find(": ")
        .or_else(|| rest.strip_suffix(':').map(|r| r.len()))?;
    let mut event = &rest[..colon];
    if let Some((_sys, name)) = event.split_once(':') {
        event = name;
    }
    let body = rest.get(colon + 2..).unwrap_or("").trim_end();
    Some(Line {
        comm,
        pid,
        cpu,
        ts,
        event,
        body,
        flavour,
    })
}

impl TextTrace {
    /// Opens a text trace and reads its header for the CPU count; the flavour is told
    /// from the first event line.
    pub fn open(path: &Path) -> Result<TextTrace> {
        let f = File::open(path).map_err(|e| TraceError::io(path, e))?;
        let mut t = TextTrace {
            path: path.into(),
            lines: BufReader::with_capacity(1 << 16, f).lines(),
            lineno: 0,
            info: SourceInfo {
                format: "text".into(),
                ..Default::default()
            },
            stats: ReadStats::default(),
            last_ts: BTreeMap::new(),
            flavour: None,
            ahead: Default::default(),
            buffers: None,
        };
        // The CPU count is in the header, before the first event: read it now, so that
        // a consumer sizing the machine from info() sees it (the lines are kept).
        while t.ahead.len() < HEADER_LINES {
            let Some(line) = t.lines.next() else { break };
            let header = match &line {
                Ok(l) => {
                    let l = l.trim();
                    if let Some((n, buffers)) = header_cpus(l) {
                        let pos = Position::Line(t.ahead.len() as u64 + 1);
                        let n = num::<u64>(n)
                            .ok_or_else(|| format!("CPU count {n:?} is not a number"))
                            .and_then(|n| {
                                super::check_cpu_count(n, "the header").map_err(|e| e.to_string())
                            })
                            .map_err(|what| TraceError::malformed(path, pos, what))?;
                        t.info.nr_cpus = Some(n);
                        if buffers {
                            t.buffers = Some(n);
                        }
                    }
                    l.is_empty()
                        || l.starts_with('#')
                        || l.starts_with("cpus=")
                        || l.starts_with("version =")
                        || l.starts_with("CPU ") && l.ends_with("is empty")
                }
                Err(_) => false,
            };
            t.ahead.push_back(line);
            if !header {
                break;
            }
        }
        Ok(t)
    }

    fn error(&self, what: String) -> TraceError {
        TraceError::malformed(&self.path, Position::Line(self.lineno), what)
    }

    /// `CPU:N [LOST M EVENTS]`, as trace-cmd report and the trace file print a loss.
    fn lost_line(&mut self, line: &str) -> bool {
        let Some(i) = line.find("[LOST ") else {
            return false;
        };
        let cpu = line
            .trim()
            .strip_prefix("CPU:")
            .and_then(|s| s.split_whitespace().next())
            .and_then(num::<u32>);
        let count = line[i + 6..].split_whitespace().next().and_then(num::<u64>);
        if let Some(cpu) = cpu {
            self.stats.lost.push(LostWindow {
                cpu,
                after_ts: self.last_ts.get(&cpu).copied(),
                before_ts: None,
                count,
            });
        }
        true
    }
}

impl EventSource for TextTrace {
    fn info(&self) -> &SourceInfo {
        &self.info
    }

    fn next_event(&mut self) -> Result<Option<Event>> {
        loop {
            let Some(line) = self.ahead.pop_front().or_else(|| self.lines.next()) else {
                // A loss line's window closes at the first later event on its CPU.
                return Ok(None);
            };
            self.lineno += 1;
            let line = line.map_err(|e| {
                if e.kind() == std::io::ErrorKind::InvalidData {
                    self.error("not UTF-8 text".into())
                } else {
                    TraceError::io(&self.path, e)
                }
            })?;
            let t = line.trim();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            if let Some(n) = t.strip_prefix("cpus=") {
                let n = num::<u64>(n.trim())
                    .ok_or_else(|| format!("CPU count {n:?} is not a number"))
                    .and_then(|n| super::check_cpu_count(n, "cpus=").map_err(|e| e.to_string()))
                    .map_err(|what| self.error(what))?;
                self.info.nr_cpus = Some(n);
                self.buffers = Some(n);
                continue;
            }
            if t.starts_with("version =") || t.starts_with("CPU ") && t.ends_with("is empty") {
                continue;
            }
            if self.lost_line(t) {
                continue;
            }
            let Some(l) = split_line(&line) else {
                return Err(self.error(format!(
                    "expected an event line `COMM-PID [CPU] SECS.USECS: EVENT: FIELDS`, found {:?}",
                    truncate(t)
                )));
            };
            if self.flavour.is_none() {
                self.flavour = Some(l.flavour);
                self.info.format = match l.flavour {
                    Flavour::Tracefs => "tracefs trace text",
                    Flavour::TraceCmd => "trace-cmd report text",
                    Flavour::PerfScript => "perf script text",
                }
                .into();
            }
            let Some(t) = EventType::from_name(l.event) else {
                *self.stats.unknown.entry(l.event.to_string()).or_default() += 1;
                continue;
            };
            let kind = parse_body(t, l.body).ok_or_else(|| {
                self.error(format!(
                    "cannot read the fields of {} from {:?}",
                    l.event,
                    truncate(l.body)
                ))
            })?;
            if let Some(n) = self.buffers.filter(|&n| l.cpu >= n) {
                return Err(self.error(format!(
                    "event on CPU {}, but the header's cpus={n} says the trace has {n} CPU buffers",
                    l.cpu
                )));
            }
            if self.info.nr_cpus.is_some_and(|n| l.cpu >= n) {
                // `#P:` counted the online CPUs; this one was numbered beyond them.
                self.info.nr_cpus = Some(l.cpu + 1);
            }
            self.info
                .comms
                .entry(l.pid)
                .or_insert_with(|| l.comm.to_string());
            for w in self.stats.lost.iter_mut().rev() {
                if w.cpu == l.cpu && w.before_ts.is_none() {
                    w.before_ts = Some(l.ts);
                }
            }
            self.last_ts.insert(l.cpu, l.ts);
            return Ok(Some(Event {
                ts: l.ts,
                cpu: l.cpu,
                common_pid: l.pid,
                kind,
            }));
        }
    }

    fn stats(&self) -> ReadStats {
        self.stats.clone()
    }
}

fn truncate(s: &str) -> &str {
    match s.char_indices().nth(100) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prev_state_letters() {
        assert_eq!(parse_state("R"), Some(0));
        assert_eq!(parse_state("R+"), Some(0x100));
        assert_eq!(parse_state("S"), Some(1));
        assert_eq!(parse_state("D|K"), None);
        assert_eq!(parse_state("I"), Some(0x80));
        assert_eq!(parse_state("256"), Some(256));
    }

    /// The probe events as tracefs prints kprobes: the probed location in parentheses,
    /// then the fetched arguments (u32 in hex).
    #[test]
    fn select_task_rq_probe_lines() {
        let enter = "       hackbench-283     [003] d..3.    61.771839: select_task_rq_enter: (select_task_rq_fair+0x0/0x5f0) prev_cpu=6 wake_flags=0x18";
        let l = split_line(enter).unwrap();
        assert_eq!((l.event, l.cpu), ("select_task_rq_enter", 3));
        assert_eq!(
            parse_body(EventType::SelectEnter, l.body),
            Some(EventKind::SelectEnter {
                prev_cpu: 6,
                wake_flags: 0x18
            })
        );
        let exit = "       hackbench-283     [003] d..3.    61.771851: select_task_rq_exit: (try_to_wake_up+0x1c4/0x5e0 <- select_task_rq_fair) cpu=2";
        let l = split_line(exit).unwrap();
        assert_eq!(
            parse_body(EventType::SelectExit, l.body),
            Some(EventKind::SelectExit { cpu: 2 })
        );
        // A flags value that is neither hex nor decimal is not an event.
        let enter = "       hackbench-283     [003] d..3.    61.771840: select_idle_cpu_enter_77: (select_idle_cpu+0x0/0x2f0) target=5";
        let l = split_line(enter).unwrap();
        assert_eq!(
            parse_body(EventType::from_name(l.event).unwrap(), l.body),
            Some(EventKind::IdleScanEnter { target: 5 })
        );
        let exit = "       hackbench-283     [003] d..3.    61.771849: select_idle_cpu_exit_77: (select_task_rq_fair+0x1c4/0x5f0 <- select_idle_cpu) cpu=-1";
        let l = split_line(exit).unwrap();
        assert_eq!(
            parse_body(EventType::from_name(l.event).unwrap(), l.body),
            Some(EventKind::IdleScanExit { cpu: -1 })
        );
        let bad = "x-1 [000] d..3. 1.000001: select_task_rq_enter: (f) prev_cpu=1 wake_flags=0xzz";
        let l = split_line(bad).unwrap();
        assert_eq!(parse_body(EventType::SelectEnter, l.body), None);
    }

    #[test]
    fn three_flavours_of_one_line() {
        let tracefs = "  Web Content-2152    [001] d..2.    87.018153: sched_waking: comm=rcu preempt pid=15 prio=120 target_cpu=000";
        let l = split_line(tracefs).unwrap();
        assert_eq!(
            (l.comm, l.pid, l.cpu, l.ts),
            ("Web Content", 2152, 1, 87_018_153_000)
        );
        assert_eq!(l.flavour, Flavour::Tracefs);
        let EventKind::Waking(w) = parse_body(EventType::SchedWaking, l.body).unwrap() else {
            panic!()
        };
        assert_eq!(
            (w.comm.to_string().as_str(), w.pid, w.target_cpu),
            ("rcu preempt", 15, 0)
        );

        let tc = "       hackbench-2155  [000]    87.019733883: sched_wakeup:          memfd:sealed-91:1060 [120] CPU:000";
        let l = split_line(tc).unwrap();
        assert_eq!(
            (l.pid, l.ts, l.flavour),
            (2155, 87_019_733_883, Flavour::TraceCmd)
        );
        let EventKind::Wakeup(w) = parse_body(EventType::SchedWakeup, l.body).unwrap() else {
            panic!()
        };
        assert_eq!(
            (w.comm.to_string().as_str(), w.pid, w.prio),
            ("memfd:sealed-91", 1060, 120)
        );

        let perf = "     migration/0    18 [000]   621.954088: sched:sched_migrate_task: comm=perf pid=6941 prio=120 orig_cpu=0 dest_cpu=1";
        let l = split_line(perf).unwrap();
        assert_eq!(
            (l.comm, l.pid, l.event, l.flavour),
            ("migration/0", 18, "sched_migrate_task", Flavour::PerfScript)
        );
    }

    #[test]
    fn plugin_switch() {
        let body = "bash:2152 [120] R ==> kworker/0:1:23 [120]";
        let EventKind::Switch {
            prev_pid,
            prev_state,
            next_comm,
            next_pid,
            ..
        } = parse_body(EventType::SchedSwitch, body).unwrap()
        else {
            panic!()
        };
        assert_eq!((prev_pid, prev_state, next_pid), (2152, 0, 23));
        assert_eq!(next_comm.to_string(), "kworker/0:1");
        assert_eq!(parse_plugin_state("W"), Some(0x80));
        assert_eq!(parse_plugin_state("Z"), Some(0x10));
        assert_eq!(parse_plugin_state("S|D"), Some(0x3));
    }
}
