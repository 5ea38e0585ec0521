//! `verify [NAME]`: the toolbox proves from the inside that it works (see [`crate::verify`]).

use crate::container_engine::{ContainerEngine, ContainerInfo};
use crate::error::Result;
use crate::host::{HostFacts, HostRoot};
use crate::image::reference::validate_container_name;
use crate::labels;
use crate::ops::refresh::read_node;
use crate::serving::engine::EngineRef;
use crate::settings::Settings;
use crate::spec::{parse_env, SpecOptions, ToolboxSpec};
use crate::toolbox::running::find_toolbox;
use crate::verify::{verify_started, Expected, VerifyReport};

pub async fn verify(settings: &Settings, name: &str) -> Result<VerifyReport> {
    validate_container_name(name)?;
    let node = read_node(settings)?;
    let connection = settings.connect().await?;
    let engine = connection.engine();
    let container = find_toolbox(engine, name).await?;
    // A toolbox of a GPU image (every one but a CPU image's, by its device label) needs the GPU.
    if !labels::computes_on_cpu(&container.labels) {
        node.1.require_gpu(&node.0)?;
    }
    let expected = expectation(engine, &node, &container).await?;
    verify_started(engine, &container, &expected).await
}

/// What `container` should be on this node: the spec refresh would make for it.
pub async fn expectation(
    engine: &dyn ContainerEngine,
    (root, facts): &(HostRoot, HostFacts),
    container: &ContainerInfo,
) -> Result<Expected> {
    let info = engine.info().await?;
    let extra_env = parse_env(&labels::decode_user_env(&container.labels))?;
    let serving = EngineRef::of_label(container.labels.get(labels::ENGINE).map(String::as_str));
    let image_ref = container.labels.get(labels::IMAGE_REF).map_or("", String::as_str);
    let spec = ToolboxSpec::new(root, facts, &SpecOptions::new(&info, serving.needs(image_ref), extra_env));
    // A container carries its image's labels: the RCCL the image was built with, its device.
    Ok(Expected::new(facts, &spec, &container.labels, serving.name(), serving.profile().image_programs))
}
