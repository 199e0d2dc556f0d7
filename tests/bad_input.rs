//! Damaged and wrong inputs: each gives one line on stderr naming the file, the offset
//! (or line) and what was expected, exit code 2, no panic, and no bundle left behind.

mod common;
use common::*;

use std::path::Path;
use std::process::Command;

struct Outcome {
    code: Option<i32>,
    stderr: String,
}

fn sisreplay(args: &[&str], cwd: &Path) -> Outcome {
    let out = Command::new(env!("CARGO_BIN_EXE_sisreplay"))
        .args(args)
        .current_dir(cwd)
        .output()
        .unwrap();
    Outcome {
        code: out.status.code(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Imports `bytes` as a file and checks the failure is clean. Returns the message.
fn import_fails(name: &str, bytes: &[u8], expect: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join(name);
    std::fs::write(&f, bytes).unwrap();
    let o = sisreplay(&["import", f.to_str().unwrap(), "--name", "b"], dir.path());
    assert_eq!(o.code, Some(2), "{name}: exit code; stderr: {}", o.stderr);
    assert_eq!(
        o.stderr.lines().count(),
        1,
        "{name}: one line expected: {}",
        o.stderr
    );
    assert!(!o.stderr.contains("panicked"), "{name}: {}", o.stderr);
    assert!(
        o.stderr.contains(f.to_str().unwrap()),
        "{name}: no file name in {}",
        o.stderr
    );
    for e in expect {
        assert!(
            o.stderr.contains(e),
            "{name}: expected {e:?} in {}",
            o.stderr
        );
    }
    // Nothing left in traces/: neither the bundle nor its temporary directory.
    let traces = dir.path().join("traces");
    let left: Vec<_> = std::fs::read_dir(&traces)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{name}: left behind {left:?}");
    o.stderr
}

#[test]
fn empty_file() {
    import_fails("empty.dat", b"", &["offset 0x0", "empty file"]);
}

#[test]
fn wrong_magic() {
    let mut d = std::fs::read(sample("hackbench-v6.dat")).unwrap();
    d[3] = b'T';
    import_fails("magic.dat", &d, &["offset 0x0", "magic"]);
    let mut p = std::fs::read(sample("hackbench-perf.data")).unwrap();
    p[0] = b'X';
    import_fails("magic.data", &p, &["offset 0x0", "unrecognised format"]);
}

#[test]
fn truncated_trace_dat_at_many_offsets() {
    for file in ["hackbench-v6.dat", "hackbench-v7-zstd.dat"] {
        let d = std::fs::read(sample(file)).unwrap();
        let n = d.len();
        for cut in [5, 11, 40, 300, 5000, n / 3, n / 2, n - 4096, n - 1] {
            let msg = import_fails(&format!("cut-{cut}-{file}"), &d[..cut], &["offset 0x"]);
            assert!(
                msg.contains("expected")
                    || msg.contains("truncated")
                    || msg.contains("beyond")
                    || msg.contains("claims"),
                "{file} cut at {cut}: {msg}"
            );
        }
    }
}

#[test]
fn truncated_perf_data_at_many_offsets() {
    for file in ["hackbench-perf.data", "hackbench-perf-z.data"] {
        let d = std::fs::read(sample(file)).unwrap();
        let n = d.len();
        for cut in [4, 50, 103, 2000, n / 2, n - 100, n - 1] {
            import_fails(&format!("cut-{cut}-{file}"), &d[..cut], &["offset 0x"]);
        }
    }
}

/// Finds CPU 0's first data page of a v6 file by asking the reader's own error: the
/// flyrecord table is at a fixed distance before the page-aligned data, so instead
/// locate the first page-aligned offset whose header timestamp is plausible.
fn first_page_offset(d: &[u8]) -> usize {
    // Page-aligned offsets from the end of the metadata; the first with a non-zero
    // timestamp and a commit within the page is CPU 0's first page.
    let mut off = 4096;
    while off + 4096 <= d.len() {
        let ts = u64::from_le_bytes(d[off..off + 8].try_into().unwrap());
        let commit = u64::from_le_bytes(d[off + 8..off + 16].try_into().unwrap()) & ((1 << 27) - 1);
        if ts > 1_000_000 && ts < 1 << 50 && commit > 0 && commit <= 4080 {
            return off;
        }
        off += 4096;
    }
    panic!("no data page found");
}

#[test]
fn corrupted_page_header() {
    let mut d = std::fs::read(sample("hackbench-v6.dat")).unwrap();
    let page = first_page_offset(&d);
    d[page + 8..page + 16].copy_from_slice(&0x7ff_fff0u64.to_le_bytes());
    let msg = import_fails("badpage.dat", &d, &["page header", "commits"]);
    assert!(msg.contains(&format!("offset {:#x}", page + 8)), "{msg}");
}

#[test]
fn corrupted_record_inside_a_page() {
    let mut d = std::fs::read(sample("hackbench-v6.dat")).unwrap();
    let page = first_page_offset(&d);
    // The first record header: type_len 0 with a length word far beyond the page.
    d[page + 16..page + 20].copy_from_slice(&0u32.to_le_bytes());
    d[page + 20..page + 24].copy_from_slice(&0xffffu32.to_le_bytes());
    import_fails(
        "badrecord.dat",
        &d,
        &["record", &format!("offset {:#x}", page + 16)],
    );
}

#[test]
fn perf_data_without_tracepoints() {
    let d = std::fs::read(sample("no-tracepoints.data")).unwrap();
    import_fails("cycles.data", &d, &["no tracepoint samples"]);
}

#[test]
fn text_that_is_not_a_trace() {
    import_fails(
        "notes.txt",
        b"# a comment\nhello world, this is not a trace\n",
        &["line 2", "expected an event line"],
    );
}

#[test]
fn existing_bundle_is_never_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let src = sample("hackbench-v7-zstd.dat");
    let ok = sisreplay(
        &["import", src.to_str().unwrap(), "--name", "b"],
        dir.path(),
    );
    assert_eq!(ok.code, Some(0), "{}", ok.stderr);
    let meta = dir.path().join("traces/b/meta.json");
    let before = std::fs::read(&meta).unwrap();
    let again = sisreplay(
        &["import", src.to_str().unwrap(), "--name", "b"],
        dir.path(),
    );
    assert_eq!(again.code, Some(2));
    assert!(again.stderr.contains("already exists"), "{}", again.stderr);
    assert_eq!(std::fs::read(&meta).unwrap(), before);
}

#[test]
fn perf_data_with_an_absurd_event_description_count() {
    let p =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/perf-bad-event-desc-count.data");
    let d = std::fs::read(p).unwrap();
    import_fails(
        "desc.data",
        &d,
        &["offset 0x18936", "event description #0: attribute"],
    );
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/perf-bad-event-name-length.data");
    let d = std::fs::read(p).unwrap();
    import_fails(
        "name.data",
        &d,
        &["offset 0x18df6", "event description #5: name"],
    );
}

#[test]
fn perf_data_with_an_absurd_cmdline_count() {
    let p =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/perf-bad-cmdline-count.data");
    let d = std::fs::read(p).unwrap();
    // This one is also damaged further on; the point is a clean error, not an abort.
    import_fails("cmdline.data", &d, &["offset 0x"]);
}

#[test]
fn perf_data_with_an_impossible_cpu_number() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/perf-bad-sample-cpu.data");
    let d = std::fs::read(p).unwrap();
    import_fails("cpu.data", &d, &["offset 0x", "CPU 796026224"]);
}

#[test]
fn perf_data_with_an_absurd_feature_section_size() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/perf-bad-feature-size.data");
    let d = std::fs::read(p).unwrap();
    import_fails(
        "feature.data",
        &d,
        &["offset 0x143c8", "feature section #10"],
    );
}

// ---- CPU counts, bundle rows, perf.data offsets (issue 17) ----

/// Runs the CLI in `cwd` and checks a clean failure: exit 2, one line, no panic, the
/// expected words. Returns stderr.
fn cli_fails(args: &[&str], cwd: &Path, expect: &[&str]) -> String {
    let t = std::time::Instant::now();
    let o = sisreplay(args, cwd);
    assert_eq!(o.code, Some(2), "{args:?}: exit code; stderr: {}", o.stderr);
    assert_eq!(o.stderr.lines().count(), 1, "{args:?}: {}", o.stderr);
    assert!(!o.stderr.contains("panicked"), "{args:?}: {}", o.stderr);
    for e in expect {
        assert!(
            o.stderr.contains(e),
            "{args:?}: expected {e:?} in {}",
            o.stderr
        );
    }
    assert!(
        t.elapsed().as_secs() < 20,
        "{args:?} took {:?}",
        t.elapsed()
    );
    o.stderr
}

/// A bundle of the small text sample (7,326 events on 2 CPUs) at `dir/traces/b`.
fn small_bundle(dir: &Path) -> std::path::PathBuf {
    let o = sisreplay(
        &[
            "import",
            &sample_arg("hackbench-tracefs.txt"),
            "--name",
            "b",
        ],
        dir,
    );
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    dir.join("traces/b")
}

/// Rewrites a bundle's events.parquet with `edit` applied to its events.
fn edit_events(bundle: &Path, edit: impl FnOnce(&mut Vec<sisreplay::trace::Event>)) {
    use sisreplay::bundle::{EventReader, EventWriter};
    let p = bundle.join("events.parquet");
    let mut r = EventReader::open(&p).unwrap();
    let mut evs = Vec::new();
    while let Some(e) = r.next_event().unwrap() {
        evs.push(e);
    }
    edit(&mut evs);
    let mut w = EventWriter::create(&p).unwrap();
    for e in &evs {
        w.push(e).unwrap();
    }
    w.finish().unwrap();
}

fn edit_meta(bundle: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let p = bundle.join("meta.json");
    let mut m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    edit(&mut m);
    std::fs::write(&p, serde_json::to_string_pretty(&m).unwrap()).unwrap();
}

#[test]
fn bundle_rows_out_of_time_order_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let b = small_bundle(dir.path());
    let bs = b.to_str().unwrap();
    edit_events(&b, |v| v.reverse());
    for cmd in ["info", "replay"] {
        cli_fails(&[cmd, bs], dir.path(), &[bs, "row 1:", "time order"]);
    }
    // Shuffled: a later row goes back in time.
    let dir = tempfile::tempdir().unwrap();
    let b = small_bundle(dir.path());
    let bs = b.to_str().unwrap();
    edit_events(&b, |v| v.swap(100, 5000));
    let msg = cli_fails(&["replay", bs], dir.path(), &[bs, "time order"]);
    assert!(msg.contains("row 101:"), "{msg}");
    cli_fails(
        &["compare", "sis_prop", "sis_util", "--trace", bs],
        dir.path(),
        &[bs, "row 101:"],
    );
}

#[test]
fn bundle_events_beyond_its_cpus_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let b = small_bundle(dir.path());
    let bs = b.to_str().unwrap();
    // One event moved to CPU 5 of this 2-CPU bundle.
    edit_events(&b, |v| v[42].cpu = 5);
    let msg = cli_fails(
        &["replay", bs],
        dir.path(),
        &[bs, "row 42:", "CPU 5", "2 CPUs"],
    );
    assert!(msg.contains("events.parquet"), "{msg}");
    cli_fails(&["info", bs], dir.path(), &["row 42:", "CPU 5"]);
    // meta.json saying fewer CPUs than the events use.
    let dir = tempfile::tempdir().unwrap();
    let b = small_bundle(dir.path());
    edit_meta(&b, |m| m["nr_cpus"] = 1.into());
    cli_fails(
        &["info", b.to_str().unwrap()],
        dir.path(),
        &["CPU 1", "1 CPUs"],
    );
}

/// A bundle whose events.parquet was cut short is named as such, at the offset where it
/// ends; one whose data pages were overwritten names the batch of rows the damage is in,
/// from its first row; a meta.json that is not JSON names its line and column, once.
#[test]
fn damaged_bundle_files_say_where_and_what() {
    let dir = tempfile::tempdir().unwrap();
    let b = small_bundle(dir.path());
    let bs = b.to_str().unwrap();
    let events = b.join("events.parquet");
    let good = std::fs::read(&events).unwrap();
    let half = good.len() / 2;
    std::fs::write(&events, &good[..half]).unwrap();
    let end = format!("offset {half:#x}: the file ends there without Parquet's closing PAR1");
    for cmd in ["info", "replay"] {
        cli_fails(
            &[cmd, bs],
            dir.path(),
            &["events.parquet", &end, "truncated"],
        );
    }
    // 2,000 zero bytes a third of the way in, inside the one row group's pages.
    let mut zeroed = good.clone();
    zeroed[good.len() / 3..good.len() / 3 + 2000].fill(0);
    std::fs::write(&events, &zeroed).unwrap();
    for cmd in ["info", "replay"] {
        cli_fails(
            &[cmd, bs],
            dir.path(),
            &["events.parquet: row 0: the batch of rows from this one is damaged"],
        );
    }
    // A directory where the file should be is an I/O error, not a truncated file.
    std::fs::remove_file(&events).unwrap();
    std::fs::create_dir(&events).unwrap();
    let msg = cli_fails(&["info", bs], dir.path(), &["events.parquet", "directory"]);
    assert!(!msg.contains("truncated"), "{msg}");
    std::fs::remove_dir(&events).unwrap();
    std::fs::write(&events, &good).unwrap();
    std::fs::write(b.join("meta.json"), "{\"nr_cpus\" 2}").unwrap();
    let msg = cli_fails(
        &["info", bs],
        dir.path(),
        &["meta.json: line 1: column 12:"],
    );
    assert!(!msg.contains("at line"), "{msg}");
}

#[test]
fn absurd_cpu_counts_in_meta_json() {
    for n in [0u64, 8193, 1_000_000, 4_294_967_295] {
        let dir = tempfile::tempdir().unwrap();
        let b = small_bundle(dir.path());
        let bs = b.to_str().unwrap();
        edit_meta(&b, |m| m["nr_cpus"] = n.into());
        let meta = b.join("meta.json");
        let meta = meta.to_str().unwrap();
        for args in [
            vec!["info", bs],
            vec!["replay", bs],
            vec!["compare", "sis_prop", "sis_util", "--trace", bs],
            vec![
                "report", "sis_prop", "sis_util", "--trace", bs, "--format", "text",
            ],
            vec!["simulate", bs],
        ] {
            cli_fails(
                &args,
                dir.path(),
                &[meta, &format!("nr_cpus says {n} CPUs"), "8192"],
            );
        }
    }
    // A topology naming a CPU no kernel can have.
    let dir = tempfile::tempdir().unwrap();
    let b = small_bundle(dir.path());
    edit_meta(&b, |m| {
        m["topology"]["cpus"][0]["cpu"] = 4_000_000_000u64.into()
    });
    cli_fails(
        &["replay", b.to_str().unwrap()],
        dir.path(),
        &["CPU 4000000000"],
    );
}

/// The offset of a perf.data feature section's (offset, size) entry and of its data.
fn perf_feature(d: &[u8], bit: usize) -> (usize, usize) {
    let u64_at = |o: usize| u64::from_le_bytes(d[o..o + 8].try_into().unwrap()) as usize;
    let set = |b: usize| d[72 + b / 8] & (1 << (b % 8)) != 0;
    assert!(set(bit), "feature {bit} not in the file");
    let index = (0..bit).filter(|&b| set(b)).count();
    let entry = u64_at(40) + u64_at(48) + 16 * index;
    (entry, u64_at(entry))
}

/// An attrs entry size of 0 (found by fuzzing: the perf.data crate divides by it) or
/// below the first perf_event_attr version is refused at its offset in the header.
#[test]
fn perf_data_with_an_impossible_attr_size() {
    let d = std::fs::read(sample("hackbench-perf.data")).unwrap();
    for size in [0u64, 1, 79] {
        let mut m = d.clone();
        m[16..24].copy_from_slice(&size.to_le_bytes());
        import_fails(
            &format!("attr-size-{size}.data"),
            &m,
            &["offset 0x10", &format!("attr_size is {size}")],
        );
    }
}

#[test]
fn perf_data_with_an_absurd_nrcpus_header() {
    for file in ["hackbench-perf.data", "hackbench-perf-z.data"] {
        let d = std::fs::read(sample(file)).unwrap();
        let (_, nrcpus) = perf_feature(&d, 7);
        for n in [0u32, 8193, 60_000, u32::MAX] {
            let mut m = d.clone();
            m[nrcpus..nrcpus + 4].copy_from_slice(&n.to_le_bytes());
            let msg = import_fails(
                &format!("nrcpus-{n}-{file}"),
                &m,
                &[
                    &format!("offset {nrcpus:#x}"),
                    "NRCPUS",
                    &format!("{n} CPUs"),
                ],
            );
            assert!(msg.contains("8192"), "{msg}");
        }
    }
}

#[test]
fn perf_data_sample_beyond_its_nrcpus() {
    let d = std::fs::read(sample("hackbench-perf.data")).unwrap();
    let (_, nrcpus) = perf_feature(&d, 7);
    let mut m = d.clone();
    // The samples are on CPUs 0 and 1; the header now says one CPU (available and online).
    m[nrcpus..nrcpus + 8].copy_from_slice(&[1, 0, 0, 0, 1, 0, 0, 0]);
    import_fails(
        "nrcpus-1.data",
        &m,
        &["offset 0x", "sample on CPU 1", "NRCPUS", "1 CPUs"],
    );
}

#[test]
fn text_with_an_absurd_cpu_count() {
    let body = std::fs::read_to_string(sample("hackbench-tracefs.txt")).unwrap();
    let events: String = body
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    for n in ["4294967295", "8193", "99999999999999999999", "0"] {
        import_fails(
            &format!("cpus-{}.txt", n.len()),
            format!("version = 6\ncpus={n}\n{events}").as_bytes(),
            &["line 2", "CPU"],
        );
        import_fails(
            &format!("p-{}.txt", n.len()),
            format!(
                "# tracer: nop\n#\n# entries-in-buffer/entries-written: 1/1   #P:{n}\n{events}"
            )
            .as_bytes(),
            &["line 3", "CPU"],
        );
    }
    // trace-cmd's cpus= counts the buffers: an event on CPU 1 of one is damage.
    let msg = import_fails(
        "cpus-1.txt",
        format!("version = 6\ncpus=1\n{events}").as_bytes(),
        &["on CPU 1", "cpus=1"],
    );
    assert!(msg.contains("line "), "{msg}");
}

/// A text trace from tracefs' trace file says `#P:2` and has no `cpus=`: replay sizes the
/// machine from it (it was a 1-CPU machine).
#[test]
fn tracefs_text_replays_on_its_header_cpus() {
    let (code, out, err) = run_cli(&["replay", &sample_arg("hackbench-tracefs.txt"), "--json"]);
    assert_eq!(code, Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["nr_cpus"], 2, "{}", &out[..300.min(out.len())]);
    // Without the header line, replay says it cannot size the machine instead of
    // replaying on a machine of one CPU.
    let dir = tempfile::tempdir().unwrap();
    let body = std::fs::read_to_string(sample("hackbench-tracefs.txt")).unwrap();
    let events: String = body
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    let f = dir.path().join("t.txt");
    std::fs::write(&f, events).unwrap();
    cli_fails(
        &["replay", f.to_str().unwrap()],
        dir.path(),
        &["on CPU 1", "import it first"],
    );
}

/// The data section's records: (offset, type, size).
fn perf_records(d: &[u8]) -> Vec<(usize, u32, usize)> {
    let u64_at = |o: usize| u64::from_le_bytes(d[o..o + 8].try_into().unwrap()) as usize;
    let (start, size) = (u64_at(40), u64_at(48));
    let mut v = Vec::new();
    let mut at = start;
    while at + 8 <= start + size {
        let t = u32::from_le_bytes(d[at..at + 4].try_into().unwrap());
        let s = u16::from_le_bytes([d[at + 6], d[at + 7]]) as usize;
        v.push((at, t, s));
        at += s;
    }
    v
}

/// Damage deep in a perf.data is reported at its byte offset (it was "record 0").
#[test]
fn perf_data_errors_carry_the_byte_offset() {
    let d = std::fs::read(sample("hackbench-perf.data")).unwrap();
    let recs = perf_records(&d);
    // A record header with an impossible size, a third of the way in.
    let (at, _, _) = recs[recs.len() / 3];
    let mut m = d.clone();
    m[at + 6..at + 8].copy_from_slice(&4u16.to_le_bytes());
    import_fails(
        "size.data",
        &m,
        &[&format!("offset {at:#x}"), "record header"],
    );
    // A sample whose tracepoint payload is cut short: its own offset.
    let (at, _, size) = *recs
        .iter()
        .filter(|r| r.1 == 9)
        .nth(recs.len() / 2)
        .unwrap();
    let mut m = d.clone();
    // PERF_SAMPLE_RAW's u32 size is the last field before the payload; make it claim
    // more than the record holds.
    let raw_size_at = (at + 8..at + size - 4)
        .find(|&o| {
            u32::from_le_bytes(m[o..o + 4].try_into().unwrap()) as usize == at + size - o - 4
        })
        .expect("raw size field");
    m[raw_size_at..raw_size_at + 4].copy_from_slice(&0xfff0u32.to_le_bytes());
    import_fails("raw.data", &m, &[&format!("offset {at:#x}")]);
    // In a compressed file: inside the compressed record that holds it.
    let z = std::fs::read(sample("hackbench-perf-z.data")).unwrap();
    let zrecs = perf_records(&z);
    let (zat, _, zsize) = *zrecs
        .iter()
        .filter(|r| r.1 == 81 || r.1 == 83)
        .nth(3)
        .unwrap();
    let mut m = z.clone();
    for b in &mut m[zat + 40..zat + zsize.min(200)] {
        *b ^= 0x5a;
    }
    let msg = import_fails("z.data", &m, &["offset 0x"]);
    let off = msg.split("offset 0x").nth(1).unwrap();
    let off = usize::from_str_radix(
        off.split(|c: char| !c.is_ascii_hexdigit()).next().unwrap(),
        16,
    )
    .unwrap();
    assert!(
        off >= zat && off <= zat + zsize,
        "{msg}: not in {zat:#x}..{:#x}",
        zat + zsize
    );
}

/// Every error from a few hundred mutants of both perf.data samples names a byte offset.
#[test]
fn perf_data_mutants_all_report_offsets() {
    use sisreplay::trace::EventSource;
    let dir = tempfile::tempdir().unwrap();
    let mut rng = fastrand::Rng::with_seed(17);
    let mut errors = 0;
    for file in ["hackbench-perf.data", "hackbench-perf-z.data"] {
        let d = std::fs::read(sample(file)).unwrap();
        for i in 0..150 {
            let mut m = d.clone();
            match i % 5 {
                0 => m.truncate(rng.usize(1..d.len())),
                1 => {
                    for _ in 0..8 {
                        let at = rng.usize(..m.len());
                        m[at] ^= 1 << rng.u8(..8);
                    }
                }
                2 => {
                    let at = rng.usize(..m.len());
                    let n = rng.usize(1..4096).min(m.len() - at);
                    m[at..at + n].fill(0);
                }
                3 => {
                    let at = rng.usize(..m.len() - 8) & !7;
                    m[at..at + 8].copy_from_slice(&u64::MAX.to_le_bytes()[..8]);
                }
                _ => {
                    let at = rng.usize(..m.len());
                    let n = rng.usize(1..4096).min(m.len() - at);
                    let chunk = m[at..at + n].to_vec();
                    let to = rng.usize(..m.len() - n);
                    m[to..to + n].copy_from_slice(&chunk);
                }
            }
            let p = dir.path().join("m.data");
            std::fs::write(&p, &m).unwrap();
            let r = sisreplay::trace::perfdata::PerfData::open(&p).and_then(|mut s| {
                let mut batch = Vec::new();
                while s.next_batch(&mut batch, 4096)? > 0 {
                    batch.clear();
                }
                Ok(())
            });
            if let Err(e) = r {
                errors += 1;
                let msg = e.to_string();
                let unsupported = matches!(e, sisreplay::trace::TraceError::Unsupported { .. });
                assert!(
                    msg.contains("offset 0x") || unsupported,
                    "{file} mutant {i}: {msg}"
                );
            }
        }
    }
    assert!(errors > 50, "only {errors} mutants failed");
}

/// A machine description naming a CPU no kernel can have is refused before anything is
/// sized by it.
#[test]
fn machine_description_with_an_absurd_cpu() {
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("m.json");
    std::fs::write(
        &m,
        r#"{"source": "x", "cpus": [{"cpu": 4000000000, "core": 0, "smt_siblings": [4000000000],
            "cluster": 0, "llc": 0, "package": 0, "node": 0}]}"#,
    )
    .unwrap();
    cli_fails(
        &[
            "import",
            &sample_arg("hackbench-tracefs.txt"),
            "--machine",
            m.to_str().unwrap(),
        ],
        dir.path(),
        &["m.json", "CPU 4000000000", "8192"],
    );
    assert!(!dir.path().join("traces").exists());
}

/// A bundle whose events.parquet makes the Parquet reader (arrow-rs 60) panic, found by
/// the `bundle` fuzz target: one line and exit 2, no panic.
#[test]
fn bundle_that_makes_the_parquet_reader_panic() {
    let dir = tempfile::tempdir().unwrap();
    let b = small_bundle(dir.path());
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bundle-parquet-panic.parquet"),
        b.join("events.parquet"),
    )
    .unwrap();
    let bs = b.to_str().unwrap();
    for args in [vec!["info", bs], vec!["replay", bs]] {
        cli_fails(
            &args,
            dir.path(),
            &[
                "events.parquet",
                "row 0",
                "Parquet reader failed on damaged data",
            ],
        );
    }
}
