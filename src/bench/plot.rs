//! `--plot FILE.svg`: output token throughput against concurrency, one line per result (left),
//! and the time to first token at each level, per result: p50 thick, p90 medium, p99 thin
//! (right). Concurrency is on a log2 axis whose ticks are the levels measured (levels double, as
//! `--concurrency 1,2,4,…` asks them). Drawn with plotters' SVG backend and without its font
//! features (`ttf` and `ab_glyph`): text goes into the SVG as `<text>` for the viewer to render,
//! so nothing reads a font file and a machine without any font (a fresh Debian 12) writes the same
//! plot. Each result has its own colour in both panels, and one legend below them, clear of the
//! data, names it by id, image, model, layout and transport.

use std::ops::Range;
use std::path::Path;

use plotters::coord::combinators::{BindKeyPoints, LogCoord, WithKeyPoints};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use super::result::BenchResult;
use crate::error::{Error, Result};

/// The two panels, side by side.
const PANELS: (u32, u32) = (1280, 520);

/// A legend row's height, and the space around the rows.
const LEGEND_ROW: u32 = 22;
const LEGEND_PAD: u32 = 12;

/// Distinct, colour-blind-friendly enough (Tableau 10); results beyond ten reuse them.
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// The stroke of a result's main line in each panel (the throughput, the TTFT's p50).
pub const SERIES_STROKE: u32 = 3;

/// The colour a result is drawn in, by its place in the list.
pub fn colour(index: usize) -> RGBColor {
    PALETTE[index % PALETTE.len()]
}

/// Draw `results` and write the SVG to `path` (atomically).
pub fn write(path: &Path, results: &[BenchResult]) -> Result<()> {
    let svg = render(results)?;
    super::store::write_atomically(path, svg.as_bytes())
}

/// The SVG of `results`, as text.
pub fn render(results: &[BenchResult]) -> Result<String> {
    if results.is_empty() {
        return Err(Error::Usage("there is no result to plot. Fix: run `strix-toolbox bench` first".into()));
    }
    let mut svg = String::new();
    draw(&mut svg, results).map_err(|e| Error::Internal(format!("cannot draw the plot: {e}")))?;
    Ok(svg)
}

/// The concurrency axis: every level measured, a tick each, on a log scale with half a doubling
/// of room on either side.
pub fn concurrency_axis(results: &[BenchResult]) -> (Range<f64>, Vec<f64>) {
    let mut levels: Vec<u32> =
        results.iter().flat_map(|result| result.levels.iter().map(|level| level.concurrency.max(1))).collect();
    levels.sort_unstable();
    levels.dedup();
    let (low, high) = (levels.first().copied().unwrap_or(1), levels.last().copied().unwrap_or(1));
    let range = f64::from(low) / std::f64::consts::SQRT_2..f64::from(high) * std::f64::consts::SQRT_2;
    (range, levels.into_iter().map(f64::from).collect())
}

type DrawResult = std::result::Result<(), Box<dyn std::error::Error>>;

fn draw(svg: &mut String, results: &[BenchResult]) -> DrawResult {
    let legend_height = 2 * LEGEND_PAD + LEGEND_ROW * results.len() as u32;
    let root = SVGBackend::with_string(svg, (PANELS.0, PANELS.1 + legend_height)).into_drawing_area();
    root.fill(&WHITE)?;
    let (panels, legend_area) = root.split_vertically(PANELS.1);
    let (left, right) = panels.split_horizontally(PANELS.0 / 2);
    let (x_range, ticks) = concurrency_axis(results);
    let x_axis = || x_range.clone().log_scale().with_key_points(ticks.clone());

    let max_throughput = results
        .iter()
        .flat_map(|result| result.levels.iter().map(|level| level.figures.output_throughput))
        .fold(0.0, f64::max);
    let mut throughput = ChartBuilder::on(&left)
        .caption("Output token throughput", ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(x_axis(), 0.0..headroom(max_throughput))?;
    mesh(&mut throughput, "output tokens/s")?;
    for (index, result) in results.iter().enumerate() {
        let points: Vec<(f64, f64)> =
            result.levels.iter().map(|level| (f64::from(level.concurrency), level.figures.output_throughput)).collect();
        throughput.draw_series(LineSeries::new(points, colour(index).stroke_width(SERIES_STROKE)).point_size(4))?;
    }

    let max_ttft = results
        .iter()
        .flat_map(|result| result.levels.iter().map(|level| level.figures.ttft_ms.p99))
        .fold(0.0, f64::max);
    let mut ttft = ChartBuilder::on(&right)
        .caption("Time to first token: p50 (thick), p90, p99 (thin)", ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(x_axis(), 0.0..headroom(max_ttft))?;
    mesh(&mut ttft, "TTFT (ms)")?;
    for (index, result) in results.iter().enumerate() {
        let colour = colour(index);
        let curve = |pick: fn(&super::stats::Distribution) -> f64| -> Vec<(f64, f64)> {
            result.levels.iter().map(|level| (f64::from(level.concurrency), pick(&level.figures.ttft_ms))).collect()
        };
        ttft.draw_series(LineSeries::new(curve(|d| d.p50), colour.stroke_width(SERIES_STROKE)).point_size(4))?;
        ttft.draw_series(LineSeries::new(curve(|d| d.p90), colour.stroke_width(2)))?;
        ttft.draw_series(LineSeries::new(curve(|d| d.p99), colour.stroke_width(1)))?;
    }
    legend(&legend_area, results)?;
    root.present()?;
    Ok(())
}

type Panel<'a> = ChartContext<'a, SVGBackend<'a>, Cartesian2d<WithKeyPoints<LogCoord<f64>>, RangedCoordf64>>;

fn mesh(chart: &mut Panel<'_>, y_desc: &str) -> DrawResult {
    chart
        .configure_mesh()
        .x_desc("concurrency (requests in flight, log2 scale)")
        .y_desc(y_desc)
        .x_label_formatter(&tick)
        .y_label_formatter(&tick)
        .draw()?;
    Ok(())
}

/// One row per result under both panels: its colour, then its name.
fn legend(area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>, results: &[BenchResult]) -> DrawResult {
    let font = ("sans-serif", 14).into_font().color(&BLACK);
    for (index, result) in results.iter().enumerate() {
        let y = (LEGEND_PAD + LEGEND_ROW * index as u32) as i32;
        let x = 64;
        area.draw(&Rectangle::new([(x, y + 2), (x + 14, y + 12)], colour(index).filled()))?;
        area.draw(&Text::new(result.label(), (x + 22, y), font.clone()))?;
    }
    Ok(())
}

/// `4`, not `4.0`; `0.5` stays.
fn tick(value: &f64) -> String {
    if value.fract().abs() < 1e-9 {
        format!("{value:.0}")
    } else {
        format!("{value:.1}")
    }
}

/// An axis top above the largest value (and a unit axis when everything is 0).
fn headroom(max: f64) -> f64 {
    if max > 0.0 {
        max * 1.15
    } else {
        1.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::result::tests::result;

    /// `(stroke colour, stroke width, point count)` of every polyline in the SVG.
    fn polylines(svg: &str) -> Vec<(String, u32, usize)> {
        svg.split("<polyline")
            .skip(1)
            .map(|element| {
                let attribute = |name: &str| {
                    let start = element.find(&format!(" {name}=\"")).unwrap() + name.len() + 3;
                    element[start..].split('"').next().unwrap().to_string()
                };
                (
                    attribute("stroke"),
                    attribute("stroke-width").parse().unwrap(),
                    attribute("points").split_whitespace().count(),
                )
            })
            .collect()
    }

    /// `(y, text)` of every text element of the SVG.
    fn texts(svg: &str) -> Vec<(f64, String)> {
        svg.split("<text")
            .skip(1)
            .map(|element| {
                let y = element.split(" y=\"").nth(1).unwrap().split('"').next().unwrap().parse().unwrap();
                let text = element.split_once('>').unwrap().1.split("</text>").next().unwrap().trim().to_string();
                (y, text)
            })
            .collect()
    }

    #[test]
    fn one_series_per_result_in_each_panel() {
        let results = vec![
            result("sha256:aaaa1111", "2026-11-20T10:00:00Z", &[(1, 100.0), (4, 300.0), (16, 500.0)]),
            result("sha256:bbbb2222", "2026-11-21T10:00:00Z", &[(1, 90.0), (4, 250.0), (16, 400.0)]),
            result("sha256:cccc3333", "2026-11-22T10:00:00Z", &[(1, 80.0)]),
        ];
        let svg = render(&results).unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        let lines = polylines(&svg);
        for (index, result) in results.iter().enumerate() {
            let RGBColor(r, g, b) = colour(index);
            let hex = format!("#{r:02X}{g:02X}{b:02X}");
            let main: Vec<_> =
                lines.iter().filter(|(stroke, width, _)| stroke == &hex && *width == SERIES_STROKE).collect();
            // The throughput line and the TTFT p50 line, each through every level.
            assert_eq!(main.len(), 2, "result {index}: {main:?}");
            assert!(main.iter().all(|(_, _, points)| *points == result.levels.len()), "{main:?}");
            // Named once, in the legend both panels share.
            assert_eq!(svg.matches(&result.label()).count(), 1, "{}", result.label());
        }
        assert!(render(&[]).is_err());
    }

    #[test]
    fn concurrency_is_a_log2_axis_ticked_at_the_levels_measured() {
        let results = vec![
            result("sha256:aaaa1111", "2026-11-20T10:00:00Z", &[(1, 100.0), (4, 300.0), (16, 500.0)]),
            result("sha256:bbbb2222", "2026-11-21T10:00:00Z", &[(2, 90.0), (16, 400.0)]),
        ];
        let (range, ticks) = concurrency_axis(&results);
        assert_eq!(ticks, [1.0, 2.0, 4.0, 16.0]);
        assert!(range.start < 1.0 && range.end > 16.0, "{range:?}");
        let labels: Vec<String> = texts(&render(&results).unwrap()).into_iter().map(|(_, text)| text).collect();
        for level in ["1", "2", "4", "16"] {
            // Once under each panel.
            assert_eq!(labels.iter().filter(|text| *text == level).count(), 2, "{level} in {labels:?}");
        }
        for between in ["0.5", "1.5", "8", "10"] {
            assert!(!labels.iter().any(|text| text == between), "{between} is no level measured: {labels:?}");
        }
    }

    #[test]
    fn the_legend_is_below_the_data_and_names_model_layout_and_transport() {
        let mut cluster = result("sha256:aaaa1111", "2026-11-20T10:00:00Z", &[(1, 100.0), (4, 300.0)]);
        (cluster.key.tensor_parallel, cluster.key.pipeline_parallel, cluster.key.nodes) = (1, 2, 2);
        cluster.key.transport = crate::bench::key::LinkTransport::ThunderboltTcp;
        let results = vec![cluster, result("sha256:bbbb2222", "2026-11-21T10:00:00Z", &[(1, 90.0)])];
        let name = results[0].label();
        assert!(name.contains("image aaaa1111") && name.contains("tiny.gguf (sha256:abababababab)"), "{name}");
        assert!(name.ends_with("TP1 PP2 on 2 nodes over Thunderbolt TCP"), "{name}");
        assert!(results[1].label().ends_with("TP1 PP1 on 1 node"));
        let svg = render(&results).unwrap();
        for result in &results {
            let (y, _) = texts(&svg).into_iter().find(|(_, text)| *text == result.label()).unwrap();
            assert!(y >= f64::from(PANELS.1), "the legend row at y {y} is over the panels");
        }
    }

    #[test]
    fn labels_are_escaped() {
        let mut odd = result("sha256:dddd", "2026-11-20T10:00:00Z", &[(2, 10.0)]);
        odd.id = "<&\">".into();
        let svg = render(&[odd]).unwrap();
        assert!(!svg.contains("<&"));
        assert!(svg.contains("&lt;&amp;"));
    }
}
