//! Families as Prometheus's text format (0.0.4): each family once, its `# HELP` and `# TYPE` first
//! (every family has both: one the engine gave no help gets a line saying so), then its samples;
//! HELP escapes `\` and line feeds, label values `\`, `"` and line feeds.

use std::fmt::Write;

use super::family::{Family, Sample};

/// The content type of what [`render`] writes.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

pub fn render(families: &[Family]) -> String {
    let mut text = String::new();
    for family in families {
        let help = family.help.as_deref().unwrap_or("(the engine gives no help for it)");
        let _ = writeln!(text, "# HELP {} {}", family.name, escape_help(help));
        let _ = writeln!(text, "# TYPE {} {}", family.name, family.kind.name());
        for sample in &family.samples {
            write_sample(&mut text, sample);
        }
    }
    text
}

fn write_sample(text: &mut String, sample: &Sample) {
    text.push_str(&sample.name);
    if !sample.labels.is_empty() {
        text.push('{');
        for (index, (name, value)) in sample.labels.iter().enumerate() {
            if index > 0 {
                text.push(',');
            }
            let _ = write!(text, "{name}=\"{}\"", escape_label_value(value));
        }
        text.push('}');
    }
    let _ = write!(text, " {}", format_value(sample.value));
    if let Some(stamp) = sample.timestamp_ms {
        let _ = write!(text, " {stamp}");
    }
    text.push('\n');
}

/// A float as Go's ParseFloat reads it back: `NaN`, `+Inf`, `-Inf`, else the shortest decimal.
pub fn format_value(value: f64) -> String {
    if value.is_nan() {
        "NaN".into()
    } else if value == f64::INFINITY {
        "+Inf".into()
    } else if value == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        value.to_string()
    }
}

fn escape_help(help: &str) -> String {
    help.replace('\\', "\\\\").replace('\n', "\\n")
}

fn escape_label_value(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::super::family::MetricType;
    use super::super::parse::{parse, ENGINE_LIMITS};
    use super::*;

    #[test]
    fn what_is_rendered_parses_back_the_same() {
        let mut family = Family::new("strix_test_bytes", MetricType::Gauge, "a \\ help\nwith two lines");
        family.push(&[("node", "n\"1\\\n"), ("kind", "gtt")], 1.5e15);
        family.push(&[], f64::INFINITY);
        family.push(&[("kind", "x")], -0.25);
        let mut untyped =
            Family { help: None, kind: MetricType::Untyped, ..Family::new("llamacpp:odd", MetricType::Untyped, "") };
        untyped.push(&[], f64::NEG_INFINITY);
        untyped.samples[0].timestamp_ms = Some(-5);
        let families = vec![family, untyped];
        let text = render(&families);
        assert!(
            text.contains("# HELP strix_test_bytes a \\\\ help\\nwith two lines\n# TYPE strix_test_bytes gauge\n"),
            "{text}"
        );
        assert!(text.contains("strix_test_bytes{node=\"n\\\"1\\\\\\n\",kind=\"gtt\"} 1500000000000000\n"), "{text}");
        assert!(text.contains("# HELP llamacpp:odd (the engine gives no help for it)\n# TYPE llamacpp:odd untyped\nllamacpp:odd -Inf -5\n"));
        let mut back = parse(&text, &ENGINE_LIMITS).unwrap();
        back[1].help = None;
        assert_eq!(back, families);
        assert_eq!(format_value(f64::NAN), "NaN");
        assert_eq!(format_value(3.0), "3");
    }
}
