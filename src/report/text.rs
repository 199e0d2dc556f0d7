//! The report as plain text within 80 columns, to paste into a mail: verdicts, the
//! seed-style tables, and histograms drawn with `@` bars as bpftrace prints them.

use std::fmt::Write;

use super::{Report, TraceReport};
use crate::metrics::Log2Hist;

/// bpftrace's bar width.
const BAR: usize = 52;

/// A log2 histogram in bpftrace's layout: `[16, 32)   123 |@@@@   |`.
pub fn bpftrace_hist(name: &str, h: &Log2Hist) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "@{name}:");
    let max = h.buckets.iter().copied().max().unwrap_or(0).max(1);
    // bpftrace starts at the first non-empty bucket and stops at the last.
    let first = h.buckets.iter().position(|&n| n > 0).unwrap_or(0);
    let last = h.buckets.iter().rposition(|&n| n > 0).unwrap_or(0);
    for i in first..=last {
        let n = h.buckets[i];
        let bar = (n as u128 * BAR as u128 / max as u128) as usize;
        let _ = writeln!(
            o,
            "{:<14}{n:>8} |{:<BAR$}|",
            Log2Hist::label(i),
            "@".repeat(bar)
        );
    }
    o
}

/// The report as text: each traced kernel's fidelity first, then the verdicts, the
/// unchanged arms, the tables, search-time histograms and the longest waits.
pub fn render(r: &Report) -> String {
    let c = &r.comparison;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "sisreplay {}: {} against {}",
        r.sisreplay_version,
        c.arms[1..].join(", "),
        c.arms[0]
    );
    let _ = writeln!(o);
    trust_lines(&mut o, r);
    let _ = writeln!(o);
    verdict(&mut o, r);
    let _ = writeln!(o);
    o.push_str(&crate::compare::text::render(c));
    for t in &r.traces {
        let _ = writeln!(o);
        search_histograms(&mut o, t);
        longest_waits(&mut o, t);
        fidelity_lines(&mut o, t);
    }
    reproduce(&mut o, r);
    glossary(&mut o);
    o
}

/// The report's words and the seeds, one entry each.
fn glossary(o: &mut String) {
    let _ = writeln!(o);
    let _ = writeln!(o, "Glossary:");
    for (term, def) in super::glossary::TERMS {
        let _ = writeln!(o, "{}", fit(&format!("  {term}: {def}")));
    }
    for (id, subject, who, _) in super::glossary::SEEDS {
        let _ = writeln!(o, "{}", fit(&format!("  seed {id} ({who}): {subject}")));
    }
}

/// Each trace by path and content hash, and the command that makes the report again
/// (with the traces it resolved when the command line named none).
fn reproduce(o: &mut String, r: &Report) {
    let _ = writeln!(o);
    for (i, t) in r.traces.iter().enumerate() {
        let line = format!("T{} {}: {}", i + 1, t.path.display(), t.content_hash);
        let _ = writeln!(o, "{}", fit(&line));
    }
    let cmd = r.reproduce.join(" ");
    let _ = writeln!(o, "{}", fit(&format!("Reproduce: {cmd}")));
}

/// The evidence first: how well the model of each traced kernel reproduced its trace;
/// these lines also name the traces (T1, T2, ...) the verdict refers to.
fn trust_lines(o: &mut String, r: &Report) {
    for (i, t) in r.traces.iter().enumerate() {
        let fid = t.replay.policies.iter().find_map(|p| p.fidelity.as_ref());
        let trust = super::trust_of(fid);
        let line = match fid {
            Some(f) => format!(
                "T{} {}: trust {trust}, {}'s model picks the kernel's CPU for {:.1}% of {} \
                 wakeups ({}){}",
                i + 1,
                t.name,
                t.replay.as_kernel,
                f.agreement_pct(),
                f.decisions,
                super::baseline_words(f, "%"),
                if trust == "weak" {
                    "; its modelled numbers are not to be relied on"
                } else {
                    ""
                }
            ),
            None => format!("T{} {}: trust unknown, no model checked", i + 1, t.name),
        };
        let _ = writeln!(o, "{}", fit(&line));
    }
}

/// The verdict: each metric that changed, per trace and arm, with its interval; then
/// what did not change at all.
fn verdict(o: &mut String, r: &Report) {
    let _ = writeln!(
        o,
        "{}",
        fit(&format!(
            "Verdict: baseline -> arm, means over the trace's time windows, change [95 % \
             interval] ({}):",
            r.comparison.test
        ))
    );
    let across = r.verdicts.iter().any(|v| v.runs.is_some());
    if let Some(test) = r.comparison.runs_test.filter(|_| across) {
        let line = format!(
            "Several runs (two or more on both sides): the means, change and interval are \
             across runs ({test}); under each, every run's value, their spread and the \
             pooled windows' change."
        );
        let _ = writeln!(o, "{}", fit(&line));
    }
    let label = |trace: &str| super::trace_label(r, trace);
    for v in r.verdicts.iter().filter(|v| v.word != "identical") {
        let interval = v
            .change_interval_pct
            .map_or(String::new(), |(lo, hi)| format!(" [{lo:+.1}, {hi:+.1}]"));
        let line = format!(
            "  {} {} {} {:.3} -> {:.3} {:+.2}%{interval} {}",
            label(&v.trace),
            v.metric.short(),
            v.arm,
            v.base_mean,
            v.mean,
            v.change_pct,
            v.word
        );
        let _ = writeln!(o, "{}", fit(&line));
        if let Some(runs) = &v.runs {
            let _ = writeln!(o, "{}", fit(&format!("      {}", super::runs_line(runs))));
        }
    }
    // What did not change at all, one line per arm, and the arms that cannot differ.
    for n in super::unchanged_notes(r) {
        let _ = writeln!(o, "{}", fit(&format!("  {n}")));
    }
}

/// Each arm's modelled time per scanning wakeup and the kernel's measured
/// select_task_rq_fair time where the trace has it, ns in log2 buckets as bpftrace
/// histograms, and what the measurement says of the cost per runqueue.
fn search_histograms(o: &mut String, t: &TraceReport) {
    let _ = writeln!(
        o,
        "{}",
        fit(&format!(
            "Modelled search time per scanning wakeup, ns, {} ({} ns + {} ns/probe):",
            t.name, t.replay.time_model.entry_ns, t.replay.time_model.probe_ns
        ))
    );
    for (policy, h) in &t.search_time.modelled_ns {
        if h.buckets.iter().any(|&n| n > 0) {
            o.push_str(&bpftrace_hist(&format!("search_ns[{policy}]"), h));
        } else {
            let _ = writeln!(o, "@search_ns[{policy}]: no scan");
        }
    }
    if let Some(m) = &t.search_time.measured_ns {
        o.push_str(&bpftrace_hist("measured_select_task_rq_fair_ns", m));
    }
    if let Some(f) = &t.replay.search_fit {
        let line = format!(
            "Measured select_task_rq_fair time {}.",
            super::search_time::fit_sentence(f)
        );
        let _ = writeln!(o, "{}", fit(&line));
    }
}

/// A trace's three longest recorded waits, each with the command that explains it.
fn longest_waits(o: &mut String, t: &TraceReport) {
    let ob = &t.replay.observed;
    if ob.worst.is_empty() {
        return;
    }
    let _ = writeln!(o, "{}", fit(&format!("Longest waits on {}:", t.name)));
    for w in ob.worst.iter().take(3) {
        let name = t.task_names.get(&w.pid).map_or("?", String::as_str);
        let _ = writeln!(
            o,
            "{}",
            fit(&format!(
                "  {:.1} us {name} ({}): sisreplay replay {} --explain {}",
                w.latency_ns as f64 / 1e3,
                w.pid,
                t.path.display(),
                w.waking_ns
            ))
        );
    }
}

/// For a trace's policy compared with its kernel: how often it picked the kernel's CPU.
fn fidelity_lines(o: &mut String, t: &TraceReport) {
    for p in &t.replay.policies {
        let Some(f) = &p.fidelity else { continue };
        let _ = writeln!(
            o,
            "{}",
            fit(&format!(
                "Fidelity of {} on {}: {:.2}% of {} wakeups on the kernel's CPU, {:.2}% in its LLC; cross-LLC recorded {}, predicted {}",
                p.policy,
                t.name,
                f.agreement_pct(),
                f.decisions,
                100.0 * f.same_llc_agree as f64 / f.decisions.max(1) as f64,
                f.recorded_cross_llc,
                f.predicted_cross_llc
            ))
        );
    }
}

/// Wraps a line at spaces so nothing passes 80 columns; continuation lines indent. A
/// word too long for a line (a list of runs) is broken after its commas; a per cent
/// sign stays with its number.
pub fn fit(line: &str) -> String {
    let indent = &line[..line.len() - line.trim_start().len()];
    let room = 75usize.saturating_sub(indent.len());
    let mut lines = vec![indent.to_string()];
    let mut words: Vec<String> = Vec::new();
    for word in line.split_whitespace() {
        match words.last_mut() {
            Some(number) if word.starts_with('%') => {
                number.push(' ');
                number.push_str(word);
            }
            _ => words.push(word.to_string()),
        }
    }
    for word in words.iter().map(String::as_str) {
        let pieces: Vec<&str> = if word.chars().count() > room {
            word.split_inclusive(',').collect()
        } else {
            vec![word]
        };
        for (k, piece) in pieces.into_iter().enumerate() {
            let cur = lines.last_mut().expect("never empty");
            let fresh = cur.trim().is_empty();
            let gap = usize::from(!fresh && k == 0);
            if !fresh && cur.chars().count() + gap + piece.chars().count() > 79 {
                lines.push(format!("{indent}    {piece}"));
            } else {
                if gap == 1 {
                    cur.push(' ');
                }
                cur.push_str(piece);
            }
        }
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_as_bpftrace_draws_it() {
        let mut h = Log2Hist::default();
        h.add_n(20, 100);
        h.add_n(40, 50);
        let s = bpftrace_hist("x", &h);
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines[0], "@x:");
        assert_eq!(lines.len(), 3);
        assert!(lines[1].starts_with("[16, 32)") && lines[1].contains(&"@".repeat(52)));
        assert!(
            lines[2].starts_with("[32, 64)")
                && lines[2].contains(&format!("|{}{}|", "@".repeat(26), " ".repeat(26)))
        );
        assert!(lines.iter().all(|l| l.chars().count() <= 80));
    }

    #[test]
    fn long_lines_wrap_within_80_columns() {
        let long = "word ".repeat(40);
        let s = fit(long.trim());
        assert!(s.lines().all(|l| l.chars().count() <= 80), "{s}");
        assert_eq!(s.split_whitespace().count(), 40);
        // A list of runs longer than a line breaks after its commas, and only there.
        let runs = ["traces/rig/kernel-sis-stats+noinline/2x4/rig-2x4-pingpong"; 3].join(",");
        let s = fit(&format!("Reproduce: x --trace {runs} -o r.txt"));
        assert!(s.lines().all(|l| l.chars().count() <= 80), "{s}");
        assert_eq!(
            s.replace("\n    ", "").replace('\n', " "),
            format!("Reproduce: x --trace {runs} -o r.txt")
        );
    }

    #[test]
    fn a_per_cent_sign_stays_with_its_number() {
        // "83.89" ends at column 79: the sign would start the next line.
        let line = format!("{} 83.89 % with none, over 1000 wakeups", "x".repeat(73));
        let s = fit(&line);
        assert!(s.lines().all(|l| l.chars().count() <= 80), "{s}");
        assert!(s.lines().all(|l| !l.trim_start().starts_with('%')), "{s}");
        assert!(s.contains("83.89 % with"), "{s}");
        assert_eq!(
            s.split_whitespace().count(),
            line.split_whitespace().count()
        );
    }
}
