//! The model's recipe (`cluster::recipe`), found for a launch that names no layout of its own:
//! its nodes, its split, and its flags when the operator gave none after `--`. Whether it still
//! holds (the same image, the same model) is the launch's to check once every node answered.

use super::request::LaunchRequest;
use crate::cluster::recipe::book::RecipeBook;
use crate::cluster::recipe::Recipe;
use crate::error::Result;
use crate::node::Node;
use crate::serving::engine_args::EngineArgs;

/// The recipe kept for the request's model and engine, when the operator left the layout open
/// (no `--on`, `--tp`, `--pp`) and every node it names is one of `cluster`'s.
pub(super) fn for_launch(cluster: &[&dyn Node], request: &LaunchRequest) -> Result<Option<Recipe>> {
    let Some(dir) = &request.recipes else { return Ok(None) };
    if !request.on.is_empty() || request.tp.is_some() || request.pp.is_some() {
        return Ok(None);
    }
    let recipe = RecipeBook::at(dir).find(&request.model, request.engine)?;
    Ok(recipe.filter(|recipe| recipe.on.iter().all(|name| cluster.iter().any(|node| node.name() == name))))
}

/// `request` served as `recipe` says.
pub(super) fn applied(recipe: &Recipe, request: &LaunchRequest) -> LaunchRequest {
    let extra = if request.extra.is_empty() { EngineArgs::new(recipe.args.clone()) } else { request.extra.clone() };
    LaunchRequest { on: recipe.on.clone(), tp: recipe.tp, pp: recipe.pp, extra, ..request.clone() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::canary::tests::llama_launch;
    use crate::cluster::recipe::book::RecipeBook;
    use crate::cluster::recipe::tests::recipe;

    #[test]
    fn the_recipe_serves_a_launch_that_names_no_layout_of_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let kept = crate::cluster::recipe::Recipe { on: vec!["node2".into(), "node1".into()], ..recipe() };
        RecipeBook::at(dir.path()).keep(&kept).unwrap();
        let nodes = crate::cluster::testing::nodes(&["node1", "node2"]);
        let cluster = crate::cluster::testing::as_nodes(&nodes);
        let request = LaunchRequest { recipes: Some(dir.path().into()), ..llama_launch(&kept.model) };
        let found = for_launch(&cluster, &request).unwrap().expect("the model's recipe");
        let by_recipe = applied(&found, &request);
        assert_eq!((by_recipe.on.as_slice(), by_recipe.extra.words()), (kept.on.as_slice(), kept.args.as_slice()));
        let own_args =
            LaunchRequest { extra: EngineArgs::new(vec!["--threads".into(), "1".into()]), ..request.clone() };
        assert_eq!(applied(&found, &own_args).extra, own_args.extra, "the operator's flags win over the recipe's");
        let named = LaunchRequest { on: vec!["node1".into()], ..request.clone() };
        assert_eq!(for_launch(&cluster, &named).unwrap(), None, "--on names the layout");
        let elsewhere: Vec<&dyn Node> = cluster[..1].to_vec();
        assert_eq!(for_launch(&elsewhere, &request).unwrap(), None, "a recipe naming a node the cluster lacks");
        let unasked = LaunchRequest { recipes: None, ..request };
        assert_eq!(for_launch(&cluster, &unasked).unwrap(), None, "no book, no recipe (one node's launch)");
    }
}
