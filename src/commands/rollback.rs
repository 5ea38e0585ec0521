//! `rollback`.

use crate::cli::{GlobalOptions, RollbackArgs};
use crate::error::{Error, Result};
use crate::ui::Ui;

pub async fn run(global: &GlobalOptions, args: &RollbackArgs, ui: &Ui) -> Result<i32> {
    let _ = (global, ui, args);
    Err(Error::Failed("rollback: not implemented yet".into()))
}
