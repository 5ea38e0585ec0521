//! Label keys: what a container or image records about how it was made.

/// Every key we own starts with this.
pub const PREFIX: &str = "io.github.strix-toolbox";
/// "true" on every container strix-toolbox manages.
pub const MANAGED: &str = "io.github.strix-toolbox.managed";
/// The logical toolbox name (the container's name may be temporary during a swap).
pub const TOOLBOX: &str = "io.github.strix-toolbox.toolbox";
/// sha256 of the container spec, so an unchanged spec is a no-op refresh.
pub const SPEC_HASH: &str = "io.github.strix-toolbox.spec-sha256";
/// The image reference asked for (repo:channel or --image).
pub const IMAGE_REF: &str = "io.github.strix-toolbox.image";
/// The image id the container was created from.
pub const IMAGE_ID: &str = "io.github.strix-toolbox.image-id";
/// The registry digest of that image, when it came from a registry.
pub const IMAGE_DIGEST: &str = "io.github.strix-toolbox.image-digest";
/// The date tag the image was pinned under (YYYYMMDD-HHMMSS).
pub const PIN: &str = "io.github.strix-toolbox.pin";
/// toolbox, distrobox or native.
pub const MANAGER: &str = "io.github.strix-toolbox.manager";

/// sha256 of the librccl.so.1 baked into an image.
pub const RCCL_SHA256: &str = "io.github.strix-toolbox.rccl.sha256";
/// Comma-separated gfx targets of that library.
pub const RCCL_GFX_TARGETS: &str = "io.github.strix-toolbox.rccl.gfx-targets";
/// Where that library came from.
pub const RCCL_SOURCE: &str = "io.github.strix-toolbox.rccl.source";

pub const OCI_CREATED: &str = "org.opencontainers.image.created";
pub const OCI_SOURCE: &str = "org.opencontainers.image.source";
pub const OCI_REVISION: &str = "org.opencontainers.image.revision";
