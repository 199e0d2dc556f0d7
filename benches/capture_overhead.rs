//! Capture overhead: hackbench's own reported time without tracing and under
//! `sisreplay capture` with each backend, interleaved in one run and given as ratios.
//! Needs root, hackbench and tracefs.

use std::process::{Command, Stdio};

const HACKBENCH: &[&str] = &["hackbench", "-g", "4", "-l", "2000"];
const ROUNDS: usize = 3;

/// Runs a command whose stdout includes hackbench's `Time: N` line; returns N.
fn hackbench_time(cmd: &mut Command) -> f64 {
    let out = cmd
        .stderr(Stdio::null())
        .output()
        .expect("hackbench (rt-tests) is needed");
    assert!(out.status.success(), "{cmd:?} failed");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("Time: "))
        .and_then(|t| t.trim().parse().ok())
        .expect("hackbench printed no Time line")
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let bin = env!("CARGO_BIN_EXE_sisreplay");
    let dir = tempfile::tempdir().unwrap();
    let (mut plain, mut tracefs, mut perf) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        plain.push(hackbench_time(
            Command::new(HACKBENCH[0]).args(&HACKBENCH[1..]),
        ));
        for (backend, times) in [("tracefs", &mut tracefs), ("perf", &mut perf)] {
            let out = dir.path().join(format!("{backend}-{round}"));
            times.push(hackbench_time(
                Command::new(bin)
                    .args(["capture", "--backend", backend, "--duration", "60s", "-o"])
                    .arg(&out)
                    .arg("--")
                    .args(HACKBENCH),
            ));
        }
    }
    let (p, t, f) = (median(plain), median(tracefs), median(perf));
    println!("hackbench -g 4 -l 2000, median of {ROUNDS}");
    println!("  no capture:      {p:.3} s");
    println!("  tracefs capture: {t:.3} s  ratio {:.2}", t / p);
    println!("  perf capture:    {f:.3} s  ratio {:.2}", f / p);
}
