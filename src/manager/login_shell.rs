//! The invoking user's login shell. Toolbx refuses to create or enter a container when `SHELL` is
//! unset ("failed to get the current user's default shell"), which it is under cron, systemd units
//! and CI runners; the children we start get it from the password database instead.

use std::ffi::CStr;

/// The shell to hand to children: `$SHELL` when set, else the passwd entry's, else `/bin/sh`.
pub fn login_shell() -> String {
    match std::env::var("SHELL") {
        Ok(shell) if !shell.is_empty() => shell,
        _ => passwd_shell().unwrap_or_else(|| "/bin/sh".to_string()),
    }
}

/// `pw_shell` of the real user's passwd entry.
fn passwd_shell() -> Option<String> {
    // SAFETY: passwd is plain C data (integers and pointers); all zeroes is a valid value.
    let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    let mut buffer = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: every pointer refers to memory owned here and outliving the call; getpwuid_r writes
    // strings only inside `buffer`, whose length it is told.
    let status = unsafe { libc::getpwuid_r(libc::getuid(), &mut entry, buffer.as_mut_ptr(), buffer.len(), &mut found) };
    if status != 0 || found.is_null() || entry.pw_shell.is_null() {
        return None;
    }
    // SAFETY: on success pw_shell points at a NUL-terminated string inside `buffer`.
    let shell = unsafe { CStr::from_ptr(entry.pw_shell) }.to_string_lossy().into_owned();
    (!shell.is_empty()).then_some(shell)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_passwd_entry_names_an_absolute_shell() {
        // Every account this runs under (root in CI, a developer's own) has a passwd entry.
        let shell = passwd_shell().expect("the invoking user has a passwd entry");
        assert!(shell.starts_with('/'), "{shell}");
    }
}
