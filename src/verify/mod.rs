//! `verify`: a toolbox proves from the inside that it works — its devices open, its limits,
//! groups and environment are what the spec asked for, and every RCCL its stack would load carries
//! gfx1151 code. Each check runs through the engine's API (exec with argv vectors, the archive API
//! to copy files out) and is pass, warn, fail, or skipped with the reason: never a pass for what
//! was not checked.

mod devices;
mod environment;
mod groups;
mod hardware;
pub mod image_files;
mod memlock;
pub mod probe;
mod proc_self;
pub(crate) mod programs;
pub mod rccl;
pub mod rdma_core;

use serde::{Deserialize, Serialize};

use probe::Probe;

use crate::check::{Check, Status};
use crate::container_engine::{ContainerEngine, ContainerInfo};
use crate::error::Result;
use crate::host::HostFacts;
use crate::manager::ManagerKind;
use crate::spec::{ToolboxSpec, KEEP_GROUPS_ANNOTATION};

/// What the toolbox should be, from the same facts and spec a refresh uses.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Expected {
    /// Device nodes, as the container sees them, that must open read-write.
    pub devices: Vec<String>,
    pub rdma: bool,
    /// Supplementary gids the process must carry.
    pub gids: Vec<u32>,
    /// The host's groups are kept (keep-groups), unmapped in the user namespace.
    pub keep_groups: bool,
    /// NCCL_* and GLOO_* variables and their values.
    pub nccl_env: Vec<(String, String)>,
    /// sha256 of the RCCL the image records (its label), when it records one.
    pub rccl_label: Option<String>,
    /// The RDMA port whose state `ibv_devinfo` must show, e.g. ("rocep194s0f0", 1).
    pub rdma_port: Option<(String, u32)>,
    /// The serving engine the toolbox is for (its name), and the programs its image must run.
    pub engine: String,
    pub programs: Vec<programs::RequiredProgram>,
    /// The image computes on the CPU (its `DEVICE` label): torch is proven on the CPU, not the GPU.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub cpu_only: bool,
}

impl Expected {
    /// What a toolbox made by `spec` on `facts` from an image with `image_labels` should be, for
    /// `engine` whose image must run `programs`.
    pub fn new(
        facts: &HostFacts,
        spec: &ToolboxSpec,
        image_labels: &std::collections::BTreeMap<String, String>,
        engine: &str,
        programs: &[programs::RequiredProgram],
    ) -> Expected {
        let rccl_label = image_labels.get(crate::labels::RCCL_SHA256).cloned();
        let cpu_only = crate::labels::computes_on_cpu(image_labels);
        // What the spec maps, not all the node has: a Vulkan llama.cpp toolbox gets no /dev/kfd.
        let maps = |node: &str| spec.devices.iter().any(|d| d.container == std::path::Path::new(node));
        let kfd = facts.gpu.kfd.iter().filter(|_| maps("/dev/kfd"));
        let mut devices: Vec<String> = kfd.map(|p| p.display().to_string()).collect();
        let node_name =
            |p: &std::path::Path| p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        devices.extend(
            facts.gpu.dri.iter().filter(|p| node_name(p).starts_with("renderD")).map(|p| p.display().to_string()),
        );
        let rdma = facts.rdma.present() && maps("/dev/infiniband");
        if rdma {
            devices.extend(
                facts
                    .rdma
                    .devices
                    .iter()
                    .filter(|p| node_name(p).starts_with("uverbs"))
                    .map(|p| p.display().to_string()),
            );
        }
        let keep_groups = spec.annotations.contains_key(KEEP_GROUPS_ANNOTATION);
        let gids = if keep_groups {
            // keep-groups: the user's own host groups come along.
            facts
                .groups
                .member
                .iter()
                .filter(|(_, member)| **member)
                .filter_map(|(name, _)| facts.groups.gids.get(name))
                .copied()
                .collect()
        } else {
            spec.group_add.iter().filter_map(|gid| gid.parse().ok()).collect()
        };
        let nccl_env = spec
            .env
            .iter()
            .filter(|(key, _)| key.starts_with("NCCL_") || key.starts_with("GLOO_"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let rdma_port = facts.rdma.nccl_port().filter(|_| rdma).map(|port| (port.device.clone(), port.port));
        let (engine, programs) = (engine.to_string(), programs.to_vec());
        Expected { devices, rdma, gids, keep_groups, nccl_env, rccl_label, rdma_port, engine, programs, cpu_only }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyReport {
    /// The container verified.
    pub container: String,
    /// No check failed.
    pub ok: bool,
    pub checks: Vec<Check>,
    /// Devices whose check was skipped (the image could not open them): an `ok` then proves
    /// nothing about them, and every summary of the verification says so.
    #[serde(default)]
    pub devices_not_opened: Vec<String>,
}

impl VerifyReport {
    fn new(container: &str, checks: Vec<Check>) -> VerifyReport {
        let ok = !checks.iter().any(|c| c.status == Status::Fail);
        let devices_not_opened = checks
            .iter()
            .filter(|c| c.status == Status::Skipped)
            .filter_map(|c| c.name.strip_prefix("device:"))
            .map(str::to_string)
            .collect();
        VerifyReport { container: container.to_string(), ok, checks, devices_not_opened }
    }

    /// What the summary adds to a pass when devices were not opened: `None` when all were.
    pub fn unproven(&self) -> Option<String> {
        (!self.devices_not_opened.is_empty()).then(|| {
            format!(
                "but {} {} not opened inside (the skipped device checks say why)",
                self.devices_not_opened.join(", "),
                if self.devices_not_opened.len() == 1 { "was" } else { "were" }
            )
        })
    }

    /// The container would not even start: one failed check, with the engine's reason.
    pub fn not_started(container: &str, why: &str) -> VerifyReport {
        let fix = if why.contains("rlimit") {
            "the engine may not raise the container's limits to what it asks for (with RDMA, memlock unlimited): \
             raise the hard limits (/etc/security/limits.d/99-rdma-memlock.conf with `* hard memlock unlimited`), \
             log in again and refresh"
        } else {
            "read the engine's reason above; `strix-toolbox doctor` checks the node"
        };
        VerifyReport::new(
            container,
            vec![Check::new("start", Status::Fail, format!("{container} does not start: {why}"), Some(fix.into()))],
        )
    }

    pub fn exit_code(&self) -> i32 {
        i32::from(!self.ok)
    }

    /// The failed checks, one line each with its fix: what a refresh that refuses says.
    pub fn failures(&self) -> String {
        let lines: Vec<String> = self
            .checks
            .iter()
            .filter(|c| c.status == Status::Fail)
            .map(|c| match &c.fix {
                Some(fix) => format!("{}: {} (fix: {fix})", c.name, c.message),
                None => format!("{}: {}", c.name, c.message),
            })
            .collect();
        lines.join("; ")
    }
}

/// Every check inside the running container `container`. `user` is who its commands run as.
pub async fn verify_container(
    engine: &dyn ContainerEngine,
    container: &str,
    user: Option<&str>,
    expected: &Expected,
) -> VerifyReport {
    let probe = Probe::new(engine, container, user);
    // Independent probes, run together: each is an exec (or a copy) the engine serves on its own.
    let (devices, proc_self, rccl, hardware, programs, rdma_core) = tokio::join!(
        devices::checks(&probe, expected),
        probe.run(&proc_self::COMMAND),
        rccl::checks(&probe, expected),
        hardware::checks(&probe, expected),
        programs::checks(&probe, expected),
        rdma_core::checks(&probe, expected),
    );
    let proc_self = proc_self::read(proc_self);
    let mut checks = devices;
    checks.push(memlock::check(&proc_self, expected));
    checks.push(groups::check(&proc_self, expected));
    checks.push(environment::check(&proc_self, expected));
    checks.extend(rccl);
    checks.extend(rdma_core);
    checks.extend(hardware);
    checks.extend(programs);
    VerifyReport::new(container, checks)
}

/// Start `container` when it is stopped, verify it, and stop it again (it is left as it was
/// found). A container that cannot start is a failed check, with the engine's reason.
pub async fn verify_started(
    engine: &dyn ContainerEngine,
    container: &ContainerInfo,
    expected: &Expected,
) -> Result<VerifyReport> {
    if !container.running {
        if let Err(error) = engine.container_start(&container.name).await {
            return Ok(VerifyReport::not_started(&container.name, &error.to_string()));
        }
    }
    let user = ManagerKind::of(container).exec_user();
    let report = verify_container(engine, &container.name, user.as_deref(), expected).await;
    if !container.running {
        engine.container_stop(&container.name).await?;
    }
    Ok(report)
}
