//! A real Prometheus (Debian's `prometheus` package; nothing starts it by itself here): its own
//! config and storage in a temporary directory, its web API on a loopback port, scraping the
//! targets the test gives every second. Stopped (SIGTERM, then SIGKILL) when dropped; its log is
//! kept for failure messages.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use tempfile::TempDir;

use super::http;
use super::{free_port, stop_child, wait_until};

/// The bounded wait for its API to answer.
const START_LIMIT: Duration = Duration::from_secs(60);

pub struct Prometheus {
    child: Child,
    port: u16,
    log: PathBuf,
    _dir: TempDir,
}

impl Prometheus {
    /// Scraping `/metrics` of each of `targets` every second.
    pub fn start(targets: &[SocketAddr]) -> Prometheus {
        let dir = tempfile::Builder::new().prefix("prometheus-").tempdir().expect("tempdir");
        let targets: Vec<String> = targets.iter().map(|target| format!("'{target}'")).collect();
        let config = format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: strix\n    \
             static_configs:\n      - targets: [{}]\n",
            targets.join(", ")
        );
        let config_file = dir.path().join("prometheus.yml");
        std::fs::write(&config_file, config).expect("write prometheus.yml");
        let log = dir.path().join("prometheus.log");
        let port = free_port();
        let file = std::fs::File::create(&log).expect("create the log");
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config_file.display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("clone the log"))
            .stderr(file)
            .spawn()
            .unwrap_or_else(|error| {
                panic!("start prometheus: {error}: install Debian's prometheus package (scripts/test-deps.sh lists it)")
            });
        let mut prometheus = Prometheus { child, port, log, _dir: dir };
        wait_until("prometheus's API", START_LIMIT, || {
            if let Ok(Some(status)) = prometheus.child.try_wait() {
                panic!("prometheus exited ({status}):\n{}", prometheus.log());
            }
            prometheus.get("/-/ready").is_ok_and(|response| response.status == 200)
        });
        prometheus
    }

    /// The series `/api/v1/query?query=EXPRESSION` gives now (`data.result`).
    pub fn query(&self, expression: &str) -> Result<Vec<Value>, String> {
        let response = self.get(&format!("/api/v1/query?query={expression}"))?;
        let value: Value =
            serde_json::from_str(&response.body).map_err(|error| format!("{error}: {}", response.body))?;
        if response.status != 200 || value["status"] != "success" {
            return Err(format!("query {expression}: {} {}", response.status, response.body));
        }
        value["data"]["result"].as_array().cloned().ok_or_else(|| format!("no data.result in {value}"))
    }

    /// What it logged.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn get(&self, path: &str) -> Result<http::Response, String> {
        http::request(None, "GET", &format!("http://127.0.0.1:{}{path}", self.port), None, Duration::from_secs(5))
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        stop_child(&mut self.child);
    }
}

/// `{(label values…) → value}` of a query's series ([`Prometheus::query`]'s `result`).
pub fn series(result: &[Value], labels: &[&str]) -> BTreeMap<Vec<String>, String> {
    result
        .iter()
        .map(|series| {
            let key = labels.iter().map(|label| series["metric"][*label].as_str().unwrap_or("").to_string()).collect();
            (key, series["value"][1].as_str().unwrap_or("").to_string())
        })
        .collect()
}

/// A [`series`] key: its label values in order.
pub fn key(values: &[&str]) -> Vec<String> {
    values.iter().map(|value| value.to_string()).collect()
}

/// `promtool check metrics` on an exposition: it passes or only lints (exit 0 or 3), and every
/// remark is on an engine's own colon name (kept as their dashboards know them), at least one
/// (so the lint did run: llama.cpp's `llamacpp:`, vLLM's `vllm:`), never on one of ours.
pub fn promtool_remarks_only_the_engines_colon_names(text: &str) {
    let (status, said) = promtool_check(text);
    assert!(matches!(status.code(), Some(0 | 3)), "promtool failed ({status}):\n{said}\n{text}");
    let remarked: Vec<&str> = said.lines().filter(|line| !line.trim().is_empty()).collect();
    let engines = ["llamacpp:", "vllm:"];
    assert!(
        remarked.iter().any(|line| engines.iter().any(|engine| line.starts_with(engine))),
        "promtool said nothing of an engine's names:\n{said}"
    );
    for line in remarked {
        let name = line.split_whitespace().next().unwrap_or_default();
        assert!(name.contains(':'), "promtool on one of ours: {line}\n{text}");
    }
}

/// `promtool check metrics` on an exposition of ours alone: not one remark.
pub fn promtool_passes(text: &str) {
    let (status, said) = promtool_check(text);
    assert!(status.success() && said.trim().is_empty(), "promtool ({status}):\n{said}\n{text}");
}

/// `promtool check metrics` on `text`: how it exited, and what it said.
fn promtool_check(text: &str) -> (std::process::ExitStatus, String) {
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian's prometheus package; scripts/test-deps.sh lists it)");
    promtool.stdin.take().expect("promtool's stdin").write_all(text.as_bytes()).expect("to promtool");
    let output = promtool.wait_with_output().expect("promtool's verdict");
    let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    (output.status, said)
}

/// The value of the sample `name` whose labels include `labels`, in an exposition (the crate's
/// own reader parses it).
pub fn value_of(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let families = strix_toolbox::metrics::parse(text, &strix_toolbox::metrics::ENGINE_LIMITS).expect("an exposition");
    families.iter().flat_map(|family| &family.samples).find_map(|sample| {
        let ours = sample.name == name && labels.iter().all(|(label, value)| sample.label(label) == Some(*value));
        ours.then_some(sample.value)
    })
}
