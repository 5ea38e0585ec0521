//! The router as the cluster's head runs it (`strix-toolbox router`, a detached process the
//! launch starts): it serves the routes file's table and registrations with the key file's key
//! and the keys file's keys, reads both files again every [`RELOAD_INTERVAL`] and serves a change
//! from the next request on (streams under way keep their engine), starts and stops the services
//! registered to start on demand through its [`Starter`], and exits once no route and no
//! registration is left, the file is gone, or SIGTERM or SIGINT came, letting the answers under
//! way finish first.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::signal::unix::{signal, SignalKind};

use super::demand::Starter;
use super::routes::{parse_routes, RouterFiles, Routes};
use super::{Router, Setup};
use crate::error::{Error, Result};
use crate::reporter::Reporter;

/// How often the routes and keys files are read for a change (a launch waits for its route at
/// most about this long after writing it; a key added or removed counts from then on).
pub const RELOAD_INTERVAL: Duration = Duration::from_millis(500);

/// Why the router stopped serving.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The last route and registration went (or the routes file did).
    NoRoutes,
    /// SIGTERM or SIGINT.
    Signalled,
}

/// Serve `files`' routes on `listen`, starting services on demand with `starter`, until one of
/// the ends of [`Ended`].
pub async fn serve(
    files: &RouterFiles,
    listen: SocketAddr,
    reporter: Arc<dyn Reporter>,
    starter: Option<Arc<dyn Starter>>,
) -> Result<Ended> {
    let mut terminate = signal(SignalKind::terminate()).map_err(signal_error)?;
    let mut interrupt = signal(SignalKind::interrupt()).map_err(signal_error)?;
    let nothing = || reporter.line(&format!("no route in {}: nothing to serve", files.routes_path().display()));
    let Some(bytes) = files.routes_bytes()? else {
        nothing();
        return Ok(Ended::NoRoutes);
    };
    let routes = parse_routes(&bytes, &files.routes_path())?;
    if routes.is_empty() {
        nothing();
        return Ok(Ended::NoRoutes);
    }
    let mut keys_seen = files.keys_bytes()?;
    let setup = Setup {
        table: routes.table(),
        api_key: files.read_key()?,
        keys: files.read_keys()?,
        registered: routes.on_demand.clone(),
        starter,
        files: Some(files.clone()),
        ..Setup::of(Default::default(), None, reporter.clone())
    };
    let router = Router::start_with(listen, setup).await?;
    reporter.line(&format!("serving {} at {}", said(&routes), router.address()));
    let mut seen = Some(bytes);
    let ended = loop {
        tokio::select! {
            _ = tokio::time::sleep(RELOAD_INTERVAL) => {}
            _ = terminate.recv() => break Ended::Signalled,
            _ = interrupt.recv() => break Ended::Signalled,
        }
        match router.reload(&mut seen).await {
            Ok(Some(routes)) if routes.is_empty() => break Ended::NoRoutes,
            Ok(Some(routes)) => reporter.line(&format!("now serving {}", said(&routes))),
            Ok(None) => {}
            // A writer replaces the file whole: an unreadable one keeps the table as it was.
            Err(error) => reporter.warning(&format!("the routes did not change: {error}")),
        }
        let keys = files.keys_bytes()?;
        if keys != keys_seen {
            match files.read_keys() {
                Ok(book) => {
                    router.update_keys(&book);
                    reporter.line(&format!("now taking {} key(s) per user", book.keys.len()));
                }
                Err(error) => reporter.warning(&format!("the keys did not change: {error}")),
            }
            keys_seen = keys;
        }
    };
    reporter.line(match ended {
        Ended::NoRoutes => "no route is left: stopping",
        Ended::Signalled => "signalled: stopping",
    });
    router.shutdown().await;
    Ok(ended)
}

fn said(routes: &Routes) -> String {
    let mut each: Vec<String> = routes.routes.iter().map(|r| format!("{} → {}", r.name, r.upstream)).collect();
    each.extend(
        routes
            .on_demand
            .iter()
            .filter(|r| !routes.names().contains(&r.name.as_str()))
            .map(|r| format!("{} (on demand)", r.name)),
    );
    each.join(", ")
}

fn signal_error(error: std::io::Error) -> Error {
    Error::Internal(format!("cannot watch for SIGTERM: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::router::routes::Route;

    fn route(name: &str, upstream: SocketAddr) -> Route {
        Route {
            name: name.into(),
            upstream,
            engine: "llama.cpp".into(),
            model: "m.gguf".into(),
            nodes: vec!["node1".into()],
            since: "2026-11-24T10:00:00Z".into(),
        }
    }

    /// A router started from the files serves their routes, takes a changed table, and ends
    /// with the last route.
    #[tokio::test]
    async fn the_router_follows_its_routes_file_and_ends_with_the_last_route() {
        let dir = tempfile::tempdir().unwrap();
        let files = RouterFiles::in_dir(dir.path());
        let nothing = serve(&files, "127.0.0.1:0".parse().unwrap(), Arc::new(crate::reporter::Silent), None).await;
        assert_eq!(nothing.unwrap(), Ended::NoRoutes, "no routes file: nothing to serve");

        // Engines that are not there: the router's own /health/NAME says which it routes.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let listen: SocketAddr = ([127, 0, 0, 1], port).into();
        let engine: SocketAddr = "127.0.0.1:9".parse().unwrap();
        files.write_routes(&Routes::default().with(route("a", engine))).unwrap();
        let recorded = Arc::new(crate::reporter::Recorder::default());
        let serving = tokio::spawn({
            let (files, recorded) = (files.clone(), recorded.clone());
            async move { serve(&files, listen, recorded, None).await }
        });
        let status = |name: &'static str| async move {
            let path = format!("/health/{name}");
            match crate::serving::http::get(listen, &path, None, Duration::from_secs(5)).await {
                crate::serving::http::HttpAnswer::Status(code, _) => Some(code),
                _ => None,
            }
        };
        let mut waited = 0;
        while status("a").await != Some(503) {
            waited += 1;
            assert!(waited < 100, "the router never served a");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(status("b").await, Some(404));
        files.write_routes(&Routes::default().with(route("a", engine)).with(route("b", engine))).unwrap();
        let mut waited = 0;
        while status("b").await != Some(503) {
            waited += 1;
            assert!(waited < 100, "the router never took b");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        files.write_routes(&Routes::default()).unwrap();
        assert_eq!(serving.await.unwrap().unwrap(), Ended::NoRoutes);
        assert!(recorded.events().iter().any(|e| e.contains("now serving a → 127.0.0.1:9, b → 127.0.0.1:9")));
    }
}
