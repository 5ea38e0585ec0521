//! `cluster watch --install`: the systemd user unit that runs the watch on the machine that drives
//! the cluster, as a pure function of the resolved arguments. Its command line is an argv, each
//! word quoted as systemd.service(5) unquotes it ("Command lines": C escapes inside double quotes,
//! `%` specifiers written `%%`, `$` variables `$$`), so no argument is split, expanded or read as a
//! specifier. A failed watch is started again (`Restart=on-failure`), itself within a budget; a
//! stop (SIGINT/SIGTERM's 130/143) is no failure, nor worth a restart a usage error (2). No secret
//! goes in: the watch reads its keys where the launch left them, so a flag or variable whose name
//! says secret is refused.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::secret::names_a_secret;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchUnit {
    /// The service watched: the unit's name and description say it.
    pub service: String,
    /// The strix-toolbox binary, absolute.
    pub program: PathBuf,
    /// Its arguments as resolved (`cluster watch …`, without `--install`).
    pub args: Vec<String>,
    /// What the watch needs of the installing session's environment (where ssh's agent listens,
    /// its ssh config): names and values, none of them a secret.
    pub environment: Vec<(String, String)>,
}

/// The unit's file name: `strix-toolbox-watch-SERVICE.service`.
pub fn unit_name(service: &str) -> Result<String> {
    check_service(service)?;
    Ok(format!("strix-toolbox-watch-{service}.service"))
}

pub fn unit_text(unit: &WatchUnit) -> Result<String> {
    check_service(&unit.service)?;
    if !unit.program.is_absolute() {
        return Err(Error::Internal(format!(
            "the watch's unit needs the program's absolute path, not {}",
            unit.program.display()
        )));
    }
    for arg in &unit.args {
        if arg.contains('\0') {
            return Err(Error::Usage(format!("the argument {arg:?} holds a NUL byte, which no command line can")));
        }
        let flag = arg.strip_prefix("--").map(|flag| flag.split('=').next().unwrap_or_default());
        if flag.is_some_and(names_a_secret) {
            return Err(secret_refused(&format!("the argument {arg:?}")));
        }
    }
    for (name, _) in &unit.environment {
        let valid = name
            .chars()
            .enumerate()
            .all(|(at, c)| c == '_' || c.is_ascii_alphabetic() || (at > 0 && c.is_ascii_digit()));
        if name.is_empty() || !valid {
            return Err(Error::Usage(format!("{name:?} is not an environment variable's name")));
        }
        // The agent's socket is a path, whatever its name says.
        if names_a_secret(name) && name != "SSH_AUTH_SOCK" {
            return Err(secret_refused(&format!("the variable {name}")));
        }
    }
    let mut words = vec![quote_word(&path_text(&unit.program)?)];
    words.extend(unit.args.iter().map(|arg| quote_word(arg)));
    let environment: String = unit
        .environment
        .iter()
        .map(|(name, value)| format!("Environment={}\n", quote(&format!("{name}={value}"), false)))
        .collect();
    Ok(format!(
        "# Written by `strix-toolbox cluster watch --install`; `cluster watch --uninstall` removes it.\n\
         [Unit]\n\
         Description=strix-toolbox cluster watch: {service}\n\
         # The watch's own restarts have a budget too: 5 in 10 minutes, then systemd stops trying.\n\
         StartLimitIntervalSec=600\n\
         StartLimitBurst=5\n\
         \n\
         [Service]\n\
         Type=exec\n\
         ExecStart={exec}\n\
         {environment}\
         Restart=on-failure\n\
         RestartSec=30\n\
         # Ctrl-C's and SIGTERM's exit codes are a stop; a usage error is not worth a restart.\n\
         SuccessExitStatus=130 143\n\
         RestartPreventExitStatus=2\n\
         \n\
         [Install]\n\
         WantedBy=default.target\n",
        service = unit.service.replace('%', "%%"),
        exec = words.join(" "),
    ))
}

/// A service's name as a unit name may carry it.
fn check_service(service: &str) -> Result<()> {
    let fits = |c: char| c.is_ascii_alphanumeric() || "-_.".contains(c);
    if service.is_empty() || service.len() > 200 || !service.chars().all(fits) {
        return Err(Error::Usage(format!(
            "service {service:?}: a watched service's name is letters, digits, '-', '_' and '.' (it names the systemd unit)"
        )));
    }
    Ok(())
}

fn secret_refused(what: &str) -> Error {
    Error::Usage(format!(
        "{what} would put a secret in the watch's systemd unit, which any process of the user can read. Fix: leave it \
         out: the watch reads the service's keys where the launch keeps them"
    ))
}

fn path_text(path: &Path) -> Result<String> {
    path.to_str().map(str::to_string).ok_or_else(|| {
        Error::Usage(format!("the program's path {} is not UTF-8, which a unit file cannot hold", path.display()))
    })
}

/// One word of ExecStart=: quoted, `$` doubled so no variable is expanded.
fn quote_word(word: &str) -> String {
    quote(word, true)
}

/// `text` in double quotes with C escapes and `%` doubled; `$` doubled too where systemd expands
/// variables (ExecStart=, not Environment=).
fn quote(text: &str, dollars: bool) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for c in text.chars() {
        match c {
            '\\' => quoted.push_str("\\\\"),
            '"' => quoted.push_str("\\\""),
            '\n' => quoted.push_str("\\n"),
            '\t' => quoted.push_str("\\t"),
            '\r' => quoted.push_str("\\r"),
            '%' => quoted.push_str("%%"),
            '$' if dollars => quoted.push_str("$$"),
            c if c.is_ascii_control() => quoted.push_str(&format!("\\x{:02x}", c as u32)),
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

#[cfg(test)]
mod tests;
