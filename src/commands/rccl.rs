//! `rccl inspect FILE [--against IMAGE]`: report an artifact's targets, sha256, size and dynamic
//! view, and reject it unless it carries gfx1151 code objects (and, against an image, would load there).
use crate::cli::RcclInspectArgs;
use crate::error::Result;
use crate::output::Style;
use crate::settings::Settings;

pub async fn inspect(args: &RcclInspectArgs, settings: &Settings) -> Result<i32> {
    let ui = &settings.ui;
    let report = crate::ops::rccl::inspect(settings, &args.file, args.against.as_deref()).await?;
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
