//! Reading perftest's tables (`ib_write_lat`, `ib_write_bw --report_gbits`), the proof that the
//! data plane runs RDMA at its speed (RCCL's own log is `rccl::log`'s to judge).

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
}
