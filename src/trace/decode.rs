//! Turns raw tracepoint records into [`Event`](super::event::Event)s using the field
//! layout of each event's own format description, so a kernel that moves or retypes a
//! field (comm became a `__data_loc` string in v6.16) is read correctly without code
//! changes.

use super::event::{Comm, EventKind, EventType, Wake};
use super::format::{EventFormat, Field, Placement};

/// Where one field lives in a record, resolved once per event type.
#[derive(Debug, Clone, Copy)]
struct Loc {
    offset: usize,
    size: usize,
    signed: bool,
    placement: Placement,
}

impl Loc {
    fn of(f: &Field) -> Loc {
        Loc {
            offset: f.offset,
            size: f.size,
            signed: f.signed,
            placement: f.placement,
        }
    }
}

/// The resolved fields of one known event type.
#[derive(Debug, Clone)]
enum Layout {
    Switch {
        prev_comm: Loc,
        prev_pid: Loc,
        prev_prio: Loc,
        prev_state: Loc,
        next_comm: Loc,
        next_pid: Loc,
        next_prio: Loc,
    },
    Wake(EventType, [Loc; 4]),
    Migrate([Loc; 5]),
    Fork([Loc; 4]),
    Exit([Loc; 3], Option<Loc>),
    IrqEntry(Loc, Loc),
    IrqExit(Loc, Loc),
    Softirq(EventType, Loc),
    SelectEnter(Loc, Loc),
    SelectExit(Loc),
    IdleScan(EventType, Loc),
}

/// What a record turned out to be.
#[derive(Debug)]
pub enum Decoded {
    /// A record of a type the model reads, decoded.
    Known {
        /// The record's common_pid: the task running when it was written (0 is idle).
        common_pid: i32,
        /// The tracepoint and its fields.
        kind: EventKind,
    },
    /// An event type this model does not use; counted by name and skipped.
    Unknown {
        /// The record's common_type: its event ID in this trace's formats.
        id: u16,
    },
}

/// Why a record could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(pub String);

/// What went wrong inside a record, put in words only once decoding has failed: a
/// plain value keeps the field readers' results in registers.
#[derive(Debug, Clone, Copy)]
enum Fault {
    /// A record of `len` bytes too short for the field at `loc`.
    Short(usize, Loc),
    /// An integer field of this many bytes.
    OddWidth(usize),
    /// A string at start..end outside a record of `len` bytes.
    Outside(usize, usize, usize),
}

impl From<Fault> for DecodeError {
    #[cold]
    fn from(f: Fault) -> DecodeError {
        DecodeError(match f {
            Fault::Short(len, loc) => format!(
                "record of {len} bytes too short for a field at {}+{}",
                loc.offset, loc.size
            ),
            Fault::OddWidth(n) => format!("integer field of {n} bytes"),
            Fault::Outside(start, end, len) => {
                format!("string at {start}..{end} outside a record of {len} bytes")
            }
        })
    }
}

/// Decodes records of one trace, keyed by the `common_type` id each record starts with.
#[derive(Debug, Clone)]
pub struct Decoder {
    big_endian: bool,
    common_type: Loc,
    common_pid: Loc,
    /// Per event id: its layout and the record length every inline field fits in.
    layouts: Vec<Option<(Layout, usize)>>,
    /// Per event id: `system:name`, with the reason for a model event whose format
    /// lacks a field the model needs (its records are then counted as skipped under that
    /// name, so the reason reaches meta.json and `info`).
    names: Vec<Option<String>>,
}

/// A model event whose format lacks a field the model reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{event} has no field `{field}`")]
struct MissingField {
    /// `system:name` of the event.
    event: String,
    field: &'static str,
}

fn find(fmt: &EventFormat, field: &'static str) -> Result<Loc, MissingField> {
    fmt.field(field).map(Loc::of).ok_or_else(|| MissingField {
        event: format!("{}:{}", fmt.system, fmt.name),
        field,
    })
}

fn layout_for(fmt: &EventFormat, t: EventType) -> Result<Layout, MissingField> {
    let f = |n| find(fmt, n);
    Ok(match t {
        EventType::SchedSwitch => Layout::Switch {
            prev_comm: f("prev_comm")?,
            prev_pid: f("prev_pid")?,
            prev_prio: f("prev_prio")?,
            prev_state: f("prev_state")?,
            next_comm: f("next_comm")?,
            next_pid: f("next_pid")?,
            next_prio: f("next_prio")?,
        },
        EventType::SchedWaking | EventType::SchedWakeup | EventType::SchedWakeupNew => {
            Layout::Wake(t, [f("comm")?, f("pid")?, f("prio")?, f("target_cpu")?])
        }
        EventType::SchedMigrateTask => Layout::Migrate([
            f("comm")?,
            f("pid")?,
            f("prio")?,
            f("orig_cpu")?,
            f("dest_cpu")?,
        ]),
        EventType::SchedProcessFork => Layout::Fork([
            f("parent_comm")?,
            f("parent_pid")?,
            f("child_comm")?,
            f("child_pid")?,
        ]),
        EventType::SchedProcessExit => Layout::Exit(
            [f("comm")?, f("pid")?, f("prio")?],
            fmt.field("group_dead").map(Loc::of),
        ),
        EventType::IrqHandlerEntry => Layout::IrqEntry(f("irq")?, f("name")?),
        EventType::IrqHandlerExit => Layout::IrqExit(f("irq")?, f("ret")?),
        EventType::SoftirqEntry | EventType::SoftirqExit => Layout::Softirq(t, f("vec")?),
        EventType::SelectEnter => Layout::SelectEnter(f("prev_cpu")?, f("wake_flags")?),
        EventType::SelectExit => Layout::SelectExit(f("cpu")?),
        EventType::IdleScanEnter => Layout::IdleScan(t, f("target")?),
        EventType::IdleScanExit => Layout::IdleScan(t, f("cpu")?),
    })
}

impl Decoder {
    /// Builds a decoder from every format the trace carries. Events outside the model
    /// are kept by name only, so they can be counted.
    pub fn new(formats: &[EventFormat], big_endian: bool) -> Decoder {
        let max_id = formats.iter().map(|f| f.id as usize).max().unwrap_or(0);
        let mut layouts = vec![None; max_id + 1];
        let mut names = vec![None; max_id + 1];
        let mut common_type = Loc {
            offset: 0,
            size: 2,
            signed: false,
            placement: Placement::Inline,
        };
        let mut common_pid = Loc {
            offset: 4,
            size: 4,
            signed: true,
            placement: Placement::Inline,
        };
        for fmt in formats {
            names[fmt.id as usize] = Some(format!("{}:{}", fmt.system, fmt.name));
            if let Some(f) = fmt.field("common_type") {
                common_type = Loc::of(f);
            }
            if let Some(f) = fmt.field("common_pid") {
                common_pid = Loc::of(f);
            }
            let Some(t) = EventType::from_name(&fmt.name).filter(|t| t.system() == fmt.system)
            else {
                continue;
            };
            match layout_for(fmt, t) {
                Ok(l) => {
                    let min_len = fmt
                        .fields
                        .iter()
                        .map(|f| f.offset + f.size)
                        .max()
                        .unwrap_or(0);
                    layouts[fmt.id as usize] = Some((l, min_len))
                }
                Err(why) => {
                    names[fmt.id as usize] =
                        Some(format!("{}:{} (unusable: {why})", fmt.system, fmt.name))
                }
            }
        }
        Decoder {
            big_endian,
            common_type,
            common_pid,
            layouts,
            names,
        }
    }

    /// `system:name` of an event id, as listed in the trace's formats.
    pub fn name_of(&self, id: u16) -> Option<&str> {
        self.names.get(id as usize).and_then(|n| n.as_deref())
    }

    /// Whether records of this id decode to an event of the model.
    #[inline]
    pub fn is_known(&self, id: u16) -> bool {
        matches!(self.layouts.get(id as usize), Some(Some(_)))
    }

    /// The event ID (common_type) of a record's payload.
    #[inline]
    pub fn event_id(&self, data: &[u8]) -> Result<u16, DecodeError> {
        Ok(self.int(data, self.common_type)? as u16)
    }

    #[inline(always)]
    fn int(&self, data: &[u8], loc: Loc) -> Result<i64, Fault> {
        let Some(b) = data.get(loc.offset..loc.offset + loc.size) else {
            return Err(Fault::Short(data.len(), loc));
        };
        let raw = match (b.len(), self.big_endian) {
            (4, false) => u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as u64,
            (8, false) => u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
            (2, false) => u16::from_le_bytes([b[0], b[1]]) as u64,
            (4, true) => u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as u64,
            (8, true) => u64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
            (2, true) => u16::from_be_bytes([b[0], b[1]]) as u64,
            (1, _) => b[0] as u64,
            (n, _) => return Err(Fault::OddWidth(n)),
        };
        let bits = loc.size * 8;
        Ok(if loc.signed && bits < 64 {
            // Sign-extend from the field's own width.
            ((raw << (64 - bits)) as i64) >> (64 - bits)
        } else {
            raw as i64
        })
    }

    #[inline(always)]
    fn bytes<'a>(&self, data: &'a [u8], loc: Loc) -> Result<&'a [u8], Fault> {
        let range = match loc.placement {
            Placement::Inline => loc.offset..loc.offset + loc.size,
            Placement::DataLoc | Placement::RelLoc => {
                let v = self.int(
                    data,
                    Loc {
                        size: 4,
                        signed: false,
                        ..loc
                    },
                )? as u32;
                let mut start = (v & 0xffff) as usize;
                if loc.placement == Placement::RelLoc {
                    start += loc.offset + 4;
                }
                start..start + (v >> 16) as usize
            }
        };
        data.get(range.clone())
            .ok_or(Fault::Outside(range.start, range.end, data.len()))
    }

    #[inline(always)]
    fn comm(&self, data: &[u8], loc: Loc) -> Result<Comm, Fault> {
        Ok(Comm::from_bytes(self.bytes(data, loc)?))
    }

    #[inline(always)]
    fn i32(&self, data: &[u8], loc: Loc) -> Result<i32, Fault> {
        Ok(self.int(data, loc)? as i32)
    }

    #[inline(always)]
    fn wake(&self, data: &[u8], l: &[Loc; 4]) -> Result<Wake, Fault> {
        Ok(Wake {
            comm: self.comm(data, l[0])?,
            pid: self.i32(data, l[1])?,
            prio: self.i32(data, l[2])?,
            target_cpu: self.i32(data, l[3])?,
        })
    }

    /// Decodes one record (starting with its common fields).
    #[inline]
    pub fn decode(&self, data: &[u8]) -> Result<Decoded, DecodeError> {
        Ok(self.decode_fields(data)?)
    }

    #[inline(always)]
    fn decode_fields(&self, data: &[u8]) -> Result<Decoded, Fault> {
        let id = self.int(data, self.common_type)? as u16;
        let Some(Some((layout, min_len))) = self.layouts.get(id as usize) else {
            return Ok(Decoded::Unknown { id });
        };
        if data.len() < *min_len {
            return Err(Fault::Short(
                data.len(),
                Loc {
                    offset: 0,
                    size: *min_len,
                    signed: false,
                    placement: Placement::Inline,
                },
            ));
        }
        let common_pid = self.i32(data, self.common_pid)?;
        let kind = match layout {
            Layout::Switch {
                prev_comm,
                prev_pid,
                prev_prio,
                prev_state,
                next_comm,
                next_pid,
                next_prio,
            } => EventKind::Switch {
                prev_comm: self.comm(data, *prev_comm)?,
                prev_pid: self.i32(data, *prev_pid)?,
                prev_prio: self.i32(data, *prev_prio)?,
                prev_state: self.int(data, *prev_state)?,
                next_comm: self.comm(data, *next_comm)?,
                next_pid: self.i32(data, *next_pid)?,
                next_prio: self.i32(data, *next_prio)?,
            },
            Layout::Wake(t, l) => {
                let w = self.wake(data, l)?;
                match t {
                    EventType::SchedWaking => EventKind::Waking(w),
                    EventType::SchedWakeup => EventKind::Wakeup(w),
                    _ => EventKind::WakeupNew(w),
                }
            }
            Layout::Migrate(l) => EventKind::Migrate {
                comm: self.comm(data, l[0])?,
                pid: self.i32(data, l[1])?,
                prio: self.i32(data, l[2])?,
                orig_cpu: self.i32(data, l[3])?,
                dest_cpu: self.i32(data, l[4])?,
            },
            Layout::Fork(l) => EventKind::Fork {
                parent_comm: self.comm(data, l[0])?,
                parent_pid: self.i32(data, l[1])?,
                child_comm: self.comm(data, l[2])?,
                child_pid: self.i32(data, l[3])?,
            },
            Layout::Exit(l, group_dead) => EventKind::Exit {
                comm: self.comm(data, l[0])?,
                pid: self.i32(data, l[1])?,
                prio: self.i32(data, l[2])?,
                group_dead: match group_dead {
                    Some(g) => Some(self.int(data, *g)? != 0),
                    None => None,
                },
            },
            Layout::IrqEntry(irq, name) => {
                let raw = self.bytes(data, *name)?;
                let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
                EventKind::IrqEntry {
                    irq: self.i32(data, *irq)?,
                    name: String::from_utf8_lossy(&raw[..end]).into(),
                }
            }
            Layout::IrqExit(irq, ret) => EventKind::IrqExit {
                irq: self.i32(data, *irq)?,
                ret: self.i32(data, *ret)?,
            },
            Layout::Softirq(t, vec) => {
                let vec = self.int(data, *vec)? as u32;
                if *t == EventType::SoftirqEntry {
                    EventKind::SoftirqEntry { vec }
                } else {
                    EventKind::SoftirqExit { vec }
                }
            }
            Layout::SelectEnter(prev, flags) => EventKind::SelectEnter {
                prev_cpu: self.i32(data, *prev)?,
                wake_flags: self.int(data, *flags)? as u32,
            },
            Layout::SelectExit(cpu) => EventKind::SelectExit {
                cpu: self.i32(data, *cpu)?,
            },
            Layout::IdleScan(t, at) => {
                let v = self.i32(data, *at)?;
                if *t == EventType::IdleScanEnter {
                    EventKind::IdleScanEnter { target: v }
                } else {
                    EventKind::IdleScanExit { cpu: v }
                }
            }
        };
        Ok(Decoded::Known { common_pid, kind })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::format::parse_event_format;

    #[test]
    fn a_model_event_missing_a_field_is_named_with_the_reason() {
        // A sched_waking without target_cpu (as a kernel that renamed it would have).
        let text = "name: sched_waking\nID: 7\nformat:\n\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\
\tfield:char comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\
\tfield:pid_t pid;\toffset:24;\tsize:4;\tsigned:1;\n\
\tfield:int prio;\toffset:28;\tsize:4;\tsigned:1;\n\
\tfield:int cpu;\toffset:32;\tsize:4;\tsigned:1;\n";
        let d = Decoder::new(&[parse_event_format("sched", text).unwrap()], false);
        assert!(!d.is_known(7));
        assert_eq!(
            d.name_of(7),
            Some("sched:sched_waking (unusable: sched:sched_waking has no field `target_cpu`)")
        );
    }
}
