use std::process::Command;

use super::*;

fn unit(args: &[&str]) -> WatchUnit {
    WatchUnit {
        service: "qwen3".into(),
        // The test binary: absolute and executable, as `systemd-analyze verify` wants ExecStart's.
        program: std::env::current_exe().unwrap(),
        args: args.iter().map(|arg| arg.to_string()).collect(),
        environment: vec![("SSH_AUTH_SOCK".into(), "/run/user/1000/ssh agent %h $HOME".into())],
    }
}

/// ExecStart='s words as systemd.service(5) reads them back: blanks between words, double quotes
/// around one, C escapes inside, `%%` a percent sign and `$$` a dollar sign.
fn exec_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.next_if_eq(&' ').is_some() {}
        let Some(open) = chars.next() else { return words };
        assert_eq!(open, '"', "every word is quoted: {line}");
        let mut word = String::new();
        loop {
            match chars.next().expect("a closing quote") {
                '"' => break,
                '\\' => match chars.next().expect("an escape") {
                    'n' => word.push('\n'),
                    't' => word.push('\t'),
                    'r' => word.push('\r'),
                    'x' => {
                        let hex: String = chars.by_ref().take(2).collect();
                        word.push(char::from(u8::from_str_radix(&hex, 16).unwrap()));
                    }
                    other => word.push(other),
                },
                special @ ('%' | '$') => {
                    assert_eq!(chars.next(), Some(special), "systemd expands a lone {special}: {line}");
                    word.push(special);
                }
                c => word.push(c),
            }
        }
        words.push(word);
    }
}

const TRICKY: &[&str] = &[
    "cluster",
    "watch",
    "--service",
    "qwen3",
    "--on-give-up",
    "notify-send \"gave up\" $REASON; echo 100% done\\n",
    "--interval",
    "30s",
    "",
    "tab\there",
    "bell\x07",
    "50%0",
];

#[test]
fn the_command_line_is_the_argv_word_for_word() {
    let text = unit_text(&unit(TRICKY)).unwrap();
    let exec = text.lines().find_map(|line| line.strip_prefix("ExecStart=")).unwrap();
    let mut expected = vec![std::env::current_exe().unwrap().to_str().unwrap().to_string()];
    expected.extend(TRICKY.iter().map(|arg| arg.to_string()));
    assert_eq!(exec_words(exec), expected);
    assert!(exec.contains("100%% done") && exec.contains("$$REASON") && exec.contains("\\x07"), "{exec}");
    assert!(text.contains("\nRestart=on-failure\n") && text.contains("\nWantedBy=default.target\n"), "{text}");
    assert!(text.contains("\nEnvironment=\"SSH_AUTH_SOCK=/run/user/1000/ssh agent %%h $HOME\"\n"), "{text}");
    assert_eq!(unit_name("qwen3").unwrap(), "strix-toolbox-watch-qwen3.service");
}

#[test]
fn no_secret_goes_in() {
    for args in [&["cluster", "watch", "--api-key", "sk-1"][..], &["--hf-token=hf_x"], &["--registry-password", "p"]] {
        let error = unit_text(&unit(args)).unwrap_err();
        assert_eq!(error.kind(), crate::error::ErrorKind::Usage, "{args:?}");
        assert!(error.to_string().contains("would put a secret in the watch's systemd unit"), "{error}");
    }
    let mut with_token = unit(&["cluster", "watch"]);
    with_token.environment.push(("HF_TOKEN".into(), "hf_x".into()));
    assert!(unit_text(&with_token).unwrap_err().to_string().contains("the variable HF_TOKEN"));
    // A value is never judged by its looks, only names: an argument after a flag may say "key".
    unit_text(&unit(&["cluster", "watch", "--service", "key-value-store"])).unwrap();
}

#[test]
fn refuses_what_no_unit_can_hold() {
    assert!(unit_text(&WatchUnit { service: "a b".into(), ..unit(&[]) }).is_err());
    assert!(unit_text(&WatchUnit { service: "a/b".into(), ..unit(&[]) }).is_err());
    assert!(unit_text(&WatchUnit { program: "strix-toolbox".into(), ..unit(&[]) }).is_err());
    assert!(unit_text(&unit(&["nul\0"])).is_err());
    let mut bad_name = unit(&[]);
    bad_name.environment = vec![("1A".into(), "x".into())];
    assert!(unit_text(&bad_name).is_err());
}

/// `systemd-analyze verify` as the user manager would load the unit: exit 0 and not one warning
/// (it exits 0 even when it ignores a line it cannot parse).
fn verify(text: &str) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let runtime = dir.path().join("runtime");
    std::fs::create_dir(&runtime).unwrap();
    std::fs::set_permissions(&runtime, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let file = dir.path().join("strix-toolbox-watch-qwen3.service");
    std::fs::write(&file, text).unwrap();
    let output = Command::new("systemd-analyze")
        .args(["--user", "verify"])
        .arg(&file)
        .env("XDG_RUNTIME_DIR", &runtime)
        .env("HOME", dir.path())
        .output()
        .unwrap_or_else(|error| {
            panic!("systemd-analyze: {error}: install Debian's systemd package (scripts/test-deps.sh lists it)")
        });
    let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    (output.status.success() && said.trim().is_empty(), said)
}

#[test]
fn systemd_analyze_verify_takes_the_unit_without_a_warning() {
    let text = unit_text(&unit(TRICKY)).unwrap();
    let (clean, said) = verify(&text);
    assert!(clean, "systemd-analyze verify:\n{said}\n--- the unit ---\n{text}");
    // The same check catches a unit written without the quoting: a lone % starts a specifier.
    let careless = text.replace("50%%0", "50%0");
    let (clean, said) = verify(&careless);
    assert!(!clean && said.contains("specifier"), "{said}");
}
