//! `enter`.

use crate::cli::{GlobalOptions, EnterArgs};
use crate::error::{Error, Result};
use crate::ui::Ui;

pub async fn run(global: &GlobalOptions, args: &EnterArgs, ui: &Ui) -> Result<i32> {
    let _ = (global, ui, args);
    Err(Error::Failed("enter: not implemented yet".into()))
}
