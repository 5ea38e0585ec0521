//! `build`.

use crate::cli::{GlobalOptions, BuildArgs};
use crate::error::{Error, Result};
use crate::ui::Ui;

pub async fn run(global: &GlobalOptions, args: &BuildArgs, ui: &Ui) -> Result<i32> {
    let _ = (global, ui, args);
    Err(Error::Failed("build: not implemented yet".into()))
}
