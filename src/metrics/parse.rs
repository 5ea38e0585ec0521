//! A bounded parser of Prometheus's text exposition format (version 0.0.4, what vLLM's
//! prometheus_client and llama-server's `/metrics` answer), after the format's description
//! (prometheus.io/docs/instrumenting/exposition_formats): lines end in `\n` (the last one too);
//! blank lines and comments other than `# HELP` and `# TYPE` are skipped; tokens are separated by
//! blanks and tabs; one HELP (`\\` and `\n` escaped) and one TYPE per name, the TYPE before the
//! name's first sample; a sample is `name{label="value",…} value [timestamp]`, its values escaped
//! with `\\`, `\"` and `\n`, its value a float (`NaN`, `+Inf`, `-Inf` included), its timestamp
//! milliseconds. Names are `[a-zA-Z_:][a-zA-Z0-9_:]*` (so `vllm:…` and `llamacpp:…` are names),
//! label names `[a-zA-Z_][a-zA-Z0-9_]*`, those starting with `__` reserved.
//!
//! Everything from outside is bounded before it is kept: the text's size, the samples, the labels
//! on one sample.

use std::collections::{HashMap, HashSet};

use super::family::{Family, MetricType, Sample};

/// How much of an engine's `/metrics` is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_bytes: usize,
    pub max_samples: usize,
    pub max_labels: usize,
}

/// An engine's: vLLM's `/metrics` for one model is some 100 KB (its histograms), llama.cpp's a few;
/// vLLM's `vllm:cache_config_info` carries every field of its CacheConfig as a label (36 in 0.32,
/// `vllm/v1/metrics/loggers.py`), and each vLLM adds some.
pub const ENGINE_LIMITS: Limits = Limits { max_bytes: 8 << 20, max_samples: 100_000, max_labels: 256 };

/// Why a text is not Prometheus's format, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpositionError {
    #[error("{size} bytes of metrics exceed the limit of {limit}")]
    TooLarge { size: usize, limit: usize },
    #[error("more than {limit} samples")]
    TooManySamples { limit: usize },
    #[error("line {line}: {why}")]
    Line { line: usize, why: String },
}

/// Every family of `text`, in the order their names first appear.
pub fn parse(text: &str, limits: &Limits) -> Result<Vec<Family>, ExpositionError> {
    if text.len() > limits.max_bytes {
        return Err(ExpositionError::TooLarge { size: text.len(), limit: limits.max_bytes });
    }
    let Some(body) = text.strip_suffix('\n') else {
        if text.trim().is_empty() {
            return Ok(Vec::new());
        }
        let line = text.lines().count();
        return Err(ExpositionError::Line {
            line,
            why: "the last line does not end with a line feed (cut short?)".into(),
        });
    };
    let mut parser = Parser {
        families: Vec::new(),
        by_name: HashMap::new(),
        typed: HashSet::new(),
        current: None,
        samples: 0,
        limits: *limits,
    };
    for (index, line) in body.split('\n').enumerate() {
        parser.line(line).map_err(|why| ExpositionError::Line { line: index + 1, why })?;
        if parser.samples > limits.max_samples {
            return Err(ExpositionError::TooManySamples { limit: limits.max_samples });
        }
    }
    Ok(parser.families)
}

struct Parser {
    families: Vec<Family>,
    by_name: HashMap<String, usize>,
    /// The families a TYPE line named (`untyped` included).
    typed: HashSet<usize>,
    /// The family the last line was about: its samples follow it.
    current: Option<usize>,
    samples: usize,
    limits: Limits,
}

impl Parser {
    fn line(&mut self, line: &str) -> Result<(), String> {
        let line = line.trim_matches(|c| c == ' ' || c == '\t' || c == '\r');
        if line.is_empty() {
            return Ok(());
        }
        match line.strip_prefix('#') {
            Some(comment) => self.comment(comment),
            None => self.sample(line),
        }
    }

    fn comment(&mut self, comment: &str) -> Result<(), String> {
        let mut cursor = Cursor::new(comment);
        cursor.skip_blanks();
        let keyword = cursor.token();
        if keyword != "HELP" && keyword != "TYPE" {
            return Ok(());
        }
        cursor.skip_blanks();
        let name = cursor.metric_name().ok_or_else(|| format!("# {keyword} without a metric name"))?;
        if !cursor.at_end() && !cursor.skip_blanks() {
            return Err(format!("# {keyword} {name}: a blank must follow the name"));
        }
        let index = self.family(name);
        let family = self.families.get_mut(index).ok_or("internal: a family went missing")?;
        if keyword == "HELP" {
            if family.help.is_some() {
                return Err(format!("a second HELP for {name}"));
            }
            family.help = Some(unescape_help(cursor.rest())?);
        } else {
            let word = cursor.token();
            let kind = MetricType::parse(word).ok_or_else(|| format!("# TYPE {name}: unknown type {word:?}"))?;
            cursor.skip_blanks();
            if !cursor.at_end() {
                return Err(format!("# TYPE {name} {word}: more after the type"));
            }
            if !self.typed.insert(index) {
                return Err(format!("a second TYPE for {name}"));
            }
            if !family.samples.is_empty() {
                return Err(format!("the TYPE of {name} comes after its samples"));
            }
            family.kind = kind;
        }
        self.current = Some(index);
        Ok(())
    }

    fn sample(&mut self, line: &str) -> Result<(), String> {
        let mut cursor = Cursor::new(line);
        let name = cursor.metric_name().ok_or_else(|| format!("not a metric name: {}", clip(line)))?.to_string();
        let labels = if cursor.eat('{') { cursor.labels(self.limits.max_labels)? } else { Vec::new() };
        if !cursor.skip_blanks() {
            return Err(format!("{name}: a blank must come before the value"));
        }
        let value = parse_value(cursor.token()).ok_or_else(|| format!("{name}: the value is not a number"))?;
        cursor.skip_blanks();
        let timestamp_ms = match cursor.token() {
            "" => None,
            stamp => Some(stamp.parse::<i64>().map_err(|_| format!("{name}: the timestamp is not a whole number"))?),
        };
        cursor.skip_blanks();
        if !cursor.at_end() {
            return Err(format!("{name}: more after the timestamp"));
        }
        let index = self.owner(&name);
        let family = self.families.get_mut(index).ok_or("internal: a family went missing")?;
        if family.kind == MetricType::Histogram && name == family.name {
            return Err(format!("histogram {name} has a sample without _bucket, _sum or _count"));
        }
        if name.ends_with("_bucket") && family.kind == MetricType::Histogram && !labels.iter().any(|(k, _)| k == "le") {
            return Err(format!("{name}: a bucket without its le label"));
        }
        family.samples.push(Sample { name, labels, value, timestamp_ms });
        self.samples += 1;
        self.current = Some(index);
        Ok(())
    }

    /// The family a sample called `name` belongs to: the current one when it owns the name, else
    /// one named so (or, stripped of a suffix, a histogram or summary), else a new untyped one.
    fn owner(&mut self, name: &str) -> usize {
        if let Some(index) = self.current.filter(|&index| self.families.get(index).is_some_and(|f| f.owns(name))) {
            return index;
        }
        if let Some(&index) = self.by_name.get(name) {
            return index;
        }
        for suffix in MetricType::Histogram.suffixes() {
            let Some(stem) = name.strip_suffix(suffix) else { continue };
            if let Some(&index) = self.by_name.get(stem) {
                if self.families.get(index).is_some_and(|family| family.owns(name)) {
                    return index;
                }
            }
        }
        self.family(name)
    }

    /// The family called `name`, made when there is none.
    fn family(&mut self, name: &str) -> usize {
        if let Some(&index) = self.by_name.get(name) {
            return index;
        }
        self.families.push(Family {
            name: name.to_string(),
            help: None,
            kind: MetricType::Untyped,
            samples: Vec::new(),
        });
        self.by_name.insert(name.to_string(), self.families.len() - 1);
        self.families.len() - 1
    }
}

/// A float as the format writes it: Go's ParseFloat's words for the infinities and NaN too.
fn parse_value(token: &str) -> Option<f64> {
    match token.to_ascii_lowercase().as_str() {
        "nan" => Some(f64::NAN),
        "+inf" | "inf" | "+infinity" | "infinity" => Some(f64::INFINITY),
        "-inf" | "-infinity" => Some(f64::NEG_INFINITY),
        "" => None,
        number if number.bytes().all(|b| b.is_ascii_digit() || b"+-.e".contains(&b)) => number.parse().ok(),
        _ => None,
    }
}

/// HELP text: `\\` is a backslash, `\n` a line feed; any other backslash stays as it is.
fn unescape_help(text: &str) -> Result<String, String> {
    let mut help = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match (c, c == '\\') {
            (_, true) => match chars.next() {
                Some('\\') => help.push('\\'),
                Some('n') => help.push('\n'),
                Some(other) => {
                    help.push('\\');
                    help.push(other);
                }
                None => help.push('\\'),
            },
            (c, false) => help.push(c),
        }
    }
    Ok(help)
}

/// The start of a line, for an error message.
fn clip(line: &str) -> String {
    line.chars().take(60).collect()
}

/// A position in one line.
struct Cursor<'a> {
    rest: &'a str,
}

impl<'a> Cursor<'a> {
    fn new(text: &'a str) -> Self {
        Cursor { rest: text }
    }

    fn at_end(&self) -> bool {
        self.rest.is_empty()
    }

    fn rest(&self) -> &'a str {
        self.rest
    }

    /// Skip blanks and tabs: whether there were any.
    fn skip_blanks(&mut self) -> bool {
        let trimmed = self.rest.trim_start_matches([' ', '\t']);
        let skipped = trimmed.len() != self.rest.len();
        self.rest = trimmed;
        skipped
    }

    /// Up to the next blank or the end.
    fn token(&mut self) -> &'a str {
        let end = self.rest.find([' ', '\t']).unwrap_or(self.rest.len());
        let (token, rest) = self.rest.split_at(end);
        self.rest = rest;
        token
    }

    fn eat(&mut self, c: char) -> bool {
        match self.rest.strip_prefix(c) {
            Some(rest) => {
                self.rest = rest;
                true
            }
            None => false,
        }
    }

    /// `[a-zA-Z_:][a-zA-Z0-9_:]*`.
    fn metric_name(&mut self) -> Option<&'a str> {
        self.name(|c, first| c.is_ascii_alphabetic() || c == '_' || c == ':' || (!first && c.is_ascii_digit()))
    }

    /// `[a-zA-Z_][a-zA-Z0-9_]*`.
    fn label_name(&mut self) -> Option<&'a str> {
        self.name(|c, first| c.is_ascii_alphabetic() || c == '_' || (!first && c.is_ascii_digit()))
    }

    fn name(&mut self, allowed: impl Fn(char, bool) -> bool) -> Option<&'a str> {
        let end = self.rest.char_indices().find(|&(at, c)| !allowed(c, at == 0)).map_or(self.rest.len(), |(at, _)| at);
        if end == 0 {
            return None;
        }
        let (name, rest) = self.rest.split_at(end);
        self.rest = rest;
        Some(name)
    }

    /// After `{`: `name="value"` pairs separated by commas (a trailing one allowed), then `}`.
    fn labels(&mut self, limit: usize) -> Result<Vec<(String, String)>, String> {
        let mut labels: Vec<(String, String)> = Vec::new();
        loop {
            self.skip_blanks();
            if self.eat('}') {
                return Ok(labels);
            }
            let name = self.label_name().ok_or("a label without a valid name")?;
            if name.starts_with("__") {
                return Err(format!("label {name}: names starting with __ are reserved"));
            }
            if labels.iter().any(|(known, _)| known == name) {
                return Err(format!("label {name} given twice"));
            }
            if labels.len() == limit {
                return Err(format!("more than {limit} labels on one sample"));
            }
            self.skip_blanks();
            let equals = self.eat('=');
            self.skip_blanks();
            if !equals || !self.eat('"') {
                return Err(format!("label {name}: expected =\"value\""));
            }
            let value =
                self.label_value().ok_or_else(|| format!("label {name}: its value is not closed or badly escaped"))?;
            labels.push((name.to_string(), value));
            self.skip_blanks();
            if !self.eat(',') {
                self.skip_blanks();
                return if self.eat('}') { Ok(labels) } else { Err(format!("after label {name}: expected , or }}")) };
            }
        }
    }

    /// After the opening quote: the value up to the closing one, unescaped.
    fn label_value(&mut self) -> Option<String> {
        let mut value = String::new();
        let mut chars = self.rest.char_indices();
        while let Some((at, c)) = chars.next() {
            match c {
                '"' => {
                    self.rest = self.rest.get(at + 1..)?;
                    return Some(value);
                }
                '\\' => match chars.next()?.1 {
                    '\\' => value.push('\\'),
                    '"' => value.push('"'),
                    'n' => value.push('\n'),
                    _ => return None,
                },
                c => value.push(c),
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Vec<Family> {
        parse(text, &ENGINE_LIMITS).unwrap_or_else(|error| panic!("{error}\n{text}"))
    }

    fn error(text: &str) -> String {
        parse(text, &ENGINE_LIMITS).unwrap_err().to_string()
    }

    /// The start of vLLM's `/metrics` as prometheus_client writes it (vllm/v1/metrics/loggers.py).
    const VLLM: &str = "\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine=\"0\",model_name=\"Qwen/Qwen3-0.6B\"} 1.0
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine=\"0\",model_name=\"Qwen/Qwen3-0.6B\"} 1234.0
# HELP vllm:e2e_request_latency_seconds Histogram of e2e request latency in seconds.
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_sum{engine=\"0\",model_name=\"Qwen/Qwen3-0.6B\"} 3.5
vllm:e2e_request_latency_seconds_bucket{engine=\"0\",le=\"0.3\",model_name=\"Qwen/Qwen3-0.6B\"} 0.0
vllm:e2e_request_latency_seconds_bucket{engine=\"0\",le=\"+Inf\",model_name=\"Qwen/Qwen3-0.6B\"} 2.0
vllm:e2e_request_latency_seconds_count{engine=\"0\",model_name=\"Qwen/Qwen3-0.6B\"} 2.0
";

    /// llama-server's, as server-task.cpp writes it: no labels, C++'s default float format.
    const LLAMA: &str = "\
# HELP llamacpp:tokens_predicted_total Number of generation tokens processed
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total 1.23457e+06
# HELP llamacpp:requests_processing Number of requests processing
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 0
";

    #[test]
    fn reads_vllm_families_with_labels_and_a_histogram() {
        let families = parsed(VLLM);
        let names: Vec<&str> = families.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            ["vllm:num_requests_running", "vllm:generation_tokens_total", "vllm:e2e_request_latency_seconds"]
        );
        let running = &families[0];
        assert_eq!(
            (running.kind, running.help.as_deref()),
            (MetricType::Gauge, Some("Number of requests in model execution batches."))
        );
        assert_eq!(running.samples[0].label("model_name"), Some("Qwen/Qwen3-0.6B"));
        assert_eq!(running.samples[0].value, 1.0);
        let histogram = &families[2];
        assert_eq!((histogram.kind, histogram.samples.len()), (MetricType::Histogram, 4));
        assert_eq!(histogram.samples[2].label("le"), Some("+Inf"));
    }

    #[test]
    fn reads_llama_cpp_families() {
        let families = parsed(LLAMA);
        assert_eq!(families.len(), 2);
        assert_eq!(families[0].samples[0].value, 1_234_570.0);
        assert_eq!((families[1].kind, families[1].samples[0].value), (MetricType::Gauge, 0.0));
    }

    #[test]
    fn escapes_blanks_timestamps_and_special_values() {
        let text = "# a comment\n\n  # HELP x A \\\\ back\\nslash \\t kept\n# TYPE x gauge\n\
                    x{a=\"q\\\"uote\\\\ \\n\" , b = \"}{,\" ,} -Inf 1700000000000\n\tx{a=\"2\"}\tNaN\n";
        let families = parsed(text);
        let family = &families[0];
        assert_eq!(family.help.as_deref(), Some("A \\ back\nslash \\t kept"));
        let first = &family.samples[0];
        assert_eq!(first.labels, [("a".to_string(), "q\"uote\\ \n".to_string()), ("b".to_string(), "}{,".to_string())]);
        assert_eq!((first.value, first.timestamp_ms), (f64::NEG_INFINITY, Some(1_700_000_000_000)));
        assert!(family.samples[1].value.is_nan());
    }

    #[test]
    fn samples_without_a_type_are_untyped_families_and_a_family_may_come_back() {
        let families = parsed("a 1\nb_sum 2\na{x=\"y\"} 3\n");
        assert_eq!(
            families.iter().map(|f| (f.name.as_str(), f.samples.len())).collect::<Vec<_>>(),
            [("a", 2), ("b_sum", 1)]
        );
        assert!(families.iter().all(|family| family.kind == MetricType::Untyped && family.help.is_none()));
    }

    #[test]
    fn a_summary_owns_its_quantiles_sum_and_count() {
        let text = "# TYPE rpc summary\nrpc{quantile=\"0.5\"} 1\nrpc_sum 2\nrpc_count 3\n";
        let families = parsed(text);
        assert_eq!((families.len(), families[0].samples.len()), (1, 3));
    }

    #[test]
    fn refuses_what_is_not_the_format() {
        for (text, why) in [
            ("x 1", "line 1: the last line does not end with a line feed"),
            ("9x 1\n", "line 1: not a metric name"),
            ("x{a=\"1\" 2\n", "after label a: expected , or }"),
            ("x{a=\"1\\q\"} 2\n", "label a: its value is not closed or badly escaped"),
            ("x{a=\"1} 2\n", "its value is not closed"),
            ("x{a=1} 2\n", "label a: expected =\"value\""),
            ("x{__name__=\"y\"} 1\n", "reserved"),
            ("x{a=\"1\",a=\"2\"} 1\n", "label a given twice"),
            ("x one\n", "x: the value is not a number"),
            ("x 0x10\n", "x: the value is not a number"),
            ("x 1 2.5\n", "the timestamp is not a whole number"),
            ("x 1 2 3\n", "more after the timestamp"),
            ("x{} 1\n# TYPE x gauge\n", "line 2: the TYPE of x comes after its samples"),
            ("# TYPE x gauge\n# TYPE x counter\n", "a second TYPE for x"),
            ("# HELP x a\n# HELP x b\n", "a second HELP for x"),
            ("# TYPE x gauge extra\n", "more after the type"),
            ("# TYPE x meter\n", "unknown type"),
            ("# TYPE h histogram\nh 1\n", "without _bucket"),
            ("# TYPE h histogram\nh_bucket 1\n", "without its le label"),
            ("x1\n", "a blank must come before the value"),
        ] {
            let error = error(text);
            assert!(error.contains(why), "{text:?}: {error}");
        }
    }

    #[test]
    fn bounds_size_samples_and_labels() {
        let limits = Limits { max_bytes: 64, max_samples: 2, max_labels: 2 };
        let big = "x 1\n".repeat(17);
        assert_eq!(parse(&big, &limits), Err(ExpositionError::TooLarge { size: 68, limit: 64 }));
        assert_eq!(parse("x 1\ny 2\nz 3\n", &limits), Err(ExpositionError::TooManySamples { limit: 2 }));
        let error = parse("x{a=\"1\",b=\"2\",c=\"3\"} 1\n", &limits).unwrap_err().to_string();
        assert!(error.contains("more than 2 labels"), "{error}");
        assert_eq!(parse("", &limits), Ok(Vec::new()));
    }

    #[test]
    fn never_panics_on_cut_or_odd_input() {
        // Every prefix of valid text, and bytes the format does not expect: an error or families,
        // never a panic.
        let text = format!("{VLLM}{LLAMA}x{{a=\"é\\\\\"}} 1\n");
        for end in (0..text.len()).filter(|&end| text.is_char_boundary(end)) {
            let _ = parse(&text[..end], &ENGINE_LIMITS);
        }
        for odd in ["{\n", "}\n", "# HELP\n", "# TYPE\n", "x{\n", "x{a\n", "x{a=\n", "x{a=\"\n", "x{a=\"\\\n", "\"\n"] {
            assert!(parse(odd, &ENGINE_LIMITS).is_err(), "{odd:?}");
        }
    }
}
