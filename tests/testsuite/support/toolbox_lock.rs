//! Another refresh at work: a toolbox's lock held as a refresh holds it (the file under
//! `$XDG_RUNTIME_DIR/strix-toolbox`, locked, with the holder's pid in it).

use std::fs::File;
use std::io::Write;
use std::path::Path;

/// Hold toolbox `name`'s lock for the strix-toolbox that runs with `env`, until dropped.
pub fn hold_toolbox_lock(env: &[(String, String)], name: &str) -> File {
    let runtime_dir = env.iter().find(|(k, _)| k == "XDG_RUNTIME_DIR").map(|(_, v)| v).expect("XDG_RUNTIME_DIR");
    let dir = Path::new(runtime_dir).join("strix-toolbox");
    std::fs::create_dir_all(&dir).expect("mkdir the lock directory");
    let mut file = File::create(dir.join(format!("{name}.lock"))).expect("create the lock file");
    file.lock().expect("lock it");
    writeln!(file, "{}", std::process::id()).expect("write the pid");
    file
}
