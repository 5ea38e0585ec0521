//! The plan beside what the engine said, one line a node: what `launch` and `cluster status`
//! both show under a service.

use crate::output::Output;
use crate::reporter::Bytes;
use crate::serving::fit::Measured;

/// `  node2: planned weights 2.25 MiB, KV cache 1.50 MiB, 2048 tokens; llama.cpp said 2.25 MiB,
/// 1.50 MiB, 2048 tokens` for each node (`?` for a figure its log did not say).
pub(super) fn render_measured(engine: &str, measured: &[Measured], out: &Output) {
    let said = |figure: Option<u64>| figure.map_or("?".to_string(), |bytes| Bytes(bytes).to_string());
    for node in measured {
        let planned = &node.planned;
        let figures = [node.said_weights_bytes, node.said_kv_cache_bytes, node.said_context_tokens];
        let engine_said = if figures.iter().all(Option::is_none) {
            format!("{engine}'s log does not say")
        } else {
            let context = node.said_context_tokens.map_or("?".to_string(), |tokens| format!("{tokens} tokens"));
            format!("{engine} said {}, {}, {context}", said(node.said_weights_bytes), said(node.said_kv_cache_bytes))
        };
        out.line(&format!(
            "  {}: planned weights {}, KV cache {}, {} tokens; {engine_said}",
            planned.node,
            Bytes(planned.weights_bytes),
            Bytes(planned.kv_cache_bytes),
            planned.context_tokens,
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serving::fit::Planned;

    #[test]
    fn each_node_sets_the_plan_beside_what_the_engine_said() {
        let (out, stdout, _) = crate::output::captured(false);
        let planned =
            Planned { node: "node2".into(), weights_bytes: 1_969_920, kv_cache_bytes: 1_310_720, context_tokens: 2048 };
        let said = Measured {
            planned: planned.clone(),
            said_weights_bytes: Some(1_971_323),
            said_kv_cache_bytes: Some(1_310_720),
            said_context_tokens: Some(2048),
        };
        let unsaid = Measured { planned: Planned { node: "node3".into(), ..planned }, ..Measured::default() };
        render_measured("llama.cpp", &[said, unsaid], &out);
        assert_eq!(
            stdout.text(),
            "  node2: planned weights 1.88 MiB, KV cache 1.25 MiB, 2048 tokens; llama.cpp said 1.88 MiB, 1.25 MiB, \
             2048 tokens\n  node3: planned weights 1.88 MiB, KV cache 1.25 MiB, 2048 tokens; llama.cpp's log does not \
             say\n"
        );
    }
}
