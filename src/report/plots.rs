//! The report's plots, each an SVG string drawn with plotters' SVG backend: text is
//! emitted as SVG text, so no font file or system library is involved, and the page
//! scales them to its width.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::topology::Topology;

/// Okabe–Ito: distinguishable with the common colour-vision deficiencies.
pub const PALETTE: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(230, 159, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(213, 94, 0),
    RGBColor(240, 228, 66),
    RGBColor(0, 0, 0),
];

/// The `i`-th series' colour, cycling through [`PALETTE`].
pub fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

const W: u32 = 760;
const H: u32 = 340;
const FONT: &str = "sans-serif";

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// Draws into a fresh SVG of the given size; a drawing error (which the SVG backend
/// only raises on impossible geometry) yields an SVG saying so rather than no figure.
fn svg(w: u32, h: u32, draw: impl FnOnce(&Area) -> Result<(), PlotError>) -> String {
    let mut out = String::new();
    let result = {
        let root = SVGBackend::with_string(&mut out, (w, h)).into_drawing_area();
        root.fill(&WHITE)
            .and_then(|_| draw(&root))
            .and_then(|_| root.present())
    };
    match result {
        Ok(()) => out,
        Err(e) => format!(
            "<svg width=\"{w}\" height=\"40\"><text x=\"4\" y=\"20\">plot failed: {}</text></svg>",
            super::html::escape(&e.to_string())
        ),
    }
}

/// What drawing on the SVG backend can fail with.
type PlotError = DrawingAreaErrorKind<<SVGBackend<'static> as DrawingBackend>::ErrorType>;

/// How a series is drawn, for its swatch in the legend.
#[derive(Debug, Clone, Copy)]
enum Swatch {
    /// A filled box, as a bar.
    Bar,
    /// A line of this width with a dot, as a curve.
    Line(u32),
}

/// Left edge of the legend: in line with the plot area, past the y labels.
const LEGEND_X: i32 = 76;

/// The caption, then the series' legend in rows between it and the plot, where it can
/// cover no bar or point; returns the area left for the plot.
fn titled_with_legend<'b>(
    root: &Area<'b>,
    title: &str,
    items: &[(&str, RGBColor, Swatch)],
) -> Result<Area<'b>, PlotError> {
    let area = root.titled(title, (FONT, 18))?;
    if items.is_empty() {
        return Ok(area);
    }
    let style = TextStyle::from((FONT, 13).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
    let (w, _) = area.dim_in_pixel();
    let (mut x, mut y) = (LEGEND_X, 14i32);
    for &(name, c, swatch) in items {
        let text_w = area
            .estimate_text_size(name, &style)
            .map_or(7 * name.chars().count() as i32, |s| s.0 as i32);
        let item_w = 20 + text_w + 22;
        if x > LEGEND_X && x + item_w > w as i32 - 12 {
            (x, y) = (LEGEND_X, y + 20);
        }
        match swatch {
            Swatch::Bar => area.draw(&Rectangle::new([(x, y - 6), (x + 12, y + 6)], c.filled()))?,
            Swatch::Line(width) => {
                area.draw(&PathElement::new(
                    [(x - 2, y), (x + 14, y)],
                    c.stroke_width(width),
                ))?;
                area.draw(&Circle::new(
                    (x + 6, y),
                    (2 + width as i32).min(6),
                    c.filled(),
                ))?;
            }
        }
        area.draw(&Text::new(name.to_string(), (x + 20, y), style.clone()))?;
        x += item_w;
    }
    Ok(area.split_vertically(y + 10).1)
}

/// One group of bars per category, one bar per series, with a legend.
pub struct Bars<'a> {
    /// Caption over the plot.
    pub title: &'a str,
    /// The x axis' description.
    pub x_desc: &'a str,
    /// The y axis' description, with its unit.
    pub y_desc: &'a str,
    /// One label per group of bars, left to right.
    pub categories: Vec<String>,
    /// (series name, one value per category).
    pub series: Vec<(String, Vec<f64>)>,
}

type Chart<'a, 'b> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

/// A chart over categories 0..n (labels drawn by `category_labels`) with its y range,
/// the axes described and only the major grid lines.
fn category_chart<'a, 'b>(
    area: &'a Area<'b>,
    b: &Bars,
    y: std::ops::Range<f64>,
) -> Result<Chart<'a, 'b>, PlotError> {
    let n = b.categories.len().max(1);
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .x_label_area_size(52)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..n as f64, y)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .x_desc(b.x_desc)
        .y_desc(b.y_desc)
        .axis_desc_style((FONT, 14))
        .label_style((FONT, 13))
        .light_line_style(WHITE)
        .draw()?;
    Ok(chart)
}

/// Each category's label under its slot, in pixels below the x axis at `y0`.
fn category_labels(root: &Area, chart: &Chart, b: &Bars, y0: f64) -> Result<(), PlotError> {
    let style = TextStyle::from((FONT, 13).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
    for (i, label) in b.categories.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(i as f64 + 0.5, y0));
        root.draw(&Text::new(label.clone(), (px, py + 6), style.clone()))?;
    }
    Ok(())
}

/// Where bar `si` of `k` in category `i`'s group stands, (left, right) in category
/// units: the group is 0.8 wide and centred on the category's tick at i + 0.5, each bar
/// centred in its share of it.
fn bar_span(i: usize, si: usize, k: usize) -> (f64, f64) {
    let share = 0.8 / k.max(1) as f64;
    let left = i as f64 + 0.1 + si as f64 * share + 0.04 * share;
    (left, left + 0.92 * share)
}

/// A short tick under each category's centre, where its bars and label are centred.
fn category_ticks(root: &Area, chart: &Chart, b: &Bars, y0: f64) -> Result<(), PlotError> {
    for i in 0..b.categories.len() {
        let (px, py) = chart.backend_coord(&(i as f64 + 0.5, y0));
        root.draw(&PathElement::new([(px, py), (px, py + 5)], BLACK))?;
    }
    Ok(())
}

/// The bars as an SVG, the y axis from 0 to 12 % above the tallest bar.
pub fn grouped_bars(b: &Bars) -> String {
    svg(W, H, |root| {
        let ymax = b
            .series
            .iter()
            .flat_map(|s| s.1.iter().copied())
            .fold(0.0f64, f64::max);
        let ymax = if ymax > 0.0 { ymax * 1.12 } else { 1.0 };
        let items: Vec<(&str, RGBColor, Swatch)> = (b.series.iter().enumerate())
            .map(|(si, (name, _))| (name.as_str(), color(si), Swatch::Bar))
            .collect();
        let area = titled_with_legend(root, b.title, &items)?;
        let mut chart = category_chart(&area, b, 0f64..ymax)?;
        let k = b.series.len();
        for (si, (_, values)) in b.series.iter().enumerate() {
            let c = color(si);
            chart.draw_series(values.iter().enumerate().map(|(i, &v)| {
                let (x0, x1) = bar_span(i, si, k);
                Rectangle::new([(x0, 0.0), (x1, v)], c.filled())
            }))?;
        }
        category_ticks(root, &chart, b, 0.0)?;
        category_labels(root, &chart, b, 0.0)?;
        Ok(())
    })
}

/// The runs of categories a curve joins: categories with the same `group` (one workload
/// at several load levels), in order; a category alone in its group is a point only.
fn joined_runs(group: &[usize]) -> Vec<Vec<usize>> {
    let mut runs: Vec<(usize, Vec<usize>)> = Vec::new();
    for (i, &g) in group.iter().enumerate() {
        match runs.iter_mut().find(|r| r.0 == g) {
            Some(r) => r.1.push(i),
            None => runs.push((g, vec![i])),
        }
    }
    runs.into_iter()
        .map(|r| r.1)
        .filter(|r| r.len() > 1)
        .collect()
}

/// One point per category and series, with lines only between the categories of one
/// group (`group[i]` is category i's: the load steps of one workload); unrelated traces
/// stay separate points.
pub fn curves(b: &Bars, group: &[usize]) -> String {
    svg(W, H, |root| {
        let vals = b.series.iter().flat_map(|s| s.1.iter().copied());
        let (lo, hi) = vals.fold((f64::MAX, f64::MIN), |(l, h), v| (l.min(v), h.max(v)));
        let (lo, hi) = if lo > hi { (0.0, 1.0) } else { (lo, hi) };
        let pad = ((hi - lo) * 0.1).max(hi.abs() * 0.05);
        // Every value 0 (no cross-LLC move on one LLC): an axis of 0..1, not of 0..1e-9
        // with every tick labelled 0.0.
        let pad = if pad > 1e-9 { pad } else { 1.0 };
        // Non-negative metrics keep a non-negative axis.
        let y_lo = if lo >= 0.0 {
            (lo - pad).max(0.0)
        } else {
            lo - pad
        };
        let k = b.series.len() as u32;
        // Earlier series wider, so a later one lying on top leaves them visible.
        let width = |si: usize| 2 + 3 * (k - 1 - si as u32);
        let items: Vec<(&str, RGBColor, Swatch)> = (b.series.iter().enumerate())
            .map(|(si, (name, _))| (name.as_str(), color(si), Swatch::Line(width(si))))
            .collect();
        let area = titled_with_legend(root, b.title, &items)?;
        let mut chart = category_chart(&area, b, y_lo..hi + pad)?;
        let runs = joined_runs(group);
        for (si, (_, values)) in b.series.iter().enumerate() {
            let c = color(si);
            let w = width(si);
            let at = |i: usize| (i as f64 + 0.5, values[i]);
            for run in &runs {
                let pts: Vec<(f64, f64)> = run.iter().map(|&i| at(i)).collect();
                chart.draw_series(LineSeries::new(pts, c.stroke_width(w)))?;
            }
            chart.draw_series(
                (0..values.len()).map(|i| Circle::new(at(i), 2 + w as i32, c.filled())),
            )?;
        }
        let y0 = chart.y_range().start;
        category_ticks(root, &chart, b, y0)?;
        category_labels(root, &chart, b, y0)?;
        Ok(())
    })
}

/// Cumulative distributions over a log10 x axis: (name, sorted (x, cumulative share)).
pub fn cdf(title: &str, x_desc: &str, series: &[(String, Vec<(f64, f64)>)]) -> String {
    svg(W, H, |root| {
        let xs = series.iter().flat_map(|s| s.1.iter().map(|p| p.0));
        let (lo, hi) = xs.fold((f64::MAX, f64::MIN), |(l, h), v| (l.min(v), h.max(v)));
        let (lo, hi) = if lo > hi {
            (1.0, 10.0)
        } else {
            (lo.max(0.1), hi.max(lo * 10.0))
        };
        let items: Vec<(&str, RGBColor, Swatch)> = (series.iter().enumerate())
            .map(|(si, (name, _))| (name.as_str(), color(si), Swatch::Line(2)))
            .collect();
        let area = titled_with_legend(root, title, &items)?;
        let mut chart = ChartBuilder::on(&area)
            .margin(12)
            .x_label_area_size(52)
            .y_label_area_size(64)
            .build_cartesian_2d((lo..hi).log_scale(), 0f64..100.0)?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc("share of wakeups, %")
            .axis_desc_style((FONT, 14))
            .label_style((FONT, 13))
            .light_line_style(WHITE)
            .x_label_formatter(&|v| format!("{v:.0}"))
            .draw()?;
        for (si, (_, pts)) in series.iter().enumerate() {
            let pts: Vec<(f64, f64)> = pts.iter().map(|&(x, y)| (x.max(lo), 100.0 * y)).collect();
            chart.draw_series(LineSeries::new(pts, color(si).stroke_width(2)))?;
        }
        Ok(())
    })
}

/// The machine as nested boxes: packages, then LLCs, then cores holding their SMT
/// threads (CPU numbers), NUMA node and capacity in each package's title.
pub fn topology(t: &Topology) -> String {
    use std::collections::BTreeMap;
    // package → llc → core → cpus
    let mut tree: BTreeMap<u32, BTreeMap<u32, BTreeMap<u32, Vec<u32>>>> = BTreeMap::new();
    for c in &t.cpus {
        tree.entry(c.package)
            .or_default()
            .entry(c.llc)
            .or_default()
            .entry(c.core)
            .or_default()
            .push(c.cpu);
    }
    let cores_per_row = 8usize;
    let core_w = 84i32;
    let core_h = 34i32;
    let llc_h = |rows: usize| 30 + rows as i32 * (core_h + 6) + 6;
    let total_h: i32 = tree
        .values()
        .map(|l| {
            40 + l
                .values()
                .map(|c| llc_h(c.len().div_ceil(cores_per_row)) + 8)
                .sum::<i32>()
        })
        .sum::<i32>()
        + 10 * tree.len() as i32;
    let width = (cores_per_row as i32 * (core_w + 6) + 40).max(400) as u32;
    svg(width, total_h.max(60) as u32, |root| {
        let font = |s: u32| TextStyle::from((FONT, s).into_font());
        let mut y = 4i32;
        for (pkg, llcs) in &tree {
            let pkg_h: i32 = 40
                + llcs
                    .values()
                    .map(|c| llc_h(c.len().div_ceil(cores_per_row)) + 8)
                    .sum::<i32>();
            let nodes: std::collections::BTreeSet<u32> = t
                .cpus
                .iter()
                .filter(|c| c.package == *pkg)
                .map(|c| c.node)
                .collect();
            root.draw(&Rectangle::new(
                [(4, y), (width as i32 - 4, y + pkg_h)],
                ShapeStyle::from(&RGBColor(60, 60, 60)).stroke_width(2),
            ))?;
            let nodes: Vec<String> = nodes.iter().map(u32::to_string).collect();
            root.draw(&Text::new(
                format!("package {pkg} · NUMA node {}", nodes.join(", ")),
                (14, y + 10),
                font(15),
            ))?;
            let mut ly = y + 34;
            for (llc, cores) in llcs {
                let rows = cores.len().div_ceil(cores_per_row);
                let h = llc_h(rows);
                root.draw(&Rectangle::new(
                    [(14, ly), (width as i32 - 14, ly + h)],
                    color(0).mix(0.12).filled(),
                ))?;
                let ncpu: usize = cores.values().map(Vec::len).sum();
                root.draw(&Text::new(
                    format!("LLC {llc}: {} cores, {ncpu} CPUs", cores.len()),
                    (22, ly + 8),
                    font(13),
                ))?;
                for (i, (_, cpus)) in cores.iter().enumerate() {
                    let (r, col) = (i / cores_per_row, i % cores_per_row);
                    let x0 = 22 + col as i32 * (core_w + 6);
                    let y0 = ly + 28 + r as i32 * (core_h + 6);
                    root.draw(&Rectangle::new(
                        [(x0, y0), (x0 + core_w, y0 + core_h)],
                        WHITE.filled(),
                    ))?;
                    root.draw(&Rectangle::new(
                        [(x0, y0), (x0 + core_w, y0 + core_h)],
                        ShapeStyle::from(&color(0)).stroke_width(1),
                    ))?;
                    let label: Vec<String> = cpus.iter().map(u32::to_string).collect();
                    root.draw(&Text::new(
                        label.join(" "),
                        (x0 + core_w / 2, y0 + core_h / 2),
                        font(13).pos(Pos::new(HPos::Center, VPos::Center)),
                    ))?;
                }
                ly += h + 8;
            }
            y += pkg_h + 10;
        }
        Ok(())
    })
}

/// Busy intervals with gaps shorter than `min_gap` joined: a gap under half a pixel
/// would not show, and a ping-pong load has tens of thousands of them.
fn coalesce(busy: &[(u64, u64)], min_gap: u64) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for &(a, b) in busy {
        match out.last_mut() {
            Some(last) if a.saturating_sub(last.1) < min_gap => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

/// Per-CPU busy/idle strips over a window: (cpu, busy intervals in ns from t0).
pub fn timeline(title: &str, span_ns: u64, cpus: &[(u32, Vec<(u64, u64)>)]) -> String {
    let rows = cpus.len().max(1) as u32;
    let h = 70 + rows * 18 + 40;
    svg(W, h, |root| {
        let span_us = (span_ns as f64 / 1000.0).max(1.0);
        let mut chart = ChartBuilder::on(root)
            .caption(title, (FONT, 18))
            .margin(12)
            // The last tick label is centred on the axis's end: room for its half.
            .margin_right(30)
            .x_label_area_size(44)
            .y_label_area_size(64)
            .build_cartesian_2d(0f64..span_us, 0f64..rows as f64)?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(0)
            .x_desc("time from window start, us")
            .x_label_formatter(&|v| format!("{v:.0}"))
            .axis_desc_style((FONT, 14))
            .label_style((FONT, 13))
            .light_line_style(WHITE)
            .draw()?;
        let c = color(0);
        for (row, (_, busy)) in cpus.iter().enumerate() {
            let y = rows as f64 - row as f64 - 1.0;
            chart.draw_series(std::iter::once(Rectangle::new(
                [(0.0, y + 0.15), (span_us, y + 0.85)],
                RGBColor(235, 235, 235).filled(),
            )))?;
            chart.draw_series(coalesce(busy, span_ns / (2 * W as u64)).into_iter().map(
                |(a, b)| {
                    Rectangle::new(
                        [(a as f64 / 1000.0, y + 0.15), (b as f64 / 1000.0, y + 0.85)],
                        c.filled(),
                    )
                },
            ))?;
        }
        let style =
            TextStyle::from((FONT, 12).into_font()).pos(Pos::new(HPos::Right, VPos::Center));
        for (row, (cpu, _)) in cpus.iter().enumerate() {
            let y = rows as f64 - row as f64 - 0.5;
            let (px, py) = chart.backend_coord(&(0.0, y));
            root.draw(&Text::new(
                format!("CPU {cpu}"),
                (px - 6, py),
                style.clone(),
            ))?;
        }
        Ok(())
    })
}

/// Shade levels of the per-LLC strip: a share is drawn to the nearest 5 %, so runs of
/// equal shade merge into one rectangle.
const SHADES: f64 = 20.0;

/// Per-LLC busy strips over a window: (label, share of the LLC's CPUs busy in each of
/// equal bins across the window, 0..=1), shaded darker the busier.
pub fn shaded_timeline(title: &str, span_ns: u64, rows: &[(String, Vec<f64>)]) -> String {
    let n = rows.len().max(1) as u32;
    let h = 70 + n * 30 + 40;
    svg(W, h, |root| {
        let span_us = (span_ns as f64 / 1000.0).max(1.0);
        let mut chart = ChartBuilder::on(root)
            .caption(title, (FONT, 18))
            .margin(12)
            // The last tick label is centred on the axis's end: room for its half.
            .margin_right(30)
            .x_label_area_size(44)
            .y_label_area_size(120)
            .build_cartesian_2d(0f64..span_us, 0f64..n as f64)?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(0)
            .x_desc("time from window start, us")
            .x_label_formatter(&|v| format!("{v:.0}"))
            .axis_desc_style((FONT, 14))
            .label_style((FONT, 13))
            .light_line_style(WHITE)
            .draw()?;
        let c = color(0);
        for (row, (_, shares)) in rows.iter().enumerate() {
            let y = n as f64 - row as f64 - 1.0;
            chart.draw_series(std::iter::once(Rectangle::new(
                [(0.0, y + 0.1), (span_us, y + 0.9)],
                RGBColor(235, 235, 235).filled(),
            )))?;
            let bin_us = span_us / shares.len().max(1) as f64;
            let level = |v: f64| (v.clamp(0.0, 1.0) * SHADES).round();
            let mut i = 0;
            while i < shares.len() {
                let l = level(shares[i]);
                let j = (i..shares.len())
                    .find(|&j| level(shares[j]) != l)
                    .unwrap_or(shares.len());
                if l > 0.0 {
                    chart.draw_series(std::iter::once(Rectangle::new(
                        [(i as f64 * bin_us, y + 0.1), (j as f64 * bin_us, y + 0.9)],
                        c.mix(l / SHADES).filled(),
                    )))?;
                }
                i = j;
            }
        }
        let style =
            TextStyle::from((FONT, 12).into_font()).pos(Pos::new(HPos::Right, VPos::Center));
        for (row, (label, _)) in rows.iter().enumerate() {
            let y = n as f64 - row as f64 - 0.5;
            let (px, py) = chart.backend_coord(&(0.0, y));
            root.draw(&Text::new(label.clone(), (px - 6, py), style.clone()))?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_are_centred_on_their_category() {
        for k in 1..=5 {
            for i in [0, 3] {
                let (left, _) = bar_span(i, 0, k);
                let (_, right) = bar_span(i, k - 1, k);
                let centre = (left + right) / 2.0;
                assert!(
                    (centre - (i as f64 + 0.5)).abs() < 1e-12,
                    "{k} bars: {centre}"
                );
            }
        }
    }

    #[test]
    fn curves_join_only_the_load_steps_of_one_workload() {
        // Two hackbench loads, a ping-pong, a third hackbench load.
        assert_eq!(joined_runs(&[0, 0, 1, 0]), vec![vec![0, 1, 3]]);
        assert!(joined_runs(&[0, 1, 2]).is_empty());
    }

    #[test]
    fn the_legend_sits_above_the_plot_not_over_it() {
        let b = Bars {
            title: "t",
            x_desc: "x",
            y_desc: "y",
            categories: vec!["a".into(), "b".into()],
            series: vec![
                ("first".into(), vec![1.0, 9.0]),
                ("second".into(), vec![9.0, 1.0]),
            ],
        };
        let svg = grouped_bars(&b);
        let y_of = |text: &str| -> f64 {
            let at = svg.find(&format!("\n{text}\n")).unwrap();
            let tag = &svg[svg[..at].rfind("<text").unwrap()..at];
            let y = tag.split(" y=\"").nth(1).unwrap();
            y[..y.find('"').unwrap()].parse().unwrap()
        };
        let attr = |tag: &str, n: &str| -> f64 {
            let v = tag.split(&format!(" {n}=\"")).nth(1).unwrap();
            v[..v.find('"').unwrap()].parse().unwrap()
        };
        // The tallest bar's top, the highest point of the plot: bars are drawn in the
        // series' colours, taller than the legend's 12-pixel swatches.
        let top = svg
            .match_indices("<rect")
            .map(|(i, _)| &svg[i..i + svg[i..].find("/>").unwrap()])
            .filter(|tag| tag.contains("fill=\"#0072B2\"") || tag.contains("fill=\"#E69F00\""))
            .filter(|tag| attr(tag, "height") > 12.0)
            .map(|tag| attr(tag, "y"))
            .fold(f64::MAX, f64::min);
        assert!(top < f64::MAX);
        // Both entries clear of the bars, whichever category they would stand over.
        assert!(
            y_of("first") < top - 20.0 && y_of("second") < top - 20.0,
            "{svg}"
        );
    }

    #[test]
    fn sub_pixel_gaps_are_joined() {
        let busy = [(0, 10), (12, 20), (40, 50), (51, 60)];
        assert_eq!(coalesce(&busy, 5), vec![(0, 20), (40, 60)]);
        assert_eq!(coalesce(&busy, 0), busy.to_vec());
    }
}
