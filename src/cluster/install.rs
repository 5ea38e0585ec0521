//! `cluster install`: copy this strix-toolbox to `~/.local/bin` on every node that lacks it or runs
//! another version; the copy is checked by its sha256 before it replaces anything.

use futures_util::future::join_all;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{close_all, connect_all, in_cluster_order, ClusterSettings};
use crate::error::{Error, Result};
use crate::node::remote::{argv, RemoteNode, VERSION};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InstallAction {
    Installed,
    UpToDate,
    Failed,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeInstall {
    pub node: String,
    pub action: InstallAction,
    /// Where the node's strix-toolbox is now.
    pub path: Option<String>,
    /// The version it had before (None: none).
    pub previous_version: Option<String>,
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstallReport {
    pub version: String,
    /// sha256 of the binary copied.
    pub sha256: String,
    pub nodes: Vec<NodeInstall>,
}

impl InstallReport {
    pub fn exit_code(&self) -> i32 {
        i32::from(self.nodes.iter().any(|n| n.action == InstallAction::Failed))
    }
}

pub async fn cluster_install(settings: &ClusterSettings) -> Result<InstallReport> {
    let exe = std::env::current_exe().map_err(|e| {
        Error::host("/proc/self/exe", format!("cannot tell where this strix-toolbox is: {e}"), "run it by its path")
    })?;
    let binary = std::fs::read(&exe).map_err(|e| Error::read(&exe, e))?;
    let sha256 = format!("{:x}", Sha256::digest(&binary));
    let needs = glibc_needed(&binary);

    let (connected, unreachable) = connect_all(settings).await;
    let mut nodes: Vec<NodeInstall> =
        join_all(connected.iter().map(|remote| install_on(remote, &binary, &sha256, needs))).await;
    nodes.extend(unreachable.into_iter().map(|(node, error)| NodeInstall {
        node,
        action: InstallAction::Failed,
        path: None,
        previous_version: None,
        error: Some(error.to_string()),
    }));
    in_cluster_order(settings, &mut nodes, |n| &n.node);
    close_all(connected).await;
    Ok(InstallReport { version: VERSION.to_string(), sha256, nodes })
}

async fn install_on(remote: &RemoteNode, binary: &[u8], sha256: &str, needs: Option<GlibcVersion>) -> NodeInstall {
    let mut report = NodeInstall {
        node: remote.name.clone(),
        action: InstallAction::UpToDate,
        path: remote.program().map(str::to_string),
        previous_version: remote.version().map(str::to_string),
        error: None,
    };
    if remote.require_ours().is_ok() {
        return report;
    }
    let copied = match runs_on(remote, needs).await {
        Ok(()) => copy_binary(remote, binary, sha256).await,
        Err(error) => Err(error),
    };
    match copied {
        Ok(path) => {
            report.action = InstallAction::Installed;
            report.path = Some(path);
        }
        Err(error) => {
            report.action = InstallAction::Failed;
            report.error = Some(error.to_string());
        }
    }
    report
}

/// Write under a temporary name, check its sha256 and that it runs, then rename it into place.
async fn copy_binary(remote: &RemoteNode, binary: &[u8], sha256: &str) -> Result<String> {
    let Some(home) = remote.home().await? else {
        return Err(node_error(remote, "it has no HOME to install into".into(), "set HOME for its ssh sessions"));
    };
    let path = format!("{}/.local/bin/strix-toolbox", home.trim_end_matches('/'));
    let temp = format!("{path}.strix-new");
    let dir = path.rsplit_once('/').map_or(".", |(dir, _)| dir).to_string();
    let step = |what: &str, output: crate::node::ssh::RemoteOutput| {
        if output.status == Some(0) {
            Ok(output)
        } else {
            Err(node_error(
                remote,
                format!("{what} failed: {}", String::from_utf8_lossy(&output.stderr).trim()),
                "check the node's disk space and its home directory's permissions, then rerun `strix-toolbox cluster install`",
            ))
        }
    };
    step("mkdir", remote.run(&argv(&["mkdir", "-p", &dir]), None).await?)?;
    let of = format!("of={temp}");
    step("copying the binary", remote.run(&argv(&["dd", &of, "bs=1M", "status=none"]), Some(binary.to_vec())).await?)?;
    let remove_temp = argv(&["rm", "-f", &temp]);
    let cleanup = || remote.run(&remove_temp, None);
    let sum = step("sha256sum", remote.run(&argv(&["sha256sum", &temp]), None).await?)?;
    let copied = String::from_utf8_lossy(&sum.stdout).split_whitespace().next().unwrap_or_default().to_string();
    if copied != sha256 {
        let _ = cleanup().await;
        return Err(node_error(
            remote,
            format!("the copy's sha256 is {copied}, not {sha256}; nothing was replaced"),
            "check the node's disk space and rerun `strix-toolbox cluster install`",
        ));
    }
    step("chmod", remote.run(&argv(&["chmod", "0755", &temp]), None).await?)?;
    let version = remote.run(&[temp.clone(), "--version".into()], None).await?;
    if version.status != Some(0) {
        let _ = cleanup().await;
        return Err(node_error(
            remote,
            format!(
                "the copied strix-toolbox does not run there ({}); nothing was replaced",
                String::from_utf8_lossy(&version.stderr).trim()
            ),
            "install the release's static binary, or build it for the node's architecture and C library",
        ));
    }
    step("rename", remote.run(&argv(&["mv", "-f", &temp, &path]), None).await?)?;
    Ok(path)
}

fn node_error(remote: &RemoteNode, message: String, fix: &str) -> Error {
    Error::Node {
        node: remote.name.clone(),
        message: format!("node {}: {message}", remote.name),
        fix: Some(fix.into()),
    }
}

/// A glibc version: `2.36`, or a symbol version's `2.2.5`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct GlibcVersion([u32; 3]);

impl GlibcVersion {
    /// `2.36` → 2.36.0; anything else → None.
    fn parse(text: &str) -> Option<GlibcVersion> {
        let mut parts = [0u32; 3];
        let mut count = 0;
        for (slot, part) in parts.iter_mut().zip(text.trim().split('.')) {
            *slot = part.parse().ok()?;
            count += 1;
        }
        (count >= 2 && text.trim().split('.').count() <= 3).then_some(GlibcVersion(parts))
    }
}

impl std::fmt::Display for GlibcVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let [major, minor, patch] = self.0;
        if patch == 0 {
            write!(f, "{major}.{minor}")
        } else {
            write!(f, "{major}.{minor}.{patch}")
        }
    }
}

/// The newest `GLIBC_x.y` symbol version the binary needs (None: it needs no glibc, like the
/// release's static build).
fn glibc_needed(binary: &[u8]) -> Option<GlibcVersion> {
    let info = crate::rccl::dynamic::parse_dynamic(binary).ok()?;
    info.version_needs.iter().filter_map(|name| GlibcVersion::parse(name.strip_prefix("GLIBC_")?)).max()
}

/// Refuse a node whose C library is older than the binary needs: the copy could not start there.
async fn runs_on(remote: &RemoteNode, needs: Option<GlibcVersion>) -> Result<()> {
    let Some(needs) = needs else { return Ok(()) };
    let output = remote.run(&argv(&["getconf", "GNU_LIBC_VERSION"]), None).await?;
    let said = String::from_utf8_lossy(&output.stdout);
    let has = said.trim().strip_prefix("glibc ").and_then(GlibcVersion::parse);
    let problem = match has {
        Some(has) if has >= needs => return Ok(()),
        Some(has) => format!("this strix-toolbox needs glibc {needs}, the node has {has}"),
        None => format!(
            "this strix-toolbox needs glibc {needs}, and the node has no glibc (`getconf` says {:?})",
            said.trim()
        ),
    };
    Err(node_error(
        remote,
        format!("{problem}; nothing was copied"),
        &format!(
            "run `cluster install` from the release's static binary (strix-toolbox-v{VERSION}-x86_64-unknown-linux-musl \
             needs no C library), or build one with `cargo build --release --target x86_64-unknown-linux-musl`"
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glibc_versions_compare_as_numbers() {
        let v = |text| GlibcVersion::parse(text).unwrap();
        assert!(v("2.36") > v("2.9"));
        assert!(v("2.2.5") < v("2.3"));
        assert_eq!(v("2.34").to_string(), "2.34");
        assert_eq!(v("2.2.5").to_string(), "2.2.5");
        for bad in ["", "2", "two.3", "2.3.4.5"] {
            assert_eq!(GlibcVersion::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn this_test_binary_needs_a_glibc_at_most_the_one_it_runs_on() {
        let binary = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let needs = glibc_needed(&binary).expect("a dynamically linked test binary needs glibc");
        let here = std::process::Command::new("getconf").arg("GNU_LIBC_VERSION").output().unwrap();
        let here = String::from_utf8_lossy(&here.stdout);
        let has = GlibcVersion::parse(here.trim().strip_prefix("glibc ").unwrap()).unwrap();
        assert!(needs <= has, "needs {needs}, has {has}");
        assert!(needs >= GlibcVersion::parse("2.2.5").unwrap());
    }
}
