//! The model's recipe (`cluster::recipe`), found for a launch that names no layout of its own:
//! its nodes, its split, and its flags when the operator gave none after `--`. Whether it still
//! holds (the same image, the same model) is the launch's to check once every node answered.

use super::request::LaunchRequest;
use crate::cluster::recipe::book::RecipeBook;
use crate::cluster::recipe::Recipe;
use crate::error::Result;
use crate::node::Node;

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
    let extra = if request.extra.is_empty() { recipe.args.clone() } else { request.extra.clone() };
    LaunchRequest { on: recipe.on.clone(), tp: recipe.tp, pp: recipe.pp, extra, ..request.clone() }
}
