//! What a capture records about the machine besides its topology: kernel release, sched
//! features and debugfs tunables where readable, /proc/schedstat where present.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

pub use crate::bundle::provenance::{NewidleCost, Readable, SchedDebug};

fn read(path: &Path) -> Readable {
    match std::fs::read_to_string(path) {
        Ok(s) => Readable::Value(s.trim_end().to_string()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Readable::Not("absent".into()),
        Err(e) => Readable::Not(format!("unreadable: {}: {e}", path.display())),
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

/// Runs `read` on /sys/kernel/debug/sched. If debugfs is not mounted it is mounted for
/// the read and unmounted again, so the machine is left as found.
fn with_sched_debugfs<T>(read: impl FnOnce(&Path) -> T) -> T {
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
    let out = read(dir);
    if mounted_here {
        let _ = Command::new("umount").arg("/sys/kernel/debug").output();
    }
    out
}

/// Reads /sys/kernel/debug/sched: the features and tunables.
pub fn sched_debug() -> SchedDebug {
    with_sched_debugfs(|dir| {
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
        SchedDebug { features, tunables }
    })
}

/// Each CPU's scheduling domains and their newidle balance cost, from
/// /sys/kernel/debug/sched/domains. From v6.3 the kernel lists the domains only with
/// sched/verbose on: it is turned on for the read and back off after.
pub fn newidle_costs() -> Vec<NewidleCost> {
    with_sched_debugfs(|dir| {
        let verbose = dir.join("verbose");
        let was_off = std::fs::read_to_string(&verbose).is_ok_and(|v| v.trim() == "N");
        if was_off {
            let _ = std::fs::write(&verbose, "Y");
        }
        let costs = newidle_costs_in(&dir.join("domains"));
        if was_off {
            let _ = std::fs::write(&verbose, "N");
        }
        costs
    })
}

/// The `cpuN/domainM/{name,max_newidle_lb_cost}` files under `domains`, by CPU and
/// domain; a domain whose files are missing or unreadable is left out.
pub fn newidle_costs_in(domains: &Path) -> Vec<NewidleCost> {
    let number = |name: &std::ffi::OsStr, prefix: &str| -> Option<u32> {
        name.to_str()?.strip_prefix(prefix)?.parse().ok()
    };
    let entries = |dir: &Path, prefix: &str| -> Vec<(u32, std::path::PathBuf)> {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        rd.filter_map(|e| {
            let e = e.ok()?;
            Some((number(&e.file_name(), prefix)?, e.path()))
        })
        .collect()
    };
    let mut out = Vec::new();
    for (cpu, cpu_dir) in entries(domains, "cpu") {
        for (domain, dir) in entries(&cpu_dir, "domain") {
            let name = std::fs::read_to_string(dir.join("name"));
            let cost = std::fs::read_to_string(dir.join("max_newidle_lb_cost"));
            if let (Ok(name), Ok(cost)) = (name, cost) {
                if let Ok(ns) = cost.trim().parse() {
                    out.push(NewidleCost {
                        cpu,
                        domain,
                        name: name.trim().to_string(),
                        max_newidle_lb_cost_ns: ns,
                    });
                }
            }
        }
    }
    out.sort_by_key(|c| (c.cpu, c.domain));
    out
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

    /// Laid out as /sys/kernel/debug/sched/domains is on a 6.1 guest of 2 LLCs (values
    /// read from one, in ns); a domain without its cost file and stray entries are left
    /// out.
    #[test]
    fn newidle_costs_are_read_by_cpu_and_domain() {
        let root = std::env::temp_dir().join(format!("sisreplay-domains-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let domain = |cpu: u32, d: u32, name: &str, cost: Option<&str>| {
            let dir = root.join(format!("cpu{cpu}/domain{d}"));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("name"), format!("{name}\n")).unwrap();
            if let Some(c) = cost {
                std::fs::write(dir.join("max_newidle_lb_cost"), format!("{c}\n")).unwrap();
            }
        };
        domain(1, 1, "DIE", Some("11534072"));
        domain(1, 0, "MC", Some("4224869"));
        domain(0, 0, "MC", Some("6775207"));
        domain(0, 1, "DIE", None);
        std::fs::create_dir_all(root.join("cpuX")).unwrap();
        std::fs::write(root.join("cpu0/flags"), "x").unwrap();
        let got = super::newidle_costs_in(&root);
        std::fs::remove_dir_all(&root).unwrap();
        let c = |cpu, domain, name: &str, ns| super::NewidleCost {
            cpu,
            domain,
            name: name.into(),
            max_newidle_lb_cost_ns: ns,
        };
        assert_eq!(
            got,
            [
                c(0, 0, "MC", 6_775_207),
                c(1, 0, "MC", 4_224_869),
                c(1, 1, "DIE", 11_534_072)
            ]
        );
        assert!(super::newidle_costs_in(std::path::Path::new("/nonexistent")).is_empty());
    }
}
