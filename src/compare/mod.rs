//! `sisreplay compare`: replays each trace through a baseline and other policies and sets
//! them side by side the way the seeds' tables do: baseline 1.00 (std%), others as
//! compare% (std%), std over time windows of the trace, and a marker where Welch's t-test
//! (5 %, two-sided) says the difference is beyond that variation.

pub mod stats;
pub mod text;

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::bundle;
use crate::metrics::{Derived, PolicyMetrics};
use crate::replay::{replay, ReplayError, ReplayOptions};
use crate::trace;

/// The metrics compared, each computed per window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    SeEff,
    SuccessRate,
    ScannedPerSearch,
    SearchUsPerWakeup,
    CrossLlcPct,
}

impl Metric {
    pub const ALL: [Metric; 5] = [
        Metric::SeEff,
        Metric::SuccessRate,
        Metric::ScannedPerSearch,
        Metric::SearchUsPerWakeup,
        Metric::CrossLlcPct,
    ];
    pub fn title(self) -> &'static str {
        match self {
            Metric::SeEff => "SIS search efficiency se_eff% (higher is better)",
            Metric::SuccessRate => "SIS success rate % (higher is better)",
            Metric::ScannedPerSearch => "runqueues scanned per search (lower is better)",
            Metric::SearchUsPerWakeup => "modelled search time per wakeup, us (lower is better)",
            Metric::CrossLlcPct => "wakeups placed in another LLC than prev, % (lower is better)",
        }
    }
    fn of_window(self, w: &crate::metrics::Window) -> Option<f64> {
        let d = Derived::of(&w.counters);
        match self {
            Metric::SeEff => (w.counters.scanned > 0).then_some(d.se_eff),
            Metric::SuccessRate => (w.counters.search > 0).then_some(d.success_rate),
            Metric::ScannedPerSearch => (w.counters.search > 0)
                .then(|| w.counters.scanned as f64 / w.counters.search as f64),
            Metric::SearchUsPerWakeup => {
                (w.wakeups > 0).then(|| w.search_ns as f64 / w.wakeups as f64 / 1000.0)
            }
            Metric::CrossLlcPct => {
                (w.wakeups > 0).then(|| 100.0 * w.cross_llc as f64 / w.wakeups as f64)
            }
        }
    }
}

/// One arm of one metric on one trace.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    pub mean: f64,
    pub std_pct: f64,
    /// (mean − base mean) / base mean, in percent; 0 for the baseline.
    pub compare_pct: f64,
    /// Welch's t-test against the baseline rejects equal means at 5 %.
    pub beyond_noise: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub trace: String,
    pub wakeups: u64,
    /// One per arm, the baseline first.
    pub cells: Vec<Cell>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Table {
    pub metric: Metric,
    pub rows: Vec<Row>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub arms: Vec<String>,
    pub windows: u32,
    pub test: &'static str,
    pub tables: Vec<Table>,
}

fn cell(values: &[f64], base: Option<&[f64]>) -> Cell {
    let (m, s) = stats::mean_std(values);
    let std_pct = if m != 0.0 { 100.0 * s / m.abs() } else { 0.0 };
    match base {
        None => Cell {
            mean: m,
            std_pct,
            compare_pct: 0.0,
            beyond_noise: false,
        },
        Some(b) => {
            let (bm, _) = stats::mean_std(b);
            Cell {
                mean: m,
                std_pct,
                compare_pct: if bm != 0.0 {
                    100.0 * (m - bm) / bm.abs()
                } else {
                    0.0
                },
                beyond_noise: stats::welch(b, values).2,
            }
        }
    }
}

/// The newest bundle under `traces_dir`, by modification time.
pub fn newest_bundle(traces_dir: &Path) -> Option<PathBuf> {
    std::fs::read_dir(traces_dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| bundle::is_bundle(p))
        .max_by_key(|p| {
            p.join(bundle::META_FILE)
                .metadata()
                .and_then(|m| m.modified())
                .ok()
        })
}

/// Replays every trace with all arms and builds one table per metric.
pub fn compare(
    arms: &[String],
    traces: &[PathBuf],
    windows: u32,
) -> Result<Comparison, CompareError> {
    let mut per_trace: Vec<(String, u64, Vec<PolicyMetrics>)> = Vec::new();
    for t in traces {
        let meta = if bundle::is_bundle(t) {
            Some(bundle::read_meta(t)?)
        } else {
            None
        };
        let mut src = trace::open(t)?;
        let r = replay(
            src.as_mut(),
            meta.as_ref(),
            ReplayOptions {
                policies: arms.to_vec(),
                windows,
                ..Default::default()
            },
        )?;
        // Arms in the order given (the kernel's policy may have been appended).
        let mut pol = Vec::new();
        for a in arms {
            if let Some(p) = r.policies.iter().find(|p| &p.policy == a) {
                pol.push(p.clone());
            }
        }
        let name = if bundle::is_bundle(t) {
            t.file_name()
        } else {
            t.file_stem()
        }
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
        per_trace.push((name, r.replayed, pol));
    }
    let tables = Metric::ALL
        .iter()
        .map(|&metric| Table {
            metric,
            rows: per_trace
                .iter()
                .map(|(name, wakeups, pols)| {
                    let series: Vec<Vec<f64>> = pols
                        .iter()
                        .map(|p| {
                            p.windows
                                .iter()
                                .filter_map(|w| metric.of_window(w))
                                .collect()
                        })
                        .collect();
                    let cells = series
                        .iter()
                        .enumerate()
                        .map(|(i, v)| cell(v, if i == 0 { None } else { Some(&series[0]) }))
                        .collect();
                    Row {
                        trace: name.clone(),
                        wakeups: *wakeups,
                        cells,
                    }
                })
                .collect(),
        })
        .collect();
    Ok(Comparison {
        arms: arms.to_vec(),
        windows,
        test: "Welch's t-test over time windows, two-sided, 5 %",
        tables,
    })
}

#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error(transparent)]
    Bundle(#[from] bundle::BundleError),
    #[error(transparent)]
    Replay(#[from] ReplayError),
}
