//! `list`.

use crate::cli::GlobalOptions;
use crate::error::{Error, Result};
use crate::ui::Ui;

pub async fn run(global: &GlobalOptions, ui: &Ui) -> Result<i32> {
    let _ = (global, ui);
    Err(Error::Failed("list: not implemented yet".into()))
}
