//! Running a program inside the container and telling "it ran and said…" from "the image has no
//! such program" (which makes a check skipped, not failed).

use crate::container_engine::{ContainerEngine, ExecIo};

pub struct Probe<'a> {
    pub engine: &'a dyn ContainerEngine,
    pub container: &'a str,
    user: Option<&'a str>,
}

/// How a program run inside went.
pub enum Ran {
    /// It ran: exit code, stdout, stderr.
    Exited(i64, String, String),
    /// The image lacks it: why.
    Missing(String),
    /// The engine could not run it at all.
    Broken(String),
}

impl<'a> Probe<'a> {
    pub fn new(engine: &'a dyn ContainerEngine, container: &'a str, user: Option<&'a str>) -> Probe<'a> {
        Probe { engine, container, user }
    }

    pub async fn run(&self, argv: &[&str]) -> Ran {
        let command: Vec<String> = argv.iter().map(|a| a.to_string()).collect();
        match self.engine.exec(self.container, &command, &[], self.user, ExecIo::Capture).await {
            // 126/127: the runtime found no such executable (podman and docker both say so).
            Ok(outcome) if outcome.exit_code == 126 || outcome.exit_code == 127 => {
                Ran::Missing(format!("{} not in the image", argv[0]))
            }
            Ok(outcome) => Ran::Exited(
                outcome.exit_code,
                String::from_utf8_lossy(&outcome.stdout).into_owned(),
                String::from_utf8_lossy(&outcome.stderr).into_owned(),
            ),
            Err(error)
                if error.to_string().contains("executable file not found")
                    || error.to_string().contains("no such file") =>
            {
                Ran::Missing(format!("{} not in the image", argv[0]))
            }
            Err(error) => Ran::Broken(format!("cannot run {} inside {}: {error}", argv[0], self.container)),
        }
    }
}
