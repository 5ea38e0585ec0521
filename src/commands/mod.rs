//! One file per verb: each declares its own arguments (clap's derive, beside the code that reads
//! them, as cargo's `commands/*.rs` hold their own `cli()`), calls one operation (`crate::ops`) and
//! renders its report as text or `--json`. Returns the process exit code. `crate::cli` holds the
//! top of the command line and names these; nothing here names it back.

pub(crate) mod agent;
mod arg_values;
pub(crate) mod bench;
pub(crate) mod build;
mod canary;
pub(crate) mod cluster;
pub(crate) mod completions;
pub(crate) mod detect;
pub(crate) mod doctor;
pub(crate) mod enter;
#[cfg(test)]
mod json_doc;
pub(crate) mod launch;
pub(crate) mod list;
pub(crate) mod logs;
mod measured;
pub(crate) mod model;
pub(crate) mod plan;
pub(crate) mod rccl;
pub(crate) mod refresh;
pub(crate) mod rm;
pub(crate) mod rollback;
pub(crate) mod router;
mod secrets;
pub(crate) mod status;
pub(crate) mod stop;
pub(crate) mod verify;

use crate::error::Error;
use crate::output::Output;

/// A failure as the user sees it (an error object too under `--json`); its exit code.
pub fn failed(error: &Error, out: &Output) -> i32 {
    if out.json() {
        out.print_json(&error.json_object());
    }
    out.error(error);
    error.exit_code()
}

/// A usage error found before the command line was parsed; its exit code (2).
pub fn usage_error(message: String, out: &Output) -> i32 {
    failed(&Error::Usage(message), out)
}

/// A command line clap refused, as the `--json` error object every usage error is.
pub fn print_usage_error(message: &str, out: &Output) {
    out.print_json(&Error::Usage(message.to_string()).json_object());
}
