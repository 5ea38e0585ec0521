//! Thin entry point: parse, run, map errors to exit codes (0 ok, 1 failure, 2 usage, 130 after
//! Ctrl-C, 143 after SIGTERM); with `--json`, a failure is also `{"error": {...}}` on stdout.

use clap::Parser;
use strix_toolbox::cli::{renamed_spelling, Cli};
use strix_toolbox::output::Output;
use strix_toolbox::{cli, commands};

fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Some(message) = renamed_spelling(&args, &|name| std::env::var(name).ok()) {
        let out = Output::for_terminal(args.iter().any(|a| a == "--json"), args.iter().any(|a| a == "--no-color"));
        let code = commands::usage_error(message, &out);
        std::process::exit(out.finish(code));
    }
    let cli = Cli::try_parse_from(args).unwrap_or_else(|error| usage(error));
    let out = Output::for_terminal(cli.global.json, cli.global.no_color);
    let settings = cli.global.settings(out.reporter());
    let code = match cli::run(cli.command, &settings, &out) {
        Ok(code) => code,
        Err(error) => commands::failed(&error, &out),
    };
    // process::exit skips destructors: finish the progress and check the output first.
    std::process::exit(out.finish(code));
}

/// clap's verdict on the command line: help and the version (exit 0), or a usage error (exit 2),
/// which with `--json` is also the error object on stdout, as every other usage error is.
fn usage(error: clap::Error) -> ! {
    let json = std::env::args().take_while(|arg| arg != "--").any(|arg| arg == "--json");
    if json && error.use_stderr() {
        let text = error.to_string();
        let said = text.lines().find_map(|line| line.strip_prefix("error: ")).unwrap_or("invalid command line");
        commands::print_usage_error(said, &Output::for_terminal(true, false));
    }
    error.exit()
}
