//! Percentiles over time as a server-rendered SVG line chart (no script):
//! samples `(time, value)` are put in equal time buckets, and each bucket's
//! p50, p95 and p99 are drawn as three lines that differ by colour and by
//! dash pattern. The figures are also in a table for screen readers and
//! copy-paste.

use crate::view;
use kairos_core::overview::quantile;
use kairos_core::time::Millis;
use maud::{Markup, html};

/// One bucket's figures; `None` where it had no samples.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Bucket {
    /// Start of the bucket (ms UTC).
    pub(crate) start: Millis,
    /// Samples in it.
    pub(crate) count: usize,
    /// Its 50th, 95th and 99th percentiles.
    pub(crate) p: [Option<i64>; 3],
}

/// The percentiles charted, in the order of [`Bucket::p`].
const QUANTILES: [(f64, &str); 3] = [(0.5, "p50"), (0.95, "p95"), (0.99, "p99")];

/// `n` buckets of `width` ms from `start`; samples outside them are left out.
pub(crate) fn buckets(
    samples: &[(Millis, i64)],
    start: Millis,
    width: Millis,
    n: usize,
) -> Vec<Bucket> {
    let mut values: Vec<Vec<i64>> = vec![Vec::new(); n];
    for &(at, v) in samples {
        if at < start || width <= 0 {
            continue;
        }
        if let Some(slot) = usize::try_from((at - start) / width)
            .ok()
            .and_then(|i| values.get_mut(i))
        {
            slot.push(v);
        }
    }
    values
        .into_iter()
        .enumerate()
        .map(|(i, mut v)| {
            v.sort_unstable();
            Bucket {
                start: start + i as Millis * width,
                count: v.len(),
                p: QUANTILES.map(|(q, _)| quantile(&v, q)),
            }
        })
        .collect()
}

/// A round top for the value axis: the smallest 1, 2 or 5 × 10ⁿ at or above
/// `max` (at least 1).
pub(crate) fn axis_top(max: i64) -> i64 {
    let mut step = 1i64;
    loop {
        for m in [1, 2, 5] {
            let top = step.saturating_mul(m);
            if top >= max {
                return top;
            }
        }
        if step > i64::MAX / 10 {
            return i64::MAX;
        }
        step *= 10;
    }
}

// Drawing area inside the 600 × 170 view box: room on the left for the
// value labels and below for the time labels.
const LEFT: f64 = 58.0;
const RIGHT: f64 = 592.0;
const TOP: f64 = 10.0;
const BOTTOM: f64 = 140.0;

/// The points of one series in view-box coordinates, in runs of
/// consecutive buckets with a value (a bucket without samples breaks the
/// line).
pub(crate) fn series_points(buckets: &[Bucket], series: usize, top: i64) -> Vec<Vec<(f64, f64)>> {
    let n = buckets.len().max(1) as f64;
    let x = |i: usize| LEFT + (RIGHT - LEFT) * (i as f64 + 0.5) / n;
    let y = |v: i64| BOTTOM - (BOTTOM - TOP) * (v.max(0) as f64 / top.max(1) as f64).min(1.0);
    let mut runs = Vec::new();
    let mut run = Vec::new();
    for (i, b) in buckets.iter().enumerate() {
        match b.p[series] {
            Some(v) => run.push((x(i), y(v))),
            None if !run.is_empty() => runs.push(std::mem::take(&mut run)),
            None => {}
        }
    }
    if !run.is_empty() {
        runs.push(run);
    }
    runs
}

/// A run as SVG `points`.
fn points(run: &[(f64, f64)]) -> String {
    run.iter()
        .map(|(x, y)| format!("{x:.1},{y:.1}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The chart of `buckets` (oldest first), named `label`, with `empty` shown
/// instead when no bucket has samples. `axis` names the time labels under
/// it (oldest, middle, newest).
pub(crate) fn percentiles(label: &str, buckets: &[Bucket], empty: &str, axis: [&str; 3]) -> Markup {
    let max = buckets.iter().filter_map(|b| b.p[2]).max();
    let Some(max) = max else {
        return html! { p.muted { (empty) } };
    };
    let top = axis_top(max.max(1));
    let worst = |s: usize| buckets.iter().filter_map(|b| b.p[s]).max();
    let summary = format!(
        "{label}: highest p50 {}, p95 {}, p99 {}",
        worst(0).map_or("—".into(), |v| view::duration(v.max(0))),
        worst(1).map_or("—".into(), |v| view::duration(v.max(0))),
        view::duration(max.max(0)),
    );
    html! {
        svg.chart.lines viewBox="0 0 600 170" role="img" aria-label=(summary) {
            title { (summary) }
            @for frac in [0.0, 0.5, 1.0] {
                @let y = BOTTOM - (BOTTOM - TOP) * frac;
                line.grid x1=(LEFT) y1=(y) x2=(RIGHT) y2=(y) {}
                text.tick x=(LEFT - 6.0) y=(y + 4.0) text-anchor="end" {
                    (view::duration((top as f64 * frac) as i64))
                }
            }
            @for (i, text) in axis.iter().enumerate() {
                @let x = LEFT + (RIGHT - LEFT) * i as f64 / 2.0;
                @let anchor = ["start", "middle", "end"][i];
                text.tick x=(x) y="162" text-anchor=(anchor) { (text) }
            }
            @for (s, (_, name)) in QUANTILES.iter().enumerate() {
                g class=(name) {
                    @for run in series_points(buckets, s, top) {
                        // A lone bucket has no line: its marker shows it.
                        @if run.len() > 1 { polyline points=(points(&run)) {} }
                        // Decreasing sizes: equal values stay visible as rings.
                        @for (x, y) in &run { circle cx=(format!("{x:.1}")) cy=(format!("{y:.1}")) r=([5.0, 3.8, 2.6][s]) {} }
                    }
                }
            }
        }
        p.legend aria-hidden="true" {
            @for (_, name) in QUANTILES {
                svg.swatch viewBox="0 0 24 8" width="24" height="8" { g class=(name) { polyline points="0,4 24,4" {} } }
                " " (name) "  "
            }
        }
        details.numbers {
            summary { "The numbers" }
            div.scroll tabindex="0" role="region" aria-label={ (label) ", as a table" } {
                table.data {
                    caption.sr-only { (label) }
                    thead { tr {
                        th scope="col" { "From (UTC)" } th scope="col" .num { "Samples" }
                        @for (_, name) in QUANTILES { th scope="col" .num { (name) } }
                    } }
                    tbody {
                        @for b in buckets {
                            tr {
                                th scope="row" { (view::time(Some(b.start))) }
                                td.num { (b.count) }
                                @for v in b.p {
                                    td.num { @match v { Some(v) => { (view::duration(v.max(0))) }, None => { "—" } } }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_fall_in_their_bucket_and_give_its_percentiles() {
        let samples: Vec<(Millis, i64)> = (1..=100)
            .map(|v| (1_000 + v, v))
            .chain([(5_500, 7), (99, 1), (9_999, 1)])
            .collect();
        let b = buckets(&samples, 1_000, 2_000, 3);
        assert_eq!(b.len(), 3);
        assert_eq!(
            (b[0].start, b[0].count, b[0].p),
            (1_000, 100, [Some(50), Some(95), Some(99)])
        );
        assert_eq!((b[1].count, b[1].p), (0, [None, None, None]));
        assert_eq!(
            (b[2].start, b[2].count, b[2].p),
            (5_000, 1, [Some(7), Some(7), Some(7)])
        );
    }

    #[test]
    fn the_value_axis_tops_at_a_round_number() {
        assert_eq!(axis_top(0), 1);
        assert_eq!(axis_top(1), 1);
        assert_eq!(axis_top(3), 5);
        assert_eq!(axis_top(7), 10);
        assert_eq!(axis_top(120), 200);
        assert_eq!(axis_top(2_000), 2_000);
        assert_eq!(axis_top(i64::MAX), i64::MAX);
    }

    fn bucket(p: [Option<i64>; 3]) -> Bucket {
        Bucket {
            start: 0,
            count: 1,
            p,
        }
    }

    #[test]
    fn a_bucket_without_samples_breaks_the_line() {
        let b = [
            bucket([Some(0), Some(5), Some(10)]),
            bucket([None, None, None]),
            bucket([Some(10), Some(10), Some(10)]),
            bucket([Some(5), Some(5), Some(10)]),
        ];
        // Four slots over x 58–592: centres at 124.75, 258.25, 391.75, 525.25;
        // y runs from 140 (0) up to 10 (the top, 10).
        let runs: Vec<String> = series_points(&b, 0, 10).iter().map(|r| points(r)).collect();
        assert_eq!(runs, ["124.8,140.0", "391.8,10.0 525.2,75.0"]);
        assert_eq!(series_points(&b, 2, 10).len(), 2);
        assert!(series_points(&[bucket([None; 3])], 0, 10).is_empty());
    }

    #[test]
    fn the_chart_is_labelled_drawn_and_tabulated() {
        let b = [
            bucket([Some(10), Some(40), Some(90)]),
            bucket([Some(20), Some(60), Some(1_500)]),
        ];
        let html =
            percentiles("Lateness", &b, "none", ["1 h ago", "30 min ago", "now"]).into_string();
        assert!(html.contains(r#"role="img""#), "{html}");
        assert!(
            html.contains("highest p50 20 ms, p95 60 ms, p99 1.5 s"),
            "{html}"
        );
        assert_eq!(
            html.matches("<polyline").count(),
            3 + 3,
            "three series, three legend swatches"
        );
        assert_eq!(html.matches("<circle").count(), 3 * 2, "a marker per point");
        let lone = percentiles("Lateness", &b[..1], "none", ["a", "b", "c"]).into_string();
        assert_eq!(
            (
                lone.matches("<polyline").count(),
                lone.matches("<circle").count()
            ),
            (3, 3),
            "one bucket: markers, no lines (the three polylines are the legend's)"
        );
        assert!(html.contains(r#"<g class="p99">"#));
        assert!(html.contains(">2.0 s<"), "axis top: {html}");
        assert!(
            html.contains("<td class=\"num\">1.5 s</td>"),
            "the table: {html}"
        );
        let none = percentiles(
            "Lateness",
            &[bucket([None; 3])],
            "Nothing yet.",
            ["a", "b", "c"],
        )
        .into_string();
        assert_eq!(none, r#"<p class="muted">Nothing yet.</p>"#);
    }
}
