//! `--plot FILE.svg`: output token throughput against concurrency, one line per result (left),
//! and the time to first token at each level, per result: p50 thick, p90 medium, p99 thin
//! (right). Drawn with plotters' SVG backend and without its font features (`ttf` and
//! `ab_glyph`): text goes into the SVG as `<text>` for the viewer to render, so nothing reads a
//! font file and a machine without any font (a fresh Debian 12) writes the same plot. Each result
//! has its own colour in both panels, and the legend names it by id, image and TP.

use std::path::Path;

use plotters::prelude::*;

use super::result::BenchResult;
use crate::error::{Error, Result};

const SIZE: (u32, u32) = (1280, 520);

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

type DrawResult = std::result::Result<(), Box<dyn std::error::Error>>;

fn draw(svg: &mut String, results: &[BenchResult]) -> DrawResult {
    let root = SVGBackend::with_string(svg, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let (left, right) = root.split_horizontally(SIZE.0 / 2);
    let max_concurrency =
        results.iter().flat_map(|result| result.levels.iter().map(|level| level.concurrency)).max().unwrap_or(1);
    let x_range = 0.0..(f64::from(max_concurrency) * 1.1).max(2.0);

    let max_throughput = results
        .iter()
        .flat_map(|result| result.levels.iter().map(|level| level.figures.output_throughput))
        .fold(0.0, f64::max);
    let mut throughput = ChartBuilder::on(&left)
        .caption("Output token throughput", ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(x_range.clone(), 0.0..headroom(max_throughput))?;
    throughput
        .configure_mesh()
        .x_desc("concurrency (requests in flight)")
        .y_desc("output tokens/s")
        .x_label_formatter(&tick)
        .y_label_formatter(&tick)
        .draw()?;
    for (index, result) in results.iter().enumerate() {
        let colour = colour(index);
        let points: Vec<(f64, f64)> =
            result.levels.iter().map(|level| (f64::from(level.concurrency), level.figures.output_throughput)).collect();
        throughput
            .draw_series(LineSeries::new(points, colour.stroke_width(SERIES_STROKE)).point_size(4))?
            .label(result.label())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], colour.filled()));
    }
    legend(&mut throughput)?;

    let max_ttft = results
        .iter()
        .flat_map(|result| result.levels.iter().map(|level| level.figures.ttft_ms.p99))
        .fold(0.0, f64::max);
    let mut ttft = ChartBuilder::on(&right)
        .caption("Time to first token: p50 (thick), p90, p99 (thin)", ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(x_range, 0.0..headroom(max_ttft))?;
    ttft.configure_mesh()
        .x_desc("concurrency (requests in flight)")
        .y_desc("TTFT (ms)")
        .x_label_formatter(&tick)
        .y_label_formatter(&tick)
        .draw()?;
    for (index, result) in results.iter().enumerate() {
        let colour = colour(index);
        let curve = |pick: fn(&super::stats::Distribution) -> f64| -> Vec<(f64, f64)> {
            result.levels.iter().map(|level| (f64::from(level.concurrency), pick(&level.figures.ttft_ms))).collect()
        };
        ttft.draw_series(LineSeries::new(curve(|d| d.p50), colour.stroke_width(SERIES_STROKE)).point_size(4))?
            .label(result.label())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], colour.filled()));
        ttft.draw_series(LineSeries::new(curve(|d| d.p90), colour.stroke_width(2)))?;
        ttft.draw_series(LineSeries::new(curve(|d| d.p99), colour.stroke_width(1)))?;
    }
    legend(&mut ttft)?;
    root.present()?;
    Ok(())
}

fn legend<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(chart: &mut ChartContext<'a, DB, CT>) -> DrawResult
where
    DB::ErrorType: 'static,
{
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()?;
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
            // Its label in both legends.
            assert_eq!(svg.matches(&result.label()).count(), 2, "{}", result.label());
        }
        assert!(render(&[]).is_err());
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
