//! The spec rules, one test per rule.

use std::path::{Path, PathBuf};

use super::*;
use crate::container_engine::argv::create_argv;
use crate::container_engine::CreateRequest;
use crate::host::netdev::THUNDERBOLT;
use crate::host::{GpuFacts, Netdev, RdmaFacts, RdmaPort};

fn root() -> HostRoot {
    HostRoot::system()
}

fn gpu_node() -> HostFacts {
    let mut facts = HostFacts {
        gpu: GpuFacts {
            kfd: Some("/dev/kfd".into()),
            dri: vec!["/dev/dri/card0".into(), "/dev/dri/renderD128".into()],
            gfx_targets: vec!["gfx1151".into()],
            ..Default::default()
        },
        ..Default::default()
    };
    for (name, gid) in [("video", 44), ("render", 105), ("rdma", 993)] {
        facts.groups.gids.insert(name.into(), gid);
    }
    facts
}

fn rdma_node() -> HostFacts {
    let mut facts = gpu_node();
    facts.rdma = RdmaFacts {
        devices: vec!["/dev/infiniband/uverbs0".into(), "/dev/infiniband/rdma_cm".into()],
        ports: vec![RdmaPort {
            device: "rocep194s0f0".into(),
            port: 1,
            state: Some("4: ACTIVE".into()),
            phys_state: Some("5: LinkUp".into()),
            link_layer: Some("Ethernet".into()),
            netdev: Some("enp194s0f0".into()),
            mtu: Some(9000),
            roce_v2_gid_index: Some(3),
            ..Default::default()
        }],
        ..Default::default()
    };
    facts
}

fn options(engine: EngineKind, rootless: bool, runtime: &str) -> SpecOptions {
    SpecOptions {
        engine,
        rootless,
        runtime: runtime.into(),
        extra_env: Default::default(),
        needs: ToolboxNeeds { kfd: true, rdma: true, nccl: true },
    }
}

#[test]
fn a_llama_cpp_toolbox_carries_the_nodes_rdma_for_its_rpc_and_no_nccl() {
    // What llama.cpp's Vulkan toolbox needs (serving::llama says so).
    let needs = ToolboxNeeds { kfd: false, rdma: true, nccl: false };
    let vulkan = SpecOptions { needs, ..options(EngineKind::Docker, false, "runc") };
    let spec = ToolboxSpec::new(&root(), &rdma_node(), &vulkan);
    assert_eq!(containers(&spec), [Path::new("/dev/dri"), Path::new("/dev/infiniband")], "Vulkan: no /dev/kfd");
    assert_eq!(spec.ulimits, [Ulimit { name: "memlock".into(), soft: None, hard: None }], "verbs pin memory");
    assert_eq!(spec.group_add, ["44", "105", "993"], "video, render and rdma");
    assert!(spec.env.is_empty(), "no NCCL transport: {:?}", spec.env);
    let rocm = SpecOptions { needs: ToolboxNeeds { kfd: true, ..needs }, ..vulkan.clone() };
    let spec = ToolboxSpec::new(&root(), &rdma_node(), &rocm);
    assert_eq!(containers(&spec)[..2], [Path::new("/dev/kfd"), Path::new("/dev/dri")], "a ROCm tag");
    // Where the node has no RDMA, neither devices nor memlock.
    let spec = ToolboxSpec::new(&root(), &gpu_node(), &vulkan);
    assert_eq!((containers(&spec), spec.ulimits.len()), (vec![Path::new("/dev/dri")], 0));
}

fn containers(spec: &ToolboxSpec) -> Vec<&Path> {
    spec.devices.iter().map(|d| d.container.as_path()).collect()
}

#[test]
fn gpu_devices_and_seccomp_always_never_privileged() {
    let spec = ToolboxSpec::new(&root(), &gpu_node(), &options(EngineKind::Docker, false, "runc"));
    assert_eq!(containers(&spec), [Path::new("/dev/kfd"), Path::new("/dev/dri")]);
    assert_eq!(spec.security_opt, ["seccomp=unconfined"]);
    let args = spec.engine_flags(EngineKind::Docker);
    assert!(!args.iter().any(|a| a.contains("privileged")), "{args:?}");
}

#[test]
fn rdma_brings_infiniband_and_unlimited_memlock() {
    let spec = ToolboxSpec::new(&root(), &rdma_node(), &options(EngineKind::Podman, false, "runc"));
    assert!(containers(&spec).contains(&Path::new("/dev/infiniband")));
    assert_eq!(spec.ulimits, [Ulimit { name: "memlock".into(), soft: None, hard: None }]);
    let args = spec.engine_flags(EngineKind::Podman);
    assert!(args.windows(2).any(|w| w == ["--ulimit", "memlock=-1:-1"]), "{args:?}");
}

#[test]
fn no_rdma_no_infiniband_no_memlock() {
    let spec = ToolboxSpec::new(&root(), &gpu_node(), &options(EngineKind::Podman, false, "runc"));
    assert!(!containers(&spec).contains(&Path::new("/dev/infiniband")));
    assert!(spec.ulimits.is_empty());
}

#[test]
fn rootless_podman_on_crun_keeps_host_groups() {
    let spec = ToolboxSpec::new(&root(), &rdma_node(), &options(EngineKind::Podman, true, "crun"));
    assert!(spec.group_add.is_empty());
    assert_eq!(spec.annotations.get(KEEP_GROUPS_ANNOTATION).map(String::as_str), Some("1"));
}

#[test]
fn numeric_gids_elsewhere() {
    for opts in [
        options(EngineKind::Docker, false, "runc"),
        options(EngineKind::Podman, false, "crun"),
        options(EngineKind::Podman, true, "runc"),
    ] {
        let spec = ToolboxSpec::new(&root(), &rdma_node(), &opts);
        assert_eq!(spec.group_add, ["44", "105", "993"], "{opts:?}");
        assert!(spec.annotations.is_empty());
    }
    let spec = ToolboxSpec::new(&root(), &gpu_node(), &options(EngineKind::Docker, false, "runc"));
    assert_eq!(spec.group_add, ["44", "105"], "rdma gid only with RDMA devices");
}

#[test]
fn active_roce_port_sets_nccl_env() {
    let spec = ToolboxSpec::new(&root(), &rdma_node(), &options(EngineKind::Docker, false, "runc"));
    assert_eq!(spec.env["NCCL_SOCKET_IFNAME"], "=enp194s0f0", "exactly that netdev");
    assert_eq!(spec.env["GLOO_SOCKET_IFNAME"], "enp194s0f0");
    assert_eq!(spec.env["NCCL_IB_GID_INDEX"], "3");
    assert_eq!(spec.env["NCCL_IB_HCA"], "=rocep194s0f0:1", "only the active device and port, by its exact name");
    assert!(!spec.env.contains_key("NCCL_IB_DISABLE"));

    let mut down = rdma_node();
    down.rdma.ports[0].state = Some("1: DOWN".into());
    let spec = ToolboxSpec::new(&root(), &down, &options(EngineKind::Docker, false, "runc"));
    assert!(spec.env.is_empty(), "{:?}", spec.env);
}

fn with_thunderbolt(mut facts: HostFacts, operstate: &str) -> HostFacts {
    facts.interfaces.push(Netdev { name: THUNDERBOLT.into(), operstate: Some(operstate.into()), ..Default::default() });
    facts
}

#[test]
fn thunderbolt_up_without_active_roce_carries_tcp_with_rdma_off() {
    let mut down = with_thunderbolt(rdma_node(), "up");
    down.rdma.ports[0].state = Some("1: DOWN".into());
    for facts in [with_thunderbolt(gpu_node(), "up"), down] {
        let spec = ToolboxSpec::new(&root(), &facts, &options(EngineKind::Docker, false, "runc"));
        assert_eq!(spec.env["NCCL_SOCKET_IFNAME"], "=thunderbolt0");
        assert_eq!(spec.env["GLOO_SOCKET_IFNAME"], "thunderbolt0");
        assert_eq!(spec.env["NCCL_IB_DISABLE"], "1");
        assert!(!spec.env.contains_key("NCCL_IB_HCA") && !spec.env.contains_key("NCCL_IB_GID_INDEX"));
        assert_eq!(Transport::of(&facts).label(), "Thunderbolt TCP");
    }
}

#[test]
fn active_roce_wins_over_thunderbolt_and_a_down_cable_is_plain_ethernet() {
    let both = with_thunderbolt(rdma_node(), "up");
    assert_eq!(Transport::of(&both).netdev(), Some("enp194s0f0"));
    let spec = ToolboxSpec::new(&root(), &both, &options(EngineKind::Docker, false, "runc"));
    assert_eq!(spec.env["NCCL_SOCKET_IFNAME"], "=enp194s0f0", "exactly that netdev");

    let unplugged = with_thunderbolt(gpu_node(), "down");
    assert_eq!(Transport::of(&unplugged), Transport::EthernetTcp);
    assert!(ToolboxSpec::new(&root(), &unplugged, &options(EngineKind::Docker, false, "runc")).env.is_empty());
}

#[test]
fn device_paths_under_a_host_root_map_to_container_paths() {
    let fake = tempfile::tempdir().unwrap();
    let root = HostRoot::open(fake.path()).unwrap();
    let spec = ToolboxSpec::new(&root, &gpu_node(), &options(EngineKind::Podman, false, "runc"));
    assert_eq!(spec.devices[0].host, fake.path().join("dev/kfd"));
    assert_eq!(spec.devices[0].container, PathBuf::from("/dev/kfd"));
    let args = spec.engine_flags(EngineKind::Podman);
    let expected = format!("{}:/dev/kfd", fake.path().join("dev/kfd").display());
    assert!(args.contains(&expected), "{args:?}");
}

#[test]
fn user_env_applies_last() {
    let mut opts = options(EngineKind::Docker, false, "runc");
    opts.extra_env = parse_env(&["NCCL_IB_GID_INDEX=1".into(), "VLLM_LOGGING=debug".into()]).unwrap();
    let spec = ToolboxSpec::new(&root(), &rdma_node(), &opts);
    assert_eq!(spec.env["NCCL_IB_GID_INDEX"], "1");
    assert_eq!(spec.env["VLLM_LOGGING"], "debug");
    assert!(matches!(parse_env(&["novalue".into()]), Err(Error::Usage(_))));
}

#[test]
fn renders_full_create_argv() {
    let spec = ToolboxSpec::new(&root(), &rdma_node(), &options(EngineKind::Docker, false, "runc"));
    let mut request = CreateRequest { name: "vllm".into(), image: "img:latest".into(), ..Default::default() };
    request.command = vec!["sleep".into(), "infinity".into()];
    spec.add_to(&mut request);
    let argv = create_argv(EngineKind::Docker, &request);
    assert_eq!(&argv[..4], ["docker", "create", "--name", "vllm"]);
    assert_eq!(&argv[argv.len() - 3..], ["img:latest", "sleep", "infinity"]);
    assert!(argv.windows(2).any(|w| w == ["--device", "/dev/infiniband:/dev/infiniband"]));
    assert!(argv.windows(2).any(|w| w == ["--group-add", "993"]));
}
