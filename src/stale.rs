//! What a sisreplay process leaves when it dies without cleaning up (SIGKILL, an abort, a
//! power cut): temporary bundle directories `.tmp-NAME-PID`, capture spools
//! `.spool-NAME-PID`, tracefs instances `sisreplay-PID` and kprobe events. Each carries the
//! PID of the process that made it, so a later run can tell a leftover (that PID is not
//! running) from the work of a live process, warn, and remove it.

use std::path::{Path, PathBuf};

/// Whether a process with this PID exists (kill with signal 0; EPERM means it does).
pub fn pid_alive(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    if unsafe { libc::kill(pid, 0) } == 0 {
        return true;
    }
    std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// The PID a name ends with after `sep`, e.g. 1234 of `.tmp-b-1234` or `sisreplay-1234`.
pub fn pid_suffix(name: &str, sep: char) -> Option<i32> {
    let (_, pid) = name.rsplit_once(sep)?;
    if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok()
}

/// Whether a name with this PID was left by a process that is gone (not this one).
pub fn left_by_dead(pid: i32) -> bool {
    pid != std::process::id() as i32 && !pid_alive(pid)
}

/// Removes the directories in `dir` named `{prefix}...-PID` whose process is gone, with a
/// warning for each; returns the paths removed.
pub fn sweep_dirs(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return removed;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(prefix)
            .and_then(|rest| pid_suffix(rest, '-'))
        else {
            continue;
        };
        if !e.file_type().is_ok_and(|t| t.is_dir()) || !left_by_dead(pid) {
            continue;
        }
        let p = e.path();
        if std::fs::remove_dir_all(&p).is_ok() {
            eprintln!(
                "sisreplay: warning: removed {}, left by sisreplay process {pid}, which is \
                 no longer running",
                p.display()
            );
            removed.push(p);
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pids_from_names() {
        assert_eq!(pid_suffix("b-1234", '-'), Some(1234));
        assert_eq!(pid_suffix("my-trace-77", '-'), Some(77));
        assert_eq!(pid_suffix("b-12x", '-'), None);
        assert_eq!(pid_suffix("b", '-'), None);
        assert_eq!(pid_suffix("b-", '-'), None);
        assert!(pid_alive(std::process::id() as i32));
        assert!(!left_by_dead(std::process::id() as i32));
        assert!(!pid_alive(0) && !pid_alive(-5));
    }

    #[test]
    fn sweeps_only_dead_pids() {
        let d = tempfile::tempdir().unwrap();
        // A child that has exited and been reaped: its PID is free.
        let mut c = std::process::Command::new("true").spawn().unwrap();
        let dead = c.id();
        c.wait().unwrap();
        let me = std::process::id();
        for n in [
            format!(".tmp-a-{dead}"),
            format!(".tmp-b-{me}"),
            ".tmp-c-1".to_string(),
            format!("tmp-d-{dead}"),
        ] {
            std::fs::create_dir(d.path().join(n)).unwrap();
        }
        let removed = sweep_dirs(d.path(), ".tmp-");
        assert_eq!(removed, vec![d.path().join(format!(".tmp-a-{dead}"))]);
        assert!(d.path().join(format!(".tmp-b-{me}")).exists());
        assert!(d.path().join(".tmp-c-1").exists(), "PID 1 is alive");
        assert!(d.path().join(format!("tmp-d-{dead}")).exists());
    }
}
