//! firewalld: Ray and RCCL open random ports, so where firewalld is configured the cluster link
//! belongs in the `trusted` zone; and what has no authentication of its own (llama.cpp's RPC
//! server, Ray's GCS and client server) must be let in on the link and in no other interface's
//! zone, while the endpoint (which takes an API key) is said where it is open.

use std::collections::BTreeSet;

use super::{check, Check, Status};
use crate::host::firewalld::FirewalldFacts;
use crate::host::netdev::THUNDERBOLT;
use crate::host::HostFacts;
use crate::link::ports::LinkPort;
use crate::spec::Transport;

/// The endpoint's default port (`launch --port`): for users, behind the API key.
const ENDPOINT_PORT: u16 = 8000;

/// `cluster_ports`: the serving engines' own ports, which only the cluster's nodes may reach (what
/// listens there has no authentication of its own; Ray's token guards its GCS, not its other ports).
pub(super) fn checks(facts: &HostFacts, cluster_ports: &[LinkPort], checks: &mut Vec<Check>) {
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
    for interface in &interfaces {
        checks.push(zone_check(firewalld, interface));
    }
    // Every interface that is or may become the cluster link is the link's side.
    let mut cluster: Vec<String> = facts.rdma.netdevs().into_iter().map(str::to_string).collect();
    cluster.push(THUNDERBOLT.to_string());
    checks.push(serving_ports(firewalld, cluster_ports, &cluster, &interfaces));
}

/// The zones of every interface but the link's: the default zone (where the management network
/// and any unbound interface land) and every zone an interface is bound to.
fn zones_beyond(firewalld: &FirewalldFacts, link: &[String]) -> BTreeSet<String> {
    let bound = firewalld.network_manager.iter().chain(&firewalld.zone_files);
    let mut zones: BTreeSet<String> =
        bound.filter(|(interface, _)| !link.contains(interface)).map(|(i, _)| firewalld.zone_of(i).zone).collect();
    zones.insert(firewalld.default_zone.clone());
    zones
}

/// The cluster's ports let in on the link (`in_use`) and on no interface beyond `link_side` (every
/// interface that is or may become the link); where the endpoint's is open.
fn serving_ports(firewalld: &FirewalldFacts, ports: &[LinkPort], link_side: &[String], in_use: &[String]) -> Check {
    let link = link_side;
    let name = "firewall:serving-ports";
    let mut open = Vec::new();
    let mut fixes = Vec::new();
    for zone in zones_beyond(firewalld, link) {
        let Some(rules) = firewalld.zones.get(&zone) else { continue };
        for LinkPort { port, what, .. } in ports.iter().copied() {
            if let Some(by) = rules.lets_in(port) {
                open.push(format!("{what} ({port}) in zone {zone} ({by})"));
                fixes.push(match by.strip_prefix("service ") {
                    _ if rules.accept_all => format!("move the interfaces of zone {zone} to another zone"),
                    Some(service) => {
                        format!("`sudo firewall-cmd --permanent --zone={zone} --remove-service={service}`")
                    }
                    None => format!(
                        "`sudo firewall-cmd --permanent --zone={zone} --remove-port={}`",
                        by.trim_start_matches("port ")
                    ),
                });
            }
        }
    }
    fixes.dedup();
    let endpoint: Vec<String> = zones_beyond(firewalld, link)
        .into_iter()
        .filter_map(|zone| Some(format!("zone {zone} ({})", firewalld.zones.get(&zone)?.lets_in(ENDPOINT_PORT)?)))
        .collect();
    let endpoint = if endpoint.is_empty() {
        format!("the endpoint's default port {ENDPOINT_PORT} is open only on the link")
    } else {
        format!(
            "the endpoint's default port {ENDPOINT_PORT} is open beyond the link in {} (give launch an API key)",
            endpoint.join(", ")
        )
    };
    // The first interface of the link whose zone keeps out one of the ports, and that port.
    let shut_on_link = in_use.iter().find_map(|interface| {
        let rules = firewalld.zones.get(&firewalld.zone_of(interface).zone)?;
        Some((interface, ports.iter().find(|port| rules.lets_in(port.port).is_none())?))
    });
    if !open.is_empty() {
        return check(
            name,
            Status::Warn,
            format!("open beyond the cluster link, to any machine on those networks: {}; {endpoint}", open.join(", ")),
            Some(format!("{}, then `sudo firewall-cmd --reload`", fixes.join(" and "))),
        );
    }
    if let Some((interface, port)) = shut_on_link {
        let zone = firewalld.zone_of(interface).zone;
        return check(
            name,
            Status::Warn,
            format!("zone {zone} of the link {interface} does not let {}'s port {} in; {endpoint}", port.what, port.port),
            Some(format!("`sudo firewall-cmd --permanent --zone=trusted --change-interface={interface}`, then `sudo firewall-cmd --reload`")),
        );
    }
    let named: Vec<&str> = ports.iter().map(|port| port.what).collect();
    check(name, Status::Pass, format!("{} are open on the link only; {endpoint}", named.join(", ")), None)
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
    fn the_cluster_ports_open_beyond_the_link_are_named_with_what_opened_them() {
        const PORTS: [LinkPort; 2] =
            [LinkPort::on_head(50052, "llama.cpp's rpc-server"), LinkPort::on_head(6379, "Ray's GCS")];
        use crate::host::firewalld::{OpenPort, ZoneRules};
        let port = |from, by: &str| OpenPort { from, to: from, protocol: "tcp".into(), by: by.into() };
        let mut facts = firewalld();
        facts.zone_files.insert("thunderbolt0".into(), "trusted".into());
        facts.zones = [
            ("trusted".to_string(), ZoneRules { accept_all: true, ports: vec![] }),
            ("public".to_string(), ZoneRules { accept_all: false, ports: vec![port(22, "service ssh")] }),
            ("internal".to_string(), ZoneRules { accept_all: false, ports: vec![] }),
        ]
        .into();
        let link = vec!["thunderbolt0".to_string(), "enp194s0f0".to_string()];
        let quiet = serving_ports(&facts, &PORTS, &link, &link[..1]);
        assert_eq!(quiet.status, Status::Pass, "{}", quiet.message);
        assert!(quiet.message.contains("open only on the link"), "{}", quiet.message);

        facts.zones.get_mut("public").unwrap().ports.push(port(50052, "port 50052/tcp"));
        facts.zones.get_mut("internal").unwrap().ports.push(port(6379, "service redis"));
        facts.zones.get_mut("internal").unwrap().ports.push(port(8000, "port 8000/tcp"));
        let open = serving_ports(&facts, &PORTS, &link, &link[..1]);
        assert_eq!(open.status, Status::Warn);
        assert!(open.message.contains("rpc-server (50052) in zone public (port 50052/tcp)"), "{}", open.message);
        assert!(open.message.contains("Ray's GCS (6379) in zone internal (service redis)"), "{}", open.message);
        assert!(open.message.contains("8000 is open beyond the link in zone internal"), "{}", open.message);
        let fix = open.fix.unwrap();
        assert!(
            fix.contains("--zone=public --remove-port=50052/tcp") && fix.contains("--remove-service=redis"),
            "{fix}"
        );

        // The link in a zone that does not let the RPC port in.
        let mut closed = firewalld();
        closed.zones = [("public".to_string(), ZoneRules::default())].into();
        let verdict = serving_ports(&closed, &PORTS, &link, &link[..1]);
        assert_eq!(verdict.status, Status::Warn);
        assert!(verdict.message.contains("does not let llama.cpp's rpc-server's port 50052 in"), "{}", verdict.message);
    }

    #[test]
    fn unreadable_profiles_are_named() {
        let mut facts = firewalld();
        facts.unreadable = vec!["/etc/NetworkManager/system-connections/tb.nmconnection".into()];
        let verdict = zone_check(&facts, "thunderbolt0");
        assert!(verdict.message.contains("tb.nmconnection unreadable"), "{}", verdict.message);
    }
}
