//! The kernel's own SIS counters, measured, and the policy a patched rig kernel runs: Mel Gorman's counters (kernel-model.md §7.2) as
//! the rig's `sis-stats` patch appends them to each cpu line of /proc/schedstat, read from
//! the snapshots capture records before and after the workload (meta.json's
//! `capture.schedstat_before` / `schedstat_after`), and set beside the counters a policy
//! model counted over the same trace.
//!
//! A cpu line has 9 numbers upstream; the out-of-tree versions append 4 (search,
//! domain_search, scanned, failed), then recent hit and miss, then core search and core
//! failed: 13, 15 or 17 numbers. The version header cannot tell them apart (the
//! out-of-tree 16 and 17 collide with upstream's), so the field count does.

use std::fmt::Write;

use serde::Serialize;

use crate::bundle::Meta;
use crate::wakeup::sis::SisCounters;

use super::Derived;

/// The counters summed over CPUs, after minus before.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Measured {
    /// The schedstat version header of the after snapshot.
    pub version: u32,
    /// Numbers on a cpu line: 13, 15 or 17.
    pub fields: usize,
    /// CPUs on the after snapshot's cpu lines.
    pub cpus: u32,
    /// after − before, summed over those CPUs.
    pub counters: SisCounters,
}

/// One /proc/schedstat text's SIS counters: (version, cpu-line field count, counters by
/// CPU).
pub type Snapshot = (u32, usize, Vec<(u32, SisCounters)>);

/// Per-CPU SIS counters of one /proc/schedstat text. None when the text has no SIS
/// fields (9 numbers, or none at all).
pub fn parse(text: &str) -> Option<Snapshot> {
    let mut version = 0;
    let mut fields = 0;
    let mut cpus = Vec::new();
    for line in text.lines() {
        let mut w = line.split_ascii_whitespace();
        match w.next() {
            Some("version") => version = w.next()?.parse().ok()?,
            Some(c) if c.starts_with("cpu") => {
                let cpu: u32 = c[3..].parse().ok()?;
                let v: Vec<u64> = w.map(|x| x.parse().ok()).collect::<Option<_>>()?;
                if !matches!(v.len(), 13 | 15 | 17) || (fields != 0 && v.len() != fields) {
                    return None;
                }
                fields = v.len();
                let at = |i: usize| v.get(i).copied().unwrap_or(0);
                cpus.push((
                    cpu,
                    SisCounters {
                        search: at(9),
                        domain_search: at(10),
                        scanned: at(11),
                        failed: at(12),
                        recent_hit: at(13),
                        recent_miss: at(14),
                        core_search: at(15),
                        core_failed: at(16),
                    },
                ));
            }
            _ => {}
        }
    }
    (fields != 0).then_some((version, fields, cpus))
}

/// after − before, summed over the CPUs of both. The kernel's counters are 32-bit
/// (`unsigned int` in struct rq), so each difference is taken modulo 2^32.
pub fn delta(before: &str, after: &str) -> Option<Measured> {
    let (_, fb, b) = parse(before)?;
    let (version, fields, a) = parse(after)?;
    if fb != fields {
        return None;
    }
    let d = |x: u64, y: u64| (x as u32).wrapping_sub(y as u32) as u64;
    let mut sum = SisCounters::default();
    for (cpu, ka) in &a {
        let kb = b
            .iter()
            .find(|(c, _)| c == cpu)
            .map(|x| x.1)
            .unwrap_or_default();
        sum.add(&SisCounters {
            search: d(ka.search, kb.search),
            domain_search: d(ka.domain_search, kb.domain_search),
            scanned: d(ka.scanned, kb.scanned),
            failed: d(ka.failed, kb.failed),
            recent_hit: d(ka.recent_hit, kb.recent_hit),
            recent_miss: d(ka.recent_miss, kb.recent_miss),
            core_search: d(ka.core_search, kb.core_search),
            core_failed: d(ka.core_failed, kb.core_failed),
        });
    }
    Some(Measured {
        version,
        fields,
        cpus: a.len() as u32,
        counters: sum,
    })
}

/// The measured counters of a bundle, when its kernel exported them.
pub fn measured(meta: &Meta) -> Option<Measured> {
    let c = meta.provenance.capture()?;
    delta(c.schedstat_before.value()?, c.schedstat_after.value()?)
}

/// Measured against modelled, as text: the counts, then se_eff, dom_eff, success rate and
/// runqueues scanned per search (schedstat_parse.py's definitions, over the deltas).
/// The kernel counts every select_idle_sibling() between the two snapshots; the model
/// only the wakeups it replayed, so the counts differ by coverage and the ratios are what
/// compare.
pub fn text(m: &Measured, policy: &str, modelled: &SisCounters) -> String {
    let mut o = String::new();
    let (km, kp) = (&m.counters, modelled);
    let _ = writeln!(
        o,
        "kernel SIS counters (schedstat v{}, {} CPUs) against {policy}'s model:",
        m.version, m.cpus
    );
    let _ = writeln!(o, "  {:<22}{:>14}{:>14}", "", "measured", "modelled");
    let mut row = |name: &str, a: u64, b: u64| {
        let _ = writeln!(o, "  {name:<22}{a:>14}{b:>14}");
    };
    row("search", km.search, kp.search);
    row("domain_search", km.domain_search, kp.domain_search);
    row("scanned", km.scanned, kp.scanned);
    row("failed", km.failed, kp.failed);
    if m.fields >= 15 {
        row("recent hit", km.recent_hit, kp.recent_hit);
        row("recent miss", km.recent_miss, kp.recent_miss);
    }
    if m.fields >= 17 {
        row("core search", km.core_search, kp.core_search);
        row("core failed", km.core_failed, kp.core_failed);
    }
    let (dm, dp) = (Derived::of(km), Derived::of(kp));
    let per = |k: &SisCounters| k.scanned as f64 / k.search.max(1) as f64;
    let mut pct = |name: &str, a: f64, b: f64| {
        let _ = writeln!(o, "  {name:<22}{a:>14.2}{b:>14.2}{:>+10.2}", b - a);
    };
    pct("se_eff %", dm.se_eff, dp.se_eff);
    pct("dom_eff %", dm.dom_eff, dp.dom_eff);
    pct("success %", dm.success_rate, dp.success_rate);
    pct("fast %", dm.fast_rate, dp.fast_rate);
    pct("scanned per search", per(km), per(kp));
    o
}

/// The policy model of a rig kernel built with patch series (its release ends in
/// `-rig-SERIES+SERIES...`, see traces/rig/kernel/), given the policy its sched features
/// select: SIS_UTIL on a kernel with `sis-util-v3` runs v3's formula; on one with `cas`
/// (and `cas-static`) the capacity rules run under the budget of SIS_PROP or SIS_UTIL,
/// whichever the features select (the port keeps both limits). Anything else (NO_SIS_UTIL
/// too, whose unlimited scan a cas model does not take) keeps `by_features`.
pub fn patched_policy(release: Option<&str>, by_features: &'static str) -> &'static str {
    let Some((_, series)) = release.and_then(|r| r.split_once("-rig-")) else {
        return by_features;
    };
    let has = |s: &str| series.split('+').any(|x| x == s);
    match by_features {
        "sis_util" if has("sis-util-v3") => "sis_util_v3",
        "sis_prop" if has("cas-static") => "cas_static",
        "sis_prop" if has("cas") => "cas",
        "sis_util" if has("cas-static") => "cas_static:budget=sis_util",
        "sis_util" if has("cas") => "cas:budget=sis_util",
        p => p,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rig_kernels_map_to_their_patches_models() {
        let v3 = Some("6.1.192-rig-sis-stats+noinline+sis-util-v3");
        assert_eq!(patched_policy(v3, "sis_util"), "sis_util_v3");
        assert_eq!(patched_policy(v3, "no_limit"), "no_limit");
        let cas = Some("6.1.192-rig-sis-stats+noinline+cas");
        assert_eq!(patched_policy(cas, "sis_prop"), "cas");
        assert_eq!(patched_policy(cas, "sis_util"), "cas:budget=sis_util");
        assert_eq!(patched_policy(cas, "no_limit"), "no_limit");
        let st = Some("6.1.192-rig-sis-stats+noinline+cas+cas-static");
        assert_eq!(patched_policy(st, "sis_prop"), "cas_static");
        assert_eq!(
            patched_policy(Some("6.1.0-57-amd64"), "sis_util"),
            "sis_util"
        );
        assert_eq!(patched_policy(None, "sis_prop"), "sis_prop");
    }

    const BEFORE: &str = "version 18\ntimestamp 1\n\
        cpu0 0 0 5 1 7 2 100 50 3 10 4 20 1 2 3 0 0\n\
        domain0 0f 0 0 0\n\
        cpu1 0 0 5 1 7 2 100 50 3 4294967290 0 6 0 0 0 0 0\n";
    const AFTER: &str = "version 18\ntimestamp 9\n\
        cpu0 0 0 9 1 9 2 300 60 5 30 10 70 3 4 5 0 0\n\
        domain0 0f 0 0 0\n\
        cpu1 0 0 9 1 9 2 300 60 5 4 2 16 1 1 1 0 0\n";

    #[test]
    fn deltas_over_cpus_with_a_32_bit_wrap() {
        let m = delta(BEFORE, AFTER).unwrap();
        assert_eq!((m.version, m.fields, m.cpus), (18, 17, 2));
        // cpu1's search wrapped from 2^32 − 6 to 4: 10 more.
        assert_eq!(m.counters.search, 20 + 10);
        assert_eq!(m.counters.domain_search, 6 + 2);
        assert_eq!(m.counters.scanned, 50 + 10);
        assert_eq!(m.counters.failed, 2 + 1);
        assert_eq!((m.counters.recent_hit, m.counters.recent_miss), (3, 3));
    }

    #[test]
    fn upstream_lines_carry_no_sis_fields() {
        let up = "version 15\ntimestamp 1\ncpu0 0 0 0 0 0 0 2132222322 377379148 611\n";
        assert_eq!(parse(up), None);
        assert_eq!(delta(up, up), None);
        // The first out-of-tree version: 4 fields, no recent or core counts.
        let v16 = "version 16\ncpu0 0 0 0 0 0 0 1 1 1 8 3 12 1\n";
        let (v, n, c) = parse(v16).unwrap();
        assert_eq!((v, n, c[0].1.scanned, c[0].1.recent_hit), (16, 13, 12, 0));
    }

    #[test]
    fn text_sets_the_ratios_side_by_side() {
        let m = delta(BEFORE, AFTER).unwrap();
        let t = text(&m, "sis_util", &m.counters);
        assert!(t.contains("schedstat v18, 2 CPUs"), "{t}");
        assert!(t.contains("se_eff %"), "{t}");
        assert!(t.contains("+0.00"), "{t}");
    }
}
