//! Reading the proofs that the data plane uses RDMA: perftest's tables (`ib_write_lat`,
//! `ib_write_bw --report_gbits`) and RCCL's own log (`NCCL_DEBUG=INFO`,
//! `NCCL_DEBUG_SUBSYS=INIT,NET`), which says which network it chose and why.

use serde::{Deserialize, Serialize};

/// What the reference cluster measured: RoCE v2 between two Strix Halo nodes.
pub const REFERENCE_LATENCY_US: f64 = 5.0;
pub const REFERENCE_BANDWIDTH_GBPS: f64 = 50.0;

/// One row of a perftest result table: its header's columns with the row's values.
fn result_row(output: &str, header_marker: &str) -> Option<Vec<(String, f64)>> {
    let mut lines = output.lines().map(str::trim);
    let header = lines.by_ref().find(|l| l.starts_with("#bytes") && l.contains(header_marker))?;
    let row = lines.find(|l| l.chars().next().is_some_and(|c| c.is_ascii_digit()))?;
    // Headers hold spaces inside names ("BW peak[Gb/sec]", "99% percentile[usec]"): split on
    // the unit brackets, which every value column has.
    let mut names = Vec::new();
    let mut rest = header;
    while let Some(close) = rest.find(']') {
        let (name, tail) = rest.split_at(close + 1);
        names.push(name.trim().to_string());
        rest = tail;
    }
    let values: Vec<f64> = row.split_whitespace().filter_map(|v| v.parse().ok()).collect();
    // The leading "#bytes #iterations" columns carry no unit; values line up from the right.
    let skip = values.len().checked_sub(names.len())?;
    Some(names.into_iter().zip(values.into_iter().skip(skip)).collect())
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

pub fn judge_rccl_log(log: &str) -> RcclVerdict {
    let lines: Vec<&str> =
        log.lines().map(str::trim).filter(|l| l.contains("NCCL INFO") || l.contains("NCCL WARN")).collect();
    let pick = |test: &dyn Fn(&str) -> bool| -> Vec<String> {
        lines.iter().filter(|l| test(l)).map(|l| l.to_string()).collect()
    };
    let fallback =
        pick(&|l| l.contains("NET/Socket") || l.contains("Using network Socket") || l.contains("No device found"));
    let ib_device = pick(&|l| l.contains("NET/IB") && l.contains("Using") && l.contains("RoCE"));
    let ib_channels = pick(&|l| l.contains("via NET/IB"));
    if !fallback.is_empty() {
        return RcclVerdict { network: RcclNetwork::Socket, evidence: fallback };
    }
    if !ib_device.is_empty() && !ib_channels.is_empty() {
        let mut evidence = ib_device;
        evidence.extend(ib_channels.into_iter().take(2));
        return RcclVerdict { network: RcclNetwork::Roce, evidence };
    }
    RcclVerdict { network: RcclNetwork::Unknown, evidence: lines.iter().rev().take(3).map(|l| l.to_string()).collect() }
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

    #[test]
    fn reads_perftest_tables() {
        assert_eq!(parse_latency_us(LAT), Some(4.68));
        assert_eq!(parse_bandwidth_gbps(BW_GBITS), Some(45.87));
        let from_mb = parse_bandwidth_gbps(BW_MB).unwrap();
        assert!((from_mb - 46.31).abs() < 0.01, "{from_mb}");
        assert_eq!(parse_latency_us("Couldn't connect to 192.168.100.2:18515"), None);
        assert_eq!(parse_bandwidth_gbps(""), None);
    }

    const ROCE_LOG: &str = "\
node1:2048:2048 [0] NCCL INFO Bootstrap : Using enp194s0np0:192.168.100.1<0>
node1:2048:2048 [0] NCCL INFO NET/IB : Using [0]rocep194s0f0:1/RoCE [RO]; OOB enp194s0np0:192.168.100.1<0>
node1:2048:2048 [0] NCCL INFO Using network IB
node1:2048:2102 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0
node1:2048:2102 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[0] [send] via NET/IB/0
";

    const SOCKET_LOG: &str = "\
node1:2048:2048 [0] NCCL INFO Bootstrap : Using enp194s0np0:192.168.100.1<0>
node1:2048:2048 [0] NCCL INFO NET/IB : No device found.
node1:2048:2048 [0] NCCL INFO NET/Socket : Using [0]enp194s0np0:192.168.100.1<0>
node1:2048:2048 [0] NCCL INFO Using network Socket
node1:2048:2102 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0
";

    #[test]
    fn rccl_logs_say_roce_or_socket_with_the_lines_that_show_it() {
        let roce = judge_rccl_log(ROCE_LOG);
        assert_eq!(roce.network, RcclNetwork::Roce);
        assert!(roce.evidence[0].contains("rocep194s0f0:1/RoCE"));
        let socket = judge_rccl_log(SOCKET_LOG);
        assert_eq!(socket.network, RcclNetwork::Socket);
        assert!(socket.evidence.iter().any(|l| l.contains("No device found")));
        assert!(socket.evidence.iter().any(|l| l.contains("Using network Socket")));
        assert_eq!(judge_rccl_log("Traceback (most recent call last):").network, RcclNetwork::Unknown);
        // A device but no channel over it: not proof.
        let half = "x NCCL INFO NET/IB : Using [0]rocep194s0f0:1/RoCE [RO]; OOB enp194s0np0:192.168.100.1<0>";
        assert_eq!(judge_rccl_log(half).network, RcclNetwork::Unknown);
    }
}
