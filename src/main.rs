//! Thin entry point: parse, run, map errors to exit codes (0 ok, 1 failure, 2 usage, 130 after
//! Ctrl-C, 143 after SIGTERM); with `--json`, a failure is also `{"error": {...}}` on stdout.

use clap::Parser;
use strix_toolbox::cli::Cli;
use strix_toolbox::commands;
use strix_toolbox::output::Style;

fn main() {
    // clap exits 2 on usage errors and 0 for --help/--version.
    let cli = Cli::parse();
    let settings = commands::settings(&cli.global);
    let code = match commands::run(cli.command, &settings) {
        Ok(code) => code,
        Err(error) => {
            if settings.ui.json {
                settings.ui.print_json(&error.json_object());
            }
            eprintln!("{} {error}", settings.ui.paint("error:", Style::Fail));
            error.exit_code()
        }
    };
    // process::exit skips destructors: flush what commands printed first.
    let _ = std::io::Write::flush(&mut std::io::stdout());
    std::process::exit(code);
}
