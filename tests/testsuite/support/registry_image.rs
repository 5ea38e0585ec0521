//! A stand-in for `registry:2` (the CNCF distribution registry) that needs no Docker Hub: Debian's
//! `docker-registry` (distribution 2.8, linked against glibc alone) with its loader and libc,
//! published to the loopback registry for a head's engine to pull and run. Its entrypoint is
//! `/bin/registry`, so the command strix-toolbox gives (`serve CONFIG`) runs as in `registry:2`,
//! whose entrypoint runs `registry serve CONFIG` too.

use super::oci_image::{layer, publish, Entry, ImageSpec, Published};
use super::registry::Registry;

/// Publish the stand-in as `REGISTRY/strix-test/registry:2.8`.
pub fn publish_registry_image(registry: &Registry) -> Published {
    let read = |path: &str| std::fs::read(path).unwrap_or_else(|e| panic!("{path} (docker-registry, libc6): {e}"));
    let root = layer(&[
        Entry::Dir("bin", 0o755),
        Entry::Dir("lib", 0o755),
        Entry::Dir("lib/x86_64-linux-gnu", 0o755),
        Entry::Dir("lib64", 0o755),
        Entry::Dir("etc", 0o755),
        Entry::Dir("etc/docker", 0o755),
        Entry::Dir("etc/docker/registry", 0o755),
        Entry::Dir("var", 0o755),
        Entry::Dir("var/lib", 0o755),
        Entry::Dir("var/lib/registry", 0o755),
        Entry::Dir("tmp", 0o1777),
        Entry::File("bin/registry".into(), read("/usr/bin/docker-registry"), 0o755),
        Entry::File("lib/x86_64-linux-gnu/libc.so.6".into(), read("/lib/x86_64-linux-gnu/libc.so.6"), 0o755),
        Entry::File("lib64/ld-linux-x86-64.so.2".into(), read("/lib64/ld-linux-x86-64.so.2"), 0o755),
        Entry::File(
            "etc/docker/registry/config.yml".into(),
            b"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: /var/lib/registry\nhttp:\n  addr: :5000\n"
                .to_vec(),
            0o644,
        ),
    ]);
    publish(
        registry,
        &ImageSpec {
            name: "strix-test/registry:2.8".into(),
            created: "2023-05-13T00:00:00Z".into(),
            layers: vec![root],
            entrypoint: Some(vec!["/bin/registry".into()]),
            cmd: vec!["serve".into(), "/etc/docker/registry/config.yml".into()],
            index: false,
        },
    )
}
