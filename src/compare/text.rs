//! A comparison as plain text in the seeds' layout, within 80 columns, ready for a mail.

use std::fmt::Write;

use super::{Cell, Comparison, SimSummary, Table};

/// Column labels for `names`: each name that fits in `width` as itself, a longer one as
/// `T1`, `T2`, ... (with `prefix` and its place), spelled out whole in the legend lines.
fn labels(names: &[&str], width: usize, prefix: &str) -> (Vec<String>, Vec<String>) {
    let mut legend = Vec::new();
    let labels = names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            if n.chars().count() <= width {
                return n.to_string();
            }
            let l = format!("{prefix}{}", i + 1);
            legend.push(format!("{l:>4} = {n}"));
            l
        })
        .collect();
    (labels, legend)
}

/// A cell's statistics across runs in the same layout: the baseline 1.00 (std% over its
/// runs), the others compare% (std%) and `*` beyond the run-to-run noise.
fn render_runs_cell(cell: Option<&Cell>, baseline: bool) -> String {
    let Some(r) = cell.and_then(|c| c.runs.as_ref()) else {
        return "n/a".into();
    };
    match r.compare_pct {
        _ if baseline => format!("1.00 ({:6.2})", r.std_pct),
        Some(pct) => format!(
            "{pct:+.2} ({:6.2}){}",
            r.std_pct,
            if r.beyond_noise { "*" } else { " " }
        ),
        None => format!("[{:.2}] ({:6.2})", r.mean, r.std_pct),
    }
}

fn render_cell(cell: Option<&Cell>, baseline: bool) -> String {
    match cell {
        None => "n/a".into(),
        Some(c) if baseline => format!("1.00 ({:6.2})", c.std_pct),
        Some(c) => match c.compare_pct {
            Some(pct) => format!(
                "{pct:+.2} ({:6.2}){}",
                c.std_pct,
                if c.beyond_noise { "*" } else { " " }
            ),
            // The baseline has no value here (an observed arm has no SIS counters).
            None => format!("[{:.2}] ({:6.2})", c.mean, c.std_pct),
        },
    }
}

/// The short labels a comparison's columns and rows go by.
struct Labels<'a> {
    arms: Vec<String>,
    trace_names: Vec<&'a str>,
    traces: Vec<String>,
}

impl Labels<'_> {
    /// A trace's row label, by its name.
    fn trace(&self, name: &str) -> String {
        self.trace_names
            .iter()
            .position(|t| *t == name)
            .map_or_else(|| name.to_string(), |i| self.traces[i].clone())
    }
}

/// The comparison as text: one table per metric that some arm has a value for (arms
/// compared two at a time beside the baseline), the legend, and what each trace recorded.
pub fn render(c: &Comparison) -> String {
    let mut o = String::new();
    let arm_names: Vec<&str> = c.arms.iter().map(String::as_str).collect();
    let (arms, arm_legend) = labels(&arm_names, 14, "A");
    let mut trace_names: Vec<&str> = c.traces.iter().map(|t| t.trace.as_str()).collect();
    let (mut traces, trace_legend) = labels(&trace_names, 15, "T");
    // A row of several runs goes by its own name, or the span of its runs' labels.
    if let Some(t) = c.tables.first() {
        for r in t.rows.iter().filter(|r| !r.runs.is_empty()) {
            if trace_names.contains(&r.trace.as_str()) {
                continue;
            }
            let at = |run: Option<&String>| {
                run.and_then(|n| trace_names.iter().position(|t| t == n))
                    .map_or(0, |i| i + 1)
            };
            let label = if r.trace.chars().count() <= 15 {
                r.trace.clone()
            } else {
                format!("T{}-T{}", at(r.runs.first()), at(r.runs.last()))
            };
            trace_names.push(&r.trace);
            traces.push(label);
        }
    }
    // Names too long for a column are numbered, and spelled out here once.
    if !arm_legend.is_empty() || !trace_legend.is_empty() {
        for l in arm_legend.iter().chain(&trace_legend) {
            let _ = writeln!(o, "{l}");
        }
        let _ = writeln!(o);
    }
    let labels = Labels {
        arms,
        trace_names,
        traces,
    };
    let mut absolute = false;
    for t in &c.tables {
        absolute |= metric_table(&mut o, c, t, &labels);
    }
    notes(&mut o, c, absolute, &labels);
    recorded_table(&mut o, c, &labels);
    simulated_table(&mut o, c, &labels);
    o
}

/// One metric's table, in blocks of the baseline and two compared arms; returns
/// whether a cell shows an absolute value (the baseline having none).
fn metric_table(o: &mut String, c: &Comparison, t: &Table, labels: &Labels) -> bool {
    let mut absolute = false;
    // A metric no arm has a value for (latency in a policy-only comparison) is left out.
    if t.rows.iter().all(|r| r.cells.iter().all(Option::is_none)) {
        return absolute;
    }
    let _ = writeln!(o, "{}", t.metric.title());
    // Columns: trace 16, then 21 per arm: three arms per block keeps 79 columns.
    // The baseline leads every block, so each compared arm sits beside it.
    for chunk_start in (1..c.arms.len().max(2)).step_by(2) {
        let mut idx = vec![0];
        idx.extend(chunk_start..(chunk_start + 2).min(c.arms.len()));
        let _ = write!(o, "{:<16}", "trace");
        for &i in &idx {
            let label = format!("{}(std%)", labels.arms[i]);
            let _ = write!(o, "{label:>21}");
        }
        let _ = writeln!(o);
        for r in &t.rows {
            let _ = write!(o, "{:<16}", labels.trace(&r.trace));
            for &i in &idx {
                let s = render_cell(r.cells[i].as_ref(), i == 0);
                absolute |= s.starts_with('[');
                let _ = write!(o, "{s:>21}");
            }
            let _ = writeln!(o);
        }
        // Rows with several runs (or compared with an arm that has them) again, across
        // the runs: each run's mean one sample.
        let with_runs: Vec<_> = t
            .rows
            .iter()
            .filter(|r| r.cells.iter().flatten().any(|c| c.runs.is_some()))
            .collect();
        if !with_runs.is_empty() {
            let _ = writeln!(o, "across runs");
        }
        for r in with_runs {
            let _ = write!(o, "{:<16}", labels.trace(&r.trace));
            for &i in &idx {
                let s = render_runs_cell(r.cells[i].as_ref(), i == 0);
                absolute |= s.starts_with('[');
                let _ = write!(o, "{s:>21}");
            }
            let _ = writeln!(o);
        }
    }
    let _ = writeln!(o);
    absolute
}

/// How to read the tables: the baseline, the noise test, absolute values and which
/// arms are observed rather than modelled.
fn notes(o: &mut String, c: &Comparison, absolute: bool, labels: &Labels) {
    let _ = writeln!(
        o,
        "baseline {}: 1.00 (std% over {} windows); others: compare% (std%);\n* beyond the noise ({})",
        c.arms[0], c.windows, c.test
    );
    if absolute {
        let _ = writeln!(o, "[v]: absolute value, where the baseline has none");
    }
    if let Some(test) = c.runs_test {
        let _ = writeln!(
            o,
            "several runs: their windows pooled above; \"across runs\": std% over the runs'\n\
             means, * beyond the run-to-run noise:\n  {test}"
        );
        runs_counts(o, c, labels);
    }
    let traced: Vec<&str> = c
        .arms
        .iter()
        .zip(&c.kinds)
        .filter(|(_, k)| **k == "trace")
        .map(|(a, _)| a.as_str())
        .collect();
    if !traced.is_empty() {
        let _ = writeln!(
            o,
            "observed arms (what the trace recorded): {}",
            traced.join(", ")
        );
    }
}

/// How many runs each arm has on each row of several, as `runs on ROW: arm N, ...`: the
/// most any metric has a value in.
fn runs_counts(o: &mut String, c: &Comparison, labels: &Labels) {
    let Some(first) = c.tables.first() else {
        return;
    };
    for (k, r) in first.rows.iter().enumerate() {
        let counts: Vec<String> = labels
            .arms
            .iter()
            .enumerate()
            .filter_map(|(i, a)| {
                let n = c
                    .tables
                    .iter()
                    .filter_map(|t| t.rows[k].cells[i].as_ref()?.runs.as_ref())
                    .map(|s| s.values.len())
                    .max()?;
                Some(format!("{a} {n}"))
            })
            .collect();
        if !counts.is_empty() {
            let _ = writeln!(
                o,
                "runs on {}: {}",
                labels.trace(&r.trace),
                counts.join(", ")
            );
        }
    }
}

/// What each trace recorded: wakeups, where they went, migrations and latency.
fn recorded_table(o: &mut String, c: &Comparison, labels: &Labels) {
    let _ = writeln!(o);
    let _ = writeln!(o, "recorded in the traces");
    let _ = writeln!(
        o,
        "{:<16}{:>9}{:>8}{:>7}{:>9}{:>9}{:>9}{:>9}",
        "trace", "wakeups", "moved%", "xLLC%", "migr/s", "p50 us", "p99 us", "p99.9 us"
    );
    for s in &c.traces {
        let ob = &s.observed;
        let p = &ob.placements;
        let pct = |n: u64| {
            if ob.wakeups > 0 {
                100.0 * n as f64 / ob.wakeups as f64
            } else {
                0.0
            }
        };
        let m = &ob.migrations;
        let migr = m.same_llc + m.cross_llc + m.cross_numa;
        let secs = s.duration_ns as f64 / 1e9;
        let _ = writeln!(
            o,
            "{:<16}{:>9}{:>8.2}{:>7.2}{:>9.0}{:>9.1}{:>9.1}{:>9.1}",
            labels.trace(&s.trace),
            ob.wakeups,
            pct(p.same_llc + p.cross_llc + p.cross_numa),
            pct(p.cross_llc + p.cross_numa),
            if secs > 0.0 { migr as f64 / secs } else { 0.0 },
            ob.latency.p50 as f64 / 1e3,
            ob.latency.p99 as f64 / 1e3,
            ob.latency.p99_9 as f64 / 1e3,
        );
    }
}

/// The closed-loop simulations, where there are any: throughput against the first,
/// latency, search efficiency, and each trace's self-fidelity gate.
fn simulated_table(o: &mut String, c: &Comparison, labels: &Labels) {
    let simulated: Vec<(&str, &SimSummary)> = c
        .traces
        .iter()
        .filter_map(|s| s.simulated.as_ref().map(|m| (s.trace.as_str(), m)))
        .collect();
    let Some((_, base)) = simulated.first() else {
        return;
    };
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "simulated (closed loop), throughput against {}",
        simulated[0].0
    );
    let _ = writeln!(
        o,
        "{:<16}{:>12}{:>8}{:>8}{:>8}{:>8}{:>8}{:>7}  self-fidelity",
        "bundle", "units/s", "vs", "p50 us", "p90 us", "p99 us", "se_eff%", "xLLC%"
    );
    for (name, m) in &simulated {
        let vs = m.throughput_vs(base);
        let _ = writeln!(
            o,
            "{:<16}{:>12.0}{:>8}{:>8.1}{:>8.1}{:>8.1}{:>8.2}{:>7.2}  {}",
            labels.trace(name),
            m.throughput_per_s,
            vs,
            m.latency_p50_ns as f64 / 1e3,
            m.latency_p90_ns as f64 / 1e3,
            m.latency_p99_ns as f64 / 1e3,
            m.se_eff,
            m.cross_llc_pct,
            m.trust()
        );
    }
    let _ = writeln!(o, "units: {}", base.unit);
    self_fidelity_lines(o, &simulated);
}

/// Each trace's self-fidelity gate once, with what it misses.
fn self_fidelity_lines(o: &mut String, simulated: &[(&str, &SimSummary)]) {
    let mut said: Vec<&crate::simulate::SelfFidelity> = Vec::new();
    for (_, m) in simulated {
        if let Some(g) = m.self_fidelity.as_ref().filter(|g| !said.contains(g)) {
            said.push(g);
            let _ = writeln!(
                o,
                "self-fidelity of {} (its trace re-run under {}): {}{}",
                m.workload,
                g.traced_policy,
                g.verdict(),
                if g.trustworthy {
                    "; its counterfactuals are trusted"
                } else {
                    "; its counterfactuals are untrustworthy"
                }
            );
        }
    }
}
