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
    import_fails("cmdline.data", &d, &["record 0"]);
}

#[test]
fn perf_data_with_an_impossible_cpu_number() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/perf-bad-sample-cpu.data");
    let d = std::fs::read(p).unwrap();
    import_fails("cpu.data", &d, &["record 5850", "CPU 796026224"]);
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
