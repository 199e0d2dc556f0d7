//! Imports ended by a signal leave nothing behind; what a SIGKILLed one leaves is swept
//! by the next; a finished import is synced to disk before its rename makes it visible.

mod common;
use common::*;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A text trace that takes a few seconds to import (the sample's events 40 times).
fn big_text(dir: &Path) -> std::path::PathBuf {
    let body = std::fs::read_to_string(sample("hackbench-tracefs.txt")).unwrap();
    let events: String = body
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    let p = dir.join("big.txt");
    std::fs::write(&p, events.repeat(40)).unwrap();
    p
}

fn start_import(src: &Path, cwd: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_sisreplay"))
        .args(["import", src.to_str().unwrap(), "--name", "b"])
        .current_dir(cwd)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Waits until the import has made its temporary directory.
fn wait_for_tmp(traces: &Path) {
    let t = Instant::now();
    while !entries(traces).iter().any(|n| n.starts_with(".tmp-b-")) {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "no temporary directory"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(200));
}

#[test]
fn signals_remove_the_temporary_directory() {
    for (sig, name) in [
        (libc::SIGINT, "SIGINT"),
        (libc::SIGTERM, "SIGTERM"),
        (libc::SIGHUP, "SIGHUP"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let src = big_text(dir.path());
        let traces = dir.path().join("traces");
        let child = start_import(&src, dir.path());
        wait_for_tmp(&traces);
        unsafe { libc::kill(child.id() as i32, sig) };
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(130), "{name}: {err}");
        assert!(err.contains("interrupted"), "{name}: {err}");
        assert_eq!(entries(&traces), Vec::<String>::new(), "{name} left these");
    }
}

#[test]
fn a_killed_imports_leftover_is_swept_by_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let src = big_text(dir.path());
    let traces = dir.path().join("traces");
    let mut child = start_import(&src, dir.path());
    wait_for_tmp(&traces);
    let pid = child.id();
    child.kill().unwrap();
    child.wait().unwrap();
    let left = format!(".tmp-b-{pid}");
    assert_eq!(entries(&traces), vec![left.clone()]);
    // Another process's live temporary directory is not touched.
    let me = format!(".tmp-other-{}", std::process::id());
    std::fs::create_dir(traces.join(&me)).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_sisreplay"))
        .args([
            "import",
            &sample_arg("hackbench-tracefs.txt"),
            "--name",
            "c",
        ])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains(&left) && err.contains(&format!("process {pid}")) && err.contains("warning"),
        "{err}"
    );
    assert_eq!(entries(&traces), vec![me, "c".to_string()]);
}

/// strace shows the bundle's files and its directory synced before the rename, and the
/// parent after it.
#[test]
#[ignore = "needs strace (.ci/run installs it and runs ignored tests: cargo test -- --include-ignored)"]
fn import_syncs_before_the_rename() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("strace.log");
    let o = Command::new("strace")
        .args([
            "-f",
            "-y",
            "-e",
            "trace=fsync,fdatasync,rename,renameat,renameat2",
            "-o",
        ])
        .arg(&log)
        .arg(env!("CARGO_BIN_EXE_sisreplay"))
        .args([
            "import",
            &sample_arg("hackbench-tracefs.txt"),
            "--name",
            "b",
        ])
        .current_dir(dir.path())
        .output()
        .expect("strace runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let log = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    let at = |pred: &dyn Fn(&str) -> bool, what: &str| {
        lines
            .iter()
            .position(|l| pred(l))
            .unwrap_or_else(|| panic!("no {what} in\n{log}"))
    };
    let rename = at(&|l| l.contains("rename") && l.contains(".tmp-b-"), "rename");
    let sync = |l: &str| l.contains("fsync(") || l.contains("fdatasync(");
    let parquet = at(
        &|l| sync(l) && l.contains("/events.parquet>"),
        "fsync of events.parquet",
    );
    let meta = at(
        &|l| sync(l) && l.contains("/meta.json>"),
        "fsync of meta.json",
    );
    let tmpdir = at(
        &|l| {
            sync(l)
                && l.contains(".tmp-b-")
                && l.contains(">)")
                && !l.contains(".tmp-b-/")
                && !l.contains(".parquet")
                && !l.contains(".json")
        },
        "fsync of the temporary directory",
    );
    assert!(
        parquet < rename && meta < rename && tmpdir < rename,
        "{log}"
    );
    let parent = lines[rename..]
        .iter()
        .any(|l| sync(l) && l.trim_end().ends_with("= 0") && l.contains("/traces>"));
    assert!(parent, "no fsync of traces/ after the rename:\n{log}");
}
