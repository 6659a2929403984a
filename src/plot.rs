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

/// Whether `p` is drawn as grouped bars rather than lines: every series has a single size (a
/// metric measured once, such as an atomic rate or a barrier), where a line over a size axis
/// would be one point.
#[must_use]
pub fn draws_as_bars(p: &Panel) -> bool {
    !p.series.is_empty()
        && p.series.iter().all(|s| {
            s.points
                .first()
                .is_some_and(|f| s.points.iter().all(|q| q.0 == f.0))
        })
}

/// A message size as a tick label: powers of two (and other whole multiples) of 1024 as `K`
/// and `M` (`64K`, `1M`), smaller sizes in bytes; sizes that are not whole get one decimal.
#[must_use]
pub fn size_label(bytes: f64) -> String {
    const K: f64 = 1024.0;
    let whole = |v: f64| (v - v.round()).abs() < 1e-9;
    if bytes >= K * K && whole(bytes / (K * K)) {
        format!("{:.0}M", bytes / (K * K))
    } else if bytes >= K && whole(bytes / K) {
        format!("{:.0}K", bytes / K)
    } else if bytes >= K * K {
        format!("{:.1}M", bytes / (K * K))
    } else if bytes >= K {
        format!("{:.1}K", bytes / K)
    } else {
        format!("{bytes:.0}")
    }
}

/// A value as a tick label: at most three significant digits, decimal `k`/`M`/`G` above a
/// thousand, and an exponent for very small values (never a row of zeros).
#[must_use]
pub fn value_label(v: f64) -> String {
    let a = v.abs();
    let sig3 = |x: f64| {
        // Three significant digits, trailing zeros dropped.
        let d = if x >= 100.0 {
            0
        } else if x >= 10.0 {
            1
        } else if x >= 1.0 {
            2
        } else {
            (2.0 - x.log10().floor()).clamp(0.0, 6.0) as usize
        };
        let t = format!("{x:.d$}");
        if t.contains('.') {
            t.trim_end_matches('0').trim_end_matches('.').to_owned()
        } else {
            t
        }
    };
    let sign = if v < 0.0 { "-" } else { "" };
    if !v.is_finite() {
        format!("{v}")
    } else if a == 0.0 {
        "0".into()
    } else if a >= 1e9 {
        format!("{sign}{}G", sig3(a / 1e9))
    } else if a >= 1e6 {
        format!("{sign}{}M", sig3(a / 1e6))
    } else if a >= 1e3 {
        format!("{sign}{}k", sig3(a / 1e3))
    } else if a >= 1e-3 {
        format!("{sign}{}", sig3(a))
    } else {
        format!("{v:.0e}")
    }
}

/// Writes `panels` under `title` to the SVG file `path`: panels of values over message size
/// one below the other (lines over a log₂ size axis labelled `64K`, `1M`), and single-value
/// panels ([`draws_as_bars`]) side by side in one row of grouped bars. Panels without a
/// finite, positive point are left out; a figure with none at all is an error (nothing to
/// show).
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
    let (lines, bars): (Vec<&Panel>, Vec<&Panel>) = usable.iter().partition(|p| !draws_as_bars(p));
    let rows = lines.len() + usize::from(!bars.is_empty());
    let height = 60 + 320 * rows as u32;
    let root = SVGBackend::new(path, (900, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let root = root
        .titled(title, ("sans-serif", 22))
        .map_err(|e| err(e.to_string()))?;
    let areas = root.split_evenly((rows, 1));
    for (panel, area) in lines.iter().zip(areas.iter()) {
        draw_lines(panel, area).map_err(err)?;
    }
    if let Some(row) = areas.get(lines.len()).filter(|_| !bars.is_empty()) {
        for (panel, area) in bars.iter().zip(row.split_evenly((1, bars.len())).iter()) {
            draw_bars(panel, area).map_err(err)?;
        }
    }
    root.present().map_err(|e| err(e.to_string()))
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

/// A panel of lines over message size; x is drawn as log₂(bytes), so ticks fall on powers of
/// two and read as sizes.
fn draw_lines(p: &Panel, area: &Area<'_>) -> Result<(), String> {
    let pts = p.series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in pts {
        x0 = x0.min(x.log2());
        x1 = x1.max(x.log2());
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    // Room around the data (and a non-empty range for a single size).
    let (x0, x1) = (x0 - 0.4, x1 + 0.4);
    let (y0, y1) = if p.log_y {
        (y0 / 2.0, y1 * 2.0)
    } else {
        (0.0, y1 * 1.15)
    };
    // One tick per power of two while they fit (about 18), every other one beyond.
    let span = (x1 - x0).ceil() as usize;
    let ticks = if span <= 20 { span + 1 } else { span / 2 + 1 };
    let x_label = |x: &f64| {
        let r = x.round();
        if (x - r).abs() < 1e-6 {
            size_label(r.exp2())
        } else {
            String::new()
        }
    };
    let y_label = |y: &f64| value_label(*y);
    // The legend where the first line is low: upper left over rising lines (latencies),
    // upper right over falling ones (rates, gda's advantage).
    let falls = p
        .series
        .first()
        .is_some_and(|s| match (s.points.first(), s.points.last()) {
            (Some(a), Some(b)) => b.1 < a.1,
            _ => false,
        });
    let legend_at = if falls {
        SeriesLabelPosition::UpperRight
    } else {
        SeriesLabelPosition::UpperLeft
    };
    let mut b = ChartBuilder::on(area);
    b.caption(&p.title, ("sans-serif", 17))
        .margin(12)
        .x_label_area_size(38)
        .y_label_area_size(70);
    macro_rules! finish {
        ($chart:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .x_desc("message size (bytes)")
                .y_desc(p.y_label.as_str())
                .x_labels(ticks)
                .x_label_formatter(&x_label)
                .y_label_formatter(&y_label)
                .draw()
                .map_err(|e| e.to_string())?;
            for (k, s) in p.series.iter().enumerate() {
                let c = COLORS[k % COLORS.len()];
                let pts: Vec<(f64, f64)> = s.points.iter().map(|&(x, y)| (x.log2(), y)).collect();
                chart
                    .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(2)))
                    .map_err(|e| e.to_string())?
                    .label(s.name.as_str())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2))
                    });
                chart
                    .draw_series(pts.iter().map(|&pt| Circle::new(pt, 3, c.filled())))
                    .map_err(|e| e.to_string())?;
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .position(legend_at)
                .draw()
                .map_err(|e| e.to_string())?;
        }};
    }
    if p.log_y {
        finish!(
            b.build_cartesian_2d(x0..x1, (y0..y1).log_scale())
                .map_err(|e| e.to_string())?
        );
    } else {
        finish!(
            b.build_cartesian_2d(x0..x1, y0..y1)
                .map_err(|e| e.to_string())?
        );
    }
    Ok(())
}

/// A single-value panel: one bar per series (gda beside Open MPI), its value written above
/// it, on a linear axis from 0 so the bars' lengths compare.
fn draw_bars(p: &Panel, area: &Area<'_>) -> Result<(), String> {
    let vals: Vec<(&str, f64)> = p
        .series
        .iter()
        .filter_map(|s| s.points.first().map(|&(_, y)| (s.name.as_str(), y)))
        .collect();
    let top = vals.iter().map(|v| v.1).fold(0.0, f64::max) * 1.25;
    let n = i32::try_from(vals.len()).map_err(|e| e.to_string())?;
    let mut chart = ChartBuilder::on(area)
        .caption(&p.title, ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(30)
        .y_label_area_size(60)
        // Plotters' segmented range `0..m` has a segment per value of `0..=m`: `0..n - 1`
        // gives one per bar and no empty slot after the last.
        .build_cartesian_2d((0..(n - 1).max(0)).into_segmented(), 0.0..top)
        .map_err(|e| e.to_string())?;
    let x_label = |x: &SegmentValue<i32>| match x {
        SegmentValue::CenterOf(k) => usize::try_from(*k)
            .ok()
            .and_then(|k| vals.get(k))
            .map(|v| v.0.to_owned())
            .unwrap_or_default(),
        _ => String::new(),
    };
    let y_label = |y: &f64| value_label(*y);
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_label_formatter(&x_label)
        .y_desc(p.y_label.as_str())
        .y_label_formatter(&y_label)
        .draw()
        .map_err(|e| e.to_string())?;
    for (k, &(_, y)) in (0..n).zip(vals.iter()) {
        let c = COLORS[k as usize % COLORS.len()];
        let mut bar = Rectangle::new(
            [
                (SegmentValue::Exact(k), 0.0),
                (SegmentValue::Exact(k + 1), y),
            ],
            c.filled(),
        );
        bar.set_margin(0, 0, 18, 18);
        chart
            .draw_series(std::iter::once(bar))
            .map_err(|e| e.to_string())?;
        chart
            .draw_series(std::iter::once(Text::new(
                value_label(y),
                (SegmentValue::CenterOf(k), y + top * 0.06),
                ("sans-serif", 14).into_font().color(&BLACK),
            )))
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Whether smaller is better for a metric of this name and unit (latencies).
fn lower_is_better(metric: &str, unit: &str) -> bool {
    metric.ends_with("_lat") || matches!(unit, "us" | "µs" | "ns" | "ms" | "s")
}

/// The name a comparison file's implementation is shown under.
fn display_name(imp: &str) -> String {
    match imp {
        "ompi" | "openmpi" | "open-mpi" => "Open MPI".into(),
        other => other.into(),
    }
}

/// How many times gda is ahead of the other implementation at each size both measured
/// (`other / gda` for latencies, `gda / other` for rates: above 1, gda is ahead); `None`
/// unless the panel has gda and exactly one other series.
fn advantage(p: &Panel) -> Option<Series> {
    let [a, b] = p.series.as_slice() else {
        return None;
    };
    let (gda, other) = if a.name == "gda" {
        (a, b)
    } else if b.name == "gda" {
        (b, a)
    } else {
        return None;
    };
    let lower = lower_is_better(&p.title, &p.y_label);
    let points: Vec<(f64, f64)> = gda
        .points
        .iter()
        .filter_map(|&(x, g)| {
            let o = other.points.iter().find(|q| q.0 == x)?.1;
            let r = if lower { o / g } else { g / o };
            (r.is_finite() && r > 0.0).then_some((x, r))
        })
        .collect();
    let how = if lower {
        format!("{} time ÷ gda time", other.name)
    } else {
        format!("gda ÷ {}", other.name)
    };
    Some(Series {
        name: format!("{} ({how})", p.title),
        points,
    })
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
        let imp = display_name(imp);
        match panel.series.iter_mut().position(|s| s.name == imp) {
            Some(k) => panel.series[k].points.push((x, value)),
            None => panel.series.push(Series {
                name: imp,
                points: vec![(x, value)],
            }),
        }
    }
    if panels.is_empty() {
        return Err("no result rows".into());
    }
    // The size panels, then how far ahead gda is at each size, then the single values (bars,
    // their titles with the same factor).
    let (mut out, mut bars): (Vec<Panel>, Vec<Panel>) =
        panels.into_iter().partition(|p| !draws_as_bars(p));
    let ratios: Vec<Series> = out
        .iter()
        .filter_map(advantage)
        .filter(|s| !s.points.is_empty())
        .collect();
    if !ratios.is_empty() {
        let (lo, hi) = ratios
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.0))
            .fold((f64::MAX, f64::MIN), |(l, h), x| (l.min(x), h.max(x)));
        let mut series = ratios;
        series.push(Series {
            name: "1 = as fast as the other".into(),
            points: vec![(lo, 1.0), (hi, 1.0)],
        });
        out.push(Panel {
            title: "gda's advantage per size (above 1: gda ahead)".into(),
            y_label: "times".into(),
            log_y: false,
            series,
        });
    }
    for b in &mut bars {
        if let Some(r) = advantage(b).and_then(|s| s.points.first().map(|p| p.1)) {
            b.title = if r >= 1.0 {
                format!("{}: gda {r:.2}× ahead", b.title)
            } else {
                format!("{}: gda {:.2}× behind", b.title, 1.0 / r)
            };
        }
    }
    out.append(&mut bars);
    Ok(out)
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
        // put_lat (lines), gda's advantage per size, barrier_lat (a bar).
        assert_eq!(p.len(), 3);
        assert_eq!(p[0].series.len(), 2);
        assert_eq!(p[0].series[0].points, vec![(8.0, 0.03), (64.0, 0.05)]);
        assert!(p[1].title.contains("advantage"));
        assert_eq!(p[2].series[0].points, vec![(8.0, 0.2)]);
        assert!(draws_as_bars(&p[2]) && !draws_as_bars(&p[0]));
        let dir = std::env::temp_dir().join(format!("gda-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("cmp.svg");
        write_svg(&f, "test", &p).unwrap();
        let svg = std::fs::read_to_string(&f).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("put_lat") && svg.contains("Open MPI"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn sizes_are_labelled_as_powers_of_two() {
        let labels: Vec<String> = [8.0, 512.0, 1024.0, 65536.0, 98304.0, 524288.0, 1048576.0]
            .into_iter()
            .map(size_label)
            .collect();
        assert_eq!(labels, ["8", "512", "1K", "64K", "96K", "512K", "1M"]);
        assert_eq!(size_label(4.0 * 1048576.0), "4M");
        assert_eq!(size_label(1536.5), "1.5K");
        // Every power of two from 1 B to 1 GiB reads as a short whole number of B, K or M.
        for k in 0..31 {
            let l = size_label(f64::from(k).exp2());
            assert!(l.len() <= 5 && !l.contains('.'), "2^{k}: {l}");
        }
    }

    #[test]
    fn values_are_labelled_short() {
        for (v, want) in [
            (0.0, "0"),
            (0.03, "0.03"),
            (0.1234, "0.123"),
            (1.5, "1.5"),
            (12.0, "12"),
            (250.0, "250"),
            (12_500.0, "12.5k"),
            (3_000_000.0, "3M"),
            (2.5e9, "2.5G"),
            (1e-13, "1e-13"),
        ] {
            assert_eq!(value_label(v), want, "{v}");
        }
        // No label is a row of zeros, whatever the decade.
        for e in -15..12 {
            let l = value_label(10f64.powi(e));
            assert!(l.len() <= 6, "1e{e}: {l}");
        }
    }

    #[test]
    fn single_values_are_bars_and_sizes_are_lines() {
        let s = |pts: &[(f64, f64)]| Series {
            name: "s".into(),
            points: pts.to_vec(),
        };
        let panel = |series| Panel {
            series,
            ..Panel::default()
        };
        assert!(draws_as_bars(&panel(vec![
            s(&[(8.0, 1.0)]),
            s(&[(8.0, 2.0)])
        ])));
        assert!(!draws_as_bars(&panel(vec![s(&[(8.0, 1.0), (16.0, 2.0)])])));
        assert!(!draws_as_bars(&panel(vec![
            s(&[(8.0, 1.0)]),
            s(&[(8.0, 1.0), (64.0, 1.0)])
        ])));
        assert!(!draws_as_bars(&panel(vec![])));
    }

    #[test]
    fn the_advantage_is_other_over_gda_for_latencies_and_gda_over_other_for_rates() {
        let j = serde_json::json!([
            {"impl": "gda", "metric": "put_lat", "bytes": 8, "value": 0.5, "unit": "us"},
            {"impl": "ompi", "metric": "put_lat", "bytes": 8, "value": 1.0, "unit": "us"},
            {"impl": "gda", "metric": "put_lat", "bytes": 16, "value": 0.5, "unit": "us"},
            {"impl": "ompi", "metric": "put_lat", "bytes": 16, "value": 0.75, "unit": "us"},
            {"impl": "gda", "metric": "put_rate", "bytes": 8, "value": 30.0, "unit": "Mops"},
            {"impl": "ompi", "metric": "put_rate", "bytes": 8, "value": 10.0, "unit": "Mops"},
            {"impl": "gda", "metric": "put_rate", "bytes": 1024, "value": 5.0, "unit": "Mops"},
            {"impl": "ompi", "metric": "put_rate", "bytes": 1024, "value": 10.0, "unit": "Mops"},
            {"impl": "gda", "metric": "amo_add_rate", "bytes": 0, "value": 4.0, "unit": "Mops"},
            {"impl": "ompi", "metric": "amo_add_rate", "bytes": 0, "value": 2.0, "unit": "Mops"},
        ]);
        let p = comparison_panels(&j).unwrap();
        let titles: Vec<&str> = p.iter().map(|p| p.title.as_str()).collect();
        assert_eq!(titles[..2], ["put_lat", "put_rate"]);
        assert_eq!(p[0].series[1].name, "Open MPI");
        let adv = &p[2];
        assert!(!adv.log_y && adv.title.contains("advantage"));
        assert_eq!(adv.series[0].points, vec![(8.0, 2.0), (16.0, 1.5)]);
        assert_eq!(adv.series[1].points, vec![(8.0, 3.0), (1024.0, 0.5)]);
        assert_eq!(
            adv.series[2].points,
            vec![(8.0, 1.0), (1024.0, 1.0)],
            "parity"
        );
        assert_eq!(p[3].title, "amo_add_rate: gda 2.00× ahead");
        assert!(draws_as_bars(&p[3]));
        let dir = std::env::temp_dir().join(format!("gda-plot-adv-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("adv.svg");
        write_svg(&f, "t", &p).unwrap();
        let svg = std::fs::read_to_string(&f).unwrap();
        // Tick labels are whole powers of two; the bars carry their values.
        for t in ["\n1K\n", "\n512\n", "amo_add_rate", "\n4\n", "Open MPI"] {
            assert!(svg.contains(t), "{t:?} not in the figure");
        }
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
