//! One line of NCCL's debug log, and what its message says of the network. RCCL keeps NCCL's
//! format and messages; the sources cited are NVIDIA/nccl v2.28.9-1 (the same lines are in
//! ROCm/rocm-systems `projects/rccl/src`).
//!
//! `src/debug.cc` (`ncclDebugLog`) writes `[TIMESTAMP ]HOST:PID:TID [DEV] NCCL INFO MESSAGE`, and
//! for a warning `\n[TIMESTAMP ]HOST:PID:TID [DEV] FILE:LINE NCCL WARN MESSAGE` (a timestamp only on
//! warnings unless `NCCL_DEBUG_TIMESTAMP_LEVELS` says otherwise), each line at most 1024 bytes.
//! Another program may put its own prefix in front (Ray's `(RayWorkerWrapper pid=…)`).

/// How NCCL rated the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Info,
    /// An error NCCL returns up the stack (`WARN(...)`).
    Warn,
}

/// A line NCCL wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NcclLine<'a> {
    pub level: Level,
    /// `HOST:PID`: every line of one process (one rank) shares it; empty when the prefix is not
    /// NCCL's.
    pub process: &'a str,
    pub message: &'a str,
}

impl<'a> NcclLine<'a> {
    /// The line, when NCCL wrote it.
    pub fn parse(line: &'a str) -> Option<NcclLine<'a>> {
        // NCCL writes text: a line with control characters or bytes that were no UTF-8 is from
        // something else (a binary given as the log), whatever words it holds.
        if line.chars().any(|c| (c.is_control() && c != '\t') || c == char::REPLACEMENT_CHARACTER) {
            return None;
        }
        let (level, header, message) =
            [(Level::Info, "NCCL INFO "), (Level::Warn, "NCCL WARN ")].into_iter().find_map(|(level, marker)| {
                let at =
                    line.match_indices(marker).map(|(at, _)| at).find(|at| *at == 0 || line[..*at].ends_with(' '))?;
                Some((level, &line[..at], &line[at + marker.len()..]))
            })?;
        Some(NcclLine { level, process: process(header), message: message.trim_end() })
    }

    /// What the message says of the network, the communicator or a failure.
    pub fn said(&self) -> Said<'a> {
        let message = self.message;
        if self.level == Level::Warn {
            // plugin/net.cc:379, at the end of ncclNetInit: neither IB nor Socket (nor a plugin) came up.
            return if message.starts_with("Failed to initialize any NET plugin") {
                Said::NoNetwork
            } else {
                Said::Warning
            };
        }
        // init.cc:428 `Using network %s`, once a communicator has its network (commAlloc, right after
        // plugin/net.cc:244's `Assigned NET plugin %s to comm`, which adds nothing).
        if let Some(name) = message.strip_prefix("Using network ") {
            return Said::Network(name.trim());
        }
        // transport/net.cc:313,317,359 `Channel %02d/%d : %d[%d] -> %d[%d] [send|receive] via NET/%s/%d…`
        // (NCCL 2.4's `Ring 00 : 0 -> 1 [send] via NET/IB/0` too): a connection over that network.
        if let Some((_, rest)) = message.split_once(" via NET/") {
            let name = rest.split(['/', ' ']).next().unwrap_or_default();
            if !name.is_empty() {
                return Said::Channel(name);
            }
        }
        // init.cc:1593,1598 `… - Init COMPLETE`: the communicator formed.
        if message.ends_with("Init COMPLETE") {
            return Said::Formed;
        }
        // plugin/net.cc:225 `Failed to initialize NET plugin %s`: that network could not start.
        if let Some(name) = message.strip_prefix("Failed to initialize NET plugin ") {
            return Said::PluginFailed(name.trim());
        }
        // misc/param.cc:89 `%s set by environment to %lld.`: IB switched off when not 0.
        if let Some(value) = message.strip_prefix("NCCL_IB_DISABLE set by environment to ") {
            let off = value.trim_end_matches('.').trim().parse::<i64>().is_ok_and(|value| value != 0);
            return if off { Said::IbUnusable(IbUnusable::Disabled) } else { Said::IbMentioned };
        }
        // transport/net_ib.cc:826 `NET/IB : No device found.`
        if message.starts_with("NET/IB : No device found") {
            return Said::IbUnusable(IbUnusable::NoDevice);
        }
        // misc/ibvsymbols.cc:81 `Failed to open libibverbs.so[.1]`: no rdma-core in the image.
        if message.starts_with("Failed to open libibverbs") {
            return Said::IbUnusable(IbUnusable::NoVerbs);
        }
        // transport/net_ib.cc:839 `NET/IB : Using%s %s; OOB %s:%s`, the devices as ` [%d]%s:%d/%s`
        // (`IB`, `RoCE`): a device when the list before `;` names one (empty with no device).
        if let Some(rest) = message.strip_prefix("NET/IB : Using") {
            let devices = rest.split(';').next().unwrap_or_default();
            return if devices.contains('/') { Said::IbDevice } else { Said::IbMentioned };
        }
        // transport/net_socket.cc:77 `NET/Socket : Using%s`: the interfaces sockets would use.
        if message.starts_with("NET/Socket : Using") {
            return Said::SocketDevice;
        }
        // transport/net_ib.cc:702 `NCCL_IB_HCA set to %s`; any other NET/IB line: IB was tried.
        if message.starts_with("NCCL_IB_HCA set to") || message.contains("NET/IB") {
            return Said::IbMentioned;
        }
        Said::Other
    }
}

/// What a message says, of what the judge reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Said<'a> {
    /// A communicator took this network (`IB`, `Socket`, or a plugin's name).
    Network(&'a str),
    /// A channel connects over this network.
    Channel(&'a str),
    /// A communicator formed.
    Formed,
    /// This network could not start (RCCL tries the next).
    PluginFailed(&'a str),
    /// No network could start: the communicator cannot form.
    NoNetwork,
    /// Why IB cannot carry the data.
    IbUnusable(IbUnusable),
    /// IB found a device (RDMA NIC and port) to use.
    IbDevice,
    /// IB was tried or configured, nothing more.
    IbMentioned,
    /// The interfaces the socket network uses.
    SocketDevice,
    /// Another warning: an error on its way up.
    Warning,
    Other,
}

/// Why IB cannot carry the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum IbUnusable {
    /// `NCCL_IB_DISABLE` not 0.
    Disabled,
    /// libibverbs did not load.
    NoVerbs,
    /// No RDMA device (or none NCCL_IB_HCA names) with an active port.
    NoDevice,
}

impl IbUnusable {
    pub fn describe(self) -> &'static str {
        match self {
            IbUnusable::Disabled => "IB is switched off (NCCL_IB_DISABLE)",
            IbUnusable::NoVerbs => "libibverbs did not load (no rdma-core in the image)",
            IbUnusable::NoDevice => "IB found no device with an active port (of those NCCL_IB_HCA names)",
        }
    }
}

/// The `HOST:PID` of NCCL's `HOST:PID:TID` prefix: the last word before the level whose last two
/// `:` parts are numbers (a timestamp's `08:40:00]` is not).
fn process(header: &str) -> &str {
    header
        .split_whitespace()
        .rev()
        .find_map(|word| {
            let (rest, tid) = word.rsplit_once(':')?;
            let (host, pid) = rest.rsplit_once(':')?;
            let numeric = |text: &str| !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
            (!host.is_empty() && numeric(pid) && numeric(tid)).then_some(rest)
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_nccl_prefixes_with_and_without_what_others_put_before() {
        let info = NcclLine::parse("vm:476:527 [0] NCCL INFO Using network Socket").unwrap();
        assert_eq!((info.level, info.process, info.said()), (Level::Info, "vm:476", Said::Network("Socket")));
        let warn =
            "[2025-11-28 08:40:00] vm:476:476 [0] plugin/net.cc:379 NCCL WARN Failed to initialize any NET plugin";
        let warn = NcclLine::parse(warn).unwrap();
        assert_eq!((warn.level, warn.process, warn.said()), (Level::Warn, "vm:476", Said::NoNetwork));
        let ray = "(RayWorkerWrapper pid=812, ip=192.168.2.2) node2:812:901 [0] NCCL INFO Channel 00/0 : 1[0] -> \
                   0[0] [send] via NET/IB/0/GDRDMA";
        let ray = NcclLine::parse(ray).unwrap();
        assert_eq!((ray.process, ray.said()), ("node2:812", Said::Channel("IB")));
        let bare = NcclLine::parse("NCCL INFO comm 0x5 rank 0 nranks 2 cudaDev 0 busId c1000 - Init COMPLETE").unwrap();
        assert_eq!((bare.process, bare.said()), ("", Said::Formed));
        assert_eq!(NcclLine::parse("INFO loading weights"), None);
        assert_eq!(NcclLine::parse("XNCCL INFO Using network IB"), None, "a marker inside a word");
    }

    #[test]
    fn tells_a_device_from_an_empty_device_list() {
        let says = |message: &str, said: Said| {
            let line = format!("n:1:1 [0] NCCL INFO {message}");
            assert_eq!(NcclLine::parse(&line).unwrap().said(), said, "{message}");
        };
        says("NET/IB : Using [0]rocep194s0f0:1/RoCE [RO]; OOB enp194s0f0:192.168.100.1<0>", Said::IbDevice);
        says("NET/IB : Using [RO]; OOB lo:127.0.0.1<0>", Said::IbMentioned);
        says("NCCL_IB_DISABLE set by environment to 1.", Said::IbUnusable(IbUnusable::Disabled));
        says("NCCL_IB_DISABLE set by environment to 0.", Said::IbMentioned);
        says("Using network IB", Said::Network("IB"));
        says("Failed to initialize NET plugin IB", Said::PluginFailed("IB"));
        says("NCCL_IB_HCA set to =mlx5_0:1", Said::IbMentioned);
        says("Channel 00/02 : 0 1", Said::Other);
    }
}
