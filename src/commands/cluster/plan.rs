//! `cluster plan MODEL`: the plan on every node, the shape read on the head (rendered as `plan`
//! renders); `--try` launches each feasible layout and keeps the fastest that answers right as
//! the model's recipe (`cluster::recipe`); `--recipes` lists the recipes kept.

use std::time::Duration;

use crate::bench::store::BenchStore;
use crate::cluster::fit::fit_model;
use crate::cluster::launch::LaunchRequest;
use crate::cluster::recipe::book::RecipeBook;
use crate::cluster::recipe::try_layouts::{candidates, try_layouts, TryReport};
use crate::cluster::recipe::Recipe;
use crate::cluster::{with_our_nodes, ClusterSettings};
use crate::commands::plan::PlanArgs;
use crate::commands::secrets::api_key;
use crate::error::{Error, Result, EXIT_FAILURE};
use crate::output::{Output, Render, Style};
use crate::serving::engine_args::EngineArgs;
use crate::serving::service_name::ServiceName;
use crate::settings::Settings;
use crate::spec::parse_env;

pub(super) async fn run(cluster: &ClusterSettings, plan: &PlanArgs, settings: &Settings, out: &Output) -> Result<i32> {
    if plan.recipes {
        out.report(&RecipeBook::open(&settings.paths)?.list()?);
        return Ok(0);
    }
    if !plan.try_layouts {
        let args = PlanArgs { try_layouts: false, recipes: false, ..plan.clone() };
        return with_our_nodes(cluster, "nothing was planned", async |nodes| {
            crate::commands::plan::run(&args, nodes, out).await
        })
        .await;
    }
    let store = BenchStore::open(&settings.paths)?;
    let book = RecipeBook::open(&settings.paths)?;
    with_our_nodes(cluster, "nothing was tried", async |nodes| {
        let fit = crate::commands::plan::request(plan)?;
        let whole = fit_model(nodes, &fit).await?.fit.filter(|whole| whole.chosen.is_some()).ok_or_else(|| {
            Error::Usage(format!(
                "{}: no layout serves it on these nodes, nothing to try (`strix-toolbox cluster plan {}` says why)",
                fit.model, fit.model
            ))
        })?;
        let head_alone = fit_model(&nodes[..1], &fit).await.ok().and_then(|report| report.fit);
        let candidates = candidates(nodes, &whole.layouts, head_alone.is_some_and(|alone| alone.chosen.is_some()));
        let extra = EngineArgs::new(plan.extra.clone());
        let service = ServiceName::parse(&fit.engine.served_name(&fit.model, &extra))?;
        let launch = LaunchRequest {
            engine: fit.engine,
            toolbox: fit.toolbox.clone(),
            service,
            on: Vec::new(),
            model: fit.model.clone(),
            source: fit.source.clone(),
            backend: None,
            tp: None,
            pp: None,
            host: None,
            port: plan.port,
            timeout: Duration::from_secs(plan.timeout),
            replace: false,
            dry_run: false,
            extra,
            env: parse_env(&plan.env)?,
            hf_token: fit.hf_token.clone(),
            api_key: api_key(plan.api_key_file.as_deref())?,
            hub_env: fit.hub_env.clone(),
            cuda_graphs: false,
            fresh_compile_cache: false,
            keep_free_gib: plan.keep_free,
            recipes: None,
            pinned: None,
            on_demand: None,
        };
        let report = try_layouts(nodes, &launch, &candidates, &store, &book, out.reporter().as_ref()).await?;
        out.report(&report);
        Ok(if report.kept.is_some() { 0 } else { EXIT_FAILURE })
    })
    .await
}

impl Render for TryReport {
    fn render(&self, out: &Output) {
        for tried in &self.tried {
            let on = tried.candidate.on.join(", ");
            let layout = tried.layout.clone().unwrap_or_else(|| format!("on {on}"));
            match (&tried.failed, tried.output_throughput) {
                (None, Some(throughput)) if tried.answers_right => out.line(&format!(
                    "{} {layout}: answers right, {throughput:.1} output tokens/s",
                    out.paint("✓", Style::Ok)
                )),
                (failed, _) => out.line(&format!(
                    "{} {layout}: {}",
                    out.paint("✗", Style::Fail),
                    failed.as_deref().unwrap_or("did not answer right")
                )),
            }
        }
        match &self.kept {
            Some(recipe) => out.line(&format!(
                "{} {}: {} (`cluster launch {}` serves it so while image {} and the model are the same)",
                out.paint("Recipe kept:", Style::Bold),
                self.model,
                recipe.layout,
                self.model,
                recipe.image
            )),
            None => out.line(&format!("{}: no layout answered right; no recipe kept", self.model)),
        }
    }
}

impl Render for Vec<Recipe> {
    fn render(&self, out: &Output) {
        if self.is_empty() {
            out.line("no recipes kept (`strix-toolbox cluster plan MODEL --try` finds one)");
        }
        for recipe in self {
            out.line(&format!(
                "{} ({}): {} on {}, {:.1} output tokens/s, image {}, {}, kept {}{}",
                out.paint(&recipe.model, Style::Bold),
                recipe.engine,
                recipe.layout,
                recipe.on.join(", "),
                recipe.output_throughput,
                recipe.image,
                recipe.identity,
                recipe.kept,
                if recipe.args.is_empty() { String::new() } else { format!("; {}", recipe.args.join(" ")) }
            ));
        }
    }
}
