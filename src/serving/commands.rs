//! The generic command lines a launch runs inside the toolboxes, as argv vectors: start a
//! process detached, signal it, ask what of a launch still runs. Each engine's own command lines
//! are in its module (`ray`, `vllm`, `llama`); `--dry-run` prints exactly those.

/// Starts `$2…` in the background with its output appended to the file `$1`, and prints its pid.
/// A constant script: the log path and the command follow it as positional parameters.
const DETACHED: &str = r#"log="$1"; shift; "$@" >>"$log" 2>&1 </dev/null & echo $!"#;

/// `command`, detached, its output in `log`: the exec returns at once with the pid.
pub fn detached(log: &str, command: &[String]) -> Vec<String> {
    let mut argv = words(&["sh", "-c", DETACHED, "sh", log]);
    argv.extend(command.iter().cloned());
    argv
}

/// `kill -SIGNAL PID`, the shell's builtin: a toolbox image need not have procps' `kill` (the
/// llama.cpp images have none), and a missing program would leave the process running.
pub fn kill(signal: &str, pid: u32) -> Vec<String> {
    let mut argv = words(&["sh", "-c", r#"kill -"$1" "$2""#, "sh", signal]);
    argv.push(pid.to_string());
    argv
}

/// Exits 0 while process `$1` runs. A toolbox's PID 1 may not reap (`sleep infinity` in a native
/// toolbox made before `--init`, Toolbx's init), and it may not have reaped yet what a detached command leaves, so an exited process can linger as a zombie that
/// `kill -0` still finds: its state in /proc says.
const PID_ALIVE: &str =
    r#"s=$(cat "/proc/$1/stat" 2>/dev/null) || exit 1; s=${s##*) }; case $s in Z*|X*) exit 1;; esac"#;

pub fn pid_alive(pid: u32) -> Vec<String> {
    let mut argv = words(&["sh", "-c", PID_ALIVE, "sh"]);
    argv.push(pid.to_string());
    argv
}

/// Prints what of a launch runs in the toolbox, one exec for all: each of `$2…` (pids) that runs,
/// then `ray` when a raylet does and `$1` is `ray` (zombies do not count, as above).
const LAUNCH_ALIVE: &str = r#"alive() { s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1; s=${s##*) }; case $s in Z*|X*) return 1;; esac; }
ray=$1; shift
for pid; do if alive "$pid"; then echo "$pid"; fi; done
if [ "$ray" = ray ]; then for f in /proc/[0-9]*/stat; do s=$(cat "$f" 2>/dev/null) || continue; case $s in *"(raylet) "[!ZX]*) echo ray; exit 0;; esac; done; fi"#;

pub fn launch_alive(pids: &[u32], ray: bool) -> Vec<String> {
    let mut argv = words(&["sh", "-c", LAUNCH_ALIVE, "sh", if ray { "ray" } else { "-" }]);
    argv.extend(pids.iter().map(u32::to_string));
    argv
}

/// Exits 0 while a process whose name is `$1` runs (zombies do not count, as above).
const PROCESS_ALIVE: &str = r#"for f in /proc/[0-9]*/stat; do s=$(cat "$f" 2>/dev/null) || continue; case $s in *"($1) "[!ZX]*) exit 0;; esac; done; exit 1"#;

pub fn process_alive(name: &str) -> Vec<String> {
    words(&["sh", "-c", PROCESS_ALIVE, "sh", name])
}

pub(crate) fn words(words: &[&str]) -> Vec<String> {
    words.iter().map(|word| word.to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exits_zero(argv: &[String]) -> bool {
        std::process::Command::new(&argv[0]).args(&argv[1..]).status().unwrap().success()
    }

    #[test]
    fn one_look_says_what_of_a_launch_runs() {
        let said = |argv: Vec<String>| {
            let output = std::process::Command::new(&argv[0]).args(&argv[1..]).output().unwrap();
            assert!(output.status.success());
            String::from_utf8(output.stdout).unwrap()
        };
        let me = std::process::id();
        assert_eq!(said(launch_alive(&[me, u32::MAX - 1], false)), format!("{me}\n"), "this test's own process runs");
        // What this machine runs decides the answer (another test may have Ray up meanwhile).
        let raylet = std::fs::read_dir("/proc").unwrap().flatten().any(|entry| {
            std::fs::read_to_string(entry.path().join("stat"))
                .is_ok_and(|stat| stat.split_once("(raylet) ").is_some_and(|(_, state)| !state.starts_with(['Z', 'X'])))
        });
        let ray = if raylet { "ray\n" } else { "" };
        assert_eq!(said(launch_alive(&[], true)), ray);
        assert_eq!(said(launch_alive(&[u32::MAX - 1], true)), ray);
        assert_eq!(said(launch_alive(&[], false)), "", "Ray is looked for only when asked");
    }

    #[test]
    fn kill_is_the_shells_own_and_needs_no_kill_program() {
        let mut sleeper = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let argv = kill("TERM", sleeper.id());
        // A PATH without procps' `kill`: the toolbox images without it.
        let empty = tempfile::tempdir().unwrap();
        let status = std::process::Command::new("/bin/sh").args(&argv[1..]).env("PATH", empty.path()).status().unwrap();
        assert!(status.success());
        assert_eq!(std::os::unix::process::ExitStatusExt::signal(&sleeper.wait().unwrap()), Some(15));
    }

    #[test]
    fn liveness_sees_running_processes_and_not_zombies() {
        assert!(exits_zero(&pid_alive(std::process::id())));
        assert!(!exits_zero(&pid_alive(u32::MAX - 1)));
        // A child that exited and was not reaped yet: a zombie.
        let mut zombie = std::process::Command::new("true").spawn().unwrap();
        let pid = zombie.id();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap().contains(") Z") {
            assert!(std::time::Instant::now() < deadline, "the child never exited");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(!exits_zero(&pid_alive(pid)), "a zombie is not alive");
        zombie.wait().unwrap();
        let mut sleeper = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        assert!(exits_zero(&process_alive("sleep")));
        sleeper.kill().unwrap();
        sleeper.wait().unwrap();
        assert!(!exits_zero(&process_alive("strix-no-such-process")));
    }

    #[test]
    fn detached_runs_the_command_in_the_background_and_prints_its_pid() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("out.log");
        let argv = detached(
            log.to_str().unwrap(),
            &words(&["sh", "-c", "echo \"$1 went\"; exit 3", "sh", "a 'quoted' $word"]),
        );
        let output = std::process::Command::new(&argv[0]).args(&argv[1..]).output().unwrap();
        assert!(output.status.success());
        let pid: u32 = String::from_utf8_lossy(&output.stdout).trim().parse().unwrap();
        assert!(pid > 1);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while std::fs::read_to_string(&log).unwrap_or_default().is_empty() {
            assert!(std::time::Instant::now() < deadline, "the detached command never wrote");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "a 'quoted' $word went\n");
    }
}
