//! SVG plots of benchmark results over message size (`gda perf --plot`, `gda shmem perf
//! --plot`, `gda plot --compare`).
//!
//! A figure is a column of panels (bandwidth, message rate, latency, …), each a set of named
//! series of `(message bytes, value)` points, drawn with a log₂ size axis by `plotters`' SVG
//! backend: a plain text file that renders in a browser and on GitHub, so plots can be
//! committed beside the README.

use std::path::Path;

use plotters::prelude::*;

/// One line of a panel: a name (legend) and its `(bytes, value)` points.
#[derive(Clone, Debug, Default)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// `(message bytes, value)`, any order (sorted when drawn).
    pub points: Vec<(f64, f64)>,
}

/// One chart: a y quantity over message size.
#[derive(Clone, Debug, Default)]
pub struct Panel {
    /// Title above the chart.
    pub title: String,
    /// The y axis (quantity and unit).
    pub y_label: String,
    /// Log-scale y axis (latencies and bandwidths spanning decades).
    pub log_y: bool,
    /// The lines.
    pub series: Vec<Series>,
}

/// Errors of drawing a plot.
#[derive(Debug, thiserror::Error)]
#[error("plot {path}: {what}")]
pub struct PlotError {
    path: String,
    what: String,
}

const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
];

/// Checks that `path` can be written (before a run that takes minutes ends by failing to save
/// its plot): opened for appending, created if missing and then removed again; nothing that
/// exists is changed.
pub fn check_writable(path: &Path) -> Result<(), String> {
    let existed = path.exists();
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .map_err(|e| format!("cannot write the plot to {}: {e}", path.display()))?;
    if !existed {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

/// Writes `panels` (stacked) under `title` to the SVG file `path`. Panels without a finite,
/// positive point are left out; a figure with none at all is an error (nothing to show).
pub fn write_svg(path: &Path, title: &str, panels: &[Panel]) -> Result<(), PlotError> {
    let err = |what: String| PlotError {
        path: path.display().to_string(),
        what,
    };
    let usable: Vec<Panel> = panels
        .iter()
        .map(|p| Panel {
            series: p
                .series
                .iter()
                .map(|s| {
                    let mut points: Vec<(f64, f64)> = s
                        .points
                        .iter()
                        .copied()
                        .filter(|&(x, y)| x.is_finite() && x > 0.0 && y.is_finite() && y > 0.0)
                        .collect();
                    points.sort_by(|a, b| a.0.total_cmp(&b.0));
                    Series {
                        name: s.name.clone(),
                        points,
                    }
                })
                .filter(|s| !s.points.is_empty())
                .collect(),
            ..p.clone()
        })
        .filter(|p| !p.series.is_empty())
        .collect();
    if usable.is_empty() {
        return Err(err("no finite, positive values to plot".into()));
    }
    let height = 60 + 320 * usable.len() as u32;
    let root = SVGBackend::new(path, (900, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let root = root
        .titled(title, ("sans-serif", 22))
        .map_err(|e| err(e.to_string()))?;
    let areas = root.split_evenly((usable.len(), 1));
    for (panel, area) in usable.iter().zip(areas.iter()) {
        draw_panel(panel, area).map_err(err)?;
    }
    root.present().map_err(|e| err(e.to_string()))
}

fn draw_panel(
    p: &Panel,
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
) -> Result<(), String> {
    let pts = p.series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    // Room around the data (and a non-empty range for a single point).
    let (x0, x1) = (x0 / 1.5, x1 * 1.5);
    let (y0, y1) = if p.log_y {
        (y0 / 2.0, y1 * 2.0)
    } else {
        (0.0, y1 * 1.15)
    };
    let mut b = ChartBuilder::on(area);
    b.caption(&p.title, ("sans-serif", 17))
        .margin(12)
        .x_label_area_size(38)
        .y_label_area_size(70);
    let size_label = |x: &f64| {
        let v = *x;
        if v >= 1024.0 * 1024.0 {
            format!("{:.0}M", v / 1048576.0)
        } else if v >= 1024.0 {
            format!("{:.0}K", v / 1024.0)
        } else {
            format!("{v:.0}")
        }
    };
    macro_rules! finish {
        ($chart:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .x_desc("message size (bytes)")
                .y_desc(p.y_label.as_str())
                .x_label_formatter(&size_label)
                .draw()
                .map_err(|e| e.to_string())?;
            for (k, s) in p.series.iter().enumerate() {
                let c = COLORS[k % COLORS.len()];
                chart
                    .draw_series(LineSeries::new(s.points.iter().copied(), c.stroke_width(2)))
                    .map_err(|e| e.to_string())?
                    .label(s.name.as_str())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2))
                    });
                chart
                    .draw_series(s.points.iter().map(|&pt| Circle::new(pt, 3, c.filled())))
                    .map_err(|e| e.to_string())?;
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .position(SeriesLabelPosition::UpperLeft)
                .draw()
                .map_err(|e| e.to_string())?;
        }};
    }
    if p.log_y {
        finish!(
            b.build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())
                .map_err(|e| e.to_string())?
        );
    } else {
        finish!(
            b.build_cartesian_2d((x0..x1).log_scale(), y0..y1)
                .map_err(|e| e.to_string())?
        );
    }
    Ok(())
}

/// The panels of `gda plot --compare`: one per metric of a comparison file (a JSON array of
/// `{"impl", "metric", "bytes", "value", "unit"}`, as `scripts/shmem-vs-openmpi.sh` writes),
/// one series per implementation. Rows that are not objects with those fields are an error
/// naming the row.
pub fn comparison_panels(json: &serde_json::Value) -> Result<Vec<Panel>, String> {
    let rows = json
        .as_array()
        .ok_or("expected a JSON array of result rows")?;
    let mut panels: Vec<Panel> = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        let field = |k: &str| r.get(k).ok_or(format!("row {i}: no {k:?}"));
        let imp = field("impl")?
            .as_str()
            .ok_or(format!("row {i}: impl is not a string"))?;
        let metric = field("metric")?
            .as_str()
            .ok_or(format!("row {i}: metric is not a string"))?;
        let unit = r.get("unit").and_then(|u| u.as_str()).unwrap_or("");
        let bytes = field("bytes")?
            .as_f64()
            .ok_or(format!("row {i}: bytes is not a number"))?;
        let value = field("value")?
            .as_f64()
            .ok_or(format!("row {i}: value is not a number"))?;
        // Barriers have no size: drawn at 1 byte would mislead, so at 8 (the smallest size).
        let x = if bytes > 0.0 { bytes } else { 8.0 };
        let panel = match panels.iter_mut().position(|p| p.title == metric) {
            Some(k) => &mut panels[k],
            None => {
                panels.push(Panel {
                    title: metric.to_owned(),
                    y_label: unit.to_owned(),
                    log_y: true,
                    series: Vec::new(),
                });
                panels.last_mut().ok_or("no panel")?
            }
        };
        match panel.series.iter_mut().position(|s| s.name == imp) {
            Some(k) => panel.series[k].points.push((x, value)),
            None => panel.series.push(Series {
                name: imp.to_owned(),
                points: vec![(x, value)],
            }),
        }
    }
    if panels.is_empty() {
        return Err("no result rows".into());
    }
    Ok(panels)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comparison_rows_become_one_panel_per_metric() {
        let j = serde_json::json!([
            {"impl": "gda", "metric": "put_lat", "bytes": 8, "value": 0.03, "unit": "us"},
            {"impl": "Open MPI", "metric": "put_lat", "bytes": 8, "value": 0.04, "unit": "us"},
            {"impl": "gda", "metric": "put_lat", "bytes": 64, "value": 0.05, "unit": "us"},
            {"impl": "gda", "metric": "barrier_lat", "bytes": 0, "value": 0.2, "unit": "us"},
        ]);
        let p = comparison_panels(&j).unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].series.len(), 2);
        assert_eq!(p[0].series[0].points, vec![(8.0, 0.03), (64.0, 0.05)]);
        assert_eq!(p[1].series[0].points, vec![(8.0, 0.2)]);
        let dir = std::env::temp_dir().join(format!("gda-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("cmp.svg");
        write_svg(&f, "test", &p).unwrap();
        let svg = std::fs::read_to_string(&f).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("put_lat") && svg.contains("Open MPI"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_rows_and_empty_figures_are_errors() {
        for (j, want) in [
            (serde_json::json!({"impl": "x"}), "expected a JSON array"),
            (
                serde_json::json!([{"impl": "x", "metric": "m", "bytes": "8", "value": 1}]),
                "row 0: bytes is not a number",
            ),
            (serde_json::json!([{"metric": "m"}]), "row 0: no \"impl\""),
            (serde_json::json!([]), "no result rows"),
        ] {
            let e = comparison_panels(&j).unwrap_err();
            assert!(e.contains(want), "{want:?} not in {e:?}");
        }
        let nan = Panel {
            title: "t".into(),
            y_label: "us".into(),
            log_y: true,
            series: vec![Series {
                name: "gda".into(),
                points: vec![(8.0, f64::NAN), (0.0, 1.0)],
            }],
        };
        let e = write_svg(Path::new("/nonexistent/x.svg"), "t", &[nan]).unwrap_err();
        assert!(e.to_string().contains("no finite, positive values"), "{e}");
    }
}
