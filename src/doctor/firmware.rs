//! The RoCE NIC's driver and firmware, as `ethtool -i` shows them. The guide verified the Intel
//! E810 (driver ice) with NVM 4.91; an older NVM is worth updating, anything else is information.

use super::{check, Check, Status};
use crate::host::ethtool::NvmVersion;
use crate::host::{HostFacts, Netdev};

pub(super) fn checks(facts: &HostFacts, checks: &mut Vec<Check>) {
    for name in facts.rdma.netdevs() {
        if let Some(netdev) = facts.interface(name) {
            checks.push(firmware_check(netdev));
        }
    }
}

fn firmware_check(netdev: &Netdev) -> Check {
    let (interface, name) = (&netdev.name, format!("nic:{}", netdev.name));
    let verified = NvmVersion::VERIFIED_E810;
    let Some(info) = &netdev.driver else {
        let why = netdev.driver_unavailable.as_deref().unwrap_or("not asked");
        return check(
            name,
            Status::Info,
            format!("{interface}: driver and firmware not read ({why})"),
            Some(format!("`ethtool -i {interface}` shows them")),
        );
    };
    let firmware = info.firmware.as_deref().unwrap_or("not reported");
    if info.driver != "ice" {
        return check(
            name,
            Status::Info,
            format!(
                "{interface}: driver {}, firmware {firmware}; the guide verified Intel E810 (ice) with NVM {verified}",
                info.driver
            ),
            None,
        );
    }
    match info.firmware.as_deref().and_then(NvmVersion::parse) {
        None => check(
            name,
            Status::Info,
            format!("{interface}: ice firmware {firmware:?} does not start with an NVM version; the guide verified NVM {verified}"),
            None,
        ),
        Some(nvm) if nvm < verified => check(
            name,
            Status::Warn,
            format!("{interface}: Intel E810 NVM {nvm} is older than {verified}, the version the guide verified (firmware {firmware})"),
            Some(
                "update the NIC's NVM with Intel's NVM Update Tool (`nvmupdate64e`, in the E810 NVM Update Package \
                 from intel.com), then power-cycle the node"
                    .into(),
            ),
        ),
        Some(nvm) => check(
            name,
            Status::Pass,
            format!("{interface}: Intel E810 NVM {nvm} (firmware {firmware}); the guide verified {verified}"),
            None,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::DriverInfo;

    fn nic(driver: &str, firmware: Option<&str>) -> Netdev {
        Netdev {
            name: "enp194s0f0".into(),
            driver: Some(DriverInfo {
                driver: driver.into(),
                firmware: firmware.map(str::to_string),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn ice_older_than_4_91_is_a_warning_naming_the_update_tool() {
        let old = firmware_check(&nic("ice", Some("4.40 0x8001c967 1.3534.0")));
        assert_eq!(old.status, Status::Warn);
        assert!(old.message.contains("4.40") && old.message.contains("4.91"), "{}", old.message);
        assert!(old.fix.unwrap().contains("NVM Update Tool"));

        let verified = firmware_check(&nic("ice", Some("4.91 0x800214b5 1.3909.0")));
        assert_eq!((verified.status, verified.fix), (Status::Pass, None));
        assert_eq!(firmware_check(&nic("ice", Some("4.a0 0x1 1.0.0"))).status, Status::Pass);
    }

    #[test]
    fn what_cannot_be_judged_is_information() {
        for netdev in [
            nic("mlx5_core", Some("16.35.2000 (MT_0000000080)")),
            nic("veth", None),
            nic("ice", Some("garbled")),
            Netdev {
                name: "enp194s0f1".into(),
                driver_unavailable: Some("ethtool ioctl on enp194s0f1 failed: No such device (os error 19)".into()),
                ..Default::default()
            },
        ] {
            let verdict = firmware_check(&netdev);
            assert_eq!(verdict.status, Status::Info, "{verdict:?}");
            assert_eq!(verdict.name, format!("nic:{}", netdev.name));
        }
        let unread = firmware_check(&Netdev {
            name: "eth0".into(),
            driver_unavailable: Some("No such device".into()),
            ..Default::default()
        });
        assert!(unread.message.contains("No such device"), "{}", unread.message);
    }
}
