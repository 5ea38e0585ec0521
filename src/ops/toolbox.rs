//! Finding a toolbox and who made it: shared by enter, rm, rollback and status.

use crate::engine::{ContainerInfo, Engine};
use crate::error::{Error, Result};

/// The toolbox `enter`, `rm`, `rollback` and `verify` act on when no name is given.
pub const DEFAULT_TOOLBOX: &str = "vllm";

/// The container named `name`, or an error that says how to make it.
pub async fn find_toolbox(engine: &dyn Engine, name: &str) -> Result<ContainerInfo> {
    engine.container_inspect(name).await?.ok_or_else(|| {
        Error::toolbox(
            name,
            format!("no toolbox named {name} in {} ({})", engine.kind().program(), engine.endpoint()),
            "`strix-toolbox refresh` creates it; `strix-toolbox list` shows what exists",
        )
    })
}
