//! Recipes: the layout a model served fastest in while answering right, found by `cluster plan
//! MODEL --try` ([`try_layouts`]) and kept on this machine ([`book`]), so that `cluster launch
//! MODEL` serves it that way while the toolbox's image and the model are the ones it was found
//! on. A layout the operator names (`--tp`, `--pp`, `--on`) wins over the recipe.

pub mod book;
pub mod try_layouts;

use serde::{Deserialize, Serialize};

use crate::model::identity::ModelIdentity;
use crate::serving::engine::EngineRef;

/// How a model served best, and on what.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recipe {
    /// The model as the operator named it (the recipe's key, with the engine).
    pub model: String,
    pub engine: EngineRef,
    /// The nodes it served on, its head first.
    pub on: Vec<String>,
    /// The split asked of the engine (None: the engine's plan chose it alone).
    pub tp: Option<usize>,
    pub pp: Option<usize>,
    /// The layout as the bench keys it (`TP1 PP2 on 2 nodes over Thunderbolt`).
    pub layout: String,
    /// The engine's arguments it served with: the operator's, then the plan's flags.
    pub args: Vec<String>,
    /// The toolbox's image it was found on (`repo@sha256:…`, else its id).
    pub image: String,
    /// The model it was found with (its Hub commit, or its GGUF's hash).
    pub identity: ModelIdentity,
    /// Output tokens/s at the short bench's concurrency, and the result that says so.
    pub output_throughput: f64,
    pub result: String,
    /// When it was kept (RFC 3339).
    pub kept: String,
}

impl Recipe {
    /// Why the recipe does not hold for `image` and `identity` (None: it holds); an identity not
    /// known yet (a dry run does not hash the model) is not held against it.
    pub fn stale(&self, image: Option<&str>, identity: Option<&ModelIdentity>) -> Option<String> {
        if image != Some(self.image.as_str()) {
            return Some(format!(
                "the recipe for {} was found on image {}, the toolbox runs {}",
                self.model,
                self.image,
                image.unwrap_or("none")
            ));
        }
        match identity {
            Some(identity) if *identity != self.identity => Some(format!(
                "the recipe for {} was found with {}, the model is now {identity}",
                self.model, self.identity
            )),
            _ => None,
        }
    }

    /// What the launch says when it serves by the recipe.
    pub fn used(&self) -> String {
        format!(
            "the recipe from `cluster plan --try` ({}, {:.1} output tokens/s, kept {}): on {}",
            self.layout,
            self.output_throughput,
            self.kept,
            self.on.join(", ")
        )
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn recipe() -> Recipe {
        Recipe {
            model: "/models/tiny.gguf".into(),
            engine: crate::serving::llama::LLAMA_CPP,
            on: vec!["node1".into()],
            tp: None,
            pp: None,
            layout: "TP1 PP1 on 1 node".into(),
            args: vec!["-c".into(), "4096".into()],
            image: "llama@sha256:aaaa".into(),
            identity: ModelIdentity::Gguf { name: "tiny.gguf".into(), sha256: "1234".into() },
            output_throughput: 120.5,
            result: "9a41d7c3".into(),
            kept: "2026-11-26T12:00:00Z".into(),
        }
    }

    #[test]
    fn a_recipe_holds_for_its_image_and_model_only() {
        let recipe = recipe();
        let same = recipe.identity.clone();
        assert_eq!(recipe.stale(Some("llama@sha256:aaaa"), Some(&same)), None);
        assert_eq!(recipe.stale(Some("llama@sha256:aaaa"), None), None, "a dry run does not hash the model");
        let other_image = recipe.stale(Some("llama@sha256:bbbb"), Some(&same)).unwrap();
        assert!(other_image.contains("sha256:aaaa") && other_image.contains("sha256:bbbb"), "{other_image}");
        assert!(recipe.stale(None, Some(&same)).is_some(), "no toolbox image: no recipe");
        let other = ModelIdentity::Gguf { name: "tiny.gguf".into(), sha256: "5678".into() };
        assert!(recipe.stale(Some("llama@sha256:aaaa"), Some(&other)).unwrap().contains("5678"));
    }
}
