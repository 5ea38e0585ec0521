//! The plan beside what the engine said, one line a node: what `launch` and `cluster status`
//! both show under a service.

use crate::output::Output;
use crate::reporter::Bytes;
use crate::serving::fit::Measured;

/// `  node2: planned weights 2.25 MiB, KV cache 1.50 MiB, 2048 tokens; llama.cpp said 2.25 MiB,
/// 1.50 MiB, 2048 tokens` for each node (`not said` where its log did not say).
pub(super) fn render_measured(engine: &str, measured: &[Measured], out: &Output) {
    let said = |figure: Option<u64>| figure.map_or("not said".to_string(), |bytes| Bytes(bytes).to_string());
    for node in measured {
        let planned = &node.planned;
        let context = node.said_context_tokens.map_or("not said".to_string(), |tokens| format!("{tokens} tokens"));
        out.line(&format!(
            "  {}: planned weights {}, KV cache {}, {} tokens; {engine} said {}, {}, {context}",
            planned.node,
            Bytes(planned.weights_bytes),
            Bytes(planned.kv_cache_bytes),
            planned.context_tokens,
            said(node.said_weights_bytes),
            said(node.said_kv_cache_bytes),
        ));
    }
}
