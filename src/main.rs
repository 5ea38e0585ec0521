//! Thin entry point: parse, run, map errors to exit codes (0 ok, 1 failure, 2 usage, 130 after
//! Ctrl-C, 143 after SIGTERM); with `--json`, a failure is also `{"error": {...}}` on stdout.

use clap::Parser;
use strix_toolbox::cli::{renamed_spelling, Cli};
use strix_toolbox::commands;
use strix_toolbox::output::Output;

fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Some(message) = renamed_spelling(&args, &|name| std::env::var(name).ok()) {
        let out = Output::for_terminal(args.iter().any(|a| a == "--json"), args.iter().any(|a| a == "--no-color"));
        let code = commands::usage_error(message, &out);
        std::process::exit(out.finish(code));
    }
    // clap exits 2 on usage errors and 0 for --help/--version.
    let cli = Cli::parse_from(args);
    let out = Output::for_terminal(cli.global.json, cli.global.no_color);
    let settings = commands::settings(&cli.global, out.reporter());
    let code = match commands::run(cli.command, &settings, &out) {
        Ok(code) => code,
        Err(error) => commands::failed(&error, &out),
    };
    // process::exit skips destructors: finish the progress and check the output first.
    std::process::exit(out.finish(code));
}
