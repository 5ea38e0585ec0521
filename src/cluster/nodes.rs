//! Which nodes make the cluster: `--nodes a,b,c`, or a cluster file (TOML) listing them in order,
//! the first being the head. Nodes are ssh destinations (`host`, `user@host`, an alias from
//! `~/.ssh/config`): whatever `ssh` reaches.
//!
//! ```toml
//! # strix-toolbox cluster: the first node is the head.
//! nodes = ["strix1", "root@strix2"]
//! # ssh_config = "/home/me/.ssh/cluster_config"   # optional, like `ssh -F`
//! ```

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::node::ssh::validate_destination;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterFile {
    /// ssh destinations, head first.
    pub nodes: Vec<String>,
    /// An ssh config file used instead of ~/.ssh/config (`ssh -F`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh_config: Option<PathBuf>,
    /// Seconds an ssh master stays up after a command for the next to reuse (`--ssh-persist`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh_persist: Option<u64>,
    /// What `cluster refresh` proves a new image with (`--canary`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canary: Option<CanaryEntry>,
}

/// `[canary]` in the cluster file: `model = "…"`, and optionally `min_ratio = 0.9`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CanaryEntry {
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_ratio: Option<f64>,
}

impl ClusterFile {
    pub fn new(nodes: Vec<String>, ssh_config: Option<PathBuf>) -> Result<ClusterFile> {
        validate_nodes(&nodes)?;
        Ok(ClusterFile { nodes, ssh_config, ssh_persist: None, canary: None })
    }

    pub fn read(path: &Path) -> Result<ClusterFile> {
        let text = std::fs::read_to_string(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => Error::Usage(format!(
                "no cluster file at {}. Fix: `strix-toolbox cluster init --nodes NODE,NODE` writes it, or give \
                 --nodes",
                path.display()
            )),
            _ => Error::read(path, e),
        })?;
        let file: ClusterFile = toml::from_str(&text).map_err(|e| {
            Error::Usage(format!(
                "{} is not a valid cluster file: {}. Expected `nodes = [\"host1\", \"host2\"]`",
                path.display(),
                e.message()
            ))
        })?;
        validate_nodes(&file.nodes).map_err(|e| Error::Usage(format!("{}: {e}", path.display())))?;
        Ok(file)
    }

    /// Write the file (creating its directory), replacing any previous one atomically.
    pub fn write(&self, path: &Path) -> Result<()> {
        let failed = |e: std::io::Error| {
            Error::host(
                path.display().to_string(),
                format!("cannot write {}: {e}", path.display()),
                "check that its directory is writable, or give another with --cluster FILE",
            )
        };
        let text =
            toml::to_string(self).map_err(|e| Error::Internal(format!("cannot render the cluster file: {e}")))?;
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(failed)?;
        let mut temp = tempfile::NamedTempFile::new_in(dir).map_err(failed)?;
        std::io::Write::write_all(
            &mut temp,
            format!("# strix-toolbox cluster: the first node is the head.\n{text}").as_bytes(),
        )
        .map_err(failed)?;
        temp.persist(path).map_err(|e| failed(e.error))?;
        Ok(())
    }
}

/// `a,b,c` → the destinations, validated.
pub fn parse_node_list(list: &str) -> Result<Vec<String>> {
    let nodes: Vec<String> = list.split(',').map(str::trim).filter(|n| !n.is_empty()).map(str::to_string).collect();
    validate_nodes(&nodes)?;
    Ok(nodes)
}

fn validate_nodes(nodes: &[String]) -> Result<()> {
    if nodes.is_empty() {
        return Err(Error::Usage("the cluster has no nodes: name at least one ssh destination".into()));
    }
    for node in nodes {
        validate_destination(node)?;
    }
    if let Some(twice) = nodes.iter().enumerate().find_map(|(i, n)| nodes[..i].contains(n).then_some(n)) {
        return Err(Error::Usage(format!("node {twice:?} is listed twice")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_lists_keep_their_order_and_refuse_options() {
        assert_eq!(parse_node_list("strix1, root@strix2,,node3").unwrap(), ["strix1", "root@strix2", "node3"]);
        for bad in ["", "-oProxyCommand=touch /tmp/x", "a,a", "a b", "ok,ba\u{7}d"] {
            assert!(matches!(parse_node_list(bad), Err(Error::Usage(_))), "{bad:?} accepted");
        }
    }

    #[test]
    fn the_file_round_trips_and_bad_files_are_usage_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/cluster.toml");
        let file = ClusterFile::new(vec!["strix1".into(), "root@strix2".into()], Some("/etc/ssh_cfg".into())).unwrap();
        file.write(&path).unwrap();
        assert_eq!(ClusterFile::read(&path).unwrap(), file);

        for (text, why) in [
            ("nodes = []", "no nodes"),
            ("nodes = [\"-oProxyCommand=x\"]", "cannot start with '-'"),
            ("nodes = \"strix1\"", "not a valid cluster file"),
            ("nodes = [\"a\"]\nhead = \"a\"", "not a valid cluster file"),
        ] {
            std::fs::write(&path, text).unwrap();
            let error = ClusterFile::read(&path).unwrap_err();
            assert!(matches!(error, Error::Usage(_)) && error.to_string().contains(why), "{text}: {error}");
        }
        let missing = ClusterFile::read(&dir.path().join("none.toml")).unwrap_err().to_string();
        assert!(missing.contains("cluster init"), "{missing}");
    }
}
