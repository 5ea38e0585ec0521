//! `cluster watch [SERVICE...]`: the watch in the foreground (each event a line; with `--json`
//! one JSON object per line, as its event log holds them) until Ctrl-C (exit 130); `--pause`,
//! `--resume`; `--install` / `--uninstall` as a systemd user service.

use crate::commands::arg_values::bounded;
use crate::serving::service_name::ServiceName;
use clap::Args;
use std::path::{Path, PathBuf};

use tokio::net::TcpListener;
use tokio::sync::oneshot;

use crate::cluster::watch::dir::WatchDir;
use crate::cluster::watch::events::WatchEvent;
use crate::cluster::watch::install::{install, uninstall, UnitReport};
use crate::cluster::watch::pause::{set_paused, PauseReport};
use crate::cluster::watch::relaunch::RelaunchSecrets;
use crate::cluster::watch::{watch, WatchExposition, WatchRequest};
use crate::cluster::ClusterSettings;
use crate::commands::cluster::ClusterArgs;
use crate::commands::secrets::{api_key, hf_token};
use crate::error::{Error, Result};
use crate::metrics::endpoint::{listen_address, serve};
use crate::model::hub_env::forwarded_hub_env;
use crate::output::{Output, Render, Style};
use crate::settings::Settings;
use crate::watch::{format_duration, parse_duration, State, WatchPolicy, WatchUnit};

/// `cluster watch`: what to watch, how often and how patiently, and what to do at the end.
#[derive(Debug, Clone, Args)]
pub struct WatchArgs {
    /// The services to watch [default: every service recorded on the cluster, as it finds them].
    #[arg(value_name = "SERVICE")]
    pub services: Vec<ServiceName>,

    /// Between two looks: seconds (90) or with a unit (90s, 5m, 6h).
    #[arg(long, value_name = "DURATION", default_value = "30s")]
    pub interval: String,

    /// Requests running (or the probe unanswered) and no token generated this long: stalled.
    #[arg(long, value_name = "DURATION", default_value = "60s")]
    pub stall: String,

    /// The probe failing this many times in a row: failing.
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = bounded::<u32>(1, 1000))]
    pub failures: u32,

    /// After each start, how long the model has to load before its silence counts.
    #[arg(long, value_name = "DURATION", default_value = "30m")]
    pub grace: String,

    /// At most this many relaunches of a service within --window; the next fault gives up.
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = bounded::<u32>(0, 1000))]
    pub max_restarts: u32,

    /// The window --max-restarts counts in.
    #[arg(long, value_name = "DURATION", default_value = "6h")]
    pub window: String,

    /// The longest wait, before a relaunch, for the nodes' GPU memory to come free, or for a GPU
    /// reset the kernel began to end; then give up.
    #[arg(long, value_name = "DURATION", default_value = "5m")]
    pub memory_wait: String,

    /// Run CMD (by `sh -c CMD`, as given) when a service is given up, with STRIX_WATCH_SERVICE
    /// and STRIX_WATCH_REASON in its environment (a page, a mail).
    #[arg(long, value_name = "CMD")]
    pub on_give_up: Option<String>,

    /// The endpoint's API key for a relaunch, read from FILE [default: the STRIX_API_KEY
    /// environment variable, as `launch` reads it].
    #[arg(long, value_name = "FILE")]
    pub api_key_file: Option<PathBuf>,

    /// Pause the running watch (maintenance): it looks and restarts nothing until --resume.
    #[arg(long, conflicts_with_all = ["resume", "install", "uninstall"])]
    pub pause: bool,

    /// Resume a paused watch; it starts afresh (whatever was restarted meanwhile is loading).
    #[arg(long, conflicts_with_all = ["install", "uninstall"])]
    pub resume: bool,

    /// Install the watch, with these flags, as a systemd user service on this machine and start it
    /// (`systemctl --user status strix-toolbox-watch-NAME` shows it).
    #[arg(long, conflicts_with = "uninstall")]
    pub install: bool,

    /// Stop and remove the systemd user service --install made.
    #[arg(long)]
    pub uninstall: bool,

    /// Serve the cluster's metrics at ADDR:PORT (or PORT, on 127.0.0.1; --metrics alone:
    /// 127.0.0.1:9464) while it watches: what `cluster metrics` serves, and the watch's own
    /// (`strix_watch_probes_total`, `strix_watch_probe_failures_total`,
    /// `strix_watch_restarts_total`, `strix_watch_state`) per service.
    #[arg(long, value_name = "ADDR:PORT", num_args = 0..=1, default_missing_value = "9464")]
    pub metrics: Option<String>,
}

/// What the installed unit keeps of this session's environment: where ssh, its agent and the
/// cluster's files are (never a secret: the unit file is readable by the user's processes).
const UNIT_ENVIRONMENT: [&str; 5] = ["PATH", "SSH_AUTH_SOCK", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR"];

pub(super) async fn run(
    cluster: &ClusterSettings,
    args: &ClusterArgs,
    watch_args: &WatchArgs,
    settings: &Settings,
    out: &Output,
) -> Result<i32> {
    let head = cluster.nodes.first().ok_or_else(|| Error::Usage("the cluster has no nodes".into()))?;
    let dir = WatchDir::of(&settings.paths, head)?;
    if watch_args.pause || watch_args.resume {
        out.report(&set_paused(&dir, watch_args.pause)?);
        return Ok(0);
    }
    let policy = policy(watch_args)?;
    let unit_service = unit_service(head);
    if watch_args.uninstall {
        out.report(&uninstall(&unit_service, config_home(settings)?).await?);
        return Ok(0);
    }
    if watch_args.install {
        let unit = WatchUnit {
            service: unit_service,
            program: std::env::current_exe().map_err(|e| Error::Internal(format!("this program's path: {e}")))?,
            args: unit_args(args, watch_args, &policy)?,
            environment: UNIT_ENVIRONMENT
                .iter()
                .filter_map(|name| Some((name.to_string(), std::env::var(name).ok()?)))
                .collect(),
        };
        out.report(&install(&unit, config_home(settings)?).await?);
        return Ok(0);
    }
    let request = WatchRequest {
        services: watch_args.services.clone(),
        policy,
        on_give_up: watch_args.on_give_up.clone(),
        dir,
        secrets: RelaunchSecrets {
            api_key: api_key(watch_args.api_key_file.as_deref())?,
            hf_token: hf_token(None)?,
            hub_env: forwarded_hub_env(std::env::vars()),
        },
        exposition: None,
    };
    let metrics = match &watch_args.metrics {
        Some(listen) => Some(MetricsServer::start(listen).await?),
        None => None,
    };
    let request = WatchRequest { exposition: metrics.as_ref().map(|server| server.exposition.clone()), ..request };
    if let Some(server) = &metrics {
        out.status(&format!("serving the cluster's metrics at http://{}/metrics", server.address));
    }
    out.status(&format!(
        "watching {} every {} (Ctrl-C ends it)",
        if request.services.is_empty() { "every service".to_string() } else { names(&request) },
        format_duration(request.policy.interval)
    ));
    let print = |event: &WatchEvent| print_event(out, event);
    let watched = watch(cluster, &request, &print).await;
    if let Some(server) = metrics {
        server.stop().await;
    }
    match watched {
        Err(Error::Interrupted { signal, .. }) => {
            out.status(&format!("{}: the watch ended; every service is left as it is", signal.stopped()));
            Ok(signal.exit_code())
        }
        Err(error) => Err(error),
        Ok(()) => Ok(0),
    }
}

/// `--metrics`: what the watch's last look read of the cluster (what `cluster metrics --listen`
/// serves, read once per look: a Prometheus scrape asks no node and no engine), and the watch's
/// own families.
struct MetricsServer {
    address: std::net::SocketAddr,
    exposition: WatchExposition,
    stop: oneshot::Sender<()>,
    server: tokio::task::JoinHandle<()>,
}

impl MetricsServer {
    async fn start(listen: &str) -> Result<MetricsServer> {
        let address = listen_address(listen)?;
        let listener = TcpListener::bind(address).await.map_err(|e| {
            Error::host(
                address.to_string(),
                format!("cannot listen on {address}: {e}"),
                "choose another address or port with --metrics ADDR:PORT",
            )
        })?;
        let exposition = WatchExposition::new(std::sync::Mutex::new(None));
        let shared = exposition.clone();
        let provider = move || {
            let shared = shared.clone();
            let reading = shared.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
            async move { reading.ok_or_else(|| NOT_YET_LOOKED.to_string()) }
        };
        let (stop, stopped) = oneshot::channel();
        let server = tokio::spawn(serve(listener, stopped, provider));
        Ok(MetricsServer { address, exposition, stop, server })
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.server.await;
    }
}

/// Why `--metrics` answers 503 until the watch's first look has ended.
const NOT_YET_LOOKED: &str = "the watch has not finished its first look yet";

fn names(request: &WatchRequest) -> String {
    request.services.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
}

/// The durations and counts as the flags give them.
fn policy(args: &WatchArgs) -> Result<WatchPolicy> {
    let policy = WatchPolicy {
        interval: parse_duration("--interval", &args.interval)?,
        stall: parse_duration("--stall", &args.stall)?,
        failures: args.failures,
        grace: parse_duration("--grace", &args.grace)?,
        max_restarts: args.max_restarts,
        window: parse_duration("--window", &args.window)?,
        memory_wait: parse_duration("--memory-wait", &args.memory_wait)?,
        ..WatchPolicy::default()
    };
    policy.check()?;
    Ok(policy)
}

/// The unit's name part: the cluster's head, as a unit name may carry it (one watch per cluster).
fn unit_service(head: &str) -> String {
    head.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '_' }).collect()
}

/// `cluster [how to reach the nodes] watch [SERVICE...] [the policy]`, every path absolute (the
/// unit runs in the user's home).
fn unit_args(args: &ClusterArgs, watch_args: &WatchArgs, policy: &WatchPolicy) -> Result<Vec<String>> {
    let mut argv = vec!["cluster".to_string()];
    if let Some(nodes) = &args.nodes {
        argv.extend(["--nodes".to_string(), nodes.clone()]);
    }
    for (flag, path) in [("--cluster", &args.cluster), ("--ssh-config", &args.ssh_config)] {
        if let Some(path) = path {
            argv.extend([flag.to_string(), absolute(path)?]);
        }
    }
    argv.extend(["--connect-timeout".to_string(), args.connect_timeout.to_string()]);
    if let Some(persist) = args.ssh_persist {
        argv.extend(["--ssh-persist".to_string(), persist.to_string()]);
    }
    argv.push("watch".into());
    argv.extend(watch_args.services.iter().map(|s| s.as_str().to_string()));
    for (flag, value) in [
        ("--interval", format_duration(policy.interval)),
        ("--stall", format_duration(policy.stall)),
        ("--failures", policy.failures.to_string()),
        ("--grace", format_duration(policy.grace)),
        ("--max-restarts", policy.max_restarts.to_string()),
        ("--window", format_duration(policy.window)),
        ("--memory-wait", format_duration(policy.memory_wait)),
    ] {
        argv.extend([flag.to_string(), value]);
    }
    if let Some(listen) = &watch_args.metrics {
        argv.extend(["--metrics".to_string(), listen.clone()]);
    }
    if let Some(command) = &watch_args.on_give_up {
        argv.extend(["--on-give-up".to_string(), command.clone()]);
    }
    if watch_args.api_key_file.is_some() {
        return Err(Error::Usage(
            "--install keeps no key file in the unit. Fix: install it without --api-key-file; a relaunch then \
             reads STRIX_API_KEY from the unit's environment (`systemctl --user set-environment`)"
                .into(),
        ));
    }
    Ok(argv)
}

fn absolute(path: &Path) -> Result<String> {
    let absolute: PathBuf = std::path::absolute(path).map_err(|e| Error::read(path, e))?;
    absolute
        .to_str()
        .map(str::to_string)
        .ok_or_else(|| Error::Usage(format!("{} is not UTF-8, which a unit file cannot hold", absolute.display())))
}

fn config_home(settings: &Settings) -> Result<&Path> {
    settings
        .paths
        .config_home()
        .ok_or_else(|| Error::Usage("no place for a systemd user unit: neither XDG_CONFIG_HOME nor HOME is set".into()))
}

/// One event: a JSON line with `--json` (as the event log has it), else a line of text.
fn print_event(out: &Output, event: &WatchEvent) {
    if out.json() {
        out.line(&serde_json::to_string(event).unwrap_or_default());
        return;
    }
    let style = match event.state {
        State::Serving => Style::Ok,
        State::Loading | State::Paused | State::NodeDown => Style::Warn,
        _ => Style::Fail,
    };
    let reason = event.reason.as_deref().map_or(String::new(), |reason| format!(": {reason}"));
    out.line(&format!(
        "{} {} {} ({}){reason}",
        event.time,
        out.paint(&event.service, Style::Bold),
        out.paint(event.state.name(), style),
        serde_json::to_value(event.action).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
    ));
}

impl Render for PauseReport {
    fn render(&self, out: &Output) {
        let what = if self.paused { "paused" } else { "resumed" };
        let already = if self.already { " (it already was)" } else { "" };
        out.line(&format!("the cluster's watch is {what}{already}: {}", self.file));
    }
}

impl Render for UnitReport {
    fn render(&self, out: &Output) {
        if self.installed {
            out.line(&format!(
                "installed and started {} ({}); `systemctl --user status {}` shows it",
                self.unit, self.file, self.unit
            ));
        } else if self.systemctl.is_empty() {
            out.line(&format!("{} was not installed ({})", self.unit, self.file));
        } else {
            out.line(&format!("stopped and removed {} ({})", self.unit, self.file));
        }
    }
}
