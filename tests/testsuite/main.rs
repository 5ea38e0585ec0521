//! The integration tests: one binary (cargo's `tests/testsuite` model), one module per area, and
//! one support tree they share. One binary links once and its tests share the two cores' worth of
//! test threads; so nothing may rely on per-process state (see `support`).
//!
//! Run one area with `cargo test --test testsuite cluster_ssh::`, one test by its name.

mod support;

mod bench;
mod bench_launch;
mod bench_plan;
mod bench_vllm;
mod broken_pipe;
mod build;
mod build_cli;
mod canary;
mod cluster;
mod cluster_on_demand;
mod cluster_persist;
mod cluster_ssh;
mod cluster_wiring;
mod detect;
mod docker;
mod doctor;
mod enter;
mod examples;
mod interrupt;
mod launch;
mod layers;
mod lint;
mod llama_engine;
mod llama_hub;
mod llama_launch;
mod metrics;
mod model;
mod on_demand;
mod patches;
mod plan;
mod plan_real_vllm;
mod rccl_abi;
mod rccl_inspect;
mod rccl_log;
mod readme;
mod refresh_lock;
mod refresh_podman;
mod refresh_rccl;
mod registry_auth;
mod rootless;
mod router;
mod shared_home;
mod spread;
mod temporary_service;
mod toolbox_manager;
mod top;
mod uplink;
mod usage;
mod verify;
mod vllm_cluster;
mod vllm_launch;
mod watch;
mod watch_vllm;
