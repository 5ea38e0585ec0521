//! A NIC's driver and firmware, as `ethtool -i IFACE` shows them: the SIOCETHTOOL ioctl with
//! ETHTOOL_GDRVINFO. The one host fact no file holds, so it is asked of the interface itself, and
//! only where [`HostRoot::live_interfaces`](super::HostRoot::live_interfaces) says this process's
//! interfaces are the node's. It needs no privilege; a failure is reported, never fatal.

use std::ffi::c_char;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use serde::{Deserialize, Serialize};

/// What ETHTOOL_GDRVINFO answers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriverInfo {
    /// "ice" for Intel E810, "mlx5_core" for ConnectX, "veth", "thunderbolt-net"...
    pub driver: String,
    pub version: Option<String>,
    /// As `ethtool -i` prints it, e.g. "4.91 0x800214b5 1.3909.0"; None when the driver has none.
    pub firmware: Option<String>,
    /// The PCI address, e.g. "0000:c2:00.0".
    pub bus_info: Option<String>,
}

/// `ETHTOOL_GDRVINFO` from linux/ethtool.h.
const ETHTOOL_GDRVINFO: u32 = 0x0000_0003;

/// `struct ethtool_drvinfo` from linux/ethtool.h.
#[repr(C)]
struct EthtoolDrvinfo {
    cmd: u32,
    driver: [c_char; 32],
    version: [c_char; 32],
    fw_version: [c_char; 32],
    bus_info: [c_char; 32],
    erom_version: [c_char; 32],
    reserved2: [c_char; 12],
    n_priv_flags: u32,
    n_stats: u32,
    testinfo_len: u32,
    eedump_len: u32,
    regdump_len: u32,
}

/// Ask `interface` (in this process's network namespace) for its driver and firmware.
/// Err says why not, e.g. "No such device (os error 19)".
pub fn query(interface: &str) -> Result<DriverInfo, String> {
    let name = interface.as_bytes();
    if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.iter().any(|b| *b == 0 || *b == b'/') {
        return Err(format!("{interface:?} is not an interface name"));
    }
    // SAFETY: socket has no memory preconditions; the result is checked before use.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(format!("cannot open a socket to ask it: {}", io::Error::last_os_error()));
    }
    // SAFETY: fd is a freshly opened descriptor that nothing else owns.
    let socket = unsafe { OwnedFd::from_raw_fd(fd) };

    // SAFETY: both are plain C structs for which all-zero bytes are valid.
    let mut info: EthtoolDrvinfo = unsafe { std::mem::zeroed() };
    info.cmd = ETHTOOL_GDRVINFO;
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    for (slot, byte) in request.ifr_name.iter_mut().zip(name) {
        *slot = *byte as c_char;
    }
    request.ifr_ifru.ifru_data = (&mut info as *mut EthtoolDrvinfo).cast();
    // SAFETY: request names a NUL-terminated interface (zeroed, name shorter than IFNAMSIZ) and
    // points at `info`, which outlives the call and has the layout the kernel writes.
    let result = unsafe { libc::ioctl(socket.as_raw_fd(), libc::SIOCETHTOOL as _, &mut request) };
    if result < 0 {
        return Err(io::Error::last_os_error().to_string());
    }
    Ok(DriverInfo {
        driver: text(&info.driver).unwrap_or_default(),
        version: text(&info.version),
        firmware: text(&info.fw_version),
        bus_info: text(&info.bus_info),
    })
}

/// A NUL-terminated field; None when empty.
fn text(field: &[c_char]) -> Option<String> {
    let bytes: Vec<u8> = field.iter().take_while(|c| **c != 0).map(|c| *c as u8).collect();
    let text = String::from_utf8_lossy(&bytes).trim().to_string();
    (!text.is_empty()).then_some(text)
}

/// An Intel NVM version, the first word of the ice driver's firmware string
/// ("4.91 0x800214b5 1.3909.0" → 4.91). The driver prints it as `%x.%02x`, so both parts are hex.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct NvmVersion {
    pub major: u32,
    pub minor: u32,
}

impl NvmVersion {
    /// The NVM version the cluster guide verified on the Intel E810.
    pub const VERIFIED_E810: NvmVersion = NvmVersion { major: 4, minor: 0x91 };

    /// None when the firmware string does not start with an NVM version.
    pub fn parse(firmware: &str) -> Option<NvmVersion> {
        let (major, minor) = firmware.split_whitespace().next()?.split_once('.')?;
        let hex = |part: &str| (!part.is_empty() && part.len() <= 4).then(|| u32::from_str_radix(part, 16).ok())?;
        Some(NvmVersion { major: hex(major)?, minor: hex(minor)? })
    }
}

impl std::fmt::Display for NvmVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:x}.{:02x}", self.major, self.minor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_nvm_version_ethtool_prints() {
        let verified = NvmVersion::parse("4.91 0x800214b5 1.3909.0").unwrap();
        assert_eq!(verified, NvmVersion::VERIFIED_E810);
        assert_eq!(verified.to_string(), "4.91");
        let older = NvmVersion::parse("4.40 0x8001c967 1.3534.0").unwrap();
        assert!(older < verified && older.to_string() == "4.40");
        assert!(NvmVersion::parse("3.20 0x80008c1d 1.2766.0").unwrap() < verified);
        assert!(NvmVersion::parse("4.a0 0x80021c3f 1.3909.0").unwrap() > verified);
        assert!(NvmVersion::parse("4.91").is_some(), "the other words are optional");
    }

    #[test]
    fn anything_else_is_not_a_version() {
        for firmware in ["", "   ", "16.35.2000 (MT_0000000080)", "N/A", "4.", ".91", "x.y 0x1"] {
            let parsed = NvmVersion::parse(firmware);
            // ConnectX's "16.35.2000" splits into "16" and "35.2000": not two hex words.
            assert_eq!(parsed, None, "{firmware:?} gave {parsed:?}");
        }
    }

    #[test]
    fn refuses_names_the_kernel_would_not_take() {
        assert!(query("").unwrap_err().contains("not an interface name"));
        assert!(query("a-name-much-too-long-for-ifnamsiz").unwrap_err().contains("not an interface name"));
        assert!(query("eth0/x").unwrap_err().contains("not an interface name"));
    }
}
