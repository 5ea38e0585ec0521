//! What the operator asks of a plan: a layout (`--tp`/`--pp`), a context (`--max-model-len`, or
//! the engine's own flag after `--`), the cache's dtype, and what the engine reads from its flags
//! and its environment (`-e`) that changes its memory. A layout asked for is taken when it fits
//! and refused, naming the rules it breaks, when it does not: the plan never puts its own choice
//! in its place.

use serde::{Deserialize, Serialize};

use super::{Chosen, Layout, LayoutOutcome, NodeMemory, Refusal};
use crate::reporter::Bytes;

/// What the operator asked of the plan; None: the engine's rules decide.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FitAsk {
    pub tp: Option<u32>,
    pub pp: Option<u32>,
    /// The longest request, in tokens (vLLM's `--max-model-len`, llama.cpp's `-c`).
    pub max_model_len: Option<u64>,
    /// vLLM's `--kv-cache-dtype` names, or llama.cpp's cache types.
    pub kv_cache_dtype: Option<String>,
    /// vLLM's `--max-num-batched-tokens` (what a sliding layer keeps beyond its window).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_num_batched_tokens: Option<u64>,
    /// vLLM's `VLLM_PP_LAYER_PARTITION`: each pipeline stage's layers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pp_layer_partition: Option<Vec<u32>>,
    /// vLLM's `VLLM_MLA_DISABLE`: latent attention served as plain attention.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mla_disabled: bool,
}

impl FitAsk {
    /// This ask, with what `fallback` asks wherever this one says nothing (the plan's own flags
    /// first, then the engine's flags after `--`).
    pub fn or(self, fallback: FitAsk) -> FitAsk {
        FitAsk {
            tp: self.tp.or(fallback.tp),
            pp: self.pp.or(fallback.pp),
            max_model_len: self.max_model_len.or(fallback.max_model_len),
            kv_cache_dtype: self.kv_cache_dtype.or(fallback.kv_cache_dtype),
            max_num_batched_tokens: self.max_num_batched_tokens.or(fallback.max_num_batched_tokens),
            pp_layer_partition: self.pp_layer_partition.or(fallback.pp_layer_partition),
            mla_disabled: self.mla_disabled || fallback.mla_disabled,
        }
    }
}

/// The layout TP `tp` × PP `pp` (no expert parallelism) as the chosen one when it fits; else the
/// refusal that names the rules it breaks, or what it lacks in memory, and the layouts that fit.
pub fn choose_asked(layouts: &[Layout], nodes: &[NodeMemory], tp: u32, pp: u32) -> Result<Chosen, Refusal> {
    let fitting: Vec<String> = layouts.iter().filter(|l| l.fits().is_some()).map(Layout::label).collect();
    let fix = match fitting.as_slice() {
        [] => "no layout of these nodes serves the model: add nodes or take a quantized variant".to_string(),
        some => format!("ask for a layout the model allows ({}), or leave out --tp/--pp", some.join(", ")),
    };
    let has = nodes.iter().map(|n| n.usable_bytes).min().unwrap_or(0);
    let found = layouts.iter().enumerate().find(|(_, l)| l.tp == tp && l.pp == pp && !l.expert_parallel);
    let Some((index, layout)) = found else {
        return Err(Refusal {
            message: format!("TP {tp} × PP {pp} is not a layout of the {} node(s): one rank a node", nodes.len()),
            fix,
            needs_bytes: 0,
            has_bytes: has,
            asked_breaks: Vec::new(),
        });
    };
    match &layout.outcome {
        LayoutOutcome::Fits(_) => Ok(Chosen { layout: index, why: "as asked (--tp/--pp)".to_string() }),
        LayoutOutcome::Breaks { rules, needs_bytes } => {
            let said: Vec<&str> = rules.iter().map(|broken| broken.message.as_str()).collect();
            let needs = needs_bytes.map_or(String::new(), |needs| {
                format!(" (it needs {} on its fullest node, which has {} usable)", Bytes(needs), Bytes(has))
            });
            Err(Refusal {
                message: format!("{}, as asked, cannot serve this model: {}{needs}", layout.label(), said.join("; ")),
                fix,
                needs_bytes: needs_bytes.unwrap_or(0),
                has_bytes: has,
                asked_breaks: rules.clone(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Broken, LayoutFigures, Rule};
    use super::*;

    fn layout(tp: u32, pp: u32, outcome: LayoutOutcome) -> Layout {
        Layout { tp, pp, dp: 1, expert_parallel: false, outcome }
    }

    fn fits() -> LayoutOutcome {
        LayoutOutcome::Fits(LayoutFigures {
            nodes: Vec::new(),
            context_tokens: 4096,
            limited_by: String::new(),
            cache: None,
        })
    }

    #[test]
    fn a_layout_asked_is_taken_or_refused_naming_its_rules() {
        let heads = Broken { rule: Rule::AttentionHeads, message: "its 64 attention heads are not divisible".into() };
        let layouts = vec![
            layout(1, 3, fits()),
            layout(3, 1, LayoutOutcome::Breaks { rules: vec![heads.clone()], needs_bytes: None }),
        ];
        let nodes = vec![NodeMemory::new("node1", 100 << 30, 0, 4 << 30); 3];
        let chosen = choose_asked(&layouts, &nodes, 1, 3).expect("PP 3 fits");
        assert_eq!((chosen.layout, chosen.why.as_str()), (0, "as asked (--tp/--pp)"));
        let refused = choose_asked(&layouts, &nodes, 3, 1).expect_err("TP 3 breaks the heads");
        assert!(refused.asked_against_the_model() && refused.asked_breaks == [heads], "{refused:?}");
        assert!(refused.message.contains("TP 3 × PP 1, as asked") && refused.message.contains("64 attention heads"));
        assert!(refused.fix.contains("TP 1 × PP 3"), "{}", refused.fix);
        let absent = choose_asked(&layouts, &nodes, 2, 2).expect_err("not a layout of 3 nodes");
        assert!(absent.message.contains("not a layout") && !absent.asked_against_the_model(), "{absent:?}");
    }

    #[test]
    fn a_layout_short_of_memory_is_refused_with_the_numbers() {
        let memory = Broken { rule: Rule::Memory, message: "node1: its weights need 200.00 GiB".into() };
        let layouts = vec![layout(2, 1, LayoutOutcome::Breaks { rules: vec![memory], needs_bytes: Some(210 << 30) })];
        let nodes = vec![NodeMemory::new("node1", 100 << 30, 0, 4 << 30); 2];
        let refused = choose_asked(&layouts, &nodes, 2, 1).expect_err("too big");
        assert!(!refused.asked_against_the_model());
        assert!(
            refused.message.contains("needs 210.00 GiB") && refused.message.contains("96.00 GiB usable"),
            "{refused:?}"
        );
        assert_eq!((refused.needs_bytes, refused.has_bytes), (210 << 30, 96 << 30));
    }

    #[test]
    fn the_plans_own_flags_come_before_the_engines() {
        let plan = FitAsk { max_model_len: Some(8192), ..FitAsk::default() };
        let engine = FitAsk { max_model_len: Some(2048), kv_cache_dtype: Some("fp8".into()), ..FitAsk::default() };
        let both = plan.or(engine);
        assert_eq!((both.max_model_len, both.kv_cache_dtype.as_deref()), (Some(8192), Some("fp8")));
    }
}
