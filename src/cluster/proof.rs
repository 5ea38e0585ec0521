//! Reading the proofs that the data plane uses RDMA: perftest's tables (`ib_write_lat`,
//! `ib_write_bw --report_gbits`) and RCCL's own log (`NCCL_DEBUG=INFO`,
//! `NCCL_DEBUG_SUBSYS=INIT,NET,ENV`), which says which network it chose and why.

use serde::{Deserialize, Serialize};

/// What the reference cluster measured: RoCE v2 between two Strix Halo nodes.
pub const REFERENCE_LATENCY_US: f64 = 5.0;
pub const REFERENCE_BANDWIDTH_GBPS: f64 = 50.0;

/// One perftest result table: its header's column names with the first result row's values,
/// matched from the left. The header starts with the count columns (`#bytes`, `#sl` with QoS,
/// `#iterations`); then every measured column carries its unit in brackets ("BW peak[Gb/sec]",
/// "99% percentile[usec]": names hold spaces); a duration run (`-D`) ends with "tps average".
fn result_row(output: &str, header_marker: &str) -> Option<Vec<(String, f64)>> {
    let mut lines = output.lines().map(str::trim);
    let header = lines.by_ref().find(|l| l.starts_with("#bytes") && l.contains(header_marker))?;
    // Warnings ("Conflicting CPU frequency values detected") can come between header and row.
    let row = lines.find(|l| l.chars().next().is_some_and(|c| c.is_ascii_digit()))?;
    let mut names = Vec::new();
    let mut rest = header;
    while let Some(counted) = rest.trim_start().strip_prefix('#') {
        let end = counted.find(char::is_whitespace).unwrap_or(counted.len());
        names.push(format!("#{}", &counted[..end]));
        rest = &counted[end..];
    }
    while let Some(close) = rest.find(']') {
        let (name, tail) = rest.split_at(close + 1);
        names.push(name.trim().to_string());
        rest = tail;
    }
    if !rest.trim().is_empty() {
        names.push(rest.trim().to_string());
    }
    let values: Vec<f64> = row.split_whitespace().map(|v| v.parse().ok()).collect::<Option<_>>()?;
    Some(names.into_iter().zip(values).collect())
}

fn column(row: &[(String, f64)], prefix: &str) -> Option<(String, f64)> {
    row.iter().find(|(name, _)| name.starts_with(prefix)).cloned()
}

/// `ib_write_lat`: the typical (else average) latency in µs.
pub fn parse_latency_us(output: &str) -> Option<f64> {
    let row = result_row(output, "usec")?;
    column(&row, "t_typical").or_else(|| column(&row, "t_avg")).map(|(_, value)| value)
}

/// `ib_write_bw`: the average bandwidth in Gb/s (perftest's MB/sec is 2^20 bytes).
pub fn parse_bandwidth_gbps(output: &str) -> Option<f64> {
    let row = result_row(output, "BW average")?;
    let (name, value) = column(&row, "BW average")?;
    if name.contains("Gb/sec") {
        Some(value)
    } else if name.contains("MB/sec") {
        Some(value * 1_048_576.0 * 8.0 / 1e9)
    } else {
        None
    }
}

/// Which network RCCL used, by its own log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RcclNetwork {
    /// A `NET/IB … RoCE` device and channels `via NET/IB`: RDMA.
    Roce,
    /// `NET/Socket`, `Using network Socket`, or `No device found`: it fell back to TCP.
    Socket,
    /// The log does not say.
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RcclVerdict {
    pub network: RcclNetwork,
    /// The log lines that decided it.
    pub evidence: Vec<String>,
}

/// Lines saying RCCL cannot use IB verbs, so it takes TCP sockets: why it fell back. A variable
/// NCCL reads as a parameter is logged as `NAME set by environment to VALUE.` under the ENV
/// subsystem (hence `NCCL_DEBUG_SUBSYS=INIT,NET,ENV`); `NCCL_NET` is no such parameter and
/// logs nothing of its own: the network it names shows as `Using network Socket`.
const IB_UNUSABLE: [&str; 3] =
    ["No device found", "Failed to open libibverbs", "NCCL_IB_DISABLE set by environment to 1"];

/// Judge RCCL's log by what carried the data: the channels' transport (`via NET/IB/0`, `via
/// NET/Socket/0`) and the network it chose (`Using network Socket`). A `NET/Socket : Using` line
/// alone proves nothing (older NCCL logs its bootstrap interface so, then uses IB), nor does a
/// "No device found" from an external plugin before the internal IB takes over.
pub fn judge_rccl_log(log: &str) -> RcclVerdict {
    let lines: Vec<&str> =
        log.lines().map(str::trim).filter(|l| l.contains("NCCL INFO") || l.contains("NCCL WARN")).collect();
    let pick = |limit: usize, test: &dyn Fn(&str) -> bool| -> Vec<String> {
        let mut picked: Vec<String> = Vec::new();
        for line in lines.iter().filter(|l| test(l)) {
            // Every rank logs the same line: one of each is enough to show.
            if picked.len() < limit && !picked.iter().any(|p| same_message(p, line)) {
                picked.push(line.to_string());
            }
        }
        picked
    };
    let over_socket = pick(2, &|l| l.contains("via NET/Socket") || l.contains("Using network Socket"));
    let over_ib = pick(2, &|l| l.contains("via NET/IB"));
    let roce_device = pick(1, &|l| l.contains("NET/IB") && l.contains("Using") && l.contains("/RoCE"));
    let why_not_ib = pick(4, &|l| IB_UNUSABLE.iter().any(|marker| l.contains(marker)));
    let socket_device = pick(1, &|l| l.contains("NET/Socket : Using"));
    let fell_back = |mut evidence: Vec<String>| {
        evidence.extend(socket_device.clone());
        evidence.extend(over_socket.clone());
        RcclVerdict { network: RcclNetwork::Socket, evidence }
    };
    if !over_socket.is_empty() {
        return fell_back(why_not_ib);
    }
    if !over_ib.is_empty() && !roce_device.is_empty() {
        let mut evidence = roce_device;
        evidence.extend(over_ib);
        return RcclVerdict { network: RcclNetwork::Roce, evidence };
    }
    if over_ib.is_empty() && !why_not_ib.is_empty() {
        // The log ends before any channel: what it says about IB is the verdict.
        return fell_back(why_not_ib);
    }
    // Neither: the warnings say why (a failed ibv_reg_mr is memlock, an unreachable
    // ibv_modify_qp the GID index), else the last lines.
    let warnings = pick(3, &|l| l.contains("NCCL WARN"));
    let evidence =
        if warnings.is_empty() { lines.iter().rev().take(3).rev().map(|l| l.to_string()).collect() } else { warnings };
    RcclVerdict { network: RcclNetwork::Unknown, evidence }
}

/// The same message from one node: equal host (before the `:pid:tid [dev]` of the prefix) and
/// equal text after it. Another node saying it too is news (which node lacks the device).
fn same_message(a: &str, b: &str) -> bool {
    let parts = |line: &str| {
        let (prefix, message) = line.split_once(" NCCL ").unwrap_or(("", line));
        (prefix.split(':').next().unwrap_or("").to_string(), message.to_string())
    };
    parts(a) == parts(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAT: &str = "\
---------------------------------------------------------------------------------------
                    RDMA_Write Latency Test
 Dual-port       : OFF\t\tDevice         : rocep194s0f0
 Number of qps   : 1\t\tTransport type : IB
 Connection type : RC\t\tUsing SRQ      : OFF
 Mtu             : 4096[B]
 Link type       : Ethernet
 GID index       : 3
---------------------------------------------------------------------------------------
 #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] 
 2       1000          4.52           12.36        4.68     \t       4.74        \t0.21   \t\t5.43    \t\t12.36  
---------------------------------------------------------------------------------------
";

    const BW_GBITS: &str = "\
 #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
 65536      5000             46.12              45.87\t\t   0.087491
---------------------------------------------------------------------------------------
";

    const BW_MB: &str = "\
 #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]
 65536      5000             5521.33            5520.92\t\t   0.088335
";

    /// `ib_write_lat -D 10`: perftest's duration mode has only the average, then "tps average"
    /// (a column without brackets); without -F, CPU frequency warnings come before the row.
    const LAT_DURATION: &str = "\
---------------------------------------------------------------------------------------
 #bytes        #iterations       t_avg[usec]    tps average
Conflicting CPU frequency values detected: 1400.000000 != 3000.000000. CPU Frequency is not max.
 2             2091311            4.77           209130.64
---------------------------------------------------------------------------------------
";

    #[test]
    fn reads_perftest_tables() {
        assert_eq!(parse_latency_us(LAT), Some(4.68));
        assert_eq!(parse_latency_us(LAT_DURATION), Some(4.77), "t_avg, not the tps beside it");
        assert_eq!(parse_bandwidth_gbps(BW_GBITS), Some(45.87));
        let from_mb = parse_bandwidth_gbps(BW_MB).unwrap();
        assert!((from_mb - 46.31).abs() < 0.01, "{from_mb}");
        assert_eq!(parse_latency_us("Couldn't connect to 192.168.100.2:18515"), None);
        assert_eq!(parse_bandwidth_gbps(""), None);
        // A header whose row never came (the client died mid-run) is no result.
        assert_eq!(parse_bandwidth_gbps(BW_GBITS.lines().next().unwrap()), None);
    }

    /// RCCL 2.2x over the E810's RoCE port: the plugin search (librccl-net.so, absent) says "No
    /// plugin found", which is no fallback; the channels go via NET/IB.
    const ROCE_LOG: &str = "\
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
    const NO_VERBS_LOG: &str = "\
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

    /// No /dev/infiniband inside: the verbs library loads, finds no device.
    const NO_DEVICE_LOG: &str = "\
node1:2048:2048 [0] NCCL INFO Bootstrap : Using enp194s0f0:192.168.100.1<0>
node1:2048:2048 [0] NCCL INFO NET/IB : No device found.
node1:2048:2048 [0] NCCL INFO NET/Socket : Using [0]enp194s0f0:192.168.100.1<0>
node1:2048:2048 [0] NCCL INFO Using network Socket
node2:3112:3112 [0] NCCL INFO NET/IB : No device found.
node1:2048:2102 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0
";

    /// memlock at 8 MiB: IB is chosen, then registering a buffer fails, and nothing is carried.
    const MEMLOCK_LOG: &str = "\
node1:2048:2090 [0] NCCL INFO NET/IB : Using [0]rocep194s0f0:1/RoCE [RO]; OOB enp194s0f0:192.168.100.1<0>
node1:2048:2090 [0] NCCL INFO Using network IB
node1:2048:2102 [0] misc/ibvwrap.cc:190 NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate memory
node1:2048:2102 [0] NCCL INFO transport/net_ib.cc:1040 -> 2
node1:2048:2102 [0] NCCL INFO transport/net.cc:733 -> 2
";

    fn judged(log: &str) -> (RcclNetwork, String) {
        let verdict = judge_rccl_log(log);
        (verdict.network, verdict.evidence.join("\n"))
    }

    #[test]
    fn roce_needs_a_roce_device_and_channels_via_net_ib() {
        let (network, evidence) = judged(ROCE_LOG);
        assert_eq!(network, RcclNetwork::Roce, "{evidence}");
        assert!(evidence.lines().next().unwrap().contains("rocep194s0f0:1/RoCE"), "{evidence}");
        assert_eq!(evidence.lines().filter(|l| l.contains("via NET/IB")).count(), 2, "{evidence}");
        let (network, evidence) = judged(ROCE_AFTER_SOCKET_BOOTSTRAP);
        assert_eq!(network, RcclNetwork::Roce, "a bootstrap line is no fallback: {evidence}");
        // A device but no channel over it: not proof.
        let half = "x NCCL INFO NET/IB : Using [0]rocep194s0f0:1/RoCE [RO]; OOB enp194s0f0:192.168.100.1<0>";
        assert_eq!(judged(half).0, RcclNetwork::Unknown);
        assert_eq!(judged("Traceback (most recent call last):").0, RcclNetwork::Unknown);
    }

    #[test]
    fn a_fallback_to_sockets_is_shown_with_why() {
        let (network, evidence) = judged(NO_VERBS_LOG);
        assert_eq!(network, RcclNetwork::Socket);
        assert!(evidence.starts_with("node1:58192:58200 [0] NCCL INFO Failed to open libibverbs.so[.1]"), "{evidence}");
        assert!(evidence.contains("Using network Socket") && evidence.contains("via NET/Socket/0"), "{evidence}");
        assert!(!evidence.contains("No plugin found"), "the plugin search is no reason: {evidence}");

        let (network, evidence) = judged(NO_DEVICE_LOG);
        assert_eq!(network, RcclNetwork::Socket);
        assert!(evidence.starts_with("node1:2048:2048 [0] NCCL INFO NET/IB : No device found."), "{evidence}");
        assert!(evidence.contains("node2:3112:3112 [0] NCCL INFO NET/IB : No device found."), "{evidence}");
        assert!(evidence.contains("NET/Socket : Using [0]enp194s0f0"), "{evidence}");

        // IB switched off, and a log that ends before any channel: its reason is the verdict.
        let disabled = "node1:7:7 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.\n\
                        node1:7:7 [0] NCCL INFO NET/Socket : Using [0]enp194s0f0:192.168.100.1<0>\n";
        let (network, evidence) = judged(disabled);
        assert_eq!(network, RcclNetwork::Socket);
        assert!(evidence.contains("NCCL_IB_DISABLE set by environment to 1"), "{evidence}");
    }

    #[test]
    fn a_failure_on_ib_is_unknown_with_its_warning() {
        let (network, evidence) = judged(MEMLOCK_LOG);
        assert_eq!(network, RcclNetwork::Unknown);
        assert_eq!(
            evidence,
            "node1:2048:2102 [0] misc/ibvwrap.cc:190 NCCL WARN Call to ibv_reg_mr failed with error \
                              Cannot allocate memory"
        );
    }
}
