//! `cluster top`: the cluster's frame ([`crate::cluster::top`]) redrawn every `--interval` until
//! Ctrl-C (exit 130) or until its reader goes away (`cluster top | head -3`: exit 0). `--once`
//! reads twice, `--interval` apart, and prints one frame whose rates are known; `--json` prints
//! that one frame as JSON. The first frame of the live view has no rates yet (shown as `-`).

use clap::Args;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

use tokio::signal::unix::{signal, Signal, SignalKind};

use super::metrics::scrape_limit;

use crate::cluster::metrics::MetricsAsk;
use crate::cluster::metrics_nodes::MetricsNodes;
use crate::cluster::top::{frame, NodeLine, Reading, ServiceLine, TopFrame};
use crate::cluster::ClusterSettings;
use crate::commands::secrets::api_key;
use crate::error::{Error, Result};
use crate::output::{Output, Render, Style};
use crate::reporter::Bytes;
use crate::watch::duration::parse_duration;

/// How `cluster top` shows the cluster.
#[derive(Debug, Clone, Args)]
pub struct TopArgs {
    /// Between two frames, and between the two readings a rate needs: seconds, or a number with
    /// its unit (2, 2s, 1m).
    #[arg(long, value_name = "DURATION", default_value = "2s")]
    pub interval: String,

    /// Print one frame and exit: two readings --interval apart, so its rates are known. With
    /// --json the frame is printed as JSON (always one frame).
    #[arg(long)]
    pub once: bool,

    /// Each engine's scrape deadline: seconds, or a number with its unit (5, 5s, 1m).
    #[arg(long, value_name = "DURATION", default_value = "5s")]
    pub scrape_timeout: String,
}

/// The longest --interval: a view refreshed less often than hourly is no live view.
const INTERVAL_MAX: Duration = Duration::from_secs(3600);

/// Clears a terminal and puts the cursor at its top (ECMA-48 CUP and ED), between frames.
const REDRAW: &str = "\x1b[H\x1b[2J";

pub(super) async fn run(cluster: &ClusterSettings, args: &TopArgs, out: &Output) -> Result<i32> {
    let interval = parse_duration("--interval", &args.interval)?;
    if interval.is_zero() || interval > INTERVAL_MAX {
        return Err(Error::Usage(format!(
            "--interval {}: between 1s and 1h (a frame needs a second between its readings)",
            args.interval
        )));
    }
    let ask =
        MetricsAsk { api_key: api_key(None)?, scrape_limit: scrape_limit(&args.scrape_timeout)?, probe: Vec::new() };
    // Ctrl-C is caught from here on, while the nodes connect too, and ends the view with 130.
    let mut interrupt = signal(SignalKind::interrupt())
        .map_err(|e| Error::Internal(format!("cannot listen for Ctrl-C (SIGINT): {e}")))?;
    let started = Instant::now();
    let nodes = MetricsNodes::new(cluster);
    let read = async || Reading {
        families: nodes.read(&ask).await.families().families,
        at_seconds: started.elapsed().as_secs_f64(),
    };
    let code = if args.once || out.json() {
        let readings = async {
            let first = read().await;
            tokio::time::sleep(interval).await;
            (first, read().await)
        };
        tokio::select! {
            (first, second) = readings => {
                out.report(&frame(Some(&first), &second));
                0
            }
            _ = interrupt.recv() => 130,
        }
    } else {
        live(read, interval, &mut interrupt, out).await
    };
    nodes.close().await;
    Ok(code)
}

/// Frames until Ctrl-C or a closed stdout; a terminal is redrawn, a pipe gets one frame after
/// another.
async fn live(read: impl AsyncFn() -> Reading, interval: Duration, interrupt: &mut Signal, out: &Output) -> i32 {
    let terminal = std::io::stdout().is_terminal();
    let mut previous: Option<Reading> = None;
    // Bounded by Ctrl-C and by the reader: each turn waits `interval` or ends.
    loop {
        let current = tokio::select! {
            reading = read() => reading,
            _ = interrupt.recv() => return 130,
        };
        if terminal {
            out.write(REDRAW.as_bytes());
        }
        out.report(&frame(previous.as_ref(), &current));
        if !terminal {
            out.line("");
        }
        if out.stdout_closed() {
            return 0;
        }
        previous = Some(current);
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = interrupt.recv() => return 130,
        }
    }
}

impl Render for TopFrame {
    fn render(&self, out: &Output) {
        let dash = || "-".to_string();
        let mut rows = vec![["NODE", "GPU MEMORY", "BUSY", "POWER", "TEMP", "LINK TX/s", "LINK RX/s"]
            .map(str::to_string)
            .to_vec()];
        for node in &self.nodes {
            rows.push(node_row(node, &dash));
        }
        table(out, &rows);
        let mut rows = vec![["SERVICE", "MODEL", "NODE", "TOKENS/s", "RUNNING", "WAITING", "KV CACHE"]
            .map(str::to_string)
            .to_vec()];
        for service in &self.services {
            rows.push(service_row(service, &dash));
        }
        if self.services.is_empty() {
            out.line(&out.paint("no service runs on the cluster", Style::Dim));
        } else {
            table(out, &rows);
        }
        for node in self.nodes.iter().filter(|n| !n.up) {
            let why = node.error.as_deref().unwrap_or("no answer");
            out.line(&out.paint(&format!("{}: {why}", node.node), Style::Fail));
        }
        for service in self.services.iter().filter(|s| !s.up) {
            let why = service.error.as_deref().unwrap_or("no answer");
            out.line(&out.paint(&format!("{} on {}: {why}", service.service, service.node), Style::Fail));
        }
        if !self.on_demand.is_empty() {
            let each: Vec<String> =
                self.on_demand.iter().map(|line| format!("{} {}", line.service, line.state)).collect();
            out.line(&format!("on demand: {}", each.join(", ")));
        }
    }
}

fn node_row(node: &NodeLine, dash: &dyn Fn() -> String) -> Vec<String> {
    if !node.up {
        return vec![node.node.clone(), "down".into(), dash(), dash(), dash(), dash(), dash()];
    }
    let memory = match (node.gpu_memory_used_bytes, node.gpu_memory_total_bytes) {
        (Some(used), Some(total)) => format!("{} / {}", bytes(used), bytes(total)),
        (Some(used), None) => bytes(used),
        _ => dash(),
    };
    let rate = |value: Option<f64>| value.map_or_else(dash, bytes);
    vec![
        node.node.clone(),
        memory,
        node.gpu_busy_percent.map_or_else(dash, |p| format!("{p:.0}%")),
        node.gpu_power_watts.map_or_else(dash, |w| format!("{w:.1} W")),
        node.gpu_temperature_celsius.map_or_else(dash, |c| format!("{c:.0} °C")),
        rate(node.link_transmit_bytes_per_second),
        rate(node.link_receive_bytes_per_second),
    ]
}

fn service_row(service: &ServiceLine, dash: &dyn Fn() -> String) -> Vec<String> {
    let count = |value: Option<f64>| value.map_or_else(dash, |v| format!("{v:.0}"));
    vec![
        service.service.clone(),
        service.model.clone(),
        service.node.clone(),
        if service.up { service.tokens_per_second.map_or_else(dash, |t| format!("{t:.1}")) } else { "down".into() },
        count(service.requests_running),
        count(service.requests_waiting),
        service.kv_cache_used_percent.map_or_else(dash, |p| format!("{p:.0}%")),
    ]
}

/// A count of bytes as `Bytes` shows it (a float from a metric, clamped to what it can say).
fn bytes(value: f64) -> String {
    Bytes(if value.is_finite() && value > 0.0 { value as u64 } else { 0 }).to_string()
}

/// Rows in columns as wide as their widest cell, the first row (the header) in bold.
fn table(out: &Output, rows: &[Vec<String>]) {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|column| rows.iter().filter_map(|row| row.get(column)).map(|c| c.chars().count()).max().unwrap_or(0))
        .collect();
    for (index, row) in rows.iter().enumerate() {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell}{}", " ".repeat(width.saturating_sub(cell.chars().count()))))
            .collect();
        let line = cells.join("  ").trim_end().to_string();
        out.line(&if index == 0 { out.paint(&line, Style::Bold) } else { line });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::captured;

    #[test]
    fn a_frame_is_two_tables_unknowns_a_dash_and_what_is_down_said() {
        let node = |name: &str, up: bool| NodeLine {
            node: name.into(),
            up,
            error: (!up).then(|| "ssh: No route to host".into()),
            gpu_memory_used_bytes: up.then_some((3u64 << 30) as f64),
            gpu_memory_total_bytes: up.then_some((124u64 << 30) as f64),
            gpu_busy_percent: up.then_some(37.4),
            gpu_power_watts: None,
            gpu_temperature_celsius: up.then_some(52.25),
            link_transmit_bytes_per_second: up.then_some(1536.0),
            link_receive_bytes_per_second: None,
        };
        let frame = TopFrame {
            rate_seconds: Some(2.0),
            nodes: vec![node("node1", true), node("node2", false)],
            services: vec![ServiceLine {
                service: "tiny".into(),
                model: "/models/tiny.gguf".into(),
                node: "node1".into(),
                up: true,
                error: None,
                tokens_per_second: Some(12.345),
                requests_running: Some(1.0),
                requests_waiting: Some(0.0),
                kv_cache_used_percent: None,
            }],
            on_demand: vec![crate::cluster::top::OnDemandLine { service: "chat".into(), state: "stopped".into() }],
        };
        let (out, stdout, _) = captured(false);
        frame.render(&out);
        let text = stdout.text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "NODE   GPU MEMORY             BUSY  POWER  TEMP   LINK TX/s  LINK RX/s", "{text}");
        assert_eq!(lines[1], "node1  3.00 GiB / 124.00 GiB  37%   -      52 °C  1.50 KiB   -", "{text}");
        assert_eq!(lines[2], "node2  down                   -     -      -      -          -", "{text}");
        assert_eq!(lines[3], "SERVICE  MODEL              NODE   TOKENS/s  RUNNING  WAITING  KV CACHE", "{text}");
        assert_eq!(lines[4], "tiny     /models/tiny.gguf  node1  12.3      1        0        -", "{text}");
        assert_eq!(lines[5], "node2: ssh: No route to host", "{text}");
        assert_eq!(lines[6], "on demand: chat stopped", "{text}");
        assert!(!text.contains('\x1b'), "no colour without a terminal: {text:?}");
    }
}
