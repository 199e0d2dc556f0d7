//! The report as one self-contained HTML file: inline CSS and SVG, no script and no
//! reference to any other file or host, readable at A4 width and on a phone.

use std::fmt::Write;

use super::{plots, trust_of, Report, TraceReport};
use crate::compare::{Cell, Metric};
use crate::metrics::Log2Hist;

/// Escapes text for HTML element content and attribute values.
pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

const STYLE: &str = "
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:0;color:#1a1a1a;background:#fff;line-height:1.45}
main{max-width:60rem;margin:0 auto;padding:1rem}
h1{font-size:1.6rem;margin:.5rem 0}
h2{font-size:1.25rem;border-bottom:2px solid #0072b2;padding-bottom:.2rem;margin-top:2.2rem}
h3{font-size:1.05rem;margin:1.2rem 0 .4rem}
.sub{color:#555;margin-top:0}
.scroll{overflow-x:auto}
table{border-collapse:collapse;margin:.4rem 0 1rem;font-size:.92rem}
th,td{border:1px solid #ccc;padding:.25rem .5rem;text-align:right;white-space:nowrap}
th:first-child,td:first-child{text-align:left}
thead th{background:#eef4fa}
td.t{text-align:left;white-space:normal;min-width:8rem}
td.better{color:#00734d;font-weight:600}
td.worse{color:#b03a00;font-weight:600}
td.same{color:#555}
.strong{color:#00734d}
.moderate{color:#8a6d00}
.weak{color:#b03a00;font-weight:600}
.unknown{color:#555}
figure{margin:.8rem 0 1.4rem}
figure svg{width:100%;height:auto;display:block}
figcaption{font-size:.88rem;color:#444;margin-top:.3rem}
pre{background:#f5f5f5;padding:.6rem;font-size:.85rem;white-space:pre-wrap;word-break:break-all}
code{font-size:.9em}
nav ol{columns:2;font-size:.92rem}
dl.glossary{display:grid;grid-template-columns:max-content 1fr;gap:.2rem .8rem;font-size:.92rem}
dl.glossary dt{font-weight:600}
dl.glossary dd{margin:0}
@media (max-width:40rem){nav ol{columns:1}main{padding:.5rem}table{font-size:.8rem}dl.glossary{grid-template-columns:1fr}}
@media print{h2{break-after:avoid}figure{break-inside:avoid}}
";

fn cell_text(c: Option<&Cell>, baseline: bool) -> String {
    match c {
        None => "n/a".into(),
        Some(c) if baseline => format!("1.00 ({:.2})", c.std_pct),
        Some(c) => match c.compare_pct {
            Some(p) => format!(
                "{p:+.2}% ({:.2}){}",
                c.std_pct,
                if c.beyond_noise { " *" } else { "" }
            ),
            None => format!("[{:.2}] ({:.2})", c.mean, c.std_pct),
        },
    }
}

/// A cell across runs: as [`cell_text`], the std over the runs, and their number.
fn runs_cell_text(r: Option<&crate::compare::RunStats>, baseline: bool) -> String {
    match r {
        None => "n/a".into(),
        Some(r) if baseline => format!("1.00 ({:.2}), {} runs", r.std_pct, r.values.len()),
        Some(r) => match r.compare_pct {
            Some(p) => format!(
                "{p:+.2}% ({:.2}){}, {} runs",
                r.std_pct,
                if r.beyond_noise { " *" } else { "" },
                r.values.len()
            ),
            None => format!(
                "[{:.2}] ({:.2}), {} runs",
                r.mean,
                r.std_pct,
                r.values.len()
            ),
        },
    }
}

/// A plot with its caption. Inline SVG in HTML needs no namespace declaration, and
/// leaving it out keeps the page free of any URL.
fn fig(o: &mut String, id: &str, svg: &str, caption: &str) {
    let svg = svg.replacen(
        " xmlns=\"http://www.w3.org/2000/svg\"",
        &format!(" role=\"img\" aria-label=\"{}\"", escape(caption)),
        1,
    );
    let _ = writeln!(
        o,
        "<figure id=\"{id}\" class=\"plot\">{svg}<figcaption>{}</figcaption></figure>",
        escape(caption)
    );
}

/// Shares of a log2 histogram, in percent of its total.
fn shares(h: &Log2Hist, len: usize) -> Vec<f64> {
    let total: u64 = h.buckets.iter().sum();
    (0..len)
        .map(|i| 100.0 * h.buckets.get(i).copied().unwrap_or(0) as f64 / total.max(1) as f64)
        .collect()
}

/// The step CDF of a log2 µs histogram: at the top of each bucket, the share below it.
pub fn cdf_points(h: &Log2Hist) -> Vec<(f64, f64)> {
    let total: u64 = h.buckets.iter().sum();
    let mut acc = 0u64;
    let mut pts = Vec::new();
    for (i, &n) in h.buckets.iter().enumerate() {
        acc += n;
        let upper = if i == 0 { 1.0 } else { (1u64 << i) as f64 };
        pts.push((upper, acc as f64 / total.max(1) as f64));
    }
    pts
}

/// The modelled search time of each policy and, when the trace has the probes, the
/// kernel's measured select_task_rq_fair time on the same ns buckets.
fn search_time_figure(o: &mut String, t: &TraceReport) {
    let st = &t.search_time;
    let Some(range) = st.bucket_range() else {
        let _ = writeln!(
            o,
            "<p>No policy scanned any runqueue on {}.</p>",
            escape(&t.name)
        );
        return;
    };
    let share = |h: &Log2Hist| -> Vec<f64> {
        let all = shares(h, range.end() + 1);
        all[*range.start()..].to_vec()
    };
    let mut series: Vec<(String, Vec<f64>)> = st
        .modelled_ns
        .iter()
        .map(|(p, h)| (p.clone(), share(h)))
        .collect();
    if let Some(m) = &st.measured_ns {
        series.push(("measured (kernel)".into(), share(m)));
    }
    let bars = plots::Bars {
        title: &format!("Time per idle search, {}", t.name),
        x_desc: "search time, ns: log2 buckets from the value shown to twice it",
        y_desc: "share of searches, %",
        categories: range
            .clone()
            .map(super::search_time::bucket_floor)
            .collect(),
        series,
    };
    let measured = if st.measured_ns.is_some() {
        " \"measured (kernel)\": select_task_rq_fair as the capture's probes timed it, \
         per wakeup, whether it scanned or not."
    } else {
        ""
    };
    fig(
        o,
        &format!("search-hist-{}", slug(&t.name)),
        &plots::grouped_bars(&bars),
        &format!(
            "Modelled time per wakeup that scanned: {} ns entry + {} ns per runqueue probed.{measured}",
            t.replay.time_model.entry_ns, t.replay.time_model.probe_ns
        ),
    );
}

/// The replay's policies that are arms of the report: not the traced kernel's model
/// added for fidelity alone, and an alias (`vanilla`) without its policy (`sis_prop`).
fn arm_policies<'a>(r: &Report, t: &'a TraceReport) -> Vec<&'a crate::metrics::PolicyMetrics> {
    t.replay
        .policies
        .iter()
        .filter(|p| r.comparison.arms.contains(&p.policy))
        .collect()
}

fn search_section(o: &mut String, r: &Report, t: &TraceReport) {
    search_time_figure(o, t);
    let pols = arm_policies(r, t);
    let max_probed = pols.iter().map(|p| p.probed.len()).max().unwrap_or(1);
    // Up to 24 single counts, then log2 buckets so a 112-CPU LLC stays legible.
    let (cats, series): (Vec<String>, Vec<(String, Vec<f64>)>) = if max_probed <= 24 {
        (
            (0..max_probed).map(|i| i.to_string()).collect(),
            pols.iter()
                .map(|p| {
                    let total: u64 = p.probed.iter().sum();
                    let v = (0..max_probed)
                        .map(|i| {
                            100.0 * p.probed.get(i).copied().unwrap_or(0) as f64
                                / total.max(1) as f64
                        })
                        .collect();
                    (p.policy.clone(), v)
                })
                .collect(),
        )
    } else {
        let hists: Vec<(String, Log2Hist)> = pols
            .iter()
            .map(|p| {
                let mut h = Log2Hist::default();
                for (n, &c) in p.probed.iter().enumerate() {
                    h.add_n(n as u64, c);
                }
                (p.policy.clone(), h)
            })
            .collect();
        let len = hists.iter().map(|h| h.1.buckets.len()).max().unwrap_or(0);
        (
            (0..len).map(Log2Hist::label).collect(),
            hists
                .iter()
                .map(|(n, h)| (n.clone(), shares(h, len)))
                .collect(),
        )
    };
    let bars = plots::Bars {
        title: &format!("Runqueues probed per wakeup, {}", t.name),
        x_desc: "runqueues probed",
        y_desc: "share of wakeups, %",
        categories: cats,
        series,
    };
    fig(
        o,
        &format!("probed-hist-{}", slug(&t.name)),
        &plots::grouped_bars(&bars),
        "Runqueues each policy probed per wakeup (0: target, prev or recent was idle, or no budget).",
    );
}

fn slug(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

fn placements_section(o: &mut String, r: &Report) {
    for t in &r.traces {
        let mut series = Vec::new();
        let pct = |n: u64, d: u64| 100.0 * n as f64 / d.max(1) as f64;
        for p in arm_policies(r, t) {
            let pl = &p.placements;
            let d = pl.same_cpu + pl.same_llc + pl.cross_llc + pl.cross_numa;
            series.push((
                p.policy.clone(),
                vec![
                    pct(pl.same_llc, d),
                    pct(pl.cross_llc, d),
                    pct(pl.cross_numa, d),
                    pct(p.remote_rq_locks, d),
                    pct(p.rq_lock_collisions, d),
                    pct(p.stacked_with_idle, d),
                ],
            ));
        }
        let ob = &t.replay.observed.placements;
        let d = ob.same_cpu + ob.same_llc + ob.cross_llc + ob.cross_numa;
        series.push((
            "recorded".into(),
            vec![
                pct(ob.same_llc, d),
                pct(ob.cross_llc, d),
                pct(ob.cross_numa, d),
                0.0,
                0.0,
                0.0,
            ],
        ));
        let bars = plots::Bars {
            title: &format!("Placements and rq locks, {}", t.name),
            x_desc: "per wakeup replayed",
            y_desc: "% of wakeups",
            categories: [
                "moved, same LLC",
                "cross-LLC",
                "cross-NUMA",
                "remote rq lock",
                "lock collision",
                "stacked w/ idle",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
            series,
        };
        fig(
            o,
            &format!("placements-{}", slug(&t.name)),
            &plots::grouped_bars(&bars),
            &format!(
                "Where each policy put the wakee relative to its previous CPU, and rq-lock traffic \
                 (a collision is a second acquisition of one rq lock within {} ns). \"recorded\" is the kernel's own placement.",
                t.replay.lock_hold_ns
            ),
        );
        let _ = writeln!(
            o,
            "<div class=\"scroll\"><table><thead><tr><th>{}</th><th>same CPU</th><th>same LLC</th>\
             <th>cross-LLC</th><th>cross-NUMA</th><th>remote rq locks</th><th>collisions</th>\
             <th>stacked with idle</th></tr></thead><tbody>",
            escape(&t.name)
        );
        for p in arm_policies(r, t) {
            let pl = &p.placements;
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&p.policy),
                pl.same_cpu,
                pl.same_llc,
                pl.cross_llc,
                pl.cross_numa,
                p.remote_rq_locks,
                p.rq_lock_collisions,
                p.stacked_with_idle
            );
        }
        let m = &t.replay.observed.migrations;
        let _ = writeln!(
            o,
            "<tr><td>recorded wakeups</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td colspan=\"3\">all migrations in the trace: {} same LLC, {} cross-LLC, {} cross-NUMA</td></tr></tbody></table></div>",
            ob.same_cpu, ob.same_llc, ob.cross_llc, ob.cross_numa, m.same_llc, m.cross_llc, m.cross_numa
        );
    }
}

fn curves_section(o: &mut String, r: &Report) {
    let c = &r.comparison;
    let _ = writeln!(
        o,
        "<p>One point per trace, in the order given. Lines join only the load steps of one \
         workload: traces whose names differ in their numbers alone (hackbench-g4 and \
         hackbench-g8); a trace of its own stands as points.</p>"
    );
    // Per row: a row of several runs is one point, at the mean of its runs' windows.
    let rows = c.tables.first().map_or(&[][..], |t| t.rows.as_slice());
    let names: Vec<&str> = rows.iter().map(|row| row.trace.as_str()).collect();
    let group = load_steps(&names);
    for metric in [
        Metric::SeEff,
        Metric::ScannedPerSearch,
        Metric::SuccessRate,
        Metric::SearchUsPerWakeup,
        Metric::CrossLlcPct,
        Metric::WakeupLatencyUs,
    ] {
        let Some(table) = c.tables.iter().find(|t| t.metric == metric) else {
            continue;
        };
        let series: Vec<(String, Vec<f64>)> = c
            .arms
            .iter()
            .enumerate()
            .filter_map(|(i, arm)| {
                let v: Option<Vec<f64>> = table
                    .rows
                    .iter()
                    .map(|row| row.cells[i].as_ref().map(|x| x.mean))
                    .collect();
                v.map(|v| (arm.clone(), v))
            })
            .collect();
        if series.is_empty() {
            continue;
        }
        let bars = plots::Bars {
            title: metric.title(),
            x_desc: "trace",
            y_desc: metric.unit(),
            categories: table.rows.iter().map(|r| r.trace.clone()).collect(),
            series,
        };
        fig(
            o,
            &format!("curve-{}", slug(&format!("{metric:?}"))),
            &plots::curves(&bars, &group),
            metric.title(),
        );
    }
}

/// Per trace, the workload it is a load step of: traces whose names are the same but
/// for their numbers (`hackbench-g4-l2000`, `hackbench-g8-l2000`) share one.
fn load_steps(names: &[&str]) -> Vec<usize> {
    let keys: Vec<String> = names
        .iter()
        .map(|name| {
            let mut key = String::new();
            for c in name.chars() {
                if !c.is_ascii_digit() {
                    key.push(c);
                } else if !key.ends_with('#') {
                    key.push('#');
                }
            }
            key
        })
        .collect();
    keys.iter()
        .map(|k| keys.iter().position(|x| x == k).expect("its own key"))
        .collect()
}

fn fidelity_section(o: &mut String, r: &Report) {
    let _ = writeln!(
        o,
        "<p>The policy of the traced kernel replayed over its own trace should pick the CPU \
         the kernel picked. Agreement by the path the model took; \"via IPI\" are wakeups the \
         kernel queued to the target's wakelist.</p><div class=\"scroll\"><table><thead><tr>\
         <th>trace</th><th>policy</th><th>wakeups</th><th>agree</th><th>same LLC</th>\
         <th>via IPI</th><th>cross-LLC recorded</th><th>predicted</th><th>by path</th></tr></thead><tbody>"
    );
    for t in &r.traces {
        for p in &t.replay.policies {
            let Some(f) = &p.fidelity else { continue };
            let paths: Vec<String> = f
                .by_path
                .iter()
                .map(|(k, (n, a))| {
                    format!("{k} {:.1}% of {n}", 100.0 * *a as f64 / (*n).max(1) as f64)
                })
                .collect();
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.2}%</td><td>{:.2}%</td><td>{:.1}% of {}</td><td>{}</td><td>{}</td><td class=\"t\">{}</td></tr>",
                escape(&t.name),
                escape(&p.policy),
                f.decisions,
                f.agreement_pct(),
                100.0 * f.same_llc_agree as f64 / f.decisions.max(1) as f64,
                100.0 * f.ipi.1 as f64 / f.ipi.0.max(1) as f64,
                f.ipi.0,
                f.recorded_cross_llc,
                f.predicted_cross_llc,
                escape(&paths.join("; "))
            );
        }
    }
    let _ = writeln!(o, "</tbody></table></div>");
    for t in &r.traces {
        if let Some(s) = crate::replay::flips_fit::sentence(&t.replay) {
            let _ = writeln!(
                o,
                "<p>{}: {} (the trace cannot show them; every policy is replayed with them).</p>",
                escape(&t.name),
                escape(&s)
            );
        }
    }
    for t in &r.traces {
        let s = &t.replay.skipped;
        let guess = if t.replay.probed_selections > 0 {
            "select_task_rq_fair probes recorded which wakings selected and their wake flags"
        } else {
            "without probes, sync is guessed (a waker in task context) and a waking of a task \
             still queued is taken as selecting nothing"
        };
        let _ = writeln!(
            o,
            "<p>{}: {} wakings, {} replayed; not replayed: {} on a runqueue already, {} without \
             selection (probes), {} of per-CPU kernel threads, {} without a matching \
             sched_wakeup. {}.</p>",
            escape(&t.name),
            t.replay.wakings,
            t.replay.replayed,
            s.on_rq,
            s.no_selection,
            s.pinned,
            s.no_wakeup,
            guess
        );
        if let Some(f) = &t.replay.search_fit {
            let _ = writeln!(
                o,
                "<p>Measured select_task_rq_fair time on {} {}. On an emulated guest these are \
                 not hardware timings.</p>",
                escape(&t.name),
                escape(&super::search_time::fit_sentence(f))
            );
        }
    }
}

fn reproduce_section(o: &mut String, r: &Report) {
    let cmd: Vec<String> = r.reproduce.iter().map(|a| shell_quote(a)).collect();
    let implicit = if r.reproduce.len() > r.command_line.len() {
        " The command line named no trace: the <code>--trace</code> options above name the \
         traces it resolved, so the command reads them again whatever is newest then."
    } else {
        ""
    };
    let _ = writeln!(
        o,
        "<pre>{}</pre><p>sisreplay {}; {}; {} time windows per trace.{implicit}</p>",
        escape(&cmd.join(" ")),
        escape(&r.sisreplay_version),
        escape(r.comparison.test),
        r.comparison.windows
    );
    let _ = writeln!(
        o,
        "<div class=\"scroll\"><table><thead><tr><th>trace</th><th>content</th><th>kernel</th><th>source</th>\
         <th>clock</th><th>CPUs</th><th>events</th><th>lost</th><th>sched features (SIS)</th>\
         </tr></thead><tbody>"
    );
    for t in &r.traces {
        let feats = t
            .features
            .as_deref()
            .map(|f| {
                if f.starts_with("unreadable") || f == "absent" {
                    f.to_string()
                } else {
                    f.split_whitespace()
                        .filter(|x| x.contains("SIS_"))
                        .collect::<Vec<_>>()
                        .join(" ")
                }
            })
            .unwrap_or_else(|| "not recorded".into());
        let _ = writeln!(
            o,
            "<tr><td class=\"t\">{}</td><td class=\"t\" title=\"{}\">{}</td><td class=\"t\">{}</td><td class=\"t\">{}</td><td class=\"t\">{}</td><td>{}{}</td><td>{}</td><td>{}</td><td class=\"t\">{}</td></tr>",
            escape(&t.path.display().to_string()),
            escape(&format!("{} of {}", t.content_hash.algorithm, t.content_hash.file.display())),
            escape(&t.content_hash.to_string()),
            escape(t.kernel_release.as_deref().unwrap_or("unknown")),
            escape(t.source_format.as_deref().unwrap_or("trace file")),
            escape(t.clock.as_deref().unwrap_or("unknown")),
            t.nr_cpus,
            if t.topology_assumed { " (topology assumed)" } else { "" },
            t.events.map_or("n/a".into(), |e| e.to_string()),
            t.lost_events.map_or("n/a".into(), |e| e.to_string()),
            escape(&feats)
        );
    }
    let _ = writeln!(o, "</tbody></table></div>");
    let first = r.traces.first();
    let _ = writeln!(
        o,
        "<h3>Model parameters</h3><div class=\"scroll\"><table><thead><tr><th>parameter</th>\
         <th>value</th></tr></thead><tbody>"
    );
    if let Some(t) = first {
        let tm = &t.replay.time_model;
        for (k, v) in [
            (
                "search entry cost (--entry-ns)",
                format!("{} ns", tm.entry_ns),
            ),
            (
                "cost per runqueue probed (--probe-ns)",
                format!("{} ns", tm.probe_ns),
            ),
            (
                "rq lock hold window",
                format!("{} ns", t.replay.lock_hold_ns),
            ),
            ("traced kernel's policy", t.replay.as_kernel.clone()),
        ] {
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td class=\"t\">{}</td></tr>",
                escape(k),
                escape(&v)
            );
        }
    }
    for p in &r.policies {
        let vals: Vec<String> = p.values.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let _ = writeln!(
            o,
            "<tr><td>policy {}</td><td class=\"t\">{} (follows {})</td></tr>",
            escape(&p.spec),
            escape(
                if vals.is_empty() {
                    "no parameters".into()
                } else {
                    vals.join(", ")
                }
                .as_str()
            ),
            escape(&p.follows)
        );
    }
    let _ = writeln!(o, "</tbody></table></div>");
}

/// Closed-loop measures of simulated bundles (`synth`, `simulate`): what decision replay
/// cannot give, throughput and latency under each policy's own placements.
fn simulated_section(o: &mut String, r: &Report) {
    let sims: Vec<(&str, &crate::compare::SimSummary)> = r
        .comparison
        .traces
        .iter()
        .filter_map(|t| t.simulated.as_ref().map(|s| (t.trace.as_str(), s)))
        .collect();
    let Some((_, base)) = sims.first() else {
        return;
    };
    let _ = writeln!(
        o,
        "<section id=\"simulated\"><h2>Simulated</h2><p>Bundles the simulator wrote, closed \
         loop: throughput in {} per second against the first, and wakeup latency with each \
         policy's own placements.</p>",
        escape(&base.unit)
    );
    let _ = writeln!(
        o,
        "<div class=\"scroll\"><table><thead><tr><th>bundle</th><th>workload</th><th>policy</th>\
         <th>per second</th><th>vs first</th><th>p50 us</th><th>p90 us</th><th>p99 us</th>\
         <th>se_eff%</th><th>cross-LLC %</th><th>self-fidelity</th></tr></thead><tbody>"
    );
    for (name, s) in &sims {
        let vs = s.throughput_vs(base);
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.0}</td><td>{}</td><td>{:.1}</td>\
             <td>{:.1}</td><td>{:.1}</td><td>{:.2}</td><td>{:.2}</td><td title=\"{}\">{}</td></tr>",
            escape(name),
            escape(&s.workload),
            escape(&s.policy),
            s.throughput_per_s,
            vs,
            s.latency_p50_ns as f64 / 1e3,
            s.latency_p90_ns as f64 / 1e3,
            s.latency_p99_ns as f64 / 1e3,
            s.se_eff,
            s.cross_llc_pct,
            escape(&s.self_fidelity.as_ref().map_or_else(
                || "synthetic workload: no trace to check against".to_string(),
                |g| g.verdict()
            )),
            s.trust()
        );
    }
    let _ = writeln!(o, "</tbody></table></div>");
    // Each trace's self-fidelity gate, check by check.
    let mut said: Vec<&crate::simulate::SelfFidelity> = Vec::new();
    for (_, s) in &sims {
        let Some(g) = s.self_fidelity.as_ref().filter(|g| !said.contains(g)) else {
            continue;
        };
        said.push(g);
        let _ = writeln!(
            o,
            "<p>Self-fidelity of {} (its trace re-run under {}): {}. {}</p>",
            escape(&s.workload),
            escape(&g.traced_policy),
            escape(&g.verdict()),
            if g.trustworthy {
                "Its counterfactuals are trusted."
            } else {
                "<strong>Its counterfactuals are untrustworthy.</strong>"
            }
        );
        let _ = writeln!(
            o,
            "<div class=\"scroll\"><table><thead><tr><th>check</th><th>trace</th><th>re-run</th>\
             <th>tolerance</th><th>re-run against trace</th><th>result</th></tr></thead><tbody>"
        );
        for c in &g.checks {
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td>{:.1}</td><td>{:.1}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&c.name),
                c.trace,
                c.rerun,
                escape(&c.tolerance),
                escape(&c.compared()),
                c.result()
            );
        }
        let _ = writeln!(o, "</tbody></table></div>");
    }
    let _ = writeln!(o, "</section>");
}

fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=,%+@".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// The document's head, title and contents.
fn head_section(o: &mut String, r: &Report) {
    let c = &r.comparison;
    let title = format!(
        "sisreplay: {} against {}",
        c.arms[1..].join(", "),
        c.arms[0]
    );
    let _ = writeln!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{}</title><style>{STYLE}</style></head><body><main>",
        escape(&title)
    );
    let traces: Vec<&str> = r.traces.iter().map(|t| t.name.as_str()).collect();
    let _ = writeln!(
        o,
        "<h1>{}</h1><p class=\"sub\">Decision replay of {} over {}. Baseline: <b>{}</b>.</p>",
        escape(&title),
        escape(&c.arms.join(", ")),
        escape(&traces.join(", ")),
        escape(&c.arms[0])
    );
    let _ = writeln!(
        o,
        "<nav><ol><li><a href=\"#verdict\">Verdict</a></li><li><a href=\"#tables\">Tables</a></li>\
         <li><a href=\"#search-time\">Search time</a></li>{}<li><a href=\"#placements\">Placements \
         and rq locks</a></li><li><a href=\"#latency\">Wakeup latency</a></li><li><a href=\"#machine\">\
         Machine</a></li><li><a href=\"#timeline\">Busy/idle timeline</a></li><li><a href=\"#fidelity\">\
         Fidelity</a></li><li><a href=\"#reproduce\">Reproduce</a></li><li><a href=\"#glossary\">\
         Glossary</a></li></ol></nav>",
        if several_rows(r) {
            "<li><a href=\"#load-curves\">Over load</a></li>"
        } else {
            ""
        }
    );
}

/// Each arm against the baseline, metric by metric.
fn verdict_section(o: &mut String, r: &Report) {
    let c = &r.comparison;
    let _ = writeln!(o, "<section id=\"verdict\"><h2>Verdict</h2>");
    // The evidence first: how well the model of the traced kernel reproduced each trace.
    // These lines name the traces T1, T2, ... that the table refers to.
    let _ = writeln!(o, "<ul class=\"trust\">");
    for (i, t) in r.traces.iter().enumerate() {
        let fid = t.replay.policies.iter().find_map(|p| p.fidelity.as_ref());
        let trust = trust_of(fid);
        let what = match fid {
            Some(f) => format!(
                "the model of its kernel ({}) picks the kernel's CPU for {:.1} % of {} \
                 wakeups ({})",
                t.replay.as_kernel,
                f.agreement_pct(),
                f.decisions,
                super::baseline_words(f, " %")
            ),
            None => "no model of its kernel was checked against it".into(),
        };
        let warn = if trust == "weak" {
            ": the modelled numbers of this trace are not to be relied on"
        } else {
            ""
        };
        let _ = writeln!(
            o,
            "<li><b>T{}</b> {} (<code>{}</code>): {}; trust <span class=\"{trust}\">{trust}</span>{warn}.</li>",
            i + 1,
            escape(&t.name),
            escape(&t.content_hash.to_string()),
            escape(&what)
        );
    }
    let _ = writeln!(o, "</ul>");
    let across = r.verdicts.iter().any(|v| v.runs.is_some());
    if let Some(test) = c.runs_test.filter(|_| across) {
        let _ = writeln!(
            o,
            "<p>Where the trace and the arm have two or more runs each, the means, change and \
             interval are across runs ({}), and the line under each gives every run's value, \
             their spread (sample std, % of the mean) and the change of the pooled \
             windows.</p>",
            escape(test)
        );
    }
    let label = |trace: &str| super::trace_label(r, trace);
    let _ = writeln!(
        o,
        "<p>Each arm against {}: the change in the metric's mean over the trace's time \
         windows (not the whole trace's total, which <code>replay</code> prints) with its \
         95 % interval ({}); better or worse only beyond the noise and past the metric's practical \
         threshold, else negligible.</p>\
         <div class=\"scroll\"><table><thead><tr><th>metric</th><th>trace</th><th>arm</th>\
         <th>baseline</th><th>arm</th><th>change [95 %]</th><th>verdict</th><th>trust</th>\
         </tr></thead><tbody>",
        escape(&c.arms[0]),
        escape(c.test)
    );
    for v in r.verdicts.iter().filter(|v| v.word != "identical") {
        let class = match v.word {
            "better" => "better",
            "worse" => "worse",
            _ => "same",
        };
        let interval = v
            .change_interval_pct
            .map_or(String::new(), |(lo, hi)| format!(" [{lo:+.1}, {hi:+.1}]"));
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td>{}</td><td class=\"t\">{}</td><td>{:.3}</td><td>{:.3}</td>\
             <td>{:+.2}%{interval}</td><td class=\"{class}\">{}</td><td class=\"{}\">{}</td>\
             </tr>",
            escape(v.metric.short()),
            label(&v.trace),
            escape(&v.arm),
            v.base_mean,
            v.mean,
            v.change_pct,
            v.word,
            v.trust,
            v.trust
        );
        if let Some(runs) = &v.runs {
            let _ = writeln!(
                o,
                "<tr class=\"runs\"><td></td><td colspan=\"7\" class=\"t\">{}</td></tr>",
                escape(&super::runs_line(runs))
            );
        }
    }
    let _ = writeln!(o, "</tbody></table></div>");
    // What did not change at all, one line per arm, and the arms that cannot differ.
    let notes = super::unchanged_notes(r);
    if !notes.is_empty() {
        let _ = writeln!(o, "<ul>");
        for n in notes {
            let _ = writeln!(o, "<li>{}</li>", escape(&n));
        }
        let _ = writeln!(o, "</ul>");
    }
    let _ = writeln!(o, "</section>");
}

/// Per task, as `perf sched latency` lists them, and the longest single waits with the
/// command that explains how each policy would have placed that wakeup.
fn latency_tables(o: &mut String, t: &TraceReport) {
    let ob = &t.replay.observed;
    if ob.per_task.is_empty() {
        return;
    }
    let name = |pid: i32| t.task_names.get(&pid).map_or("?", String::as_str);
    let _ = writeln!(
        o,
        "<h3>{}: tasks by their longest wait</h3><div class=\"scroll\"><table><thead><tr>\
         <th>task</th><th>pid</th><th>wakeups</th><th>avg us</th><th>max us</th>\
         <th>max at (waking, ns)</th></tr></thead><tbody>",
        escape(&t.name)
    );
    for k in &ob.per_task {
        let _ = writeln!(
            o,
            "<tr><td class=\"t\">{}</td><td>{}</td><td>{}</td><td>{:.1}</td><td>{:.1}</td>\
             <td>{}</td></tr>",
            escape(name(k.pid)),
            k.pid,
            k.wakeups,
            k.total_ns as f64 / k.wakeups.max(1) as f64 / 1e3,
            k.max_ns as f64 / 1e3,
            k.max_at_ns
        );
    }
    let _ = writeln!(
        o,
        "</tbody></table></div><h3>{}: the longest waits</h3><div class=\"scroll\"><table>\
         <thead><tr><th>latency us</th><th>task</th><th>pid</th><th>explain it</th></tr>\
         </thead><tbody>",
        escape(&t.name)
    );
    for w in &ob.worst {
        let _ = writeln!(
            o,
            "<tr><td>{:.1}</td><td class=\"t\">{}</td><td>{}</td><td class=\"t\">\
             <code>sisreplay replay {} --explain {}</code></td></tr>",
            w.latency_ns as f64 / 1e3,
            escape(name(w.pid)),
            w.pid,
            escape(&shell_quote(&t.path.display().to_string())),
            w.waking_ns
        );
    }
    let _ = writeln!(o, "</tbody></table></div>");
}

/// The seed-style tables.
fn tables_section(o: &mut String, r: &Report) {
    let c = &r.comparison;
    // Seed-style tables.
    let _ = writeln!(
        o,
        "<section id=\"tables\"><h2>Tables</h2><p>As the seeds print them: the baseline as \
         1.00 (std%), the others as change% (std%); std over {} time windows; * where the \
         difference is beyond the noise; [value] where the baseline has none.{}</p>",
        c.windows,
        if c.runs_test.is_some() {
            " A trace of several runs pools their windows, and the row under it, across \
             runs, takes each run's mean as one sample: std over the runs, * by the test \
             across runs."
        } else {
            ""
        }
    );
    for t in &c.tables {
        if t.rows.iter().all(|r| r.cells.iter().all(Option::is_none)) {
            continue;
        }
        let _ = writeln!(
            o,
            "<h3>{}</h3><div class=\"scroll\"><table><thead><tr><th>trace</th><th>wakeups</th>",
            escape(t.metric.title())
        );
        for a in &c.arms {
            let _ = write!(o, "<th>{}</th>", escape(a));
        }
        let _ = writeln!(o, "</tr></thead><tbody>");
        for row in &t.rows {
            let _ = write!(
                o,
                "<tr><td>{}</td><td>{}</td>",
                escape(&row.trace),
                row.wakeups
            );
            for (i, cell) in row.cells.iter().enumerate() {
                let _ = write!(o, "<td>{}</td>", escape(&cell_text(cell.as_ref(), i == 0)));
            }
            let _ = writeln!(o, "</tr>");
            // The same row across its runs: each run's mean one sample.
            if row.cells.iter().flatten().any(|c| c.runs.is_some()) {
                let _ = write!(o, "<tr class=\"runs\"><td>across runs</td><td></td>");
                for (i, cell) in row.cells.iter().enumerate() {
                    let runs = cell.as_ref().and_then(|c| c.runs.as_ref());
                    let _ = write!(o, "<td>{}</td>", escape(&runs_cell_text(runs, i == 0)));
                }
                let _ = writeln!(o, "</tr>");
            }
        }
        let _ = writeln!(o, "</tbody></table></div>");
    }
    let _ = writeln!(o, "</section>");
}

/// The recorded waking-to-running latency.
fn latency_section(o: &mut String, r: &Report) {
    let _ = writeln!(o, "<section id=\"latency\"><h2>Wakeup latency</h2>");
    let series: Vec<(String, Vec<(f64, f64)>)> = r
        .traces
        .iter()
        .filter(|t| !t.replay.observed.latency_us.buckets.is_empty())
        .map(|t| (t.name.clone(), cdf_points(&t.replay.observed.latency_us)))
        .collect();
    if series.is_empty() {
        let _ = writeln!(o, "<p>No wakee was seen running after its wakeup.</p>");
    } else {
        fig(
            o,
            "latency-cdf",
            &plots::cdf(
                "Waking-to-running latency, recorded",
                "latency, us (log scale)",
                &series,
            ),
            "Recorded in each trace: from sched_waking to the sched_switch that runs the wakee, \
             cumulative at the top of each log2 bucket. Decision replay is open loop and cannot \
             say how a different placement would change it.",
        );
        let _ = writeln!(
            o,
            "<div class=\"scroll\"><table><thead><tr><th>trace</th><th>p50 us</th><th>p90 us</th><th>p99 us</th><th>p99.9 us</th><th>max us</th></tr></thead><tbody>"
        );
        for t in &r.traces {
            let l = &t.replay.observed.latency;
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td>{:.1}</td><td>{:.1}</td><td>{:.1}</td><td>{:.1}</td><td>{:.1}</td></tr>",
                escape(&t.name),
                l.p50 as f64 / 1e3,
                l.p90 as f64 / 1e3,
                l.p99 as f64 / 1e3,
                l.p99_9 as f64 / 1e3,
                l.max as f64 / 1e3
            );
        }
        let _ = writeln!(o, "</tbody></table></div>");
    }
    for t in &r.traces {
        latency_tables(o, t);
    }
    let _ = writeln!(o, "</section>");
}

/// Each distinct machine's topology.
fn machine_section(o: &mut String, r: &Report) {
    let _ = writeln!(o, "<section id=\"machine\"><h2>Machine</h2>");
    let mut drawn: Vec<&crate::topology::Topology> = Vec::new();
    for t in &r.traces {
        if drawn.contains(&&t.topology) {
            continue;
        }
        drawn.push(&t.topology);
        fig(
            o,
            &format!("topology-{}", slug(&t.name)),
            &plots::topology(&t.topology),
            &format!(
                "{}: packages, LLCs and cores with their CPUs (SMT siblings share a box); from {}.",
                t.name, t.topology.source
            ),
        );
    }
    let _ = writeln!(o, "</section>");
}

/// Machines with more CPUs than this draw one busy strip per LLC, not per CPU: a row
/// per CPU of a 224-CPU machine is illegible and weighs megabytes.
const PER_CPU_STRIPS_MAX: usize = 16;

/// Bins of the per-LLC strip across the window: about two pixels each.
const LLC_STRIP_BINS: usize = 340;

/// A busy/idle strip from the middle of each trace: a row per CPU, or per LLC, shaded by
/// the share of its CPUs busy, on a machine of more than [`PER_CPU_STRIPS_MAX`] CPUs.
fn timeline_section(o: &mut String, r: &Report) {
    let _ = writeln!(o, "<section id=\"timeline\"><h2>Busy/idle timeline</h2>");
    for t in &r.traces {
        let tl = &t.timeline;
        let title = format!(
            "Busy CPUs, {} ({} us from the middle)",
            t.name,
            tl.span_ns / 1000
        );
        let (svg, caption) = if tl.cpus.len() > PER_CPU_STRIPS_MAX {
            let llcs = tl.llc_busy(&t.topology, LLC_STRIP_BINS);
            let rows: Vec<(String, Vec<f64>)> = llcs
                .iter()
                .map(|l| (format!("LLC {} ({} CPUs)", l.llc, l.cpus), l.shares.clone()))
                .collect();
            let busy: Vec<String> = llcs
                .iter()
                .map(|l| {
                    let mean = l.shares.iter().sum::<f64>() / l.shares.len().max(1) as f64;
                    format!("LLC {} {:.0}%", l.llc, 100.0 * mean)
                })
                .collect();
            (
                plots::shaded_timeline(&title, tl.span_ns, &rows),
                format!(
                    "One row per LLC: the darker, the larger the share of its CPUs running \
                     a task. Busy: {}.",
                    busy.join(", ")
                ),
            )
        } else {
            let busy: Vec<String> = tl
                .busy_pct()
                .iter()
                .map(|(c, p)| format!("CPU {c} {p:.0}%"))
                .collect();
            (
                plots::timeline(&title, tl.span_ns, &tl.cpus),
                format!(
                    "Dark: a task runs; light: the idle task. Busy: {}.",
                    busy.join(", ")
                ),
            )
        };
        fig(o, &format!("timeline-{}", slug(&t.name)), &svg, &caption);
    }
    let _ = writeln!(o, "</section>");
}

/// The report's words, one line each, and the seeds with their subjects.
fn glossary_section(o: &mut String) {
    let _ = writeln!(
        o,
        "<section id=\"glossary\"><h2>Glossary</h2><dl class=\"glossary\">"
    );
    for (term, def) in super::glossary::TERMS {
        let _ = writeln!(o, "<dt>{}</dt><dd>{}</dd>", escape(term), escape(def));
    }
    let _ = writeln!(o, "</dl><h3>Seeds</h3><dl class=\"glossary\">");
    for (id, subject, who, what) in super::glossary::SEEDS {
        let _ = writeln!(
            o,
            "<dt>seed {id}</dt><dd><i>{}</i> ({}): {}</dd>",
            escape(subject),
            escape(who),
            escape(what)
        );
    }
    let _ = writeln!(o, "</dl></section>");
}

/// The comparison has more than one row to draw over: traces read only for a trace arm,
/// or the runs of one row, are no load steps.
fn several_rows(r: &Report) -> bool {
    r.comparison
        .tables
        .first()
        .is_some_and(|t| t.rows.len() > 1)
}

/// The whole report as one HTML page: verdict, tables, search time, load curves (several
/// traces), placements, latency, simulation results, the machine, the busy/idle strips,
/// fidelity and how to reproduce it.
pub fn render(r: &Report) -> String {
    let mut o = String::new();
    head_section(&mut o, r);
    let multi = several_rows(r);

    verdict_section(&mut o, r);

    tables_section(&mut o, r);

    let _ = writeln!(o, "<section id=\"search-time\"><h2>Search time</h2>");
    for t in &r.traces {
        search_section(&mut o, r, t);
    }
    let _ = writeln!(o, "</section>");

    if multi {
        let _ = writeln!(o, "<section id=\"load-curves\"><h2>Over load</h2>");
        curves_section(&mut o, r);
        let _ = writeln!(o, "</section>");
    }

    let _ = writeln!(
        o,
        "<section id=\"placements\"><h2>Placements and rq locks</h2>"
    );
    placements_section(&mut o, r);
    let _ = writeln!(o, "</section>");

    latency_section(&mut o, r);

    simulated_section(&mut o, r);

    machine_section(&mut o, r);

    timeline_section(&mut o, r);

    let _ = writeln!(o, "<section id=\"fidelity\"><h2>Fidelity</h2>");
    fidelity_section(&mut o, r);
    let _ = writeln!(o, "</section>");

    let _ = writeln!(o, "<section id=\"reproduce\"><h2>Reproduce</h2>");
    reproduce_section(&mut o, r);
    let _ = writeln!(o, "</section>");

    glossary_section(&mut o);
    let _ = writeln!(o, "</main></body></html>");
    o
}
