//! `refresh`.

use crate::cli::{GlobalOptions, RefreshArgs};
use crate::error::{Error, Result};
use crate::ui::Ui;

pub async fn run(global: &GlobalOptions, args: &RefreshArgs, ui: &Ui) -> Result<i32> {
    let _ = (global, ui, args);
    Err(Error::Failed("refresh: not implemented yet".into()))
}
