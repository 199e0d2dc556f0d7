//! Report generation cost over the 2-million-event hackbench trace (target/bench-data,
//! made by the read benchmark's script): the comparison alone (the replay a report
//! needs) against the whole report (comparison, busy/idle strip, HTML and SVG plots) in
//! the same run. The difference is what the report adds.

use std::path::{Path, PathBuf};
use std::time::Instant;

use sisreplay::compare::{self, Arm};
use sisreplay::report::{self, ReportOptions};

fn main() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-data/big-v6.dat");
    assert!(
        p.exists(),
        "run `cargo bench --bench read` first: it captures {}",
        p.display()
    );
    let arms = [
        Arm::Policy("vanilla".into()),
        Arm::Policy("sis_util".into()),
    ];
    let traces: Vec<Vec<PathBuf>> = vec![vec![p.clone()]];
    let best = |f: &dyn Fn() -> usize| {
        let mut t_best = f64::MAX;
        let mut size = 0;
        for _ in 0..3 {
            let t = Instant::now();
            size = f();
            t_best = t_best.min(t.elapsed().as_secs_f64());
        }
        (t_best, size)
    };
    let (replay_s, wakeups) = best(&|| {
        let c = compare::compare(&arms, &traces, 10, None).unwrap();
        c.tables[0].rows[0].wakeups as usize
    });
    let (report_s, html_bytes) = best(&|| {
        let r = report::build(
            &arms,
            &traces,
            &ReportOptions {
                windows: 10,
                timeline_ns: 20_000_000,
                command_line: vec!["bench".into()],
                traces_implicit: false,
                flips_before_trace: None,
            },
        )
        .unwrap();
        report::html::render(&r).len()
    });
    let added = report_s - replay_s;
    println!(
        "{wakeups} wakeups; comparison (replay) {replay_s:.3} s, whole report {report_s:.3} s"
    );
    println!(
        "report adds {added:.3} s = {:.1} % of the replay; HTML {} KB",
        100.0 * added / replay_s,
        html_bytes / 1024
    );
}
