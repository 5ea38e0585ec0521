//! A pseudo-terminal for testing interactive sessions: the child gets the pty as its controlling
//! terminal and stdin/stdout/stderr, and the test types into it as a user would.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What a terminal session showed, and how it ended.
pub struct Session {
    pub status: ExitStatus,
    pub screen: String,
}

/// Run `command` on a new pty; once it prints `ready` (its prompt), type `lines`; wait up to `limit`.
pub fn run_on_terminal(mut command: Command, ready: &str, lines: &[&str], limit: Duration) -> Session {
    let (mut master, slave) = open_pty();
    let slave_fd = slave.as_raw_fd();
    command.stdin(Stdio::from(slave.try_clone().unwrap()));
    command.stdout(Stdio::from(slave.try_clone().unwrap()));
    command.stderr(Stdio::from(slave));
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        command.pre_exec(move || {
            if libc::setsid() < 0 || libc::ioctl(slave_fd, libc::TIOCSCTTY, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command.spawn().expect("spawn on the pty");
    drop(command); // closes our copies of the slave, so reads see EIO when the child is done

    let screen = Arc::new(Mutex::new(Vec::new()));
    let reader = {
        let screen = Arc::clone(&screen);
        let mut master = master.try_clone().unwrap();
        std::thread::spawn(move || {
            let mut buffer = [0u8; 4096];
            while let Ok(n @ 1..) = master.read(&mut buffer) {
                screen.lock().unwrap().extend_from_slice(&buffer[..n]);
            }
        })
    };
    let deadline = Instant::now() + limit;
    let shown = |screen: &Arc<Mutex<Vec<u8>>>| String::from_utf8_lossy(&screen.lock().unwrap()).into_owned();
    while !shown(&screen).contains(ready) {
        assert!(Instant::now() < deadline, "no {ready:?} on the terminal within {limit:?}: {:?}", shown(&screen));
        std::thread::sleep(Duration::from_millis(20));
    }
    for line in lines {
        master.write_all(line.as_bytes()).unwrap();
        master.write_all(b"\r").unwrap();
    }
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the session did not end within {limit:?}: {:?}", shown(&screen));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // The reader ends at EIO once every holder of the slave is gone; a straggler must not hang us.
    let drained = Instant::now() + Duration::from_secs(2);
    while !reader.is_finished() && Instant::now() < drained {
        std::thread::sleep(Duration::from_millis(20));
    }
    let screen = shown(&screen);
    Session { status, screen }
}

/// `command` gives a root shell prompt ("# ") on the terminal that evaluates a typed line on a
/// tty and ends with the exit code typed last (`exit_code`).
pub fn assert_interactive_shell(command: Command, exit_code: i32, limit: Duration) {
    let exit = format!("exit {exit_code}");
    let session = run_on_terminal(command, "# ", &["[ -t 0 ] && echo on-a-tty-$((6*7))", &exit], limit);
    assert!(session.screen.contains("on-a-tty-42"), "the shell ran our line on a tty: {:?}", session.screen);
    assert_eq!(session.status.code(), Some(exit_code), "{:?}", session.screen);
}

fn open_pty() -> (File, OwnedFd) {
    let (mut master, mut slave) = (-1, -1);
    // SAFETY: openpty writes two descriptors into the given ints; the other arguments may be null.
    let rc =
        unsafe { libc::openpty(&mut master, &mut slave, std::ptr::null_mut(), std::ptr::null(), std::ptr::null()) };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just opened and are owned by nobody else.
    unsafe { (File::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) }
}
