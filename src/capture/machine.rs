//! What a capture records about the machine besides its topology: kernel release, sched
//! features and debugfs tunables where readable, /proc/schedstat where present.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

pub use crate::bundle::provenance::{Readable, SchedDebug};

fn read(path: &Path) -> Readable {
    match std::fs::read_to_string(path) {
        Ok(s) => Readable::Value(s.trim_end().to_string()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Readable::Not("absent".into()),
        Err(e) => Readable::Not(format!("unreadable: {e}")),
    }
}

/// `uname -r` of the running kernel, from /proc/sys/kernel/osrelease.
pub fn kernel_release() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .map(|s| s.trim().to_string())
}

/// Whether the running kernel was built with CONFIG_IRQ_TIME_ACCOUNTING (and so keeps
/// interrupt time as pressure on CPU capacity), from /proc/config.gz or
/// /boot/config-RELEASE; None when neither can be read.
pub fn irq_time_accounting(release: Option<&str>) -> Option<bool> {
    use std::io::Read;
    let from_proc = std::fs::read("/proc/config.gz").ok().and_then(|gz| {
        let mut text = String::new();
        flate2::read::GzDecoder::new(&gz[..])
            .read_to_string(&mut text)
            .ok()?;
        Some(text)
    });
    let text =
        from_proc.or_else(|| std::fs::read_to_string(format!("/boot/config-{}", release?)).ok())?;
    Some(config_is_set(&text, "CONFIG_IRQ_TIME_ACCOUNTING"))
}

/// The clock source timekeeping runs on (current_clocksource), None where sysfs does not
/// say. On x86 anything but `tsc` means the kernel found its TSC unstable, and then its
/// scheduler clock (PELT's) only advances up to a tick past the last tick that came, so
/// it stalls where ticks come late, which the trace's clock does not show.
pub fn clocksource() -> Option<String> {
    std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Whether a kernel config sets `option` to y (an option it does not list is off).
pub fn config_is_set(config: &str, option: &str) -> bool {
    config
        .lines()
        .any(|l| l.strip_prefix(option).is_some_and(|rest| rest == "=y"))
}

/// The machine's hostname, or `host` when it cannot be read.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "host".into())
}

/// Reads /sys/kernel/debug/sched. If debugfs is not mounted it is mounted for the read
/// and unmounted again, so the machine is left as found.
pub fn sched_debug() -> SchedDebug {
    let dir = Path::new("/sys/kernel/debug/sched");
    let mut mounted_here = false;
    if !dir.exists()
        && Command::new("mount")
            .args(["-t", "debugfs", "none", "/sys/kernel/debug"])
            .output()
            .is_ok_and(|o| o.status.success())
    {
        mounted_here = true;
    }
    let features = read(&dir.join("features"));
    let mut tunables = BTreeMap::new();
    for name in [
        "base_slice_ns",
        "migration_cost_ns",
        "nr_migrate",
        "tunable_scaling",
        "latency_warn_ms",
        "preempt",
    ] {
        let p = dir.join(name);
        if p.exists() {
            tunables.insert(name.to_string(), read(&p));
        }
    }
    if mounted_here {
        let _ = Command::new("umount").arg("/sys/kernel/debug").output();
    }
    SchedDebug { features, tunables }
}

/// /proc/schedstat as text, or why it could not be read.
pub fn schedstat() -> Readable {
    read(Path::new("/proc/schedstat"))
}

/// Seconds since the epoch as `YYYY-mm-ddTHH:MM:SSZ` (UTC), and the compact
/// `YYYYmmdd-HHMMSS` used in default bundle names.
pub fn utc(secs: u64) -> (String, String) {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (h, m, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let mo = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(mo <= 2);
    (
        format!("{y:04}-{mo:02}-{d:02}T{h:02}:{m:02}:{s:02}Z"),
        format!("{y:04}{mo:02}{d:02}-{h:02}{m:02}{s:02}"),
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn utc_dates() {
        assert_eq!(super::utc(0).0, "1970-01-01T00:00:00Z");
        // 2026-12-02 16:10:54 UTC
        assert_eq!(super::utc(1_796_227_854).1, "20261202-161054");
        assert_eq!(super::utc(951_782_400).0, "2000-02-29T00:00:00Z");
    }

    #[test]
    fn config_options_set_unset_and_absent() {
        let config = "CONFIG_TICK_CPU_ACCOUNTING=y\n# CONFIG_IRQ_TIME_ACCOUNTING is not set\n\
                      CONFIG_IRQ_TIME_ACCOUNTING_X=y\nCONFIG_PARAVIRT_TIME_ACCOUNTING=y\n";
        assert!(!super::config_is_set(config, "CONFIG_IRQ_TIME_ACCOUNTING"));
        assert!(super::config_is_set(
            config,
            "CONFIG_PARAVIRT_TIME_ACCOUNTING"
        ));
        assert!(!super::config_is_set(config, "CONFIG_HZ_1000"));
        let on = "CONFIG_IRQ_TIME_ACCOUNTING=y\n";
        assert!(super::config_is_set(on, "CONFIG_IRQ_TIME_ACCOUNTING"));
    }
}
