//! Checks over hand-made facts: the rules the fixtures do not each exercise.

use super::*;
use crate::host::netdev::THUNDERBOLT;
use crate::host::{FirewalldFacts, Memlock, Netdev, OsFacts, RdmaFacts, RdmaPort, SelinuxFacts};

/// The ports the serving engines name (`serving::engine::link_ports`), as the checks see them.
const PORTS: [LinkPort; 2] = [LinkPort::on_head(50052, "llama.cpp's rpc-server"), LinkPort::on_head(6379, "Ray's GCS")];

fn run(facts: &HostFacts) -> Vec<Check> {
    run_checks(facts, &Installed::default(), Programs::TheNodes, &PORTS, None)
}

fn find<'a>(checks: &'a [Check], name: &str) -> &'a Check {
    checks.iter().find(|c| c.name == name).unwrap_or_else(|| panic!("no {name} in {checks:#?}"))
}

fn has(checks: &[Check], name: &str) -> bool {
    checks.iter().any(|c| c.name == name)
}

fn gtt(gttsize: &str, pages: &str, gtt_bytes: Option<u64>) -> HostFacts {
    let mut facts = HostFacts::default();
    facts.kernel_params.insert("amdgpu.gttsize".into(), gttsize.into());
    facts.kernel_params.insert("ttm.pages_limit".into(), pages.into());
    facts.gpu.gtt_bytes = gtt_bytes;
    facts
}

#[test]
fn gttsize_and_pages_limit_must_agree_both_ways() {
    let checks = run(&gtt("126976", "32505856", Some(126976 << 20)));
    assert_eq!(find(&checks, "kernel:gtt-vs-ttm").status, Status::Pass);
    assert_eq!(find(&checks, "kernel:gtt-size").status, Status::Pass);

    let too_few = run(&gtt("126976", "1048576", None));
    let verdict = find(&too_few, "kernel:gtt-vs-ttm");
    assert_eq!(verdict.status, Status::Warn);
    assert!(verdict.message.contains("caps GPU memory at 4.00 GiB"), "{}", verdict.message);
    assert!(verdict.fix.as_deref().unwrap().starts_with("set ttm.pages_limit=32505856"));
    assert!(!has(&too_few, "kernel:gtt-size"), "no GTT reported, nothing to compare");

    let too_many = run(&gtt("65536", "32505856", None));
    let verdict = find(&too_many, "kernel:gtt-vs-ttm");
    assert_eq!(verdict.status, Status::Warn);
    assert!(verdict.message.contains("disagree"), "{}", verdict.message);
    assert!(verdict.fix.as_deref().unwrap().contains("ttm.pages_limit=16777216 (or amdgpu.gttsize=126976)"));
}

#[test]
fn a_gtt_smaller_than_asked_is_reported_once() {
    let checks = run(&gtt("126976", "32505856", Some(64 << 30)));
    let verdict = find(&checks, "kernel:gtt-size");
    assert_eq!(verdict.status, Status::Warn);
    assert!(verdict.message.contains("64.00 GiB") && verdict.message.contains("124.00 GiB"), "{}", verdict.message);
    assert!(verdict.fix.as_deref().unwrap().contains("dmesg"), "params agree: the driver's log says why");
    assert_eq!(checks.iter().filter(|c| c.name.starts_with("kernel:gtt")).count(), 2);

    let disagreeing = run(&gtt("126976", "1048576", Some(4 << 30)));
    assert!(find(&disagreeing, "kernel:gtt-size").fix.as_deref().unwrap().contains("ttm.pages_limit=32505856"));
}

#[test]
fn nonsense_sizes_do_not_overflow() {
    let checks = run(&gtt("18446744073709551615", "18446744073709551615", Some(1)));
    assert_eq!(find(&checks, "kernel:gtt-size").status, Status::Warn);
}

#[test]
fn os_and_kernel_are_information_beside_the_verified_ones() {
    let mut facts = HostFacts::default();
    let checks = run(&facts);
    assert_eq!(find(&checks, "os").status, Status::Info);
    assert_eq!(find(&checks, "kernel").status, Status::Info);

    facts.os = OsFacts {
        kernel: Some("6.18.6-200.fc43.x86_64".into()),
        id: Some("fedora".into()),
        id_like: Vec::new(),
        version_id: Some("43".into()),
        name: Some("Fedora Linux 43 (Workstation Edition)".into()),
    };
    let checks = run(&facts);
    assert_eq!(find(&checks, "os").status, Status::Pass);
    assert_eq!(find(&checks, "kernel").status, Status::Pass);

    facts.os.kernel = Some("6.19.0-100.fc44.x86_64".into());
    facts.os.version_id = Some("44".into());
    let checks = run(&facts);
    for name in ["os", "kernel"] {
        let verdict = find(&checks, name);
        assert_eq!(verdict.status, Status::Info, "{verdict:?}");
        assert!(verdict.message.contains("the guide verified"), "{}", verdict.message);
    }
    assert!(find(&checks, "kernel").message.contains("6.18.5 and 6.18.6"));
}

fn rdma_node(gid: u32, restricted: bool, member: bool) -> HostFacts {
    let mut facts = HostFacts {
        rdma: RdmaFacts { devices: vec!["/dev/infiniband/uverbs0".into()], ..Default::default() },
        memlock: Some(Memlock::default()),
        ..Default::default()
    };
    if restricted {
        facts.rdma.restricted_to_gids.insert(gid);
    }
    facts.groups.user = Some("alice".into());
    facts.groups.gids.insert("rdma".into(), gid);
    facts.groups.member.insert("rdma".into(), member);
    facts
}

#[test]
fn rdma_membership_is_checked_wherever_there_is_rdma() {
    assert_eq!(find(&run(&rdma_node(993, true, true)), "group:rdma").status, Status::Pass);
    let closed = run(&rdma_node(993, true, false));
    assert_eq!(find(&closed, "group:rdma").status, Status::Fail);
    let open = run(&rdma_node(993, false, false));
    let verdict = find(&open, "group:rdma");
    assert_eq!(verdict.status, Status::Info);
    assert!(verdict.fix.as_deref().unwrap().contains("usermod -aG rdma alice"));

    let mut no_group = rdma_node(993, false, false);
    no_group.groups.gids.clear();
    assert!(find(&run(&no_group), "group:rdma").fix.as_deref().unwrap().contains("rdma-core"));

    let mut no_rdma = HostFacts::default();
    no_rdma.groups.user = Some("alice".into());
    assert!(!has(&run(&no_rdma), "group:rdma"));
}

#[test]
fn memlock_has_its_own_check_only_with_rdma() {
    let mut facts = rdma_node(993, true, true);
    assert_eq!(find(&run(&facts), "memlock").status, Status::Pass);
    facts.memlock = Some(Memlock { soft: Some(8 << 20), hard: Some(8 << 20) });
    let verdict = run(&facts).into_iter().find(|c| c.name == "memlock").unwrap();
    assert_eq!((verdict.status, verdict.fix.as_deref()), (Status::Fail, Some(memlock::FIX)));
    facts.rdma = RdmaFacts::default();
    assert!(!has(&run(&facts), "memlock"));
}

fn port(state: &str, mtu: u32, gid: Option<u32>) -> RdmaPort {
    RdmaPort {
        device: "rocep194s0f0".into(),
        port: 1,
        state: Some(state.into()),
        phys_state: Some(if state.contains("ACTIVE") { "5: LinkUp" } else { "3: Disabled" }.into()),
        link_layer: Some("Ethernet".into()),
        netdev: Some("enp194s0f0".into()),
        mtu: Some(mtu),
        roce_v2_gid_index: gid,
        ..Default::default()
    }
}

#[test]
fn a_down_port_still_shows_its_mtu_and_gid_problems() {
    let mut facts = rdma_node(993, true, true);
    facts.rdma.ports = vec![port("1: DOWN", 1500, None)];
    let checks = run(&facts);
    assert_eq!(find(&checks, "rdma:rocep194s0f0/1").status, Status::Fail);
    let mtu = find(&checks, "rdma:rocep194s0f0/1:mtu");
    assert_eq!(mtu.status, Status::Warn);
    assert!(mtu.message.contains("MTU is 1500 (port down)"), "{}", mtu.message);
    assert_eq!(find(&checks, "rdma:rocep194s0f0/1:gid").status, Status::Fail);

    // Beside an active port, an idle one's MTU does not matter.
    let mut idle = port("1: DOWN", 1500, None);
    idle.device = "rocep194s0f1".into();
    facts.rdma.ports = vec![port("4: ACTIVE", 9000, Some(3)), idle];
    let checks = run(&facts);
    assert_eq!(find(&checks, "rdma:rocep194s0f1/1").status, Status::Warn);
    assert!(!has(&checks, "rdma:rocep194s0f1/1:mtu") && !has(&checks, "rdma:rocep194s0f1/1:gid"));
    assert_eq!(find(&checks, "rdma:rocep194s0f0/1:mtu").status, Status::Pass);
}

fn thunderbolt(operstate: &str, mtu: u32, ipv4: Option<Vec<String>>) -> Netdev {
    Netdev { name: THUNDERBOLT.into(), operstate: Some(operstate.into()), mtu: Some(mtu), ipv4, ..Default::default() }
}

#[test]
fn doctor_names_the_transport() {
    let mut roce = rdma_node(993, true, true);
    roce.rdma.ports = vec![port("4: ACTIVE", 9000, Some(3))];
    roce.interfaces.push(thunderbolt("up", 1500, Some(vec![])));
    let checks = run(&roce);
    let transport = find(&checks, "transport");
    assert_eq!(transport.status, Status::Pass);
    assert!(
        transport.message.starts_with("RoCE: RCCL uses rocep194s0f0 port 1 on enp194s0f0"),
        "{}",
        transport.message
    );
    assert!(!has(&checks, "thunderbolt0:mtu"), "the cable is not the link: {checks:#?}");

    let mut tcp = HostFacts::default();
    tcp.interfaces.push(thunderbolt("up", 65520, Some(vec!["192.168.2.1/24".into()])));
    let checks = run(&tcp);
    let transport = find(&checks, "transport");
    assert_eq!(transport.status, Status::Info);
    assert!(transport.message.starts_with("Thunderbolt TCP over thunderbolt0"), "{}", transport.message);
    for name in ["thunderbolt0", "thunderbolt0:mtu", "thunderbolt0:ipv4"] {
        assert_eq!(find(&checks, name).status, Status::Pass, "{name}");
    }

    let checks = run(&HostFacts::default());
    assert!(find(&checks, "transport").message.starts_with("plain Ethernet TCP"));
    assert!(!has(&checks, "thunderbolt0"));
}

#[test]
fn a_thunderbolt_link_shows_every_problem_even_when_down() {
    let mut facts = HostFacts::default();
    facts.interfaces.push(thunderbolt("down", 1500, Some(vec![])));
    let checks = run(&facts);
    assert_eq!(find(&checks, "transport").status, Status::Info);
    assert!(find(&checks, "thunderbolt0").fix.as_deref().unwrap().contains("cable"));
    assert!(find(&checks, "thunderbolt0:mtu").fix.as_deref().unwrap().contains("mtu 65520"));
    assert!(find(&checks, "thunderbolt0:ipv4").fix.as_deref().unwrap().contains("192.168.2.N/24"));

    facts.interfaces[0].ipv4 = None;
    assert_eq!(find(&run(&facts), "thunderbolt0:ipv4").status, Status::Info);
}

#[test]
fn firewall_checks_the_link_in_use_or_every_candidate() {
    let mut facts = rdma_node(993, true, true);
    facts.firewalld = Some(FirewalldFacts { default_zone: "public".into(), ..Default::default() });
    facts.rdma.ports = vec![port("1: DOWN", 9000, Some(3))];
    facts.interfaces.push(thunderbolt("down", 65520, Some(vec![])));
    let checks = run(&facts);
    assert_eq!(find(&checks, "firewall:enp194s0f0").status, Status::Warn);
    assert_eq!(find(&checks, "firewall:thunderbolt0").status, Status::Warn);

    facts.interfaces[0].operstate = Some("up".into());
    let checks = run(&facts);
    assert!(has(&checks, "firewall:thunderbolt0") && !has(&checks, "firewall:enp194s0f0"));

    facts.firewalld = None;
    assert!(!run(&facts).iter().any(|c| c.name.starts_with("firewall:")), "no firewalld, nothing to check");
}

#[test]
fn missing_programs_beside_a_copied_tree_are_information() {
    let on_the_node = run(&HostFacts::default());
    assert_eq!(find(&on_the_node, "engine").status, Status::Fail);
    assert_eq!(find(&on_the_node, "manager").status, Status::Warn);
    let beside_a_copy = run_checks(&HostFacts::default(), &Installed::default(), Programs::ThisMachines, &PORTS, None);
    for name in ["engine", "manager"] {
        let verdict = find(&beside_a_copy, name);
        assert_eq!(verdict.status, Status::Info, "{verdict:?}");
        assert!(verdict.message.contains("on this machine"), "{}", verdict.message);
    }
}

fn on(id: &str) -> HostFacts {
    HostFacts { os: OsFacts { id: Some(id.into()), ..Default::default() }, ..Default::default() }
}

/// The kernel parameter checks that carry a fix.
fn kernel_fixes(checks: &[Check]) -> Vec<(&str, &str)> {
    checks
        .iter()
        .filter(|c| c.name.starts_with("kernel:") && !c.name.starts_with("kernel:gtt"))
        .filter_map(|c| Some((c.name.as_str(), c.fix.as_deref()?)))
        .collect()
}

#[test]
fn one_command_sets_every_missing_kernel_parameter() {
    let checks = run(&on("fedora"));
    let parameters: Vec<&Check> =
        checks.iter().filter(|c| c.name.starts_with("kernel:") && c.name != "kernel").collect();
    assert_eq!(parameters.len(), 5, "still one check per parameter: {parameters:#?}");
    assert!(parameters.iter().all(|c| c.status == Status::Warn));
    assert_eq!(
        kernel_fixes(&checks),
        [(
            "kernel:iommu",
            "`sudo grubby --update-kernel=ALL --args=\"iommu=pt pci=realloc pcie_aspm=off amdgpu.gttsize=126976 \
             ttm.pages_limit=32505856\"`, then reboot"
        )]
    );

    // Only what is missing or wrong, sizes that agree with the size that is there.
    let mut facts = on("fedora");
    facts.kernel_params.insert("iommu".into(), "pt".into());
    facts.kernel_params.insert("pci".into(), "noaer".into());
    facts.kernel_params.insert("amdgpu.gttsize".into(), "65536".into());
    assert_eq!(
        kernel_fixes(&run(&facts)),
        [(
            "kernel:pci",
            "`sudo grubby --update-kernel=ALL --args=\"pci=realloc pcie_aspm=off ttm.pages_limit=16777216\"`, then reboot"
        )]
    );
}

#[test]
fn sizes_that_disagree_alone_get_the_one_fix_on_their_own_check() {
    let mut facts = gtt("126976", "1048576", Some(4 << 30));
    facts.os = on("fedora").os;
    for (name, value) in [("iommu", "pt"), ("pci", "realloc"), ("pcie_aspm", "off")] {
        facts.kernel_params.insert(name.into(), value.into());
    }
    let checks = run(&facts);
    assert_eq!(kernel_fixes(&checks), [], "every parameter is there");
    assert_eq!(
        find(&checks, "kernel:gtt-vs-ttm").fix.as_deref(),
        Some(
            "set ttm.pages_limit=32505856 (MiB × 256): `sudo grubby --update-kernel=ALL \
             --args=\"ttm.pages_limit=32505856\"`, then reboot"
        )
    );
    assert!(find(&checks, "kernel:gtt-size")
        .fix
        .as_deref()
        .unwrap()
        .ends_with("the fix under kernel:gtt-vs-ttm sets it too"));
}

#[test]
fn on_debian_the_fix_is_the_whole_grub_line_with_every_change() {
    let mut facts = on("debian");
    facts.kernel_params.insert("iommu".into(), "on".into());
    facts.kernel_params.insert("amdgpu.gttsize".into(), "126976".into());
    facts.kernel_params.insert("ttm.pages_limit".into(), "1048576".into());
    facts.grub_cmdline_linux = Some("iommu=on amdgpu.gttsize=126976 ttm.pages_limit=1048576".into());
    let checks = run(&facts);
    let line =
        "`GRUB_CMDLINE_LINUX=\"iommu=pt amdgpu.gttsize=126976 ttm.pages_limit=32505856 pci=realloc pcie_aspm=off\"`";
    let expected = format!("in /etc/default/grub make it {line}, then `sudo update-grub` and reboot");
    assert_eq!(kernel_fixes(&checks), [("kernel:iommu", expected.as_str())]);
    let pages = find(&checks, "kernel:gtt-vs-ttm").fix.clone().unwrap();
    assert_eq!(pages, "set ttm.pages_limit=32505856 (MiB × 256): the fix under kernel:iommu sets it too");

    // Ubuntu's kin too; a node without the line gets the parameters to add to it.
    let mut pop = on("pop");
    pop.os.id_like = vec!["ubuntu".into(), "debian".into()];
    let fix = kernel_fixes(&run(&pop))[0].1.to_string();
    assert!(fix.contains("GRUB_CMDLINE_LINUX=\"iommu=pt pci=realloc") && fix.contains("after what it holds"), "{fix}");
}

#[test]
fn elsewhere_the_fix_names_the_parameters_and_both_ways() {
    let fix = kernel_fixes(&run(&on("arch")))[0].1.to_string();
    assert!(fix.starts_with("add `iommu=pt pci=realloc pcie_aspm=off"), "{fix}");
    assert!(fix.contains("grubby") && fix.contains("update-grub"), "{fix}");
}

#[test]
fn selinux_enforcing_needs_container_use_devices() {
    let verdict = |selinux: Option<SelinuxFacts>| {
        let facts = HostFacts { selinux, ..Default::default() };
        find(&run(&facts), "selinux").clone()
    };
    let selinux = |enforcing, container_use_devices| Some(SelinuxFacts { enforcing, container_use_devices });
    assert_eq!(verdict(None).status, Status::Pass);
    assert_eq!(verdict(selinux(true, Some(true))).status, Status::Pass);
    let off = verdict(selinux(true, Some(false)));
    assert_eq!((off.status, off.fix.as_deref()), (Status::Fail, Some("`sudo setsebool -P container_use_devices 1`")));
    assert!(off.message.contains("cannot open /dev/kfd and /dev/dri"), "{}", off.message);
    let no_boolean = verdict(selinux(true, None));
    assert_eq!(no_boolean.status, Status::Warn);
    assert!(no_boolean.fix.unwrap().contains("container-selinux"));
    assert_eq!(verdict(selinux(false, Some(true))).status, Status::Pass);
    let permissive = verdict(selinux(false, Some(false)));
    assert_eq!((permissive.status, permissive.fix.as_deref()), (Status::Warn, off.fix.as_deref()));
}

#[test]
fn the_gpu_memory_check_says_what_the_plan_counts_or_that_it_cannot() {
    let plan = FitMemory { gtt_used_bytes: 2 << 30, reserve_bytes: 4 << 30, usable_bytes: 114 << 30 };
    let mut facts = HostFacts::default();
    facts.gpu.kfd = Some("/dev/kfd".into());
    facts.gpu.gtt_bytes = Some(120 << 30);
    facts.gpu.vram_bytes = Some(16 << 30);
    let checks = run_checks(&facts, &Installed::default(), Programs::TheNodes, &PORTS, Some(plan));
    let memory = find(&checks, "gpu:memory");
    assert_eq!(memory.status, Status::Info);
    assert!(memory.message.starts_with("HIP may report 16.00 GiB"), "{}", memory.message);
    assert!(memory
        .message
        .ends_with("120.00 GiB less 2.00 GiB in use less a 4.00 GiB reserve = 114.00 GiB for a model"));

    let nothing_left = FitMemory { usable_bytes: 0, ..plan };
    let checks = run_checks(&facts, &Installed::default(), Programs::TheNodes, &PORTS, Some(nothing_left));
    assert_eq!(find(&checks, "gpu:memory").status, Status::Warn);
    assert!(find(&checks, "gpu:memory").message.ends_with("= 0 B for a model: no model fits here"));

    facts.gpu.vram_bytes = None;
    let checks = run_checks(&facts, &Installed::default(), Programs::TheNodes, &PORTS, Some(plan));
    assert!(find(&checks, "gpu:memory").message.starts_with("the VRAM carve-out is unknown"));

    // No GTT size: the plan cannot say, whatever it was handed.
    facts.gpu.gtt_bytes = None;
    let unknown = find(&run(&facts), "gpu:memory").clone();
    assert_eq!(unknown.status, Status::Warn);
    assert!(unknown.fix.as_deref().is_some_and(|fix| fix.contains("modprobe amdgpu")));
    assert!(!has(&run(&HostFacts::default()), "gpu:memory"), "no GPU: the gpu check speaks");
}
