//! `rm`.

use crate::cli::{GlobalOptions, RmArgs};
use crate::error::{Error, Result};
use crate::ui::Ui;

pub async fn run(global: &GlobalOptions, args: &RmArgs, ui: &Ui) -> Result<i32> {
    let _ = (global, ui, args);
    Err(Error::Failed("rm: not implemented yet".into()))
}
