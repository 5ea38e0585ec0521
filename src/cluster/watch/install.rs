//! `cluster watch --install` / `--uninstall`: the watch as a systemd user service on the machine
//! that drives the cluster. The unit ([`crate::watch::unit_text`]) is written to
//! `$XDG_CONFIG_HOME/systemd/user/` (where systemd looks for a user's own units:
//! systemd.unit(5), "User Unit Search Path"), then `systemctl --user daemon-reload` and `enable
//! --now`; `--uninstall` disables and stops it, removes the file and reloads. The file is written
//! before systemctl is asked, so a machine without a user systemd (a container, no lingering)
//! keeps it, and the error says how to start it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::dir::unwritable;
use crate::error::{Error, Result};
use crate::watch::{unit_name, unit_text, WatchUnit};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnitReport {
    /// `strix-toolbox-watch-NAME.service`.
    pub unit: String,
    /// The unit file.
    pub file: String,
    /// True: installed and started; false: stopped and removed.
    pub installed: bool,
    /// The systemctl commands run, in order.
    pub systemctl: Vec<Vec<String>>,
}

/// Where `name`'s unit file goes under `config_home`.
pub fn unit_path(config_home: &Path, name: &str) -> PathBuf {
    config_home.join("systemd").join("user").join(name)
}

/// Write the unit and start it.
pub async fn install(unit: &WatchUnit, config_home: &Path) -> Result<UnitReport> {
    let name = unit_name(&unit.service)?;
    let text = unit_text(unit)?;
    let path = unit_path(config_home, &name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| unwritable(parent, &e))?;
    }
    std::fs::write(&path, text).map_err(|e| unwritable(&path, &e))?;
    let commands = vec![argv(&["daemon-reload"]), argv(&["enable", "--now", &name])];
    for command in &commands {
        systemctl(command, &path).await?;
    }
    Ok(UnitReport { unit: name, file: path.display().to_string(), installed: true, systemctl: commands })
}

/// Stop the unit and remove it (a unit never installed is no failure).
pub async fn uninstall(service: &str, config_home: &Path) -> Result<UnitReport> {
    let name = unit_name(service)?;
    let path = unit_path(config_home, &name);
    let mut commands = Vec::new();
    if path.exists() {
        let disable = argv(&["disable", "--now", &name]);
        systemctl(&disable, &path).await?;
        commands.push(disable);
        std::fs::remove_file(&path).map_err(|e| unwritable(&path, &e))?;
        let reload = argv(&["daemon-reload"]);
        systemctl(&reload, &path).await?;
        commands.push(reload);
    }
    Ok(UnitReport { unit: name, file: path.display().to_string(), installed: false, systemctl: commands })
}

/// `systemctl --user ARGS` (the argv as the report shows it: without `systemctl --user`).
async fn systemctl(args: &[String], unit_file: &Path) -> Result<()> {
    let output = tokio::process::Command::new("systemctl")
        .arg("--user")
        .args(args)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(std::time::Duration::from_secs(60), output).await;
    let failed = |message: String| Error::Command {
        program: format!("systemctl --user {}", args.join(" ")),
        message,
        fix: Some(format!(
            "the unit file is {}; start it once this user has a systemd instance (`loginctl enable-linger`, then \
             `systemctl --user daemon-reload && systemctl --user enable --now {}`), or run `cluster watch` in the \
             foreground",
            unit_file.display(),
            unit_file.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default()
        )),
    };
    match output {
        Err(_) => Err(failed("no answer within 60s".into())),
        Ok(Err(error)) => Err(failed(error.to_string())),
        Ok(Ok(output)) if output.status.success() => Ok(()),
        Ok(Ok(output)) => Err(failed(format!(
            "{}: {}",
            output.status,
            crate::error::last_line(&String::from_utf8_lossy(&output.stderr)).unwrap_or("no message")
        ))),
    }
}

fn argv(words: &[&str]) -> Vec<String> {
    words.iter().map(|word| word.to_string()).collect()
}
