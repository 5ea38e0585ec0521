use super::bounded::MAX_LINE;
use super::*;

const SOCKET_LO: &str = include_str!("../../../tests/fixtures/rccl-logs/nccl-2.28.9/socket-lo.log");
const EXACT_HCA: &str = include_str!("../../../tests/fixtures/rccl-logs/nccl-2.28.9/exact-hca.log");
const IB_DISABLED: &str = include_str!("../../../tests/fixtures/rccl-logs/nccl-2.28.9/ib-disabled.log");
const DEFAULT: &str = include_str!("../../../tests/fixtures/rccl-logs/nccl-2.28.9/default.log");
const NET_IB_NO_DEVICE: &str =
    include_str!("../../../tests/fixtures/rccl-logs/written/nccl-2.28.9-net-ib-no-device.log");
const ROCE: &str = include_str!("../../../tests/fixtures/rccl-logs/written/nccl-2.28.9-roce.log");

/// RCCL 2.2x over the E810's RoCE port: the plugin search (librccl-net.so, absent) says "No plugin
/// found", which is no fallback; the channels go via NET/IB.
const RCCL_ROCE: &str = "\
node1:2048:2048 [0] NCCL INFO Bootstrap : Using enp194s0f0:192.168.100.1<0>
node1:2048:2048 [0] NCCL INFO NET/Plugin: No plugin found (librccl-net.so)
node1:2048:2048 [0] NCCL INFO NET/Plugin: Plugin load returned 2 : librccl-net.so: cannot open shared object file: No such file or directory : when loading librccl-net.so
node1:2048:2048 [0] NCCL INFO NET/Plugin: Using internal network plugin.
node1:2048:2090 [0] NCCL INFO NCCL_IB_GID_INDEX set by environment to 3.
node1:2048:2090 [0] NCCL INFO NET/IB : Using [0]rocep194s0f0:1/RoCE [RO]; OOB enp194s0f0:192.168.100.1<0>
node1:2048:2090 [0] NCCL INFO Using network IB
node2:3112:3112 [0] NCCL INFO NET/IB : Using [0]rocep194s0f0:1/RoCE [RO]; OOB enp194s0f0:192.168.100.2<0>
node2:3112:3112 [0] NCCL INFO Using network IB
node1:2048:2102 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0
node1:2048:2102 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[0] [send] via NET/IB/0
node2:3112:3160 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [receive] via NET/IB/0
";

/// NCCL 2.4 logged its bootstrap interface as `NET/Socket : Using`, then used IB.
const ROCE_AFTER_SOCKET_BOOTSTRAP: &str = "\
node1:20:289 [0] NCCL INFO NET/Socket : Using [0]enp194s0f0:192.168.100.1<0>
node1:20:289 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so).
node1:20:289 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 0.
node1:20:289 [0] NCCL INFO NET/IB : Using [0]rocep194s0f0:1/RoCE ; OOB enp194s0f0:192.168.100.1<0>
node1:20:301 [0] NCCL INFO Ring 00 : 0 -> 1 [send] via NET/IB/0
";

/// The image lacks rdma-core: RCCL cannot load libibverbs and takes sockets.
const NO_VERBS: &str = "\
node1:58192:58192 [0] NCCL INFO Bootstrap : Using enp194s0f0:192.168.100.1<0>
node1:58192:58192 [0] NCCL INFO NET/Plugin: No plugin found (librccl-net.so)
node1:58192:58200 [0] NCCL INFO Failed to open libibverbs.so[.1]
node1:58192:58200 [0] NCCL INFO NET/Socket : Using [0]enp194s0f0:192.168.100.1<0>
node1:58192:58200 [0] NCCL INFO Using non-device net plugin version 0
node1:58192:58200 [0] NCCL INFO Using network Socket
node1:58192:58230 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0
node1:58192:58230 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[0] [send] via NET/Socket/0
node1:58192:58230 [0] NCCL INFO Channel 02/0 : 0[0] -> 1[0] [send] via NET/Socket/0
";

/// memlock at 8 MiB: IB is chosen, then registering a buffer fails, and nothing is carried.
const MEMLOCK: &str = "\
node1:2048:2090 [0] NCCL INFO NET/IB : Using [0]rocep194s0f0:1/RoCE [RO]; OOB enp194s0f0:192.168.100.1<0>
node1:2048:2090 [0] NCCL INFO Using network IB
node1:2048:2102 [0] misc/ibvwrap.cc:190 NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate memory
node1:2048:2102 [0] NCCL INFO transport/net_ib.cc:1040 -> 2
node1:2048:2102 [0] NCCL INFO transport/net.cc:733 -> 2
";

fn judged(log: &str) -> RcclLogReport {
    judge(log.lines())
}

fn evidence(report: &RcclLogReport) -> String {
    report.evidence.join("\n")
}

#[test]
fn recorded_sockets_are_tcp_with_why_ib_did_not_start() {
    for (name, log) in [("socket-lo", SOCKET_LO), ("exact-hca", EXACT_HCA), ("default", DEFAULT)] {
        let report = judged(log);
        assert_eq!(report.verdict, RcclVerdict::Tcp, "{name}: {report:?}");
        assert!(report.asked_for_ib && !report.ok, "{name}: IB was tried, so TCP is not what was asked");
        assert!(report.why.contains("fell back") && report.why.contains("no device"), "{name}: {}", report.why);
        let evidence = evidence(&report);
        assert!(evidence.starts_with("vm:"), "{name}: {evidence}");
        for said in ["NET/IB : No device found.", "Failed to initialize NET plugin IB", "Using network Socket"] {
            assert!(evidence.contains(said), "{name}: {said} in {evidence}");
        }
        assert!(evidence.contains("via NET/Socket/0"), "{name}: a channel: {evidence}");
        assert!(!evidence.contains("Init COMPLETE") && !evidence.contains("dlvsym"), "{name}: {evidence}");
        // Both ranks formed their communicator over sockets.
        assert_eq!(report.processes.len(), 2, "{name}");
        for process in &report.processes {
            assert_eq!(
                (process.networks.as_slice(), process.formed, process.warnings),
                (&["Socket".to_string()][..], 1, 0)
            );
        }
        assert!(report.joined(), "{name}");
        assert_eq!((report.lines_read, report.cut_lines), (log.lines().count() as u64, 0), "{name}");
        assert_eq!(report.nccl_lines, log.lines().filter(|line| line.contains(" NCCL INFO ")).count() as u64, "{name}");
    }
    assert_eq!(judged(SOCKET_LO).processes[0].process, "vm:476", "in order of appearance");
}

#[test]
fn recorded_sockets_with_ib_switched_off_are_what_was_asked() {
    let report = judged(IB_DISABLED);
    assert_eq!(report.verdict, RcclVerdict::Tcp);
    assert!(!report.asked_for_ib && report.ok, "{report:?}");
    assert!(report.why.contains("as the log asked") && report.why.contains("NCCL_IB_DISABLE"), "{}", report.why);
    assert_eq!(report.fix, None);
    assert!(evidence(&report).contains("NCCL_IB_DISABLE set by environment to 1."), "{}", evidence(&report));
}

#[test]
fn no_network_at_all_is_a_failure_not_a_fall_back() {
    let report = judged(NET_IB_NO_DEVICE);
    assert_eq!(report.verdict, RcclVerdict::Failed, "{report:?}");
    assert!(!report.ok && !report.joined());
    assert!(
        report.why.contains("never formed") && report.why.contains("tried IB; IB found no device"),
        "{}",
        report.why
    );
    assert!(report.why.contains("no device"), "{}", report.why);
    let evidence = evidence(&report);
    assert!(evidence.contains("plugin/net.cc:379 NCCL WARN Failed to initialize any NET plugin"), "{evidence}");
    assert!(evidence.contains("NET/IB : No device found."), "{evidence}");
    assert!(!evidence.contains("NET/Socket") && !evidence.contains("init.cc:421"), "{evidence}");
    assert!(report.fix.as_deref().is_some_and(|fix| fix.contains("NCCL_NET=IB")), "{:?}", report.fix);
    assert!(report.processes.iter().all(|process| process.formed == 0 && process.warnings == 1), "{report:?}");
}

#[test]
fn roce_is_rdma_by_the_network_its_communicators_took() {
    let report = judged(ROCE);
    assert_eq!(report.verdict, RcclVerdict::Rdma, "{report:?}");
    assert!(report.ok && report.asked_for_ib && report.joined() && report.fix.is_none());
    assert_eq!(report.why, "RCCL carries the data with RDMA over RoCE (NET/IB)");
    let lines = evidence(&report);
    assert!(lines.starts_with("node1:2048:2048 [0] NCCL INFO NET/IB : Using [0]rocep194s0:1/RoCE"), "{lines}");
    assert!(lines.contains("node2:3112:3112 [0] NCCL INFO NET/IB : Using [0]rocep194s0:1/RoCE"), "{lines}");
    assert!(lines.contains("Using network IB") && lines.contains("via NET/IB/0"), "{lines}");

    // The log read as the ranks come up, before any channel (NCCL 2.22+ connects at the first
    // collective): the network the communicator took already decides.
    let up_to_init: Vec<&str> = ROCE.lines().take_while(|line| !line.contains("Init COMPLETE")).collect();
    let early = judge(&up_to_init);
    assert_eq!(early.verdict, RcclVerdict::Rdma);
    assert!(!early.joined(), "no communicator formed yet");

    let report = judged(RCCL_ROCE);
    assert_eq!(report.verdict, RcclVerdict::Rdma);
    assert_eq!(report.evidence.iter().filter(|line| line.contains("via NET/IB")).count(), 2, "one per host");
    assert!(!evidence(&report).contains("No plugin found"), "the plugin search is no reason");
    let report = judged(ROCE_AFTER_SOCKET_BOOTSTRAP);
    assert_eq!(report.verdict, RcclVerdict::Rdma, "a bootstrap line is no fall-back: {report:?}");
    assert!(report.asked_for_ib, "NCCL_IB_DISABLE=0 leaves IB on");
}

#[test]
fn older_fall_backs_say_why() {
    let report = judged(NO_VERBS);
    assert_eq!(report.verdict, RcclVerdict::Tcp);
    assert!(report.why.contains("libibverbs"), "{}", report.why);
    assert!(evidence(&report).starts_with("node1:58192:58200 [0] NCCL INFO Failed to open libibverbs.so[.1]"));
    // The stand-in vLLM's lines (a TCP link): sockets, and nothing says IB was tried.
    let stand_in = "node2:7:7 [0] NCCL INFO NET/Socket : Using [0]enp194s0np0\n\
                    node2:7:7 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [send] via NET/Socket/0\n\
                    node2:7:7 [0] NCCL INFO comm 0x5a rank 1 nranks 2 cudaDev 0 busId c1000 - Init COMPLETE";
    let report = judged(stand_in);
    assert_eq!((report.verdict, report.asked_for_ib, report.ok), (RcclVerdict::Tcp, false, true), "{report:?}");
    assert!(report.why.contains("no line says IB was tried"), "{}", report.why);
}

#[test]
fn a_failure_once_formed_or_before_is_failed_with_its_warning() {
    let report = judged(MEMLOCK);
    assert_eq!(report.verdict, RcclVerdict::Failed);
    assert!(report.why.contains("Call to ibv_reg_mr failed with error Cannot allocate memory"), "{}", report.why);
    assert!(evidence(&report).contains("NCCL WARN Call to ibv_reg_mr failed"), "{}", evidence(&report));
    // Formed over IB, then a peer went away: failed after forming.
    let formed = ROCE.lines().take(18).collect::<Vec<_>>().join("\n");
    let later = format!(
        "{formed}\n[2025-11-28 09:00:00] node1:2048:2200 [0] transport/net_ib.cc:2200 NCCL WARN NET/IB : Got completion \
         from peer 192.168.2.2<49152> with status=12 opcode=0 len=0 vendor err 21 (Recv)"
    );
    let report = judged(&later);
    assert_eq!(report.verdict, RcclVerdict::Failed, "{report:?}");
    assert!(
        report.why.starts_with("RCCL failed after its communicator formed: NET/IB : Got completion"),
        "{}",
        report.why
    );
    assert!(!report.joined());
    // Over sockets, a failure after forming still says TCP: what carried the data is the news.
    let socket_then_warning = format!(
        "{SOCKET_LO}\nvm:476:530 [0] misc/socket.cc:50 NCCL WARN socketProgress: Connection closed by remote peer"
    );
    assert_eq!(judged(&socket_then_warning).verdict, RcclVerdict::Tcp);
}

#[test]
fn what_does_not_say_is_unknown_with_why() {
    let report = judged("Traceback (most recent call last):\nRuntimeError: boom");
    assert_eq!(report.verdict, RcclVerdict::Unknown);
    assert!(
        report.why.contains("no NCCL line in 2 line(s)") && report.why.contains("NCCL_DEBUG=INFO"),
        "{}",
        report.why
    );
    assert!(!report.ok && report.evidence.is_empty());
    // IB found no device, and the log ends before a network was chosen: not yet TCP.
    let cut: Vec<&str> = SOCKET_LO.lines().take(14).collect();
    let report = judge(&cut);
    assert_eq!(report.verdict, RcclVerdict::Unknown, "{report:?}");
    assert!(report.why.contains("no device") && report.why.contains("before RCCL chose"), "{}", report.why);
    // Only the subsystems that say nothing of the network.
    let quiet = "n:1:1 [0] NCCL INFO cudaDriverVersion 13000\nn:1:1 [0] NCCL INFO NCCL version 2.28.9+cuda13.0";
    let report = judged(quiet);
    assert_eq!(report.verdict, RcclVerdict::Unknown);
    assert_eq!(report.evidence, quiet.lines().collect::<Vec<_>>(), "the last lines");
    let plugin = "n:1:1 [0] NCCL INFO Using network AWS Libfabric";
    assert_eq!(judged(plugin).verdict, RcclVerdict::Unknown);
    assert!(judged(plugin).why.contains("external network plugin"));
}

#[test]
fn any_input_is_read_in_bounded_memory() {
    let mut huge = Vec::new();
    huge.extend_from_slice(SOCKET_LO.as_bytes());
    huge.extend(std::iter::repeat_n(b'x', 10 * MAX_LINE));
    huge.extend_from_slice(b"\n\x00\x01\xff binary\n");
    let report = judge_input(std::io::Cursor::new(&huge)).unwrap();
    assert_eq!(report.verdict, RcclVerdict::Tcp, "the log's own lines still decide");
    assert_eq!(report.cut_lines, 1);
    let binary = judge_input(std::io::Cursor::new(b"\x7fELF\x02\x01\x01\x00\x00\x00\n\x00\x00".to_vec())).unwrap();
    assert_eq!(binary.verdict, RcclVerdict::Unknown);
    assert!(binary.why.contains("binary"), "{}", binary.why);
    // Past MAX_PROCESSES, the rest are counted together.
    let many: Vec<String> =
        (0..MAX_PROCESSES + 10).map(|pid| format!("h:{pid}:{pid} [0] NCCL INFO Using network IB")).collect();
    let report = judge(&many);
    assert_eq!(report.processes.len(), MAX_PROCESSES + 1);
    assert_eq!(report.processes.last().unwrap().process, "…");
    assert!(report.evidence.len() <= 3 * EVIDENCE_PER_KIND, "{:?}", report.evidence);
}
