//! `doctor`.
use crate::cli::GlobalOptions;
use crate::error::{Error, Result};
use crate::ui::Ui;

pub fn run(global: &GlobalOptions, ui: &Ui) -> Result<i32> {
    let _ = (global, ui);
    Err(Error::Failed("doctor: not implemented yet".into()))
}
