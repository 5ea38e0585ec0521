//! IPv4 addresses per interface, from two files instead of a netlink socket, so a fake host tree
//! can hold them: `/proc/net/fib_trie` lists the node's local addresses (`/32 host LOCAL`) and
//! `/proc/net/route` names the interface of each subnet. An address belongs to the interface whose
//! most specific route covers it, with that route's prefix.
//!
//! Limits: an address without a subnet route (a /32, or `noprefixroute`) is not attributed; two
//! interfaces in one subnet get the address of the first route. Both files describe the network
//! namespace of the process reading them, as /sys/class/net does.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use super::HostRoot;

/// Interface → its addresses as `192.168.2.1/24`; `None` when the kernel's tables were unreadable.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ipv4Addresses(Option<BTreeMap<String, Vec<String>>>);

impl Ipv4Addresses {
    pub fn read(root: &HostRoot, warnings: &mut Vec<String>) -> Ipv4Addresses {
        let read = |path: &str| root.read(path).ok().flatten();
        let (Some(route), Some(fib_trie)) = (read("/proc/net/route"), read("/proc/net/fib_trie")) else {
            return Ipv4Addresses(None);
        };
        let routes = parse_routes(&route, warnings);
        let mut by_interface: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for address in local_addresses(&fib_trie) {
            let best = routes.iter().filter(|r| r.prefix > 0 && r.covers(address)).max_by_key(|r| r.prefix);
            if let Some(route) = best {
                let entry = by_interface.entry(route.interface.clone()).or_default();
                let text = format!("{address}/{}", route.prefix);
                if !entry.contains(&text) {
                    entry.push(text);
                }
            }
        }
        Ipv4Addresses(Some(by_interface))
    }

    /// The addresses of `interface` (empty: none); `None` when they could not be read.
    pub fn of(&self, interface: &str) -> Option<Vec<String>> {
        self.0.as_ref().map(|table| table.get(interface).cloned().unwrap_or_default())
    }
}

struct Route {
    interface: String,
    destination: u32,
    prefix: u32,
}

impl Route {
    fn covers(&self, address: Ipv4Addr) -> bool {
        let mask = u32::MAX.checked_shl(32 - self.prefix).unwrap_or(0);
        u32::from(address) & mask == self.destination & mask
    }
}

/// `Iface Destination Gateway Flags RefCnt Use Metric Mask ...`, addresses as the kernel's
/// network-order words printed in hex (so `0002A8C0` is 192.168.2.0 on a little-endian node).
fn parse_routes(text: &str, warnings: &mut Vec<String>) -> Vec<Route> {
    let mut routes = Vec::new();
    for line in text.lines().skip(1).filter(|l| !l.trim().is_empty()) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let parsed =
            (fields.len() >= 8).then(|| Some((word_to_address(fields[1])?, word_to_address(fields[7])?))).flatten();
        let Some((destination, mask)) = parsed else {
            warnings.push(format!("/proc/net/route: cannot read the line {line:?}"));
            continue;
        };
        let prefix = u32::from(mask).count_ones();
        routes.push(Route { interface: fields[0].to_string(), destination: u32::from(destination), prefix });
    }
    routes
}

fn word_to_address(hex: &str) -> Option<Ipv4Addr> {
    u32::from_str_radix(hex, 16).ok().map(|word| Ipv4Addr::from(word.to_ne_bytes()))
}

/// The addresses fib_trie marks `/32 host LOCAL`: the node's own (each appears in both the Main
/// and the Local table; duplicates are dropped, loopback is skipped).
fn local_addresses(text: &str) -> Vec<Ipv4Addr> {
    let mut found = Vec::new();
    let mut leaf = None;
    for line in text.lines().map(str::trim) {
        if let Some(address) = line.strip_prefix("|-- ") {
            leaf = address.trim().parse::<Ipv4Addr>().ok();
        } else if line.starts_with("/32 host LOCAL") {
            if let Some(address) = leaf.filter(|a| !a.is_loopback() && !found.contains(a)) {
                found.push(address);
            }
        }
    }
    found
}

// The recorded words are what a little-endian node (x86_64) prints.
#[cfg(all(test, target_endian = "little"))]
mod tests {
    use super::*;

    const ROUTE: &str = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
        eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n\
        eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n\
        thunderbolt0\t0002A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n";

    const FIB_TRIE: &str = "Main:\n  +-- 0.0.0.0/0 3 0 5\n     |-- 0.0.0.0\n        /0 universe UNICAST\n\
        \x20    +-- 127.0.0.0/8 2 0 2\n           |-- 127.0.0.1\n              /32 host LOCAL\n\
        \x20          |-- 192.0.2.2\n              /32 host LOCAL\n\
        \x20          |-- 192.0.2.255\n              /32 link BROADCAST\n\
        \x20          |-- 192.168.2.1\n              /32 host LOCAL\n\
        Local:\n           |-- 192.168.2.1\n              /32 host LOCAL\n";

    fn table(route: &str, fib_trie: &str) -> Ipv4Addresses {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("proc/net")).unwrap();
        std::fs::write(dir.path().join("proc/net/route"), route).unwrap();
        std::fs::write(dir.path().join("proc/net/fib_trie"), fib_trie).unwrap();
        Ipv4Addresses::read(&HostRoot::open(dir.path()).unwrap(), &mut Vec::new())
    }

    #[test]
    fn attributes_local_addresses_to_the_interface_of_their_subnet() {
        let addresses = table(ROUTE, FIB_TRIE);
        assert_eq!(addresses.of("thunderbolt0").unwrap(), ["192.168.2.1/24"]);
        assert_eq!(addresses.of("eth0").unwrap(), ["192.0.2.2/24"]);
        assert_eq!(addresses.of("enp194s0f0").unwrap(), Vec::<String>::new(), "no address is not unknown");
    }

    #[test]
    fn unreadable_tables_are_unknown_and_bad_lines_are_warnings() {
        let dir = tempfile::tempdir().unwrap();
        let root = HostRoot::open(dir.path()).unwrap();
        assert_eq!(Ipv4Addresses::read(&root, &mut Vec::new()).of("eth0"), None);

        let mut warnings = Vec::new();
        let routes = parse_routes("Iface\tDestination\neth0 zz\n", &mut warnings);
        assert!(routes.is_empty());
        assert!(warnings[0].contains("/proc/net/route"), "{warnings:?}");
    }

    #[test]
    fn reads_kernel_words_in_network_order() {
        assert_eq!(word_to_address("0002A8C0"), Some(Ipv4Addr::new(192, 168, 2, 0)));
        assert_eq!(word_to_address("00FFFFFF"), Some(Ipv4Addr::new(255, 255, 255, 0)));
        assert_eq!(word_to_address("nothex"), None);
    }
}
