//! `detect`: what this node has, and the container flags that follow.

use crate::error::Result;
use crate::host::Netdev;
use crate::ops::detect::{detect, DetectReport};
use crate::output::{Style, Ui};
use crate::settings::Settings;

pub fn run(settings: &Settings) -> Result<i32> {
    let report = detect(settings)?;
    if settings.ui.json {
        settings.ui.print_json(&report);
    } else {
        print_summary(&report, &settings.ui);
    }
    Ok(0)
}

fn print_summary(report: &DetectReport, ui: &Ui) {
    let none = || ui.paint("none", Style::Dim);
    let heading = |text: &str| ui.paint(text, Style::Bold);
    let gpu = &report.gpu;
    println!("{}", heading("GPU"));
    println!("  kfd:      {}", gpu.kfd.as_ref().map_or_else(none, |p| p.display().to_string()));
    println!("  dri:      {}", list_or(&gpu.dri.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(), none));
    println!("  targets:  {}", list_or(&gpu.gfx_targets, none));
    println!("  GTT/VRAM: {} / {}", bytes(gpu.gtt_bytes), bytes(gpu.vram_bytes));

    println!("{}", heading("RDMA"));
    let devices: Vec<String> = report.rdma.devices.iter().map(|p| p.display().to_string()).collect();
    println!("  devices:  {}", list_or(&devices, none));
    for port in &report.rdma.ports {
        println!(
            "  {}/{}: {} {} {} netdev={} mtu={} roce_v2_gid_index={}",
            port.device,
            port.port,
            port.state.as_deref().unwrap_or("?"),
            port.phys_state.as_deref().unwrap_or("?"),
            port.link_layer.as_deref().unwrap_or("?"),
            port.netdev.as_deref().unwrap_or("?"),
            port.mtu.map_or("?".into(), |m| m.to_string()),
            port.roce_v2_gid_index.map_or("none".into(), |i| i.to_string()),
        );
    }

    println!("{}", heading("Network"));
    for netdev in &report.interfaces {
        println!("  {}", interface_line(netdev));
    }
    println!("  transport: {}", report.transport.label());
    if let Some(firewalld) = &report.firewalld {
        let zones: Vec<String> =
            report.interfaces.iter().map(|n| format!("{}={}", n.name, firewalld.zone_of(&n.name).zone)).collect();
        println!("  firewalld: default zone {} {}", firewalld.default_zone, zones.join(" "));
    }

    println!("{}", heading("Groups"));
    for (name, gid) in &report.groups {
        let member = match report.user_groups.get(name) {
            Some(true) => format!(" ({} is a member)", report.user.as_deref().unwrap_or("user")),
            Some(false) => format!(" ({} is NOT a member)", report.user.as_deref().unwrap_or("user")),
            None => String::new(),
        };
        println!("  {name}: {gid}{member}");
    }
    let limit = |value: Option<u64>| value.map_or("unlimited".to_string(), |v| v.to_string());
    match &report.memlock {
        Some(m) => println!("{} soft {} / hard {}", heading("memlock:"), limit(m.soft), limit(m.hard)),
        None => println!("{} unknown", heading("memlock:")),
    }
    let params: Vec<String> = report.kernel_params.iter().map(|(k, v)| format!("{k}={v}")).collect();
    println!("{} {}", heading("kernel:"), list_or(&params, none));
    let os = &report.os;
    println!(
        "{} {} / kernel {}",
        heading("OS:"),
        os.name.as_deref().unwrap_or("unknown"),
        os.kernel.as_deref().unwrap_or("unknown")
    );
    println!("{} {} create {}", heading("container args:"), report.engine.program(), report.container_args.join(" "));
    for warning in &report.warnings {
        ui.warn(warning);
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
