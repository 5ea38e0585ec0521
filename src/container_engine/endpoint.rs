//! Where the engine's API listens: `CONTAINER_HOST` / `DOCKER_HOST`, else the usual sockets.
//! Pure functions of the environment and the filesystem, so they are unit-tested directly.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Podman's sockets, most specific first: `CONTAINER_HOST`, the user's, root's.
pub fn podman_sockets(env: &dyn Fn(&str) -> Option<String>) -> Result<Vec<PathBuf>> {
    if let Some(host) = env("CONTAINER_HOST").filter(|h| !h.is_empty()) {
        return Ok(vec![unix_path("CONTAINER_HOST", &host)?]);
    }
    let mut sockets = Vec::new();
    if let Some(runtime_dir) = env("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        sockets.push(Path::new(&runtime_dir).join("podman/podman.sock"));
    }
    sockets.push(PathBuf::from("/run/podman/podman.sock"));
    Ok(sockets)
}

/// Docker's socket: `DOCKER_HOST`, else /var/run/docker.sock.
pub fn docker_socket(env: &dyn Fn(&str) -> Option<String>) -> Result<PathBuf> {
    match env("DOCKER_HOST").filter(|h| !h.is_empty()) {
        Some(host) => unix_path("DOCKER_HOST", &host),
        None => Ok(PathBuf::from("/var/run/docker.sock")),
    }
}

/// `unix:///path` → `/path`. Other schemes (tcp, ssh) are not supported: say so.
fn unix_path(variable: &str, value: &str) -> Result<PathBuf> {
    match value.strip_prefix("unix://") {
        Some(path) if path.starts_with('/') => Ok(PathBuf::from(path)),
        _ => Err(Error::Usage(format!(
            "{variable}={value:?} is not supported: strix-toolbox talks to the engine on this node over \
             a unix socket (unix:///path/to/socket)"
        ))),
    }
}

/// True when something accepts connections on the socket (no request is sent).
pub fn answers(socket: &Path) -> bool {
    std::os::unix::net::UnixStream::connect(socket).is_ok()
}

/// The pid of the process listening on `socket`, as the kernel tells a peer (SO_PEERCRED: the
/// listener's credentials when it called listen(2); systemd's for a socket it activates). None
/// when it cannot be had, or the listener is in another pid namespace (the kernel says 0).
pub fn listener_pid(socket: &Path) -> Option<u32> {
    use std::os::fd::AsRawFd;
    let stream = std::os::unix::net::UnixStream::connect(socket).ok()?;
    let mut credentials = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut length = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: a connected socket, and a ucred buffer of the length given.
    let answered = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            std::ptr::addr_of_mut!(credentials).cast(),
            &mut length,
        )
    } == 0;
    u32::try_from(credentials.pid).ok().filter(|&pid| answered && pid > 0)
}

/// The process environment, as the functions above take it.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
    }

    #[test]
    fn container_host_wins() {
        let env = env_of(&[("CONTAINER_HOST", "unix:///tmp/p.sock"), ("XDG_RUNTIME_DIR", "/run/user/1000")]);
        assert_eq!(podman_sockets(&env).unwrap(), [PathBuf::from("/tmp/p.sock")]);
    }

    #[test]
    fn usual_podman_sockets() {
        let env = env_of(&[("XDG_RUNTIME_DIR", "/run/user/1000")]);
        assert_eq!(
            podman_sockets(&env).unwrap(),
            [PathBuf::from("/run/user/1000/podman/podman.sock"), PathBuf::from("/run/podman/podman.sock")]
        );
        assert_eq!(podman_sockets(&env_of(&[])).unwrap(), [PathBuf::from("/run/podman/podman.sock")]);
    }

    #[test]
    fn docker_host_or_default() {
        assert_eq!(docker_socket(&env_of(&[("DOCKER_HOST", "unix:///d.sock")])).unwrap(), PathBuf::from("/d.sock"));
        assert_eq!(docker_socket(&env_of(&[])).unwrap(), PathBuf::from("/var/run/docker.sock"));
    }

    #[test]
    fn tcp_is_a_clear_usage_error() {
        let error = docker_socket(&env_of(&[("DOCKER_HOST", "tcp://1.2.3.4:2375")])).unwrap_err();
        assert!(matches!(error, Error::Usage(_)));
        assert!(error.to_string().contains("DOCKER_HOST"));
    }
}
