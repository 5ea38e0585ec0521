//! `rccl inspect FILE`.
use crate::cli::RcclInspectArgs;
use crate::error::{Error, Result};
use crate::ui::Ui;

pub fn inspect(args: &RcclInspectArgs, ui: &Ui) -> Result<i32> {
    let _ = (args, ui);
    Err(Error::Failed("rccl inspect: not implemented yet".into()))
}
