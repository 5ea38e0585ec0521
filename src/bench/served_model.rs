//! Which model name to send: the one asked for, if the server lists it, else the first it lists
//! (as vLLM's bench does without `--model`).

use super::client::ApiClient;
use crate::error::Result;

pub async fn served_model(client: &ApiClient, wanted: Option<&str>) -> Result<String> {
    let listed = client.served_models().await?;
    let url = format!("GET {}/models", client.endpoint().base());
    match wanted {
        Some(wanted) if listed.iter().any(|name| name == wanted) => Ok(wanted.to_string()),
        Some(wanted) => Err(super::error::endpoint(
            &url,
            "the model list",
            &format!("it lists {listed:?}, not {wanted:?}"),
            "name a model the server lists, or leave it out to use the first",
        )),
        None => listed.into_iter().next().ok_or_else(|| {
            super::error::endpoint(
                &url,
                "the model list",
                "no model is listed",
                "wait until the server has loaded its model",
            )
        }),
    }
}
