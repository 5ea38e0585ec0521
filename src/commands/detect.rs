//! `detect`: what this node has, and the container flags that follow.

use crate::error::Result;
use crate::host::Netdev;
use crate::ops::detect::{detect, DetectReport};
use crate::output::{Output, Render, Style};
use crate::settings::Settings;

pub fn run(settings: &Settings, out: &Output) -> Result<i32> {
    out.report(&detect(settings)?);
    Ok(0)
}

impl Render for DetectReport {
    fn render(&self, out: &Output) {
        let none = || out.paint("none", Style::Dim);
        let heading = |text: &str| out.paint(text, Style::Bold);
        let gpu = &self.gpu;
        out.line(&heading("GPU"));
        out.line(&format!("  kfd:      {}", gpu.kfd.as_ref().map_or_else(none, |p| p.display().to_string())));
        let dri: Vec<String> = gpu.dri.iter().map(|p| p.display().to_string()).collect();
        out.line(&format!("  dri:      {}", list_or(&dri, none)));
        out.line(&format!("  targets:  {}", list_or(&gpu.gfx_targets, none)));
        out.line(&format!("  GTT/VRAM: {} / {}", bytes(gpu.gtt_bytes), bytes(gpu.vram_bytes)));

        out.line(&heading("RDMA"));
        let devices: Vec<String> = self.rdma.devices.iter().map(|p| p.display().to_string()).collect();
        out.line(&format!("  devices:  {}", list_or(&devices, none)));
        for port in &self.rdma.ports {
            out.line(&format!(
                "  {}/{}: {} {} {} netdev={} mtu={} roce_v2_gid_index={}",
                port.device,
                port.port,
                port.state.as_deref().unwrap_or("?"),
                port.phys_state.as_deref().unwrap_or("?"),
                port.link_layer.as_deref().unwrap_or("?"),
                port.netdev.as_deref().unwrap_or("?"),
                port.mtu.map_or("?".into(), |m| m.to_string()),
                port.roce_v2_gid_index.map_or("none".into(), |i| i.to_string()),
            ));
        }

        out.line(&heading("Network"));
        for netdev in &self.interfaces {
            out.line(&format!("  {}", interface_line(netdev)));
        }
        out.line(&format!("  transport: {}", self.transport.label()));
        if let Some(firewalld) = &self.firewalld {
            let zones: Vec<String> =
                self.interfaces.iter().map(|n| format!("{}={}", n.name, firewalld.zone_of(&n.name).zone)).collect();
            out.line(&format!("  firewalld: default zone {} {}", firewalld.default_zone, zones.join(" ")));
        }

        out.line(&heading("Groups"));
        for (name, gid) in &self.groups {
            let member = match self.user_groups.get(name) {
                Some(true) => format!(" ({} is a member)", self.user.as_deref().unwrap_or("user")),
                Some(false) => format!(" ({} is NOT a member)", self.user.as_deref().unwrap_or("user")),
                None => String::new(),
            };
            out.line(&format!("  {name}: {gid}{member}"));
        }
        let limit = |value: Option<u64>| value.map_or("unlimited".to_string(), |v| v.to_string());
        match &self.memlock {
            Some(m) => out.line(&format!("{} soft {} / hard {}", heading("memlock:"), limit(m.soft), limit(m.hard))),
            None => out.line(&format!("{} unknown", heading("memlock:"))),
        }
        let params: Vec<String> = self.kernel_params.iter().map(|(k, v)| format!("{k}={v}")).collect();
        out.line(&format!("{} {}", heading("kernel:"), list_or(&params, none)));
        let os = &self.os;
        out.line(&format!(
            "{} {} / kernel {}",
            heading("OS:"),
            os.name.as_deref().unwrap_or("unknown"),
            os.kernel.as_deref().unwrap_or("unknown")
        ));
        out.line(&format!(
            "{} {} create {}",
            heading("container args:"),
            self.engine.program(),
            self.container_args.join(" ")
        ));
        for warning in &self.warnings {
            out.warn(warning);
        }
    }
}

/// `thunderbolt0: up mtu=65520 ipv4=192.168.2.1/24 driver=thunderbolt-net firmware=?`
fn interface_line(netdev: &Netdev) -> String {
    let ipv4 = match &netdev.ipv4 {
        Some(addresses) if !addresses.is_empty() => addresses.join(","),
        Some(_) => "none".into(),
        None => "?".into(),
    };
    let driver = match &netdev.driver {
        Some(info) => format!("driver={} firmware={}", info.driver, info.firmware.as_deref().unwrap_or("?")),
        None => format!("driver=? ({})", netdev.driver_unavailable.as_deref().unwrap_or("not asked")),
    };
    format!(
        "{}: {} mtu={} ipv4={ipv4} {driver}",
        netdev.name,
        netdev.operstate.as_deref().unwrap_or("?"),
        netdev.mtu.map_or("?".into(), |m| m.to_string())
    )
}

fn list_or(items: &[String], none: impl Fn() -> String) -> String {
    if items.is_empty() {
        none()
    } else {
        items.join(" ")
    }
}

fn bytes(value: Option<u64>) -> String {
    value.map_or("?".into(), |b| format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64))
}
