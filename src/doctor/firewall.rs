//! firewalld: Ray and RCCL open random ports, so where firewalld is configured the cluster link
//! belongs in the `trusted` zone.

use super::{check, Check, Status};
use crate::host::firewalld::FirewalldFacts;
use crate::host::netdev::THUNDERBOLT;
use crate::host::HostFacts;
use crate::spec::Transport;

pub(super) fn checks(facts: &HostFacts, checks: &mut Vec<Check>) {
    let Some(firewalld) = &facts.firewalld else { return };
    let interfaces = match Transport::of(facts).netdev() {
        Some(netdev) => vec![netdev.to_string()],
        // No link up yet: the interfaces that will carry it once one is.
        None => {
            let mut candidates: Vec<String> = facts.rdma.netdevs().into_iter().map(str::to_string).collect();
            if facts.interface(THUNDERBOLT).is_some() {
                candidates.push(THUNDERBOLT.to_string());
            }
            candidates
        }
    };
    for interface in interfaces {
        checks.push(zone_check(firewalld, &interface));
    }
}

fn zone_check(firewalld: &FirewalldFacts, interface: &str) -> Check {
    let name = format!("firewall:{interface}");
    let zone = firewalld.zone_of(interface);
    if zone.zone == "trusted" {
        return check(name, Status::Pass, format!("{interface} is in firewalld zone trusted ({})", zone.source), None);
    }
    let unread = if firewalld.unreadable.is_empty() {
        String::new()
    } else {
        format!(" ({} unreadable: as root doctor may see another zone)", firewalld.unreadable.join(", "))
    };
    // --add-interface refuses an interface bound to another zone; --change-interface moves it.
    let verb = if zone.bound { "change-interface" } else { "add-interface" };
    check(
        name,
        Status::Warn,
        format!(
            "{interface} is in firewalld zone {} ({}): it lets in only the services it lists, but Ray and RCCL use \
             random ports{unread}",
            zone.zone, zone.source
        ),
        Some(format!(
            "`sudo firewall-cmd --permanent --zone=trusted --{verb}={interface}`, then `sudo firewall-cmd --reload`"
        )),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn firewalld() -> FirewalldFacts {
        FirewalldFacts {
            default_zone: "public".into(),
            zone_files: [("enp194s0f0".into(), "trusted".into()), ("enp1s0".into(), "internal".into())].into(),
            ..Default::default()
        }
    }

    #[test]
    fn trusted_passes_anything_else_warns_with_the_firewall_cmd_that_fixes_it() {
        assert_eq!(zone_check(&firewalld(), "enp194s0f0").status, Status::Pass);

        let default = zone_check(&firewalld(), "thunderbolt0");
        assert_eq!(default.status, Status::Warn);
        assert!(default.message.contains("zone public (the default zone)"), "{}", default.message);
        assert_eq!(
            default.fix.as_deref(),
            Some("`sudo firewall-cmd --permanent --zone=trusted --add-interface=thunderbolt0`, then `sudo firewall-cmd --reload`")
        );

        let bound = zone_check(&firewalld(), "enp1s0");
        assert!(bound.fix.unwrap().contains("--change-interface=enp1s0"));
    }

    #[test]
    fn unreadable_profiles_are_named() {
        let mut facts = firewalld();
        facts.unreadable = vec!["/etc/NetworkManager/system-connections/tb.nmconnection".into()];
        let verdict = zone_check(&facts, "thunderbolt0");
        assert!(verdict.message.contains("tb.nmconnection unreadable"), "{}", verdict.message);
    }
}
