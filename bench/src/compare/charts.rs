//! The page `compare` writes beside its table: the same rows drawn as
//! horizontal bar charts, one per figure (latency p50 and p99, cycles/s,
//! availability, the gap after a holder's crash, the safety verdicts), each
//! an SVG drawn by plotters and inlined in one HTML file that loads nothing
//! else: no script, no style sheet, no font, no image.
//!
//! The page is well-formed XML as well as HTML, so a test (and any XML
//! tool) can read it back.

use std::time::Duration;

use plotters::{
    prelude::*,
    style::text_anchor::{HPos, Pos, VPos},
};

use super::{COLUMNS, Row, cells, method, rate, verdict};

/// Why the page could not be drawn.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PageError {
    /// plotters refused to draw a chart.
    #[error("cannot draw the {figure} chart: {detail}")]
    Draw {
        /// The figure's id.
        figure: &'static str,
        /// plotters' error.
        detail: String,
    },
    /// There were no rows to draw.
    #[error("no configuration to draw")]
    NoRows,
}

/// The figures every page holds, by the `id` of their `<figure>` element, in
/// the page's order.
pub const FIGURES: [&str; 6] = [
    "latency-p50",
    "latency-p99",
    "cycles-per-second",
    "availability",
    "crash-gap",
    "safety",
];

/// One bar: its length on the value axis and the text at its end.
#[derive(Debug, Clone)]
struct Bar {
    value: f64,
    label: String,
}

/// One chart: a band of bars per configuration.
struct Figure {
    id: &'static str,
    title: String,
    /// What the bars are, under the chart.
    caption: String,
    /// The value axis's description.
    axis: &'static str,
    /// The value axis's tick labels.
    tick: fn(f64) -> String,
    /// Where the value axis ends, if not just past the longest bar.
    axis_max: Option<f64>,
    /// The bars' colours, one per bar of a band.
    colours: Vec<RGBColor>,
    /// Whether a band's bars go end to end on one line (parts of a whole)
    /// instead of one under the other.
    stacked: bool,
    /// Per configuration: its label and its bars.
    bands: Vec<(String, Vec<Bar>)>,
}

const LOCK: RGBColor = RGBColor(0x2f, 0x6d, 0xb5);
const RAW: RGBColor = RGBColor(0x9a, 0xa5, 0xb1);
const MEDIAN: RGBColor = RGBColor(0xd9, 0x82, 0x2b);
const MAX: RGBColor = RGBColor(0xf2, 0xc2, 0x8f);
const SAFE: RGBColor = RGBColor(0x2e, 0x8b, 0x57);
const UNSAFE: RGBColor = RGBColor(0xc0, 0x39, 0x2b);

/// The chart's width in pixels; its height follows from its bars.
const WIDTH: u32 = 1100;
/// Pixels per bar line.
const LINE: u32 = 24;
/// The left margin, where the configurations' names go.
const NAMES: u32 = 300;
/// The right margin, where the longest bars' labels go.
const LABELS: u32 = 230;
/// Text size, before plotters' SVG backend scales it by 0.8.
const TEXT: u32 = 16;

/// The HTML page: [`method`]'s line, the charts of [`FIGURES`], then the
/// table of exact figures; `redis` says where the Redis came from.
pub fn page(redis: &str, rows: &[Row]) -> Result<String, PageError> {
    if rows.is_empty() {
        return Err(PageError::NoRows);
    }
    let mut out = String::from(
        "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n\
         <meta charset=\"utf-8\"/>\n<title>Lock configurations compared</title>\n<style>\n\
         body { font-family: sans-serif; margin: 24px; color: #222; }\n\
         figure { margin: 0 0 28px 0; }\n\
         figcaption { max-width: 1100px; margin-top: 4px; }\n\
         table { border-collapse: collapse; font-size: 14px; }\n\
         th, td { border: 1px solid #bbb; padding: 4px 8px; text-align: left; }\n\
         </style>\n</head>\n<body>\n<h1>Lock configurations compared</h1>\n",
    );
    out.push_str(&format!("<p>{}</p>\n", escape(&method(redis))));
    for figure in figures(rows) {
        let svg = draw(&figure)?;
        out.push_str(&format!(
            "<figure id=\"{}\">\n{svg}\n<figcaption>{}</figcaption>\n</figure>\n",
            figure.id,
            escape(&figure.caption)
        ));
    }
    out.push_str("<table>\n<tr>");
    for column in COLUMNS {
        out.push_str(&format!("<th>{}</th>", escape(column)));
    }
    out.push_str("</tr>\n");
    for row in rows {
        out.push_str("<tr>");
        for cell in cells(row) {
            out.push_str(&format!("<td>{}</td>", escape(&cell)));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n</body>\n</html>\n");
    Ok(out)
}

/// The figures of `rows`, in [`FIGURES`]' order.
fn figures(rows: &[Row]) -> Vec<Figure> {
    let first = &rows[0];
    let (samples, tasks, rounds) = (
        first.latency.samples,
        first.throughput.tasks,
        first.throughput.rounds,
    );
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let bands = |bars: &dyn Fn(&Row) -> Vec<Bar>| -> Vec<(String, Vec<Bar>)> {
        rows.iter()
            .map(|row| (row.config.label.to_owned(), bars(row)))
            .collect()
    };
    let micros = |name: &str, value: f64| Bar {
        value,
        label: format!("{name} {value:.0} µs"),
    };
    let latency = |id, which: &str, pick: fn(&super::Percentiles) -> Duration| Figure {
        axis_max: None,
        id,
        title: format!("Acquire + release, {which}"),
        caption: format!(
            "{which} of {samples} cycles, one at a time. lock: the configuration's acquire + release; \
             raw: SET NX PX + DEL on the same nodes, sampled alternately with it."
        ),
        axis: "µs",
        tick: |v| format!("{v:.0}"),
        colours: vec![LOCK, RAW],
        stacked: false,
        bands: bands(&|row| {
            vec![
                with_ratio(
                    micros("lock", us(pick(&row.latency.subject))),
                    // The ratio is the median of per-pair ratios: a p50's.
                    (which == "p50").then_some(row.latency.ratio),
                ),
                micros("raw", us(pick(&row.latency.baseline))),
            ]
        }),
    };
    vec![
        latency("latency-p50", "p50", |p| p.p50),
        latency("latency-p99", "p99", |p| p.p99),
        Figure {
            id: "cycles-per-second",
            title: format!("Acquire + release cycles per second, {tasks} tasks"),
            caption: format!(
                "Medians of {rounds} windows, {tasks} tasks on one Locker, each on its own key; \
                 raw: the SET NX PX + DEL loop on the same nodes and at the same concurrency, \
                 in windows alternating with the lock's. Longer is better."
            ),
            axis: "cycles/s",
            tick: rate,
            axis_max: None,
            colours: vec![LOCK, RAW],
            stacked: false,
            bands: bands(&|row| {
                vec![
                    Bar {
                        value: row.throughput.subject,
                        label: format!(
                            "lock {} ({:.2}×)",
                            rate(row.throughput.subject),
                            row.throughput.ratio
                        ),
                    },
                    Bar {
                        value: row.throughput.baseline,
                        label: format!("raw {}", rate(row.throughput.baseline)),
                    },
                ]
            }),
        },
        Figure {
            id: "availability",
            title: "Availability (simulation)".into(),
            caption: "Median fraction of simulated time some client held the lock, \
                      three clients contending, one of them crashing at 3 s."
                .into(),
            axis: "% of the time held",
            tick: |v| format!("{v:.0}"),
            axis_max: Some(100.0),
            colours: vec![LOCK],
            stacked: false,
            bands: bands(&|row| {
                let percent = row.sim.availability * 100.0;
                vec![Bar {
                    value: percent,
                    label: format!("{percent:.1} %"),
                }]
            }),
        },
        crash_gap(rows),
        safety(rows),
    ]
}

/// `bar` with ` (1.11×)` after its label when there is a `ratio`.
fn with_ratio(bar: Bar, ratio: Option<f64>) -> Bar {
    match ratio {
        Some(ratio) => Bar {
            label: format!("{} ({ratio:.2}×)", bar.label),
            ..bar
        },
        None => bar,
    }
}

/// The gap between a holder's crash and the next grant.
fn crash_gap(rows: &[Row]) -> Figure {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    Figure {
        id: "crash-gap",
        title: "Gap after the holder's crash (simulation)".into(),
        caption: "From the crash of the client holding the lock to the next grant to another \
                  client: median and longest, over the seeds where the crashed client held it \
                  (how many, in brackets). The ttl bounds it."
            .into(),
        axis: "ms",
        tick: |v| format!("{v:.0}"),
        axis_max: None,
        colours: vec![MEDIAN, MAX],
        stacked: false,
        bands: rows
            .iter()
            .map(|row| {
                let (median, max) = (ms(row.sim.crash_gap), ms(row.sim.crash_gap_max));
                (
                    row.config.label.to_owned(),
                    vec![
                        Bar {
                            value: median,
                            label: format!("median {median:.0} ms ({} seeds)", row.sim.gaps),
                        },
                        Bar {
                            value: max,
                            label: format!("max {max:.0} ms"),
                        },
                    ],
                )
            })
            .collect(),
    }
}

/// The safety verdicts: safe and unsafe seeds end to end.
fn safety(rows: &[Row]) -> Figure {
    Figure {
        id: "safety",
        title: "Safety verdicts (simulation)".into(),
        caption: "Seeds run, in green those that broke no safety property and in red those that \
                  broke one; the verdict is safe only when none did."
            .into(),
        axis: "seeds",
        tick: |v| format!("{v:.0}"),
        axis_max: None,
        colours: vec![SAFE, UNSAFE],
        stacked: true,
        bands: rows
            .iter()
            .map(|row| {
                let unsafe_seeds = row.sim.unsafe_seeds as f64;
                (
                    row.config.label.to_owned(),
                    vec![
                        Bar {
                            value: row.sim.seeds as f64 - unsafe_seeds,
                            label: String::new(),
                        },
                        Bar {
                            value: unsafe_seeds,
                            label: verdict(&row.sim),
                        },
                    ],
                )
            })
            .collect(),
    }
}

/// Where a band's bars go on the value axis's perpendicular: `(top,
/// bottom)` of each, in bar lines counted from the chart's bottom.
fn lines(figure: &Figure) -> (f64, Vec<Vec<(f64, f64)>>) {
    // Half a line of air above and below each band.
    let per_band = if figure.stacked {
        1
    } else {
        figure.colours.len()
    } as f64
        + 1.0;
    let height = per_band * figure.bands.len() as f64;
    let placed = figure
        .bands
        .iter()
        .enumerate()
        .map(|(i, (_, bars))| {
            let top = height - per_band * i as f64 - 0.5;
            (0..bars.len())
                .map(|k| {
                    let line = if figure.stacked { 0.0 } else { k as f64 };
                    (top - line - 0.1, top - line - 0.9)
                })
                .collect()
        })
        .collect();
    (height, placed)
}

/// `figure` as an SVG document.
fn draw(figure: &Figure) -> Result<String, PageError> {
    let error = |detail: &dyn std::fmt::Display| PageError::Draw {
        figure: figure.id,
        detail: detail.to_string(),
    };
    let (height, placed) = lines(figure);
    let longest = figure
        .bands
        .iter()
        .map(|(_, bars)| {
            if figure.stacked {
                bars.iter().map(|bar| bar.value).sum()
            } else {
                bars.iter().map(|bar| bar.value).fold(0.0, f64::max)
            }
        })
        .fold(0.0, f64::max);
    // The labels of the longest bars go in the right margin; an axis of 1
    // when all bars are zero.
    let x_max = figure
        .axis_max
        .unwrap_or(if longest > 0.0 { longest * 1.05 } else { 1.0 });
    let pixels = (height as u32) * LINE + 110;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, pixels)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| error(&e))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(&figure.title, ("sans-serif", TEXT + 8))
            .margin(12)
            .margin_right(LABELS)
            .x_label_area_size(44)
            .y_label_area_size(NAMES)
            .build_cartesian_2d(0.0..x_max, 0.0..height)
            .map_err(|e| error(&e))?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(0)
            .x_labels(8)
            .x_label_formatter(&|v| (figure.tick)(*v))
            .x_desc(figure.axis)
            .light_line_style(TRANSPARENT)
            .bold_line_style(RGBColor(0xdd, 0xdd, 0xdd))
            .label_style(("sans-serif", TEXT))
            .axis_desc_style(("sans-serif", TEXT))
            .draw()
            .map_err(|e| error(&e))?;
        let label_style = TextStyle::from(("sans-serif", TEXT).into_font());
        for ((name, bars), places) in figure.bands.iter().zip(&placed) {
            let mut start = 0.0;
            for ((bar, &(top, bottom)), colour) in bars.iter().zip(places).zip(&figure.colours) {
                let end = if figure.stacked {
                    start + bar.value
                } else {
                    bar.value
                };
                if end > start {
                    chart
                        .draw_series([Rectangle::new(
                            [(start, top), (end, bottom)],
                            colour.filled(),
                        )])
                        .map_err(|e| error(&e))?;
                }
                if !bar.label.is_empty() {
                    let (x, y) = chart.backend_coord(&(end, (top + bottom) / 2.0));
                    root.draw(&Text::new(
                        bar.label.clone(),
                        (x + 6, y),
                        label_style.pos(Pos::new(HPos::Left, VPos::Center)),
                    ))
                    .map_err(|e| error(&e))?;
                }
                if figure.stacked {
                    start = end;
                }
            }
            // The configuration's name, right-aligned left of its band.
            let first_top = places.first().map_or(0.0, |&(top, _)| top);
            let last_bottom = places.last().map_or(0.0, |&(_, bottom)| bottom);
            let (x, y) = chart.backend_coord(&(0.0, (first_top + last_bottom) / 2.0));
            root.draw(&Text::new(
                name.clone(),
                (x - 10, y),
                label_style.pos(Pos::new(HPos::Right, VPos::Center)),
            ))
            .map_err(|e| error(&e))?;
        }
        root.present().map_err(|e| error(&e))?;
    }
    Ok(svg)
}

/// `text` with XML's special characters escaped.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::{Config, Interleaved, Percentiles, SimResult, Throughput};

    /// Three configurations with distinct figures, the last one unsafe.
    fn rows() -> Vec<Row> {
        let us = Duration::from_micros;
        let ms = Duration::from_millis;
        let row = |label, latency: [u64; 4], rates: [f64; 2], sim: [u64; 5]| Row {
            config: Config {
                label,
                ttl: ms(1_000),
                renew_every: ms(333),
                retry_max: ms(200),
                nodes: 1,
            },
            latency: Interleaved {
                subject: Percentiles {
                    p50: us(latency[0]),
                    p99: us(latency[1]),
                },
                baseline: Percentiles {
                    p50: us(latency[2]),
                    p99: us(latency[3]),
                },
                ratio: latency[0] as f64 / latency[2] as f64,
                samples: 200,
            },
            throughput: Throughput {
                subject: rates[0],
                baseline: rates[1],
                ratio: rates[0] / rates[1],
                tasks: 16,
                rounds: 3,
            },
            sim: SimResult {
                availability: sim[0] as f64 / 1_000.0,
                crash_gap: ms(sim[1]),
                crash_gap_max: ms(sim[2]),
                gaps: 60,
                unsafe_seeds: sim[3] as usize,
                seeds: sim[4] as usize,
            },
        };
        vec![
            row(
                "ttl 1s, renew ttl/3",
                [187, 412, 168, 301],
                [45_000.0, 90_000.0],
                [990, 879, 997, 0, 150],
            ),
            row(
                "ttl 1s, polling every ≤20ms",
                [185, 455, 166, 350],
                [44_100.0, 88_200.0],
                [985, 861, 990, 0, 160],
            ),
            row(
                "Redlock, 3 nodes, <odd> & \"quoted\"",
                [223, 640, 157, 390],
                [30_000.0, 60_000.0],
                [911, 914, 1091, 12, 180],
            ),
        ]
    }

    /// Per figure, in [`FIGURES`]' order: the lengths its bars must have
    /// (band by band, zeros left out) and texts it must show.
    fn expected() -> [(Vec<f64>, Vec<&'static str>); 6] {
        [
            (
                vec![187.0, 168.0, 185.0, 166.0, 223.0, 157.0],
                vec![
                    "lock 187 µs (1.11×)",
                    "raw 168 µs",
                    "lock 223 µs (1.42×)",
                    "raw 157 µs",
                ],
            ),
            (
                vec![412.0, 301.0, 455.0, 350.0, 640.0, 390.0],
                vec!["lock 412 µs", "raw 301 µs", "lock 640 µs", "raw 390 µs"],
            ),
            (
                vec![45_000.0, 90_000.0, 44_100.0, 88_200.0, 30_000.0, 60_000.0],
                vec!["lock 45.0 k (0.50×)", "raw 90.0 k", "raw 60.0 k"],
            ),
            (vec![99.0, 98.5, 91.1], vec!["99.0 %", "98.5 %", "91.1 %"]),
            (
                vec![879.0, 997.0, 861.0, 990.0, 914.0, 1091.0],
                vec!["median 879 ms (60 seeds)", "max 997 ms", "max 1091 ms"],
            ),
            (
                vec![150.0, 160.0, 168.0, 12.0],
                vec!["safe, 0/150", "safe, 0/160", "UNSAFE, 12/180"],
            ),
        ]
    }

    #[test]
    fn the_page_draws_every_figure_for_every_configuration() {
        let rows = rows();
        let html = page("a spawned redis-server 7.0.15 on loopback", &rows).expect("drawn");
        // Well-formed, so every chart is a whole SVG element.
        let options = roxmltree::ParsingOptions {
            // The HTML5 doctype, which declares nothing.
            allow_dtd: true,
            ..roxmltree::ParsingOptions::default()
        };
        let doc = roxmltree::Document::parse_with_options(&html, options)
            .expect("the page is well-formed");
        let root = doc.root_element();
        assert_eq!(root.tag_name().name(), "html");
        // Self-contained: nothing to fetch, nothing to run.
        for node in root.descendants() {
            assert_ne!(node.tag_name().name(), "script");
            for attribute in ["src", "href"] {
                assert!(node.attribute(attribute).is_none(), "{node:?}");
            }
        }
        let figures: Vec<_> = root
            .descendants()
            .filter(|n| n.has_tag_name("figure"))
            .collect();
        let ids: Vec<_> = figures.iter().filter_map(|f| f.attribute("id")).collect();
        assert_eq!(ids, FIGURES);
        for ((figure, (lengths, texts)), id) in figures.iter().zip(expected()).zip(FIGURES) {
            let svgs: Vec<_> = figure
                .children()
                .filter(|n| n.tag_name().name() == "svg")
                .collect();
            assert_eq!(svgs.len(), 1, "{id}: one chart");
            let shown: Vec<&str> = svgs[0]
                .descendants()
                .filter(|n| n.tag_name().name() == "text")
                .filter_map(|n| n.text())
                .map(str::trim)
                .collect();
            for row in &rows {
                assert!(
                    shown.contains(&row.config.label),
                    "{id}: {}",
                    row.config.label
                );
            }
            for text in texts {
                assert!(shown.contains(&text), "{id}: {text:?} in {shown:?}");
            }
            bars_measure(id, svgs[0], &lengths);
        }
        let cells: Vec<_> = root
            .descendants()
            .filter(|n| n.has_tag_name("td"))
            .filter_map(|n| n.text())
            .collect();
        assert!(cells.contains(&"UNSAFE, 12/180"), "{cells:?}");
        assert_eq!(cells.len(), rows.len() * COLUMNS.len());
    }

    /// Asserts that `svg`'s bars, the rectangles in the figure's colours in
    /// drawing order, are as long as `lengths` on one scale (a pixel of
    /// rounding each).
    fn bars_measure(id: &str, svg: roxmltree::Node<'_, '_>, lengths: &[f64]) {
        let colours = [LOCK, RAW, MEDIAN, MAX, SAFE, UNSAFE]
            .map(|RGBColor(r, g, b)| format!("#{r:02X}{g:02X}{b:02X}"));
        let widths: Vec<f64> = svg
            .descendants()
            .filter(|n| n.tag_name().name() == "rect")
            .filter(|n| {
                n.attribute("fill")
                    .is_some_and(|fill| colours.iter().any(|c| c.eq_ignore_ascii_case(fill)))
            })
            .map(|n| {
                n.attribute("width")
                    .and_then(|w| w.parse().ok())
                    .unwrap_or(0.0)
            })
            .collect();
        assert_eq!(widths.len(), lengths.len(), "{id}: bars {widths:?}");
        let longest = lengths.iter().copied().fold(0.0, f64::max);
        let scale = widths.iter().copied().fold(0.0, f64::max) / longest;
        // The longest bar takes most of the plot, not a sliver.
        assert!(longest * scale > 400.0, "{id}: {widths:?}");
        for (width, length) in widths.iter().zip(lengths) {
            assert!(
                (width - length * scale).abs() <= 1.5,
                "{id}: a bar of {length} is {width} px at {scale} px each"
            );
        }
    }

    #[test]
    fn no_rows_is_an_error_not_an_empty_page() {
        assert!(matches!(page("nowhere", &[]), Err(PageError::NoRows)));
    }
}
