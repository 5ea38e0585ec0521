//! The node's side of the channel (`strix-toolbox agent`, started by the head over ssh): say
//! hello, hear the head's (the protocol it speaks must be this one's), then answer each call with
//! the same operation a local command runs, until the head closes the channel. Calls run concurrently; each answer goes out as one line when it is ready.
//! A call already running when the head goes away still finishes: a half-done phase is worse than
//! a finished one.

use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::call::{Call, NodeCall};
use super::identity::NodeIdentity;
use super::wire::{
    line, read_line, HeadHello, Hello, LineError, Outcome, Request, Response, WireError, LINE_LIMIT, PROTOCOL,
};
use crate::error::{Error, Result};
use crate::ops;
use crate::settings::Settings;
use crate::{bench, link, model, serving, spread};

/// Answer calls read from `input` on `output` until `input` ends.
pub async fn run_agent(
    settings: Settings,
    input: impl AsyncRead + Unpin,
    output: impl AsyncWrite + Unpin + Send + 'static,
) -> Result<()> {
    let settings = Arc::new(settings);
    let (answers, mut outgoing) = mpsc::unbounded_channel::<String>();
    let writer = tokio::spawn(async move {
        let mut output = output;
        while let Some(text) = outgoing.recv().await {
            // The head is gone: nobody reads answers any more, but running calls still finish.
            if output.write_all(text.as_bytes()).await.is_err() || output.flush().await.is_err() {
                break;
            }
        }
    });
    let identity = settings.open_host_root().ok().map(|root| NodeIdentity::here(&root));
    let hello = line(&Hello::here(&settings.paths, identity))
        .map_err(|e| Error::Internal(format!("cannot encode the hello: {e}")))?;
    let _ = answers.send(hello);

    let mut running = JoinSet::new();
    let mut input = BufReader::new(input);
    let mut heard_head = false;
    loop {
        let text = match read_line(&mut input, LINE_LIMIT).await {
            Ok(Some(text)) => text,
            Ok(None) => break,
            Err(LineError::TooLong) => {
                let _ = answers.send(unreadable(0, &format!("a call too long to read: {}", LineError::TooLong)));
                continue;
            }
            Err(error) => {
                let _ = answers.send(unreadable(0, &format!("cannot read the call: {error}")));
                break;
            }
        };
        if text.trim().is_empty() {
            continue;
        }
        if !heard_head {
            match head_speaks(&text) {
                Ok(()) => {
                    heard_head = true;
                    continue;
                }
                Err(why) => {
                    let _ = answers.send(unreadable(0, &why));
                    break;
                }
            }
        }
        let request: Request = match serde_json::from_str(&text) {
            Ok(request) => request,
            Err(error) => {
                let id = serde_json::from_str::<serde_json::Value>(&text).ok().and_then(|v| v["id"].as_u64());
                let _ = answers.send(unreadable(id.unwrap_or(0), &format!("not a call this node knows: {error}")));
                continue;
            }
        };
        let (settings, answers) = (settings.clone(), answers.clone());
        running.spawn(async move {
            let outcome = answer(&settings, request.call).await;
            let text = match line(&Response { id: request.id, outcome }) {
                Ok(text) if text.len() <= LINE_LIMIT => text,
                Ok(text) => unreadable(
                    request.id,
                    &format!("its answer is {} MiB, over the protocol's limit", text.len() >> 20),
                ),
                Err(error) => unreadable(request.id, &format!("cannot encode its answer: {error}")),
            };
            let _ = answers.send(text);
        });
    }
    while running.join_next().await.is_some() {}
    drop(answers);
    let _ = writer.await;
    Ok(())
}

/// The head's first line says it speaks this node's protocol; else why not.
fn head_speaks(text: &str) -> std::result::Result<(), String> {
    match serde_json::from_str::<HeadHello>(text) {
        Ok(hello) if hello.head.protocol == PROTOCOL => Ok(()),
        Ok(hello) => Err(format!(
            "the head (strix-toolbox {}) speaks protocol {}, this node (strix-toolbox {}) protocol {PROTOCOL}",
            hello.head.version,
            hello.head.protocol,
            env!("CARGO_PKG_VERSION")
        )),
        Err(_) => Err(format!(
            "the head did not say first which protocol it speaks; this node (strix-toolbox {}) speaks protocol \
             {PROTOCOL}",
            env!("CARGO_PKG_VERSION")
        )),
    }
}

/// An error answer to call `id` (0: to a line that is no call).
fn unreadable(id: u64, why: &str) -> String {
    let node = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default().trim().to_string();
    let error = Error::Node {
        message: format!("{node}: {why}"),
        node,
        fix: Some("run the same strix-toolbox version on the head and every node (`cluster install`)".into()),
    };
    line(&Response { id, outcome: Outcome::Error(WireError::from(&error.report())) }).unwrap_or_default()
}

/// Run one call and wrap its answer for the wire.
async fn answer(settings: &Settings, call: NodeCall) -> Outcome {
    match dispatch(settings, call).await {
        Ok(value) => Outcome::Ok(value),
        Err(error) => Outcome::Error(WireError::from(&error.report())),
    }
}

/// Run one call on this node: the operation a local command would run, its report as a value.
pub async fn dispatch(settings: &Settings, call: NodeCall) -> Result<serde_json::Value> {
    match call {
        NodeCall::Resolve(c) => reply(&c, ops::resolve::resolve(settings, &c.image).await),
        NodeCall::Refresh(request) => reply(&request, ops::refresh::refresh(settings, &request).await),
        NodeCall::Phase(request) => reply(&request, ops::phase::run_phase(settings, &request).await),
        NodeCall::Doctor(c) => reply(&c, ops::doctor::doctor(settings)),
        NodeCall::Detect(c) => reply(&c, ops::detect::detect(settings)),
        NodeCall::Status(c) => reply(&c, ops::status::status(settings).await),
        NodeCall::Verify(c) => reply(&c, ops::verify::verify(settings, &c.name).await),
        NodeCall::Link(c) => reply(&c, link::address::read_link(&c.netdev).await),
        NodeCall::Ping(c) => reply(&c, link::address::ping(&c.netdev, c.address, c.size).await),
        NodeCall::Exec(c) => reply(&c, ops::exec::exec_in_toolbox(settings, &c.toolbox, &c.argv).await),
        NodeCall::ServeCheck(c) => reply(&c, serving::state::serve_check(settings, &c).await),
        NodeCall::RayStart(c) => reply(&c, serving::ray::ray_start(settings, &c).await),
        NodeCall::RayNodes(c) => reply(&c, serving::ray::ray_nodes_of(settings, &c).await),
        NodeCall::ProcessStart(c) => reply(&c, serving::process::process_start(settings, &c).await),
        NodeCall::Reach(c) => reply(&c, Ok(serving::reach::reach(&c).await)),
        NodeCall::ServeProbe(c) => reply(&c, serving::probe::serve_probe(settings, &c).await),
        NodeCall::ServeStop(c) => reply(&c, serving::stop::serve_stop(settings, &c).await),
        NodeCall::ServeLogs(c) => reply(&c, serving::logs::serve_logs(settings, &c).await),
        NodeCall::ModelDownload(c) => reply(&c, model::download::model_download(settings, &c).await),
        NodeCall::ModelList(c) => reply(&c, model::list::model_list(settings, &c).await),
        NodeCall::ModelServe(c) => reply(&c, model::serve::model_serve(settings, &c).await),
        NodeCall::ModelServeStop(c) => reply(&c, model::serve::model_serve_stop(&c).await),
        NodeCall::ModelFetch(c) => reply(&c, model::fetch::model_fetch(settings, &c).await),
        NodeCall::ShapeRead(c) => reply(&c, model::shape::ask::shape_ask(settings, &c).await),
        NodeCall::SpreadResolve(c) => reply(&c, spread::resolve::resolve_upstream(settings, &c.image).await),
        NodeCall::ImageDigests(c) => reply(&c, spread::pull::image_digests(settings, &c).await),
        NodeCall::SpreadServe(c) => reply(&c, spread::registry::spread_serve(settings, &c).await),
        NodeCall::SpreadRelay(c) => reply(&c, spread::relay_serve::spread_relay(settings, &c).await),
        NodeCall::SpreadRelayEnd(c) => reply(&c, spread::relay_serve::spread_relay_end(&c).await),
        NodeCall::SpreadTrust(c) => reply(&c, spread::trust::spread_trust(settings, &c).await),
        NodeCall::SpreadSign(c) => reply(&c, spread::trust::spread_sign(settings, &c).await),
        NodeCall::SpreadPrune(c) => reply(&c, spread::prune::spread_prune(settings, &c).await),
        NodeCall::SpreadStatus(c) => reply(&c, spread::status::spread_status(settings).await),
        NodeCall::BenchLevel(c) => reply(&c, bench::node::bench_level(&c).await),
        NodeCall::GateAsk(c) => reply(&c, bench::node::gate_ask(&c).await),
        NodeCall::RouterLook(c) => reply(&c, super::router::router_look(settings, &c).await),
        NodeCall::RouterUpdate(c) => reply(&c, super::router::router_update(settings, &c).await),
        NodeCall::RouterKeys(c) => reply(&c, super::router_keys::router_keys(settings, &c).await),
        NodeCall::RouterScrape(c) => reply(&c, super::router::router_scrape(settings, &c).await),
        NodeCall::Telemetry(c) => reply(&c, super::telemetry::telemetry(settings, &c).await),
    }
}

/// A call's report as it travels; the request only fixes the report's type.
fn reply<C: Call>(_call: &C, result: Result<C::Reply>) -> Result<serde_json::Value> {
    let report = result?;
    serde_json::to_value(report).map_err(|e| Error::Internal(format!("cannot encode the report: {e}")))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    use super::*;
    use crate::container_engine::kind::EngineChoice;
    use crate::node::call::{Detect, Exec};
    use crate::ops::detect::DetectReport;

    /// A node whose host tree is `root`.
    fn settings(root: PathBuf) -> Settings {
        Settings::resolve(root, EngineChoice::Podman, std::sync::Arc::new(crate::reporter::Silent))
    }

    #[tokio::test]
    async fn hello_first_then_each_answer_under_its_call_id() {
        let root = tempfile::tempdir().unwrap();
        let (head, node) = tokio::io::duplex(1 << 16);
        let (node_in, node_out) = tokio::io::split(node);
        let serving = tokio::spawn(run_agent(settings(root.path().into()), node_in, node_out));
        let (head_in, mut head_out) = tokio::io::split(head);
        let mut lines = BufReader::new(head_in).lines();

        let hello: Hello = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
        assert_eq!((hello.version.as_str(), hello.protocol), (env!("CARGO_PKG_VERSION"), super::super::wire::PROTOCOL));

        head_out.write_all(line(&HeadHello::here()).unwrap().as_bytes()).await.unwrap();
        // No engine here knows this toolbox (or no engine answers at all): an error either way.
        let exec = Exec { toolbox: "strix-agent-test-none".into(), argv: vec!["true".into()] };
        for request in [Request { id: 7, call: Detect {}.into() }, Request { id: 8, call: exec.into() }] {
            head_out.write_all(line(&request).unwrap().as_bytes()).await.unwrap();
        }
        head_out.write_all(b"{\"id\": 9, \"call\": \"format-disk\"}\nnot json at all\n").await.unwrap();
        head_out.shutdown().await.unwrap();

        let mut answers = std::collections::BTreeMap::new();
        while let Some(text) = lines.next_line().await.unwrap() {
            let response: Response = serde_json::from_str(&text).unwrap();
            answers.insert(response.id, response.outcome);
        }
        serving.await.unwrap().unwrap();

        match &answers[&7] {
            Outcome::Ok(value) => {
                let report: DetectReport = serde_json::from_value(value.clone()).unwrap();
                assert!(report.gpu.kfd.is_none(), "an empty host tree has no GPU");
            }
            other => panic!("detect failed: {other:?}"),
        }
        let Outcome::Error(missing) = &answers[&8] else { panic!("exec in no toolbox: {:?}", answers[&8]) };
        assert!(missing.message.contains("strix-agent-test-none") || missing.message.contains("podman"), "{missing:?}");
        let Outcome::Error(unknown) = &answers[&9] else { panic!("an unknown call: {:?}", answers[&9]) };
        assert!(unknown.message.contains("not a call this node knows"), "{unknown:?}");
        let Outcome::Error(garbage) = &answers[&0] else { panic!("a line that is no call: {:?}", answers[&0]) };
        assert!(garbage.fix.as_deref().unwrap_or_default().contains("same strix-toolbox version"), "{garbage:?}");
        assert_eq!(garbage.kind, "node");
    }

    /// The first line the agent gets, and every line it answers with.
    async fn answers_to(first: &str) -> Vec<String> {
        let root = tempfile::tempdir().unwrap();
        let (head, node) = tokio::io::duplex(1 << 16);
        let (node_in, node_out) = tokio::io::split(node);
        let serving = tokio::spawn(run_agent(settings(root.path().into()), node_in, node_out));
        let (head_in, mut head_out) = tokio::io::split(head);
        head_out.write_all(first.as_bytes()).await.unwrap();
        head_out.write_all(line(&Request { id: 1, call: Detect {}.into() }).unwrap().as_bytes()).await.unwrap();
        head_out.shutdown().await.unwrap();
        let mut lines = BufReader::new(head_in).lines();
        let mut said = Vec::new();
        while let Some(text) = lines.next_line().await.unwrap() {
            said.push(text);
        }
        serving.await.unwrap().unwrap();
        said
    }

    #[tokio::test]
    async fn a_head_of_another_protocol_is_refused_naming_both() {
        let other =
            HeadHello { head: crate::node::wire::HeadSpeaks { version: "9.9.9".into(), protocol: PROTOCOL + 1 } };
        let said = answers_to(&line(&other).unwrap()).await;
        assert_eq!(said.len(), 2, "the hello, then the refusal, and no answer to the call: {said:?}");
        let refusal: Response = serde_json::from_str(&said[1]).unwrap();
        let Outcome::Error(error) = refusal.outcome else { panic!("{said:?}") };
        let expected = format!("the head (strix-toolbox 9.9.9) speaks protocol {}, this node", PROTOCOL + 1);
        assert!(
            error.message.contains(&expected) && error.message.contains(&format!("protocol {PROTOCOL}")),
            "{error:?}"
        );

        let silent = answers_to(&line(&Request { id: 5, call: Detect {}.into() }).unwrap()).await;
        assert!(silent[1].contains("did not say first which protocol it speaks"), "{silent:?}");
    }

    #[tokio::test]
    async fn a_call_over_the_line_limit_is_refused_and_the_next_one_answered() {
        let root = tempfile::tempdir().unwrap();
        let (head, node) = tokio::io::duplex(1 << 20);
        let (node_in, node_out) = tokio::io::split(node);
        let serving = tokio::spawn(run_agent(settings(root.path().into()), node_in, node_out));
        let (head_in, mut head_out) = tokio::io::split(head);
        let writing = tokio::spawn(async move {
            head_out.write_all(line(&HeadHello::here()).unwrap().as_bytes()).await.unwrap();
            let huge = vec![b'x'; LINE_LIMIT + 10];
            head_out.write_all(&huge).await.unwrap();
            head_out.write_all(b"\n").await.unwrap();
            head_out.write_all(line(&Request { id: 3, call: Detect {}.into() }).unwrap().as_bytes()).await.unwrap();
            head_out.shutdown().await.unwrap();
        });
        let mut lines = BufReader::new(head_in).lines();
        let mut answers = std::collections::BTreeMap::new();
        lines.next_line().await.unwrap();
        while let Some(text) = lines.next_line().await.unwrap() {
            let response: Response = serde_json::from_str(&text).unwrap();
            answers.insert(response.id, response.outcome);
        }
        writing.await.unwrap();
        serving.await.unwrap().unwrap();
        let Outcome::Error(refused) = &answers[&0] else { panic!("{answers:?}") };
        assert!(refused.message.contains("a call too long to read"), "{refused:?}");
        assert!(matches!(answers[&3], Outcome::Ok(_)), "{answers:?}");
    }
}
