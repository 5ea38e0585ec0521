//! What a node's GPU and RDMA ports are doing now, read when asked (a scrape): the GPU memory in
//! use and in all ([`super::gpu`] reads those), each card's busy share, power and temperature
//! (amdgpu's hwmon), the GPU hangs the kernel's log tells this boot ([`super::gpu_hangs`]), and
//! each RDMA port's bytes and packets sent and received. Counters stay
//! counters: whoever reads them twice (Prometheus, `cluster top`) takes the difference.
//!
//! The ports count in one of two places, by driver:
//! - `ports/N/counters/port_{xmit,rcv}_{data,packets}`: the port's performance-management
//!   counters, which the kernel shows only for drivers that answer management datagrams (mlx5,
//!   bnxt_re, rxe; core/sysfs.c creates the group only with `process_mad`). `*_data` counts
//!   4-octet words ("octets, divided by 4", Documentation/ABI/stable/sysfs-class-infiniband;
//!   mlx5's mad.c shifts its byte counters right by 2): bytes are four times the count.
//! - `ports/N/hw_counters/ip{4,6}{In,Out}{Octets,Pkts}`: irdma's (Intel E810) own counters, in
//!   bytes and packets of RoCE v2's IP traffic. irdma has no `process_mad`, so no `counters/`.

use serde::{Deserialize, Serialize};

use super::gpu::{self, is_card};
use super::gpu_hangs::{self, GpuHang};
use super::{rdma, HostRoot};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeTelemetry {
    pub gpu_memory: GpuMemory,
    /// One entry per GPU card with anything to say.
    pub cards: Vec<CardTelemetry>,
    /// One entry per RDMA port with counters.
    pub ports: Vec<PortTraffic>,
    /// The GPU hangs of this boot, the newest last (a node that does not say: none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpu_hangs: Vec<GpuHang>,
    /// Files that exist but could not be understood.
    pub warnings: Vec<String>,
}

/// GTT (system memory the GPU maps: most of a Strix Halo's) and VRAM (the BIOS carve-out), summed
/// over cards; None where amdgpu does not say.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuMemory {
    pub gtt_used_bytes: Option<u64>,
    pub gtt_total_bytes: Option<u64>,
    pub vram_used_bytes: Option<u64>,
    pub vram_total_bytes: Option<u64>,
}

impl GpuMemory {
    /// GTT and VRAM in use together: what a model holds (None when neither is known).
    pub fn used_bytes(&self) -> Option<u64> {
        match (self.gtt_used_bytes, self.vram_used_bytes) {
            (None, None) => None,
            (gtt, vram) => Some(gtt.unwrap_or(0).saturating_add(vram.unwrap_or(0))),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CardTelemetry {
    /// "card0".
    pub card: String,
    /// `device/gpu_busy_percent`: how busy the GPU is, 0 to 100.
    pub busy_percent: Option<u64>,
    /// hwmon's `power1_average`, else `power1_input` (APUs report only the latter), microwatts.
    pub power_microwatts: Option<u64>,
    /// hwmon's `temp1_input` (the edge sensor), millidegrees Celsius.
    pub temperature_millicelsius: Option<i64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortTraffic {
    /// The RDMA device, e.g. "rocep194s0f0" (E810) or "mlx5_0".
    pub device: String,
    pub port: u32,
    pub transmit_bytes: Option<u64>,
    pub receive_bytes: Option<u64>,
    pub transmit_packets: Option<u64>,
    pub receive_packets: Option<u64>,
}

pub fn read(root: &HostRoot) -> NodeTelemetry {
    let mut warnings = Vec::new();
    let facts = gpu::read(root, &mut warnings);
    let gpu_memory = GpuMemory {
        gtt_used_bytes: facts.gtt_used_bytes,
        gtt_total_bytes: facts.gtt_bytes,
        vram_used_bytes: facts.vram_used_bytes,
        vram_total_bytes: facts.vram_bytes,
    };
    let cards = root
        .list(DRM)
        .into_iter()
        .filter(|name| is_card(name))
        .map(|card| read_card(root, card, &mut warnings))
        .filter(|card| {
            card.busy_percent.is_some() || card.power_microwatts.is_some() || card.temperature_millicelsius.is_some()
        })
        .collect();
    // The ports as the RDMA facts enumerate them; only their counters are read here.
    let ports = rdma::read(root, &mut Vec::new())
        .ports
        .iter()
        .filter_map(|port| read_port(root, &port.device, port.port, &mut warnings))
        .collect();
    let gpu_hangs = gpu_hangs::read(root).unwrap_or_else(|why| {
        warnings.push(why);
        Vec::new()
    });
    NodeTelemetry { gpu_memory, cards, ports, gpu_hangs, warnings }
}

const DRM: &str = "/sys/class/drm";
const INFINIBAND: &str = "/sys/class/infiniband";

fn read_card(root: &HostRoot, card: String, warnings: &mut Vec<String>) -> CardTelemetry {
    let device = format!("{DRM}/{card}/device");
    let busy_percent = number(root, &format!("{device}/gpu_busy_percent"), warnings);
    // amdgpu registers one hwmon device per card; its name (hwmonN) is the kernel's choice.
    let hwmon = root
        .list(format!("{device}/hwmon"))
        .into_iter()
        .find(|name| name.starts_with("hwmon"))
        .map(|name| format!("{device}/hwmon/{name}"));
    let (mut power_microwatts, mut temperature_millicelsius) = (None, None);
    if let Some(hwmon) = hwmon {
        power_microwatts = number(root, &format!("{hwmon}/power1_average"), warnings)
            .or_else(|| number(root, &format!("{hwmon}/power1_input"), warnings));
        temperature_millicelsius = number(root, &format!("{hwmon}/temp1_input"), warnings);
    }
    CardTelemetry { card, busy_percent, power_microwatts, temperature_millicelsius }
}

fn read_port(root: &HostRoot, device: &str, port: u32, warnings: &mut Vec<String>) -> Option<PortTraffic> {
    let dir = format!("{INFINIBAND}/{device}/ports/{port}");
    let counters = format!("{dir}/counters");
    let traffic = if root.metadata(format!("{counters}/port_xmit_data")).is_some() {
        PortTraffic {
            device: device.to_string(),
            port,
            transmit_bytes: words_as_bytes(root, &format!("{counters}/port_xmit_data"), warnings),
            receive_bytes: words_as_bytes(root, &format!("{counters}/port_rcv_data"), warnings),
            transmit_packets: number(root, &format!("{counters}/port_xmit_packets"), warnings),
            receive_packets: number(root, &format!("{counters}/port_rcv_packets"), warnings),
        }
    } else {
        let hw = format!("{dir}/hw_counters");
        // IPv4 and IPv6 together: RoCE v2 runs over either.
        let mut both = |what: &str| -> Option<u64> {
            let v4: Option<u64> = number(root, &format!("{hw}/ip4{what}"), warnings);
            let v6: Option<u64> = number(root, &format!("{hw}/ip6{what}"), warnings);
            match (v4, v6) {
                (None, None) => None,
                (v4, v6) => Some(v4.unwrap_or(0).saturating_add(v6.unwrap_or(0))),
            }
        };
        PortTraffic {
            device: device.to_string(),
            port,
            transmit_bytes: both("OutOctets"),
            receive_bytes: both("InOctets"),
            transmit_packets: both("OutPkts"),
            receive_packets: both("InPkts"),
        }
    };
    let counted = [traffic.transmit_bytes, traffic.receive_bytes, traffic.transmit_packets, traffic.receive_packets];
    counted.iter().any(Option::is_some).then_some(traffic)
}

/// A `*_data` counter of four-octet words, in bytes.
fn words_as_bytes(root: &HostRoot, path: &str, warnings: &mut Vec<String>) -> Option<u64> {
    let words: u64 = number(root, path, warnings)?;
    words.checked_mul(4).or_else(|| {
        warnings.push(format!("{path}: {words} four-octet words overflow a byte count"));
        None
    })
}

/// A one-number sysfs attribute; None when missing or unreadable, and a warning when it is not a
/// number.
fn number<T: std::str::FromStr>(root: &HostRoot, path: &str, warnings: &mut Vec<String>) -> Option<T> {
    let text = root.attribute(path)?;
    text.parse().map_err(|_| warnings.push(format!("{path}: expected a number, found {text:?}"))).ok()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn write(root: &Path, path: &str, text: &str) {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn port_counters_count_four_octet_words_and_hw_counters_count_bytes() {
        let dir = tempfile::tempdir().unwrap();
        // mlx5: performance-management counters.
        let mlx5 = "sys/class/infiniband/mlx5_0/ports/1/counters";
        write(dir.path(), &format!("{mlx5}/port_xmit_data"), "1000\n");
        write(dir.path(), &format!("{mlx5}/port_rcv_data"), "250\n");
        write(dir.path(), &format!("{mlx5}/port_xmit_packets"), "7\n");
        write(dir.path(), &format!("{mlx5}/port_rcv_packets"), "3\n");
        // irdma: its own counters, IPv4 and IPv6.
        let irdma = "sys/class/infiniband/rocep1s0f0/ports/1/hw_counters";
        write(dir.path(), &format!("{irdma}/ip4OutOctets"), "4096\n");
        write(dir.path(), &format!("{irdma}/ip6OutOctets"), "4\n");
        write(dir.path(), &format!("{irdma}/ip4InOctets"), "100\n");
        write(dir.path(), &format!("{irdma}/ip4OutPkts"), "2\n");
        // A port with neither says nothing.
        write(dir.path(), "sys/class/infiniband/siw0/ports/1/state", "4: ACTIVE\n");
        let telemetry = read(&HostRoot::open(dir.path()).unwrap());
        assert_eq!(
            telemetry.ports,
            [
                PortTraffic {
                    device: "mlx5_0".into(),
                    port: 1,
                    transmit_bytes: Some(4000),
                    receive_bytes: Some(1000),
                    transmit_packets: Some(7),
                    receive_packets: Some(3),
                },
                PortTraffic {
                    device: "rocep1s0f0".into(),
                    port: 1,
                    transmit_bytes: Some(4100),
                    receive_bytes: Some(100),
                    transmit_packets: Some(2),
                    receive_packets: None,
                },
            ]
        );
        assert!(telemetry.warnings.is_empty(), "{:?}", telemetry.warnings);
    }

    #[test]
    fn a_card_says_its_busy_share_power_and_temperature() {
        let dir = tempfile::tempdir().unwrap();
        let device = "sys/class/drm/card1/device";
        write(dir.path(), &format!("{device}/gpu_busy_percent"), "37\n");
        write(dir.path(), &format!("{device}/mem_info_gtt_used"), "1073741824\n");
        write(dir.path(), &format!("{device}/mem_info_gtt_total"), "133143986176\n");
        write(dir.path(), &format!("{device}/hwmon/hwmon4/power1_input"), "45000000\n");
        write(dir.path(), &format!("{device}/hwmon/hwmon4/temp1_input"), "52000\n");
        // A connector entry and a card amdgpu says nothing about.
        write(dir.path(), "sys/class/drm/card1-DP-1/status", "connected\n");
        write(dir.path(), "sys/class/drm/card0/device/vendor", "0x1234\n");
        let telemetry = read(&HostRoot::open(dir.path()).unwrap());
        assert_eq!(
            telemetry.cards,
            [CardTelemetry {
                card: "card1".into(),
                busy_percent: Some(37),
                power_microwatts: Some(45_000_000),
                temperature_millicelsius: Some(52_000),
            }]
        );
        assert_eq!(telemetry.gpu_memory.gtt_used_bytes, Some(1 << 30));
        assert_eq!(telemetry.gpu_memory.gtt_total_bytes, Some(133_143_986_176));
        assert_eq!(telemetry.gpu_memory.used_bytes(), Some(1 << 30));

        // power1_average wins where both are (dGPUs); garbage is a warning, not a number.
        write(dir.path(), &format!("{device}/hwmon/hwmon4/power1_average"), "30000000\n");
        write(dir.path(), &format!("{device}/hwmon/hwmon4/temp1_input"), "hot\n");
        let telemetry = read(&HostRoot::open(dir.path()).unwrap());
        assert_eq!(telemetry.cards[0].power_microwatts, Some(30_000_000));
        assert_eq!(telemetry.cards[0].temperature_millicelsius, None);
        assert_eq!(
            telemetry.warnings,
            [format!("{DRM}/card1/device/hwmon/hwmon4/temp1_input: expected a number, found \"hot\"")]
        );
    }

    #[test]
    fn the_healthy_fixture_has_every_reading() {
        let root =
            HostRoot::open(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/strix-e810-healthy")).unwrap();
        let telemetry = read(&root);
        assert!(telemetry.warnings.is_empty(), "{:?}", telemetry.warnings);
        let memory = &telemetry.gpu_memory;
        assert!(memory.gtt_used_bytes.is_some() && memory.vram_used_bytes.is_some(), "{memory:?}");
        let card = &telemetry.cards[0];
        assert!(
            card.busy_percent.is_some() && card.power_microwatts.is_some() && card.temperature_millicelsius.is_some()
        );
        assert_eq!(telemetry.ports.len(), 2, "{:?}", telemetry.ports);
        assert!(telemetry.ports.iter().all(|port| port.transmit_bytes.is_some() && port.receive_packets.is_some()));
    }
}
