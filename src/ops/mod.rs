//! The operations (cargo's `ops`): resolved [`Settings`](crate::settings::Settings) in, a public
//! typed report out (`Serialize + Deserialize`). Commands parse, call one of these and render;
//! a node's `--json` output is exactly the report the cluster reads back.

pub mod abi;
pub mod build;
pub mod detect;
pub mod doctor;
pub mod enter;
pub mod exec;
pub mod home;
pub mod phase;
pub mod rccl;
pub mod refresh;
pub mod remove;
pub mod resolve;
pub mod rollback;
pub mod status;
pub mod verify;
