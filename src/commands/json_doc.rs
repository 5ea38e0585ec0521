//! `docs/json.md` holds an example of every command's `--json` output. Each must be exactly what
//! the command's report type reads and writes back: a field renamed, added or removed in the code
//! fails here until the page says so (and a release note does).

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::cluster::canary::CanaryReport;
use crate::cluster::checks::ClusterDoctorReport;
use crate::cluster::disconnect::DisconnectReport;
use crate::cluster::fit::FitReport;
use crate::cluster::install::InstallReport;
use crate::cluster::launch::LaunchReport;
use crate::cluster::model::{ModelListReport, ModelPullReport};
use crate::cluster::recipe::try_layouts::TryReport;
use crate::cluster::recipe::Recipe;
use crate::cluster::refresh::ClusterRefreshReport;
use crate::cluster::status::ClusterStatusReport;
use crate::cluster::stop::StopReport;
use crate::cluster::top::TopFrame;
use crate::cluster::verify::ClusterVerifyReport;
use crate::error::ErrorObject;
use crate::ops::build::BuildOutcome;
use crate::ops::detect::DetectReport;
use crate::ops::doctor::DoctorReport;
use crate::ops::refresh::RefreshReport;
use crate::ops::remove::RemoveReport;
use crate::rccl::RcclReport;
use crate::toolbox::status::ToolboxStatus;
use crate::verify::VerifyReport;

const PAGE: &str = include_str!("../../docs/json.md");

/// Every ```` ```json NAME ```` block of the page, by name.
fn examples() -> BTreeMap<String, Value> {
    let mut found = BTreeMap::new();
    let mut lines = PAGE.lines();
    while let Some(line) = lines.next() {
        let Some(name) = line.strip_prefix("```json ") else { continue };
        let block: Vec<&str> = lines.by_ref().take_while(|line| *line != "```").collect();
        let value = serde_json::from_str(&block.join("\n"))
            .unwrap_or_else(|e| panic!("docs/json.md: the {name} example is not JSON: {e}"));
        assert!(found.insert(name.to_string(), value).is_none(), "docs/json.md: two examples named {name}");
    }
    found
}

/// The example `name` reads as a `T` and writes back as itself.
fn check<T: Serialize + DeserializeOwned>(examples: &mut BTreeMap<String, Value>, name: &str) {
    let example = examples.remove(name).unwrap_or_else(|| panic!("docs/json.md has no {name} example"));
    let report: T = serde_json::from_value(example.clone())
        .unwrap_or_else(|e| panic!("docs/json.md: the {name} example is not what the command prints: {e}"));
    let printed = serde_json::to_value(&report).expect("a report encodes");
    assert_eq!(printed, example, "docs/json.md: the {name} example differs from what the command prints");
}

#[test]
fn every_example_is_what_its_command_prints() {
    let mut examples = examples();
    check::<DetectReport>(&mut examples, "detect");
    check::<DoctorReport>(&mut examples, "doctor");
    check::<RefreshReport>(&mut examples, "refresh");
    check::<RefreshReport>(&mut examples, "refresh-dry-run");
    check::<VerifyReport>(&mut examples, "verify");
    check::<super::status::StatusShown>(&mut examples, "status");
    check::<Vec<ToolboxStatus>>(&mut examples, "list");
    check::<RemoveReport>(&mut examples, "rm");
    check::<FitReport>(&mut examples, "plan");
    check::<LaunchReport>(&mut examples, "launch");
    check::<StopReport>(&mut examples, "stop");
    check::<ModelPullReport>(&mut examples, "model-pull");
    check::<ModelListReport>(&mut examples, "model-list");
    check::<BuildOutcome>(&mut examples, "build");
    check::<RcclReport>(&mut examples, "rccl-inspect");
    check::<RcclReport>(&mut examples, "rccl-inspect-against");
    check::<super::cluster::init::Initialized>(&mut examples, "cluster-init");
    check::<ClusterDoctorReport>(&mut examples, "cluster-doctor");
    check::<ClusterRefreshReport>(&mut examples, "cluster-refresh");
    check::<CanaryReport>(&mut examples, "cluster-refresh-canary");
    check::<ClusterVerifyReport>(&mut examples, "cluster-verify");
    check::<TryReport>(&mut examples, "cluster-plan-try");
    check::<Vec<Recipe>>(&mut examples, "cluster-plan-recipes");
    check::<ClusterStatusReport>(&mut examples, "cluster-status");
    check::<crate::cluster::watch::events::WatchEvent>(&mut examples, "cluster-watch");
    check::<crate::cluster::watch::pause::PauseReport>(&mut examples, "cluster-watch-pause");
    check::<crate::cluster::watch::install::UnitReport>(&mut examples, "cluster-watch-install");
    check::<TopFrame>(&mut examples, "cluster-top");
    check::<InstallReport>(&mut examples, "cluster-install");
    check::<DisconnectReport>(&mut examples, "cluster-disconnect");
    check::<ErrorObject>(&mut examples, "error");
    assert!(examples.is_empty(), "docs/json.md: examples no test checks: {:?}", examples.keys());
}
