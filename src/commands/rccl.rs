//! `rccl inspect FILE`: report an artifact's targets, sha256 and size, and reject it unless it
//! carries gfx1151 code objects.
use crate::cli::RcclInspectArgs;
use crate::error::Result;
use crate::rccl;
use crate::settings::Settings;
use crate::ui::Style;

pub fn inspect(args: &RcclInspectArgs, settings: &Settings) -> Result<i32> {
    let ui = &settings.ui;
    let report = rccl::inspect_artifact(&args.file)?;
    if ui.json {
        ui.print_json(&report);
    } else {
        print!("{}", report.render_text());
    }
    match report.ensure_gfx1151() {
        Ok(()) => Ok(0),
        Err(rejection) => {
            // The report is already printed; say why on stderr and exit 1.
            eprintln!("{} {rejection}", ui.paint("error:", Style::Fail));
            Ok(crate::error::EXIT_FAILURE)
        }
    }
}
