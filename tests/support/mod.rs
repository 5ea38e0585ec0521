//! Shared by the test binaries: fake host trees and running the built binary.
//! (`tests/common/` holds the real-engine harness.)
#![allow(dead_code)]

pub mod cli;
pub mod host_tree;
pub mod netns;
pub mod terminal;
pub mod toolbox_image;
