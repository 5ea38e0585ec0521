//! The environment Ray and vLLM get on each node, on top of the toolbox's own NCCL/Gloo settings
//! (the spec's): what the working Strix Halo cluster scripts export on every node. Ray's actors
//! inherit the raylet's environment, so each node's values must be in its own `ray start`.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use crate::spec::Transport;

/// The variables for a node whose cluster-link address is `link_ip`, with the user's `-e`
/// overrides applied last.
pub fn serving_env(
    transport: &Transport,
    link_ip: Ipv4Addr,
    overrides: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = [
        // vLLM's placement group pins its first bundle to this address: it must be the
        // address Ray runs on (the link's), or the driver waits for a node that never comes.
        ("VLLM_HOST_IP", link_ip.to_string()),
        ("NCCL_NET_GDR_LEVEL", "0".to_string()),
        // ROCm selects devices itself; Ray must not narrow the visible devices per actor. Ray
        // 2.45 on (ray#51104; the image's 2.52) sets HIP_VISIBLE_DEVICES on each actor unless
        // told not to by this one; older Ray read the ROCR one, kept for them.
        ("RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES", "1".to_string()),
        ("RAY_EXPERIMENTAL_NOSET_ROCR_VISIBLE_DEVICES", "1".to_string()),
        // Unified memory looks "full" to Ray's monitor while weights load: it would kill workers.
        ("RAY_memory_monitor_refresh_ms", "0".to_string()),
    ]
    .into_iter()
    .map(|(key, value)| (key.to_string(), value))
    .collect();
    if matches!(transport, Transport::Roce { .. }) {
        env.insert("NCCL_IB_TIMEOUT".into(), "23".into());
        env.insert("NCCL_IB_RETRY_CNT".into(), "7".into());
    }
    env.extend(overrides.clone());
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roce() -> Transport {
        Transport::Roce { device: "rocep194s0f0".into(), port: 1, netdev: "enp194s0np0".into(), gid_index: 1 }
    }

    #[test]
    fn every_node_gets_its_own_address_and_the_cluster_settings() {
        let env = serving_env(&roce(), Ipv4Addr::new(192, 168, 100, 2), &BTreeMap::new());
        assert_eq!(env["VLLM_HOST_IP"], "192.168.100.2");
        for (key, value) in [
            ("NCCL_NET_GDR_LEVEL", "0"),
            ("NCCL_IB_TIMEOUT", "23"),
            ("NCCL_IB_RETRY_CNT", "7"),
            ("RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES", "1"),
            ("RAY_EXPERIMENTAL_NOSET_ROCR_VISIBLE_DEVICES", "1"),
            ("RAY_memory_monitor_refresh_ms", "0"),
        ] {
            assert_eq!(env[key], value, "{key}");
        }
    }

    #[test]
    fn infiniband_settings_only_on_roce_and_the_user_has_the_last_word() {
        let tb = Transport::ThunderboltTcp { netdev: "thunderbolt0".into() };
        let overrides = [("NCCL_NET_GDR_LEVEL".to_string(), "2".to_string())].into_iter().collect();
        let env = serving_env(&tb, Ipv4Addr::new(192, 168, 2, 1), &overrides);
        assert!(!env.contains_key("NCCL_IB_TIMEOUT") && !env.contains_key("NCCL_IB_RETRY_CNT"));
        assert_eq!(env["NCCL_NET_GDR_LEVEL"], "2");
    }
}
