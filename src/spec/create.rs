//! The spec as the engine takes it: its part of a create request. The spec knows the engine's
//! request type; the engine never knows the spec.

use super::ToolboxSpec;
use crate::container_engine::argv::create_flags;
use crate::container_engine::{CreateRequest, EngineKind};

impl ToolboxSpec {
    /// Add what the spec asks for (devices, groups, limits, security, environment) to `request`.
    pub fn add_to(&self, request: &mut CreateRequest) {
        request.devices.extend(self.devices.iter().map(|d| (d.host.clone(), d.container.clone())));
        request.group_add.extend(self.group_add.iter().cloned());
        request.annotations.extend(self.annotations.clone());
        request.ulimits.extend(self.ulimits.iter().cloned());
        request.security_opt.extend(self.security_opt.iter().cloned());
        request.env.extend(self.env.clone());
    }

    /// The create flags the spec alone gives (what `detect` and `refresh` report as `container_args`).
    pub fn engine_flags(&self, engine: EngineKind) -> Vec<String> {
        let mut request = CreateRequest::default();
        self.add_to(&mut request);
        create_flags(engine, &request)
    }
}
