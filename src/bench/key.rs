//! What decides a figure, so results are only ever held against results measured the same way:
//! the image (its digest), the engine, the model's identity, how it is spread (tensor- and
//! pipeline-parallel sizes, nodes), the link between the nodes, the lengths and how the prompts
//! are sent (text or token ids: a text is tokenized by the server too). Concurrency is
//! decided per level inside a result; the number of requests only steadies a figure, so it is kept
//! but is no part of the key.

use serde::{Deserialize, Serialize};

use super::prompt::PromptForm;

pub use crate::model::identity::ModelIdentity;
pub use crate::serving::engine::EngineRef;

/// The link tensors cross between nodes: what decides a multi-node figure most after the image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LinkTransport {
    /// One node: nothing crosses a link.
    Local,
    Roce,
    ThunderboltTcp,
    EthernetTcp,
}

impl LinkTransport {
    pub fn label(self) -> &'static str {
        match self {
            LinkTransport::Local => "one node",
            LinkTransport::Roce => "RoCE",
            LinkTransport::ThunderboltTcp => "Thunderbolt TCP",
            LinkTransport::EthernetTcp => "Ethernet TCP",
        }
    }
}

/// Everything a figure depends on besides the load's concurrency.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct BenchKey {
    /// The serving image (`repo@sha256:…`, else its id).
    pub image: String,
    pub engine: EngineRef,
    pub model: ModelIdentity,
    pub tensor_parallel: u32,
    /// 1 in results whose launch split nothing by layers, and in results kept without it.
    #[serde(default = "one")]
    pub pipeline_parallel: u32,
    pub nodes: u32,
    pub transport: LinkTransport,
    pub input_len: u32,
    pub output_len: u32,
    /// How the prompts were sent (results kept before prompts had a form: token ids).
    #[serde(default)]
    pub prompts: PromptForm,
}

fn one() -> u32 {
    1
}

impl BenchKey {
    /// The same setup on another image: how a new image is held against the old one.
    pub fn on_image(&self, image: &str) -> BenchKey {
        BenchKey { image: image.to_string(), ..self.clone() }
    }

    /// The image's digest, short (`0123456789ab`), whether it is named `repo@sha256:…` or by id.
    pub fn short_image(&self) -> &str {
        let digest = self.image.rsplit_once('@').map_or(self.image.as_str(), |(_, digest)| digest);
        crate::image::short_digest(digest)
    }

    /// "TP2 PP1 on 2 nodes over RoCE".
    pub fn layout(&self) -> String {
        let nodes = if self.nodes == 1 { "1 node".to_string() } else { format!("{} nodes", self.nodes) };
        let over = if self.transport == LinkTransport::Local {
            String::new()
        } else {
            format!(" over {}", self.transport.label())
        };
        format!("TP{} PP{} on {nodes}{over}", self.tensor_parallel, self.pipeline_parallel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_layout_reads_as_people_say_it() {
        let key = BenchKey {
            image: "sha256:aa".into(),
            engine: crate::serving::vllm::VLLM,
            model: ModelIdentity::Hub { repo: "m/m".into(), commit: "c".into() },
            tensor_parallel: 2,
            pipeline_parallel: 1,
            nodes: 2,
            transport: LinkTransport::Roce,
            input_len: 128,
            output_len: 128,
            prompts: PromptForm::Text,
        };
        assert_eq!(key.layout(), "TP2 PP1 on 2 nodes over RoCE");
        let layers = BenchKey { tensor_parallel: 1, pipeline_parallel: 3, nodes: 3, ..key.clone() };
        assert_eq!(layers.layout(), "TP1 PP3 on 3 nodes over RoCE");
        let mut older = serde_json::to_value(&key).unwrap();
        older.as_object_mut().unwrap().remove("pipeline_parallel");
        assert_eq!(serde_json::from_value::<BenchKey>(older).unwrap(), key, "a result kept without PP reads as PP 1");
        assert_eq!(key.on_image("sha256:bb").image, "sha256:bb");
        assert_eq!(key.on_image("docker.io/x/y@sha256:0123456789abcdef").short_image(), "0123456789ab");
    }
}
