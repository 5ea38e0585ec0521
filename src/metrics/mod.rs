//! Metrics are data like bench results: every rank's engine `/metrics` scraped ([`scrape`]),
//! parsed ([`parse`]), relabelled with its `node` and `model` ([`relabel`]), the nodes' telemetry
//! ([`telemetry`]) and the watch's own families beside them, merged into one family per name
//! ([`merge`]) and rendered in Prometheus's text format ([`render`]) by a small read-only endpoint
//! ([`endpoint`]). The engines' own names (`vllm:…`, `llamacpp:…`) are kept as their dashboards
//! know them; ours are `strix_…`.

pub mod endpoint;
pub mod family;
pub mod merge;
pub mod parse;
pub mod relabel;
pub mod render;
pub mod scrape;
pub mod telemetry;

pub use family::{sum_of, Family, MetricType, Sample};
pub use merge::{merge, Merged};
pub use parse::{parse, ExpositionError, Limits, ENGINE_LIMITS};
pub use relabel::relabel;
pub use render::{render, CONTENT_TYPE};
pub use scrape::{scrape, ScrapeError};
pub use telemetry::{read_node_telemetry, telemetry_families, NodeReading, NodeTelemetry};
