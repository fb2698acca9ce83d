//! Writing the Prometheus text exposition format (version 0.0.4): `# HELP` and `# TYPE`
//! lines, samples with escaped label values, and histograms as `_bucket`/`_sum`/`_count`.
//!
//! Owns the syntax only; which metrics exist is decided by [`super::Metrics::render`].

use std::fmt::Write;

use super::HistogramReading;

/// The `Content-Type` of a scrape answer.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

pub(super) struct TextWriter {
    out: String,
}

impl TextWriter {
    pub(super) fn new() -> TextWriter {
        TextWriter {
            out: String::with_capacity(8 * 1024),
        }
    }

    pub(super) fn finish(self) -> String {
        self.out
    }

    /// Starts a metric family.
    pub(super) fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.out, "# HELP {name} {}", escape_help(help));
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
    }

    /// One sample line: `name{labels} value`.
    pub(super) fn sample(
        &mut self,
        name: &str,
        labels: &[(&str, &str)],
        value: impl std::fmt::Display,
    ) {
        self.out.push_str(name);
        write_labels(&mut self.out, labels);
        let _ = writeln!(self.out, " {value}");
    }

    /// A histogram's samples. `scale` divides the integer observations into the unit of the
    /// metric (1e6 turns microseconds into seconds; 1 keeps counts).
    pub(super) fn histogram(
        &mut self,
        name: &str,
        labels: &[(&str, &str)],
        reading: &HistogramReading,
        scale: f64,
    ) {
        let bucket_name = format!("{name}_bucket");
        for (bound, count) in reading.bounds.iter().zip(&reading.cumulative) {
            let le = format_number(*bound as f64 / scale);
            let mut with_le = labels.to_vec();
            with_le.push(("le", &le));
            self.sample(&bucket_name, &with_le, count);
        }
        let mut with_inf = labels.to_vec();
        with_inf.push(("le", "+Inf"));
        self.sample(&bucket_name, &with_inf, reading.count);
        self.sample(
            &format!("{name}_sum"),
            labels,
            format_number(reading.sum as f64 / scale),
        );
        self.sample(&format!("{name}_count"), labels, reading.count);
    }
}

/// A float as Prometheus reads it, without a needless exponent or trailing zeros.
pub(super) fn format_number(value: f64) -> String {
    let text = format!("{value}");
    if text.contains('e') {
        format!("{value:.9}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    } else {
        text
    }
}

fn write_labels(out: &mut String, labels: &[(&str, &str)]) {
    if labels.is_empty() {
        return;
    }
    out.push('{');
    for (index, (name, value)) in labels.iter().enumerate() {
        if index > 0 {
            out.push(',');
        }
        out.push_str(name);
        out.push_str("=\"");
        for c in value.chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '"' => out.push_str("\\\""),
                '\n' => out.push_str("\\n"),
                c => out.push(c),
            }
        }
        out.push('"');
    }
    out.push('}');
}

fn escape_help(help: &str) -> String {
    help.replace('\\', "\\\\").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        let mut writer = TextWriter::new();
        writer.sample("m", &[("a", "x\"y\\z\nw")], 1);
        assert_eq!(writer.finish(), "m{a=\"x\\\"y\\\\z\\nw\"} 1\n");
    }

    #[test]
    fn histograms_end_with_inf_sum_and_count() {
        static BOUNDS: [u64; 2] = [500, 1_000_000];
        let reading = HistogramReading::from_counts(&BOUNDS, &[1, 2, 3], 4_000_250);
        let mut writer = TextWriter::new();
        writer.histogram("d", &[("e", "h")], &reading, 1e6);
        assert_eq!(
            writer.finish(),
            "d_bucket{e=\"h\",le=\"0.0005\"} 1\n\
             d_bucket{e=\"h\",le=\"1\"} 3\n\
             d_bucket{e=\"h\",le=\"+Inf\"} 6\n\
             d_sum{e=\"h\"} 4.00025\n\
             d_count{e=\"h\"} 6\n"
        );
    }

    #[test]
    fn numbers_have_no_exponent() {
        assert_eq!(format_number(0.0005), "0.0005");
        assert_eq!(format_number(1e-7), "0.0000001");
        assert_eq!(format_number(2.0), "2");
    }
}
