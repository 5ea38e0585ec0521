//! The correctness gate: a fixed, versioned prompt set ([`prompts`]) sent at temperature 0 with a
//! fixed seed, each answer kept token by token ([`answer`] says how each engine gives its
//! tokens), and held against a reference of the same model identity ([`diff`]): the first accepted
//! run for that model ([`references`]), or one node serving the model alone. A mismatch names the
//! prompt, the first token that differs, both texts around it and both images; answers that part
//! at a near-tie pass, and are counted.

pub mod answer;
pub mod diff;
pub mod prompts;
pub mod references;
pub mod run;

pub use answer::{Alternative, GateAnswer, GateRun, GateToken, TOP_LOGPROBS};
pub use diff::{GateVerdict, Mismatch, MismatchKind, Tie, DEFAULT_LOGPROB_TOLERANCE};
pub use prompts::{PromptSet, PROMPT_SET};
pub use references::ReferenceStore;
pub use run::{ask, judge, GateReport, GateTarget, Reference};
