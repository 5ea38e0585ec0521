//! `detect`: what this node has, and the container flags that follow.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::cli::GlobalOptions;
use crate::engine::EngineKind;
use crate::engine_probe::{guess_spec_options, Installed};
use crate::error::Result;
use crate::host::{GpuFacts, HostFacts, HostRoot, Memlock, RdmaFacts};
use crate::spec::ToolboxSpec;
use crate::ui::{Style, Ui};

/// The `--json` shape scripts rely on.
#[derive(Debug, Serialize)]
struct DetectReport<'a> {
    gpu: &'a GpuFacts,
    rdma: &'a RdmaFacts,
    /// Group name → gid.
    groups: &'a BTreeMap<String, u32>,
    user: Option<&'a str>,
    /// Group name → whether the user is a member.
    user_groups: &'a BTreeMap<String, bool>,
    memlock: Option<&'a Memlock>,
    kernel_params: &'a BTreeMap<String, String>,
    engine: EngineKind,
    container_args: Vec<String>,
    warnings: &'a [String],
}

pub fn run(global: &GlobalOptions, ui: &Ui) -> Result<i32> {
    let root = HostRoot::open(&global.host_root)?;
    let facts = HostFacts::read(&root)?;
    let engine = Installed::find().engine_for(global.engine);
    let spec = ToolboxSpec::new(&root, &facts, &guess_spec_options(engine));
    let report = DetectReport {
        gpu: &facts.gpu,
        rdma: &facts.rdma,
        groups: &facts.groups.gids,
        user: facts.groups.user.as_deref(),
        user_groups: &facts.groups.member,
        memlock: facts.memlock.as_ref(),
        kernel_params: &facts.kernel_params,
        engine,
        container_args: spec.container_args(engine),
        warnings: &facts.warnings,
    };
    if global.json {
        ui.print_json(&report);
    } else {
        print_summary(&report, ui);
    }
    Ok(0)
}

fn print_summary(report: &DetectReport<'_>, ui: &Ui) {
    let none = || ui.paint("none", Style::Dim);
    let heading = |text: &str| ui.paint(text, Style::Bold);
    let gpu = report.gpu;
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

    println!("{}", heading("Groups"));
    for (name, gid) in report.groups {
        let member = match report.user_groups.get(name) {
            Some(true) => format!(" ({} is a member)", report.user.unwrap_or("user")),
            Some(false) => format!(" ({} is NOT a member)", report.user.unwrap_or("user")),
            None => String::new(),
        };
        println!("  {name}: {gid}{member}");
    }
    let limit = |value: Option<u64>| value.map_or("unlimited".to_string(), |v| v.to_string());
    match report.memlock {
        Some(m) => println!("{} soft {} / hard {}", heading("memlock:"), limit(m.soft), limit(m.hard)),
        None => println!("{} unknown", heading("memlock:")),
    }
    let params: Vec<String> = report.kernel_params.iter().map(|(k, v)| format!("{k}={v}")).collect();
    println!("{} {}", heading("kernel:"), list_or(&params, none));
    println!("{} {} create {}", heading("container args:"), report.engine.program(), report.container_args.join(" "));
    for warning in report.warnings {
        ui.warn(warning);
    }
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
