//! A comparison as plain text in the seeds' layout, within 80 columns, ready for a mail.

use std::fmt::Write;

use super::Comparison;

fn short(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

pub fn render(c: &Comparison) -> String {
    let mut o = String::new();
    // Columns: trace 16, then 21 per arm: three arms per block keeps 79 columns.
    for t in &c.tables {
        let _ = writeln!(o, "{}", t.metric.title());
        // The baseline leads every block, so each compared arm sits beside it.
        for chunk_start in (1..c.arms.len().max(2)).step_by(2) {
            let mut idx = vec![0];
            idx.extend(chunk_start..(chunk_start + 2).min(c.arms.len()));
            let _ = write!(o, "{:<16}", "trace");
            for &i in &idx {
                let label = format!("{}(std%)", short(&c.arms[i], 14));
                let _ = write!(o, "{label:>21}");
            }
            let _ = writeln!(o);
            for r in &t.rows {
                let _ = write!(o, "{:<16}", short(&r.trace, 15));
                for &i in &idx {
                    let cell = &r.cells[i];
                    let s = if i == 0 {
                        format!("1.00 ({:6.2})", cell.std_pct)
                    } else {
                        format!(
                            "{:+.2} ({:6.2}){}",
                            cell.compare_pct,
                            cell.std_pct,
                            if cell.beyond_noise { "*" } else { " " }
                        )
                    };
                    let _ = write!(o, "{s:>21}");
                }
                let _ = writeln!(o);
            }
        }
        let _ = writeln!(o);
    }
    let _ = writeln!(
        o,
        "baseline {}: 1.00 (std% over {} windows); others: compare% (std%);\n* beyond the noise ({})",
        c.arms[0], c.windows, c.test
    );
    o
}
