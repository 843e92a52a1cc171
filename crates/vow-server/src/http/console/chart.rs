//! Stacked bar charts drawn on the server as SVG: the page carries the `<svg>` markup, which is
//! not script, so the console's CSP allows it. No inline `style`: the parts are coloured by
//! their class in the stylesheet. Each bar has a `<title>`, which a browser shows on hover.
//!
//! [`StackedBars::draw`] turns columns of counts into coordinates; the template only prints
//! them (`templates/console/chart.html`).

/// The drawing's size, in SVG user units, and its margins around the plot.
const WIDTH: f64 = 520.0;
const HEIGHT: f64 = 200.0;
const LEFT: f64 = 44.0;
const RIGHT: f64 = 8.0;
const TOP: f64 = 10.0;
const BOTTOM: f64 = 26.0;
/// The share of a column's slot its bar takes.
const BAR: f64 = 0.72;

/// One column to draw: counts stacked bottom up, each with the class that colours it.
#[derive(Debug, Clone)]
pub struct Column {
    /// What hovering the bar shows.
    pub title: String,
    /// The text under the column, if it gets one.
    pub label: Option<String>,
    /// `(class, count)`, bottom first.
    pub stack: Vec<(&'static str, u64)>,
}

/// A drawn chart: everything in SVG user units, as text.
#[derive(Debug, Clone)]
pub struct StackedBars {
    /// The `viewBox` width.
    pub width: String,
    /// The `viewBox` height.
    pub height: String,
    /// Where the plot's left edge is (the grid lines' start).
    pub left: String,
    /// Where the plot's right edge is (the grid lines' end).
    pub right: String,
    /// The bars, left to right.
    pub bars: Vec<Bar>,
    /// The horizontal grid lines with their values: 0, half the scale, the scale.
    pub ticks: Vec<Tick>,
    /// The labels under the columns.
    pub labels: Vec<Label>,
    /// Where the labels' baseline is.
    pub label_y: String,
}

/// One bar.
#[derive(Debug, Clone)]
pub struct Bar {
    /// Its left edge.
    pub x: String,
    /// Its width.
    pub width: String,
    /// What hovering it shows.
    pub title: String,
    /// Its non-empty parts, bottom first.
    pub parts: Vec<Part>,
}

/// One coloured part of a bar.
#[derive(Debug, Clone)]
pub struct Part {
    /// The class that colours it.
    pub class: &'static str,
    /// Its top edge.
    pub y: String,
    /// Its height.
    pub height: String,
}

/// A grid line and its value.
#[derive(Debug, Clone)]
pub struct Tick {
    /// Where the line is.
    pub y: String,
    /// The value it marks.
    pub text: String,
}

/// A label under a column.
#[derive(Debug, Clone)]
pub struct Label {
    /// Its centre.
    pub x: String,
    /// The text.
    pub text: String,
}

/// A coordinate, to a tenth.
fn at(v: f64) -> String {
    format!("{v:.1}")
}

/// The smallest 1, 2 or 5 times a power of ten that is at least `max` (1 at least).
pub fn scale(max: u64) -> u64 {
    let mut step = 1u64;
    loop {
        for m in [1, 2, 5] {
            let top = step.saturating_mul(m);
            if top >= max || top == u64::MAX {
                return top;
            }
        }
        step = step.saturating_mul(10);
    }
}

impl StackedBars {
    /// Draws `columns` side by side, scaled so the tallest stack fits. A part with a count
    /// is at least one unit tall, so it never disappears.
    #[allow(clippy::cast_precision_loss)] // counts far below 2^52
    pub fn draw(columns: Vec<Column>) -> StackedBars {
        let plot_w = WIDTH - LEFT - RIGHT;
        let plot_h = HEIGHT - TOP - BOTTOM;
        let bottom = TOP + plot_h;
        let top = scale(
            columns
                .iter()
                .map(|c| c.stack.iter().map(|(_, n)| n).sum())
                .max()
                .unwrap_or(0),
        );
        let slot = plot_w / columns.len().max(1) as f64;
        let mut bars = Vec::new();
        let mut labels = Vec::new();
        for (i, column) in columns.into_iter().enumerate() {
            let x = LEFT + slot * i as f64;
            let mut y = bottom;
            let mut parts = Vec::new();
            for (class, n) in column.stack.into_iter().filter(|(_, n)| *n > 0) {
                let height = (n as f64 / top as f64 * plot_h).max(1.0);
                y -= height;
                parts.push(Part {
                    class,
                    y: at(y),
                    height: at(height),
                });
            }
            if let Some(text) = column.label {
                labels.push(Label {
                    x: at(x + slot / 2.0),
                    text,
                });
            }
            bars.push(Bar {
                x: at(x + slot * (1.0 - BAR) / 2.0),
                width: at(slot * BAR),
                title: column.title,
                parts,
            });
        }
        let mut values = vec![0, top / 2, top];
        values.dedup();
        let ticks = values
            .into_iter()
            .map(|v| Tick {
                y: at(bottom - v as f64 / top as f64 * plot_h),
                text: super::view::grouped(v),
            })
            .collect();
        StackedBars {
            width: at(WIDTH),
            height: at(HEIGHT),
            left: at(LEFT),
            right: at(WIDTH - RIGHT),
            bars,
            ticks,
            labels,
            label_y: at(HEIGHT - 8.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn column(ok: u64, failed: u64) -> Column {
        Column {
            title: format!("{ok} ok, {failed} failed"),
            label: None,
            stack: vec![("ok", ok), ("failed", failed)],
        }
    }

    #[test]
    fn the_scale_is_one_two_or_five_times_a_power_of_ten() {
        let scales: Vec<u64> = [0, 1, 2, 3, 6, 11, 99, 101, 250_001].map(scale).to_vec();
        assert_eq!(scales, [1, 1, 2, 5, 10, 20, 100, 200, 500_000]);
    }

    #[test]
    fn parts_stack_bottom_up_and_empty_ones_are_left_out() {
        let chart = StackedBars::draw(vec![column(3, 2), column(0, 0), column(1, 0)]);
        assert_eq!(chart.bars.len(), 3);
        let first = &chart.bars[0];
        let classes: Vec<&str> = first.parts.iter().map(|p| p.class).collect();
        assert_eq!(classes, ["ok", "failed"]);
        // Scale 5 over a plot 164 high: 3 is 98.4 high from the bottom at 174.
        let at = |p: &Part| (p.y.clone(), p.height.clone());
        assert_eq!(at(&first.parts[0]), ("75.6".into(), "98.4".into()));
        assert_eq!(at(&first.parts[1]), ("10.0".into(), "65.6".into()));
        assert!(chart.bars[1].parts.is_empty());
        assert_eq!(chart.bars[2].parts.len(), 1);
        let ticks: Vec<&str> = chart.ticks.iter().map(|t| t.text.as_str()).collect();
        assert_eq!(ticks, ["0", "2", "5"]);
    }

    #[test]
    fn a_tiny_count_is_still_drawn() {
        let chart = StackedBars::draw(vec![column(1_000_000, 1)]);
        assert_eq!(chart.bars[0].parts[1].height, "1.0");
    }
}
