//! firewalld's permanent configuration: which zone each interface is in, and what each zone lets
//! in (its target, ports and services). Ray and RCCL open random ports, so the cluster link belongs
//! in the `trusted` zone; the services that have no authentication of their own (llama.cpp's RPC
//! server, Ray) must not be let in on any other interface's zone.
//!
//! An interface's zone comes, in the order firewalld applies them, from its NetworkManager
//! connection profile (`zone=` in a keyfile: where `firewall-cmd --permanent` records the zone of
//! an interface NetworkManager manages), else from an `<interface name=.../>` in a zone file
//! under /etc/firewalld/zones, else the `DefaultZone` of firewalld.conf. Legacy ifcfg files
//! (`ZONE=`) are not read: Fedora keeps connections as keyfiles.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::HostRoot;

const CONFIG_DIR: &str = "/etc/firewalld";
const ZONES_DIR: &str = "/etc/firewalld/zones";
/// firewalld's shipped zones and services, which /etc's files of the same name replace.
const SHIPPED_ZONES_DIR: &str = "/usr/lib/firewalld/zones";
const SERVICES_DIR: &str = "/etc/firewalld/services";
const SHIPPED_SERVICES_DIR: &str = "/usr/lib/firewalld/services";
const NM_CONNECTIONS: &str = "/etc/NetworkManager/system-connections";
/// firewalld's own default when firewalld.conf names none.
const FALLBACK_ZONE: &str = "public";

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FirewalldFacts {
    /// `DefaultZone` of firewalld.conf: where an interface bound nowhere else lands.
    pub default_zone: String,
    /// Interface → zone, from the zone files.
    pub zone_files: BTreeMap<String, String>,
    /// Interface → zone, from NetworkManager connection profiles that set one.
    pub network_manager: BTreeMap<String, String>,
    /// Files that exist but could not be read (NetworkManager's profiles are root's alone).
    pub unreadable: Vec<String>,
    /// What each zone lets in, by name (/etc's zone files over the shipped ones).
    #[serde(default)]
    pub zones: BTreeMap<String, ZoneRules>,
}

/// What a zone lets in.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZoneRules {
    /// `target="ACCEPT"` (the `trusted` zone): everything.
    pub accept_all: bool,
    /// Its `<port>`s and the ports of its `<service>`s, with what opened each.
    pub ports: Vec<OpenPort>,
}

/// A port range a zone opens, and what opened it (`port 50052/tcp`, `service redis`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenPort {
    pub from: u16,
    pub to: u16,
    pub protocol: String,
    pub by: String,
}

impl ZoneRules {
    /// What lets TCP `port` in, if anything does.
    pub fn lets_in(&self, port: u16) -> Option<String> {
        if self.accept_all {
            return Some("its target ACCEPT (everything)".into());
        }
        self.ports.iter().find(|p| p.protocol == "tcp" && p.from <= port && port <= p.to).map(|p| p.by.clone())
    }
}

/// The zone an interface is in, and what put it there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfaceZone {
    pub zone: String,
    /// "its NetworkManager connection", "/etc/firewalld/zones/NAME.xml" or "the default zone".
    pub source: String,
    /// Bound to that zone explicitly (not just the default zone).
    pub bound: bool,
}

impl FirewalldFacts {
    pub fn zone_of(&self, interface: &str) -> InterfaceZone {
        if let Some(zone) = self.network_manager.get(interface) {
            return InterfaceZone { zone: zone.clone(), source: "its NetworkManager connection".into(), bound: true };
        }
        if let Some(zone) = self.zone_files.get(interface) {
            return InterfaceZone { zone: zone.clone(), source: format!("{ZONES_DIR}/{zone}.xml"), bound: true };
        }
        InterfaceZone { zone: self.default_zone.clone(), source: "the default zone".into(), bound: false }
    }
}

/// None when the node has no firewalld configuration.
pub fn read(root: &HostRoot, warnings: &mut Vec<String>) -> Option<FirewalldFacts> {
    root.metadata(CONFIG_DIR).filter(|m| m.is_dir())?;
    let mut facts = FirewalldFacts::default();
    let mut read = |path: String| match root.read(&path) {
        Ok(text) => text,
        Err(_) => {
            facts.unreadable.push(path);
            None
        }
    };

    let config = read(format!("{CONFIG_DIR}/firewalld.conf"));
    let default_zone = config.as_deref().and_then(default_zone_of);

    let mut zone_files = BTreeMap::new();
    for file in root.list(ZONES_DIR).into_iter().filter(|f| f.ends_with(".xml")) {
        let zone = file.trim_end_matches(".xml").to_string();
        let path = format!("{ZONES_DIR}/{file}");
        let Some(text) = read(path.clone()) else { continue };
        for interface in interfaces_in_zone_file(&text) {
            if let Some(other) = zone_files.insert(interface.clone(), zone.clone()) {
                warnings.push(format!("{path}: {interface} is also in zone {other}; firewalld refuses that"));
            }
        }
    }

    let mut network_manager = BTreeMap::new();
    for file in root.list(NM_CONNECTIONS).into_iter().filter(|f| f.ends_with(".nmconnection")) {
        let Some(text) = read(format!("{NM_CONNECTIONS}/{file}")) else { continue };
        if let Some((interface, zone)) = keyfile_zone(&text) {
            network_manager.insert(interface, zone);
        }
    }

    facts.default_zone = default_zone.unwrap_or_else(|| FALLBACK_ZONE.to_string());
    facts.zone_files = zone_files;
    facts.network_manager = network_manager;
    facts.zones = zone_rules(root);
    Some(facts)
}

/// Every zone's rules: /etc's files over the shipped ones, each service's ports from its own file
/// (/etc's over the shipped one).
fn zone_rules(root: &HostRoot) -> BTreeMap<String, ZoneRules> {
    let files = |dir: &str| -> Vec<(String, String)> {
        root.list(dir)
            .into_iter()
            .filter(|f| f.ends_with(".xml"))
            .filter_map(|f| Some((f.trim_end_matches(".xml").to_string(), root.read(format!("{dir}/{f}")).ok()??)))
            .collect()
    };
    let mut zones: BTreeMap<String, String> = files(SHIPPED_ZONES_DIR).into_iter().collect();
    zones.extend(files(ZONES_DIR));
    let mut services: BTreeMap<String, String> = files(SHIPPED_SERVICES_DIR).into_iter().collect();
    services.extend(files(SERVICES_DIR));
    zones
        .into_iter()
        .map(|(name, xml)| {
            let text = without_comments(&xml);
            let accept_all =
                elements(&text, "zone").first().and_then(|z| attribute(z, "target")).as_deref() == Some("ACCEPT");
            let mut ports = ports_in(&text, |port| format!("port {port}"));
            for element in elements(&text, "service") {
                let Some(service) = attribute(&element, "name") else { continue };
                let defined = services.get(&service).map(|xml| without_comments(xml)).unwrap_or_default();
                ports.extend(ports_in(&defined, |_| format!("service {service}")));
            }
            (name, ZoneRules { accept_all, ports })
        })
        .collect()
}

/// The `<port port="A[-B]" protocol="P"/>` elements of `xml`, each named by `by`.
fn ports_in(xml: &str, by: impl Fn(&str) -> String) -> Vec<OpenPort> {
    elements(xml, "port")
        .iter()
        .filter_map(|element| {
            let port = attribute(element, "port")?;
            let protocol = attribute(element, "protocol").unwrap_or_else(|| "tcp".into());
            let (from, to) = match port.split_once('-') {
                Some((from, to)) => (from.trim().parse().ok()?, to.trim().parse().ok()?),
                None => {
                    let only = port.trim().parse().ok()?;
                    (only, only)
                }
            };
            Some(OpenPort { from, to, by: by(&format!("{port}/{protocol}")), protocol })
        })
        .collect()
}

/// `DefaultZone=public` (comments and blank lines ignored).
fn default_zone_of(config: &str) -> Option<String> {
    config
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| l.strip_prefix("DefaultZone="))
        .map(|zone| zone.trim().to_string())
        .filter(|zone| !zone.is_empty())
}

/// The `name` of every `<interface name="..."/>` element, comments skipped.
fn interfaces_in_zone_file(xml: &str) -> Vec<String> {
    elements(&without_comments(xml), "interface")
        .iter()
        .filter_map(|attributes| attribute(attributes, "name"))
        .collect()
}

/// `xml` without its `<!-- … -->` comments.
fn without_comments(xml: &str) -> String {
    let mut text = String::new();
    let mut rest = xml;
    while let Some(start) = rest.find("<!--") {
        text.push_str(&rest[..start]);
        rest = rest[start..].find("-->").map_or("", |end| &rest[start + end + 3..]);
    }
    text.push_str(rest);
    text
}

/// The attributes of every `<tag …>` element of `text` (not `<tags …>`).
fn elements(text: &str, tag: &str) -> Vec<String> {
    text.split('<')
        .skip(1)
        .filter_map(|element| {
            let inside = element.split('>').next().unwrap_or_default();
            let attributes = inside.strip_prefix(tag)?;
            (attributes.is_empty() || attributes.starts_with(char::is_whitespace) || attributes.starts_with('/'))
                .then(|| attributes.to_string())
        })
        .collect()
}

/// `name="value"` or `name='value'` among an element's attributes.
fn attribute(attributes: &str, name: &str) -> Option<String> {
    let mut rest = attributes;
    while let Some(at) = rest.find(name) {
        let before_ok = rest[..at].chars().last().is_none_or(char::is_whitespace);
        let after = rest[at + name.len()..].trim_start();
        if let (true, Some(value)) = (before_ok, after.strip_prefix('=')) {
            let value = value.trim_start();
            let quote = value.chars().next().filter(|q| *q == '"' || *q == '\'')?;
            return value[1..].split(quote).next().map(str::to_string);
        }
        rest = &rest[at + name.len()..];
    }
    None
}

/// `interface-name` and `zone` of a keyfile's `[connection]` section, when both are set.
fn keyfile_zone(keyfile: &str) -> Option<(String, String)> {
    let (mut section, mut interface, mut zone) = ("", None, None);
    for line in keyfile.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name;
        } else if section == "connection" {
            match line.split_once('=').map(|(k, v)| (k.trim(), v.trim())) {
                Some(("interface-name", value)) if !value.is_empty() => interface = Some(value.to_string()),
                Some(("zone", value)) if !value.is_empty() => zone = Some(value.to_string()),
                _ => {}
            }
        }
    }
    Some((interface?, zone?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_interfaces_from_zone_files() {
        let xml = r#"<?xml version="1.0" encoding="utf-8"?>
<zone target="ACCEPT">
  <short>Trusted</short>
  <!-- <interface name="commented"/> -->
  <interface name="enp194s0f0"/>
  <interface  name='thunderbolt0' />
  <interfaces name="not-an-interface-element"/>
  <source address="10.0.0.0/24"/>
</zone>"#;
        assert_eq!(interfaces_in_zone_file(xml), ["enp194s0f0", "thunderbolt0"]);
        assert_eq!(interfaces_in_zone_file("<zone><interface/></zone>"), Vec::<String>::new());
    }

    #[test]
    fn reads_what_zones_let_in_with_their_services() {
        let dir = tempfile::tempdir().unwrap();
        let write = |path: &str, text: &str| {
            let path = dir.path().join(path.trim_start_matches('/'));
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        write("/etc/firewalld/firewalld.conf", "DefaultZone=public\n");
        write("/usr/lib/firewalld/zones/public.xml", "<zone><service name=\"ssh\"/></zone>");
        write(
            "/etc/firewalld/zones/public.xml",
            "<zone>\n<service name=\"ssh\"/><service name=\"redis\"/>\n<!-- <port port=\"1\" protocol=\"tcp\"/> -->\n\
             <port port=\"50000-50100\" protocol=\"tcp\"/><port port=\"8000\" protocol=\"udp\"/></zone>",
        );
        write("/usr/lib/firewalld/zones/trusted.xml", "<zone target=\"ACCEPT\"><short>Trusted</short></zone>");
        write("/usr/lib/firewalld/services/ssh.xml", "<service><port protocol=\"tcp\" port=\"22\"/></service>");
        write("/usr/lib/firewalld/services/redis.xml", "<service><port protocol=\"tcp\" port=\"6379\"/></service>");
        let facts = read(&HostRoot::open(dir.path()).unwrap(), &mut Vec::new()).unwrap();
        let public = &facts.zones["public"];
        assert_eq!(public.lets_in(6379).as_deref(), Some("service redis"));
        assert_eq!(public.lets_in(50052).as_deref(), Some("port 50000-50100/tcp"));
        assert_eq!(public.lets_in(22).as_deref(), Some("service ssh"));
        assert_eq!(public.lets_in(8000), None, "udp only");
        assert_eq!(public.lets_in(1), None, "a comment");
        assert!(facts.zones["trusted"].lets_in(50052).unwrap().contains("ACCEPT"));
    }

    #[test]
    fn reads_the_default_zone() {
        let conf = "# DefaultZone=dmz\nDefaultZone=FedoraWorkstation\nCleanupOnExit=yes\n";
        assert_eq!(default_zone_of(conf).as_deref(), Some("FedoraWorkstation"));
        assert_eq!(default_zone_of("DefaultZone=\n"), None);
    }

    #[test]
    fn reads_the_zone_of_a_networkmanager_profile() {
        let keyfile = "[connection]\nid=RoCE\ntype=ethernet\ninterface-name=enp194s0f0\nzone=trusted\n\n\
                       [ipv4]\nzone=not-this-section\n";
        assert_eq!(keyfile_zone(keyfile), Some(("enp194s0f0".into(), "trusted".into())));
        assert_eq!(keyfile_zone("[connection]\ninterface-name=eth0\nzone=\n"), None, "empty zone: firewalld decides");
        assert_eq!(keyfile_zone("[connection]\nzone=trusted\n"), None, "bound by MAC: interface unknown");
    }

    #[test]
    fn networkmanager_then_zone_files_then_default() {
        let facts = FirewalldFacts {
            default_zone: "public".into(),
            zone_files: [("a".into(), "trusted".into()), ("b".into(), "trusted".into())].into(),
            network_manager: [("b".into(), "internal".into())].into(),
            ..Default::default()
        };
        assert_eq!(facts.zone_of("a").zone, "trusted");
        assert!(facts.zone_of("a").source.ends_with("trusted.xml"));
        assert_eq!(facts.zone_of("b").zone, "internal");
        let c = facts.zone_of("c");
        assert_eq!((c.zone.as_str(), c.bound), ("public", false));
    }

    #[test]
    fn no_configuration_no_facts() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(&HostRoot::open(dir.path()).unwrap(), &mut Vec::new()), None);
        std::fs::create_dir_all(dir.path().join("etc/firewalld")).unwrap();
        let facts = read(&HostRoot::open(dir.path()).unwrap(), &mut Vec::new()).unwrap();
        assert_eq!(facts.default_zone, "public");
    }
}
