//! Charts drawn by the server as inline SVG: no script, no third-party library, readable
//! without JavaScript and at any width (the SVG scales to its box).
//!
//! Each data point is an element of its own (`rect class="bar"` with `data-label` and
//! `data-value`, and a `title` the browser shows on hover), so a test or a person can find
//! every point in the DOM.

use maud::{Markup, html};

/// One bar: its label (an hour, a date), its value, and the value as shown.
pub(super) struct Point {
    pub label: String,
    pub value: f64,
    pub shown: String,
}

const WIDTH: f64 = 960.0;
const HEIGHT: f64 = 180.0;
/// Room for the labels under the bars and the scale on the left.
const BOTTOM: f64 = 22.0;
const LEFT: f64 = 44.0;
const TOP: f64 = 8.0;

/// A bar chart of `points` titled `title`; every `label_every`-th bar is labelled below.
pub(super) fn bars(id: &str, title: &str, points: &[Point], label_every: usize) -> Markup {
    let max = points.iter().map(|p| p.value).fold(0.0_f64, f64::max);
    let scale_max = if max > 0.0 { max } else { 1.0 };
    let plot_width = WIDTH - LEFT;
    let plot_height = HEIGHT - BOTTOM - TOP;
    let slot = plot_width / points.len().max(1) as f64;
    let bar_width = (slot * 0.8).max(1.0);
    let label_every = label_every.max(1);
    html! {
        figure class="chart" id=(id) {
            figcaption { (title) }
            svg class="chart-svg" viewBox={ "0 0 " (WIDTH) " " (HEIGHT) }
                xmlns="http://www.w3.org/2000/svg" role="img" aria-label=(title) {
                line class="axis" x1=(LEFT) y1=(HEIGHT - BOTTOM) x2=(WIDTH) y2=(HEIGHT - BOTTOM) {}
                text class="scale" x=(LEFT - 4.0) y=(TOP + 10.0) text-anchor="end" {
                    (short(max))
                }
                text class="scale" x=(LEFT - 4.0) y=(HEIGHT - BOTTOM) text-anchor="end" { "0" }
                @for (i, point) in points.iter().enumerate() {
                    @let height = (point.value / scale_max * plot_height).max(0.0);
                    @let x = LEFT + i as f64 * slot + (slot - bar_width) / 2.0;
                    rect class="bar" x=(round(x)) y=(round(HEIGHT - BOTTOM - height))
                        width=(round(bar_width)) height=(round(height))
                        data-label=(point.label) data-value=(point.value) {
                        title { (point.label) ": " (point.shown) }
                    }
                    @if i % label_every == 0 {
                        text class="tick" x=(round(x + bar_width / 2.0)) y=(HEIGHT - 6.0)
                            text-anchor="middle" { (point.label) }
                    }
                }
            }
        }
    }
}

fn round(value: f64) -> f64 {
    (value * 10.0).round() / 10.0
}

/// A scale value in few characters: 950, 1.2k, 3.4M.
fn short(value: f64) -> String {
    if value >= 1_000_000.0 {
        format!("{:.1}M", value / 1_000_000.0)
    } else if value >= 10_000.0 {
        format!("{:.0}k", value / 1000.0)
    } else if value >= 1000.0 {
        format!("{:.1}k", value / 1000.0)
    } else {
        format!("{}", (value * 100.0).round() / 100.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_point_is_an_element_with_its_value() {
        let points: Vec<Point> = (0..3)
            .map(|i| Point {
                label: format!("h{i}"),
                value: f64::from(i),
                shown: format!("{i} leads"),
            })
            .collect();
        let svg = bars("c", "Leads", &points, 2).into_string();
        assert_eq!(svg.matches("<rect class=\"bar\"").count(), 3);
        assert!(svg.contains("data-label=\"h2\" data-value=\"2\""), "{svg}");
        assert!(svg.contains("<title>h1: 1 leads</title>"));
        assert_eq!(short(12_345.0), "12k");
        assert_eq!(short(1_500.0), "1.5k");
    }
}
