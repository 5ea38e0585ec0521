//! The nodes' telemetry as families, every sample labelled with its node: whether the node
//! answered, its GPU memory in use and in all (by kind: GTT, VRAM), each card's busy share, power
//! and temperature, each RDMA port's bytes and packets sent and received (the proof that RoCE
//! carries the traffic while the model serves). Names follow Prometheus's conventions: base units
//! (bytes, watts, celsius, a ratio for a share), `_total` on counters, one `strix_` prefix.

use std::path::Path;

use super::family::{Family, MetricType};
use crate::error::Result;
pub use crate::host::telemetry::NodeTelemetry;
use crate::host::HostRoot;

/// The telemetry of the node whose root is `host_root` (`/`, or a fake tree in tests): what a
/// node's agent reads when the head asks.
pub fn read_node_telemetry(host_root: &Path) -> Result<NodeTelemetry> {
    Ok(crate::host::telemetry::read(&HostRoot::open(host_root)?))
}

/// One node's reading: None when the node did not answer.
pub struct NodeReading<'a> {
    pub node: &'a str,
    pub telemetry: Option<&'a NodeTelemetry>,
}

pub fn telemetry_families(readings: &[NodeReading]) -> Vec<Family> {
    let mut up =
        Family::new("strix_node_up", MetricType::Gauge, "Whether the node answered for its telemetry (1) or not (0).");
    let mut memory_used = Family::new(
        "strix_gpu_memory_used_bytes",
        MetricType::Gauge,
        "GPU memory in use (amdgpu mem_info_*_used), by kind.",
    );
    let mut memory_total = Family::new(
        "strix_gpu_memory_total_bytes",
        MetricType::Gauge,
        "GPU memory in all (amdgpu mem_info_*_total), by kind.",
    );
    let mut busy = Family::new(
        "strix_gpu_busy_ratio",
        MetricType::Gauge,
        "How busy the GPU is, 0 to 1 (amdgpu gpu_busy_percent).",
    );
    let mut power = Family::new(
        "strix_gpu_power_watts",
        MetricType::Gauge,
        "The GPU's power draw (hwmon power1_average or power1_input).",
    );
    let mut temperature = Family::new(
        "strix_gpu_temperature_celsius",
        MetricType::Gauge,
        "The GPU's edge temperature (hwmon temp1_input).",
    );
    let port_help = |what: &str| format!("{what} by the RDMA port since the node started.");
    let mut transmit_bytes =
        Family::new("strix_rdma_port_transmit_bytes_total", MetricType::Counter, &port_help("Bytes sent"));
    let mut receive_bytes =
        Family::new("strix_rdma_port_receive_bytes_total", MetricType::Counter, &port_help("Bytes received"));
    let mut transmit_packets =
        Family::new("strix_rdma_port_transmit_packets_total", MetricType::Counter, &port_help("Packets sent"));
    let mut receive_packets =
        Family::new("strix_rdma_port_receive_packets_total", MetricType::Counter, &port_help("Packets received"));

    for reading in readings {
        let node = reading.node;
        up.push(&[("node", node)], if reading.telemetry.is_some() { 1.0 } else { 0.0 });
        let Some(telemetry) = reading.telemetry else { continue };
        let memory = &telemetry.gpu_memory;
        for (kind, used, total) in [
            ("gtt", memory.gtt_used_bytes, memory.gtt_total_bytes),
            ("vram", memory.vram_used_bytes, memory.vram_total_bytes),
        ] {
            if let Some(used) = used {
                memory_used.push(&[("node", node), ("kind", kind)], used as f64);
            }
            if let Some(total) = total {
                memory_total.push(&[("node", node), ("kind", kind)], total as f64);
            }
        }
        for card in &telemetry.cards {
            let labels = [("node", node), ("card", card.card.as_str())];
            if let Some(percent) = card.busy_percent {
                busy.push(&labels, percent as f64 / 100.0);
            }
            if let Some(microwatts) = card.power_microwatts {
                power.push(&labels, microwatts as f64 / 1e6);
            }
            if let Some(millicelsius) = card.temperature_millicelsius {
                temperature.push(&labels, millicelsius as f64 / 1e3);
            }
        }
        for port in &telemetry.ports {
            let number = port.port.to_string();
            let labels = [("node", node), ("device", port.device.as_str()), ("port", number.as_str())];
            for (family, count) in [
                (&mut transmit_bytes, port.transmit_bytes),
                (&mut receive_bytes, port.receive_bytes),
                (&mut transmit_packets, port.transmit_packets),
                (&mut receive_packets, port.receive_packets),
            ] {
                if let Some(count) = count {
                    family.push(&labels, count as f64);
                }
            }
        }
    }
    [
        up,
        memory_used,
        memory_total,
        busy,
        power,
        temperature,
        transmit_bytes,
        receive_bytes,
        transmit_packets,
        receive_packets,
    ]
    .into_iter()
    .filter(|family| !family.samples.is_empty())
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::telemetry::{CardTelemetry, GpuMemory, PortTraffic};

    #[test]
    fn every_sample_names_its_node_and_units_are_base_units() {
        let telemetry = NodeTelemetry {
            gpu_memory: GpuMemory {
                gtt_used_bytes: Some(1 << 30),
                gtt_total_bytes: Some(124 << 30),
                vram_used_bytes: None,
                vram_total_bytes: Some(512 << 20),
            },
            cards: vec![CardTelemetry {
                card: "card0".into(),
                busy_percent: Some(37),
                power_microwatts: Some(45_500_000),
                temperature_millicelsius: Some(52_250),
            }],
            ports: vec![PortTraffic {
                device: "rocep194s0f0".into(),
                port: 1,
                transmit_bytes: Some(4000),
                receive_bytes: Some(1000),
                transmit_packets: Some(7),
                receive_packets: None,
            }],
            gpu_hangs: Vec::new(),
            warnings: Vec::new(),
        };
        let families = telemetry_families(&[
            NodeReading { node: "strix1", telemetry: Some(&telemetry) },
            NodeReading { node: "strix2", telemetry: None },
        ]);
        let value = |name: &str, labels: &[(&str, &str)]| {
            let family = families.iter().find(|f| f.name == name).unwrap_or_else(|| panic!("no {name}"));
            let wanted: Vec<(String, String)> = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            family.samples.iter().find(|s| s.labels == wanted).map(|s| s.value)
        };
        assert_eq!(value("strix_node_up", &[("node", "strix1")]), Some(1.0));
        assert_eq!(value("strix_node_up", &[("node", "strix2")]), Some(0.0));
        assert_eq!(
            value("strix_gpu_memory_used_bytes", &[("node", "strix1"), ("kind", "gtt")]),
            Some((1u64 << 30) as f64)
        );
        assert_eq!(value("strix_gpu_memory_used_bytes", &[("node", "strix1"), ("kind", "vram")]), None);
        assert_eq!(
            value("strix_gpu_memory_total_bytes", &[("node", "strix1"), ("kind", "vram")]),
            Some((512u64 << 20) as f64)
        );
        assert_eq!(value("strix_gpu_busy_ratio", &[("node", "strix1"), ("card", "card0")]), Some(0.37));
        assert_eq!(value("strix_gpu_power_watts", &[("node", "strix1"), ("card", "card0")]), Some(45.5));
        assert_eq!(value("strix_gpu_temperature_celsius", &[("node", "strix1"), ("card", "card0")]), Some(52.25));
        let port = [("node", "strix1"), ("device", "rocep194s0f0"), ("port", "1")];
        assert_eq!(value("strix_rdma_port_transmit_bytes_total", &port), Some(4000.0));
        assert!(
            families.iter().all(|f| f.name != "strix_rdma_port_receive_packets_total"),
            "no family without samples"
        );
        assert!(families.iter().all(|f| f.help.is_some()));
        let counters = families.iter().filter(|f| f.kind == MetricType::Counter);
        assert!(counters.clone().count() == 3 && counters.into_iter().all(|f| f.name.ends_with("_total")));
    }
}
