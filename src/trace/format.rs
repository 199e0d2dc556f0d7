//! Parser for the kernel's event format descriptions: the text of
//! `events/<system>/<event>/format` and `events/header_page`, as tracefs shows them and as
//! trace.dat and perf.data embed them. Every field offset the readers use comes from here.

/// How a field's bytes are found inside a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// The value sits at `offset` with `size` bytes (integers and fixed arrays).
    Inline,
    /// `__data_loc`: a u32 at `offset` holds (length << 16 | offset-from-record-start).
    DataLoc,
    /// `__rel_loc`: like DataLoc, with the offset counted from the end of the u32.
    RelLoc,
}

/// One field of an event record, from a `field:...;` line of its format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// The identifier, without type or array brackets (`prev_comm`, `common_pid`).
    pub name: String,
    /// The C declaration as the kernel printed it, e.g. `char prev_comm[16]`.
    pub decl: String,
    /// Bytes from the start of the record (for `__data_loc`/`__rel_loc`, of the u32 locator).
    pub offset: usize,
    /// Size in bytes: of the value, the whole fixed array, or the 4-byte locator.
    pub size: usize,
    /// `signed:1`: sign-extend when read as an integer.
    pub signed: bool,
    /// Whether the bytes are inline or found through a locator.
    pub placement: Placement,
    /// A fixed-size array (`char comm[16]`): read as bytes, not as an integer.
    pub is_array: bool,
}

/// One event's format: its identity and where each field sits in a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventFormat {
    /// The tracefs system (`sched`, `irq`, or a kprobe group).
    pub system: String,
    /// The event name (`sched_switch`), from the `name:` line.
    pub name: String,
    /// The event ID from the `ID:` line: the `common_type` of its records in this trace.
    pub id: u16,
    /// Common fields first, then the event's own, in the order the kernel lists them.
    pub fields: Vec<Field>,
}

impl EventFormat {
    /// The field called `name`, if the event has one.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }
}

/// Why a format text could not be used, with the 1-based line it was found on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatError {
    /// The 1-based line of the format text.
    pub line: usize,
    /// What is wrong there.
    pub what: String,
}

impl std::fmt::Display for FormatError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "format line {}: {}", self.line, self.what)
    }
}

/// Parses one `field:...;\toffset:N;\tsize:N;\tsigned:N;` line.
fn parse_field_line(line: &str, lineno: usize) -> Result<Field, FormatError> {
    let err = |what: &str| FormatError {
        line: lineno,
        what: format!("{what} in {:?}", line.trim()),
    };
    let mut decl = None;
    let mut offset = None;
    let mut size = None;
    let mut signed = false;
    for part in line.trim().split(';') {
        let part = part.trim();
        if let Some(d) = part.strip_prefix("field:") {
            decl = Some(d.trim().to_string());
        } else if let Some(v) = part.strip_prefix("offset:") {
            offset = Some(v.trim().parse().map_err(|_| err("bad offset"))?);
        } else if let Some(v) = part.strip_prefix("size:") {
            size = Some(v.trim().parse().map_err(|_| err("bad size"))?);
        } else if let Some(v) = part.strip_prefix("signed:") {
            signed = v.trim() == "1";
        }
    }
    let decl = decl.ok_or_else(|| err("missing field declaration"))?;
    let (offset, size) = (
        offset.ok_or_else(|| err("missing offset"))?,
        size.ok_or_else(|| err("missing size"))?,
    );
    let placement = if decl.starts_with("__data_loc") {
        Placement::DataLoc
    } else if decl.starts_with("__rel_loc") {
        Placement::RelLoc
    } else {
        Placement::Inline
    };
    // The name is the last identifier, before any array brackets: `char comm[16]` -> comm,
    // `__data_loc char[] comm` -> comm.
    let without_brackets = {
        let mut s = String::with_capacity(decl.len());
        let mut depth = 0;
        for c in decl.chars() {
            match c {
                '[' => depth += 1,
                ']' => depth -= 1,
                _ if depth == 0 => s.push(c),
                _ => {}
            }
        }
        s
    };
    let name = without_brackets
        .split_whitespace()
        .last()
        .ok_or_else(|| err("empty field declaration"))?
        .trim_start_matches('*')
        .to_string();
    let is_array = placement == Placement::Inline && decl.contains('[');
    Ok(Field {
        name,
        decl,
        offset,
        size,
        signed,
        placement,
        is_array,
    })
}

/// Parses an event `format` file. `system` is supplied by the caller because the file
/// itself does not name it (trace.dat and perf.data record it beside the text).
pub fn parse_event_format(system: &str, text: &str) -> Result<EventFormat, FormatError> {
    let mut name = None;
    let mut id = None;
    let mut fields = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let lineno = i + 1;
        let t = line.trim();
        if let Some(v) = t.strip_prefix("name:") {
            name = Some(v.trim().to_string());
        } else if let Some(v) = t.strip_prefix("ID:") {
            id = Some(v.trim().parse::<u16>().map_err(|_| FormatError {
                line: lineno,
                what: format!("bad event ID {:?}", v.trim()),
            })?);
        } else if t.starts_with("field:") {
            fields.push(parse_field_line(t, lineno)?);
        } else if t.starts_with("print fmt:") {
            break;
        }
    }
    Ok(EventFormat {
        system: system.to_string(),
        name: name.ok_or(FormatError {
            line: 1,
            what: "no `name:` line".into(),
        })?,
        id: id.ok_or(FormatError {
            line: 1,
            what: "no `ID:` line".into(),
        })?,
        fields,
    })
}

/// The layout of one ring-buffer sub-buffer (page), from `events/header_page`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageLayout {
    /// Size of the `commit` word: the kernel's long (4 or 8).
    pub commit_size: usize,
    /// Where event data starts in the page.
    pub data_offset: usize,
    /// Bytes of event data a page can hold.
    pub data_size: usize,
}

impl PageLayout {
    /// The sub-buffer size in bytes, header plus data: 4096 unless buffer_subbuf_size_kb
    /// was changed.
    pub fn page_size(&self) -> usize {
        self.data_offset + self.data_size
    }
}

/// Parses `header_page`: timestamp, commit, overwrite and data fields.
pub fn parse_header_page(text: &str) -> Result<PageLayout, FormatError> {
    let mut commit = None;
    let mut data = None;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if !t.starts_with("field:") {
            continue;
        }
        let f = parse_field_line(t, i + 1)?;
        match f.name.as_str() {
            "commit" => commit = Some(f),
            "data" => data = Some(f),
            _ => {}
        }
    }
    let missing = |what: &str| FormatError {
        line: 1,
        what: format!("header_page has no `{what}` field"),
    };
    let commit = commit.ok_or_else(|| missing("commit"))?;
    let data = data.ok_or_else(|| missing("data"))?;
    if commit.size != 4 && commit.size != 8 {
        return Err(FormatError {
            line: 1,
            what: format!("header_page commit size {} is neither 4 nor 8", commit.size),
        });
    }
    Ok(PageLayout {
        commit_size: commit.size,
        data_offset: data.offset,
        data_size: data.size,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIGRATE_6_18: &str = "name: sched_migrate_task\nID: 371\nformat:\n\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
\tfield:__data_loc char[] comm;\toffset:8;\tsize:4;\tsigned:0;\n\
\tfield:pid_t pid;\toffset:12;\tsize:4;\tsigned:1;\n\
\tfield:int prio;\toffset:16;\tsize:4;\tsigned:1;\n\
\tfield:int orig_cpu;\toffset:20;\tsize:4;\tsigned:1;\n\
\tfield:int dest_cpu;\toffset:24;\tsize:4;\tsigned:1;\n\n\
print fmt: \"comm=%s pid=%d\", __get_str(comm), REC->pid\n";

    #[test]
    fn data_loc_comm_of_v6_16_and_later() {
        let f = parse_event_format("sched", MIGRATE_6_18).unwrap();
        assert_eq!((f.name.as_str(), f.id), ("sched_migrate_task", 371));
        let comm = f.field("comm").unwrap();
        assert_eq!(comm.placement, Placement::DataLoc);
        assert_eq!((comm.offset, comm.size, comm.is_array), (8, 4, false));
        let dest = f.field("dest_cpu").unwrap();
        assert_eq!((dest.offset, dest.size, dest.signed), (24, 4, true));
    }

    #[test]
    fn fixed_array_comm() {
        let text = "name: sched_waking\nID: 5\nformat:\n\
\tfield:char comm[16];\toffset:8;\tsize:16;\tsigned:0;\n";
        let f = parse_event_format("sched", text).unwrap();
        let comm = f.field("comm").unwrap();
        assert!(comm.is_array);
        assert_eq!(comm.placement, Placement::Inline);
    }

    #[test]
    fn header_page_64bit() {
        let text = "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n\
\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n\
\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n\
\tfield: char data;\toffset:16;\tsize:4080;\tsigned:1;\n";
        let p = parse_header_page(text).unwrap();
        assert_eq!(
            p,
            PageLayout {
                commit_size: 8,
                data_offset: 16,
                data_size: 4080
            }
        );
        assert_eq!(p.page_size(), 4096);
    }

    #[test]
    fn bad_offset_names_the_line() {
        let text = "name: x\nID: 1\nformat:\n\tfield:int a;\toffset:zz;\tsize:4;\tsigned:1;\n";
        let e = parse_event_format("s", text).unwrap_err();
        assert_eq!(e.line, 4);
    }
}
