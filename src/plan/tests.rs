//! Planning decisions: create, no-op, recreate on image or spec change, recovery, pruning.

use super::*;

const REPO: &str = "127.0.0.1:5000/vllm";

fn image(id: &str, pins: &[&str]) -> ImageInfo {
    ImageInfo { id: id.into(), repo_tags: pins.iter().map(|p| format!("{REPO}:{p}")).collect(), ..Default::default() }
}

fn desired(image_id: &str, hash: &str) -> DesiredToolbox {
    DesiredToolbox {
        name: "vllm".into(),
        repository: REPO.into(),
        image: image(image_id, &["latest", "20261101-100000"]),
        request: CreateRequest { name: "vllm".into(), image: format!("{REPO}:latest"), ..Default::default() },
        spec_hash: hash.into(),
        pin: Some("20261101-100000".into()),
        verify: None,
    }
}

fn container(name: &str, image_id: &str, hash: &str) -> ContainerInfo {
    let mut c = ContainerInfo { id: format!("id-{name}"), name: name.into(), ..Default::default() };
    c.labels.insert(labels::MANAGED.into(), "true".into());
    c.labels.insert(labels::IMAGE_ID.into(), image_id.into());
    c.labels.insert(labels::SPEC_HASH.into(), hash.into());
    c
}

fn kinds(plan: &RefreshPlan) -> Vec<&'static str> {
    plan.steps
        .iter()
        .map(|s| match s {
            Step::Restore { .. } => "restore",
            Step::RemoveLeftover { .. } => "remove-leftover",
            Step::Pin { .. } => "pin",
            Step::Create { .. } => "create",
            Step::Verify { .. } => "verify",
            Step::Swap { .. } => "swap",
            Step::Prune { .. } => "prune",
        })
        .collect()
}

#[test]
fn creates_when_absent_under_a_temporary_name() {
    let plan = plan_refresh(&desired("sha256:a", "h"), &CurrentState::default(), 2, false);
    assert_eq!(plan.action, Action::Created);
    assert_eq!(kinds(&plan), ["create", "swap"]);
    let Step::Create { request } = &plan.steps[0] else { panic!() };
    assert_eq!(request.name, "vllm-strix-new");
    assert_eq!(plan.steps[1], Step::Swap { temp: "vllm-strix-new".into(), name: "vllm".into(), old_id: None });
}

#[test]
fn unchanged_image_and_spec_is_an_empty_plan() {
    let current = CurrentState { container: Some(container("vllm", "sha256:a", "h")), ..Default::default() };
    let plan = plan_refresh(&desired("sha256:a", "h"), &current, 2, false);
    assert_eq!(plan.action, Action::Unchanged);
    assert!(plan.steps.is_empty(), "{:?}", plan.steps);
}

#[test]
fn force_recreates() {
    let current = CurrentState { container: Some(container("vllm", "sha256:a", "h")), ..Default::default() };
    let plan = plan_refresh(&desired("sha256:a", "h"), &current, 2, true);
    assert_eq!(plan.action, Action::Recreated);
    assert_eq!(kinds(&plan), ["create", "swap"]);
}

#[test]
fn new_image_or_new_spec_recreates_and_swaps_the_old_one_out() {
    let current = CurrentState { container: Some(container("vllm", "sha256:old", "h")), ..Default::default() };
    let plan = plan_refresh(&desired("sha256:new", "h"), &current, 2, false);
    assert_eq!(plan.action, Action::Recreated);
    assert!(plan.reason.contains("image changed"), "{}", plan.reason);
    assert!(!plan.replaces_running);
    assert_eq!(
        plan.steps[1],
        Step::Swap { temp: "vllm-strix-new".into(), name: "vllm".into(), old_id: Some("id-vllm".into()) }
    );

    let current = CurrentState { container: Some(container("vllm", "sha256:a", "other")), ..Default::default() };
    let plan = plan_refresh(&desired("sha256:a", "h"), &current, 2, false);
    assert!(plan.reason.contains("spec changed"), "{}", plan.reason);
}

#[test]
fn pins_an_image_that_lacks_its_date_tag() {
    let mut wanted = desired("sha256:a", "h");
    wanted.image.repo_tags = vec![format!("{REPO}:latest")];
    let current = CurrentState { container: Some(container("vllm", "sha256:a", "h")), ..Default::default() };
    let plan = plan_refresh(&wanted, &current, 2, false);
    assert_eq!(plan.steps, [Step::Pin { image_id: "sha256:a".into(), reference: format!("{REPO}:20261101-100000") }]);
}

#[test]
fn recovers_from_an_interrupted_swap_without_losing_the_toolbox() {
    let current = CurrentState {
        left_as_old: Some(container("vllm-strix-old", "sha256:a", "h")),
        left_as_new: Some(container("vllm-strix-new", "sha256:a", "h")),
        ..Default::default()
    };
    let plan = plan_refresh(&desired("sha256:a", "h"), &current, 2, false);
    assert_eq!(kinds(&plan), ["restore", "remove-leftover"]);
    assert_eq!(plan.steps[0], Step::Restore { from: "vllm-strix-old".into(), to: "vllm".into() });
    assert_eq!(plan.action, Action::Unchanged);
}

#[test]
fn prunes_pins_beyond_keep_newest_first() {
    let images = vec![
        image("sha256:cur", &["latest", "20261105-000000"]),
        image("sha256:d", &["20261104-000000"]),
        image("sha256:c", &["20261103-000000"]),
        image("sha256:b", &["20261102-000000"]),
        image("sha256:a", &["20261101-000000", "20261101-000001"]),
    ];
    let pruned = pins_to_prune(&images, REPO, "sha256:cur", 2);
    assert_eq!(
        pruned,
        [format!("{REPO}:20261102-000000"), format!("{REPO}:20261101-000001"), format!("{REPO}:20261101-000000")]
    );
    assert!(pins_to_prune(&images, REPO, "sha256:cur", 10).is_empty());
}

#[test]
fn pruning_a_spread_image_on_docker_removes_the_head_registrys_name_too() {
    let digest = format!("sha256:{}", "1".repeat(64));
    let path = REPO.split_once('/').map_or(REPO, |(_, path)| path);
    let mut spread = image("sha256:a", &["20261101-000000"]);
    // Docker keeps the digest under the name it pulled: the head's registry's.
    spread.repo_digests = vec![format!("192.168.100.1:5443/{path}@{digest}"), format!("{REPO}@{digest}")];
    // A name the user tagged in another registry is theirs: kept.
    let mut tagged = image("sha256:b", &["20261102-000000"]);
    tagged.repo_tags.push(format!("mirror.lan/{path}:mine"));
    tagged.repo_digests = vec![format!("mirror.lan/{path}@{digest}")];
    let pruned = pins_to_prune(&[spread, tagged], REPO, "sha256:cur", 0);
    assert_eq!(
        pruned,
        [
            format!("{REPO}:20261102-000000"),
            format!("{REPO}:20261101-000000"),
            format!("192.168.100.1:5443/{path}@{digest}")
        ]
    );
}

#[test]
fn spec_hash_ignores_name_image_and_our_labels() {
    let mut a = CreateRequest { name: "x".into(), image: "i".into(), ..Default::default() };
    a.labels.insert(labels::IMAGE_ID.into(), "sha256:1".into());
    let mut b = CreateRequest { name: "y".into(), image: "j".into(), ..Default::default() };
    b.labels.insert(labels::IMAGE_ID.into(), "sha256:2".into());
    assert_eq!(spec_hash(ManagerKind::Native, &a), spec_hash(ManagerKind::Native, &b));
    b.devices.push(("/dev/kfd".into(), "/dev/kfd".into()));
    assert_ne!(spec_hash(ManagerKind::Native, &a), spec_hash(ManagerKind::Native, &b));
    assert_ne!(spec_hash(ManagerKind::Native, &a), spec_hash(ManagerKind::Toolbox, &a));
}

#[test]
fn digest_from_the_repository() {
    let mut img = image("sha256:a", &[]);
    let (one, two) = (format!("sha256:{}", "1".repeat(64)), format!("sha256:{}", "2".repeat(64)));
    img.repo_digests = vec![format!("other/x@{one}"), format!("{REPO}@{two}")];
    assert_eq!(registry_digest(&img, REPO), Some(two.clone()));
    img.repo_digests.pop();
    assert_eq!(registry_digest(&img, REPO), Some(one.clone()), "else the first");
    // Asked for by digest: that one, whatever the engine lists first.
    img.repo_digests = vec![format!("{REPO}@{one}"), format!("{REPO}@{two}")];
    assert_eq!(pulled_digest(&img, REPO, &format!("{REPO}@{two}")), Some(two.clone()));
    assert_eq!(pulled_digest(&img, REPO, &format!("{REPO}:latest")), Some(one));
}

#[test]
fn says_when_the_replaced_toolbox_is_running() {
    let mut running = container("vllm", "sha256:old", "h");
    running.running = true;
    let current = CurrentState { container: Some(running), ..Default::default() };
    assert!(plan_refresh(&desired("sha256:new", "h"), &current, 2, false).replaces_running);
    assert!(!plan_refresh(&desired("sha256:old", "h"), &current, 2, false).replaces_running, "a no-op stops nothing");
}

#[test]
fn a_verified_refresh_checks_the_replacement_between_create_and_swap() {
    let expected = crate::verify::Expected {
        devices: vec!["/dev/kfd".into()],
        rdma: false,
        gids: vec![105],
        keep_groups: false,
        nccl_env: vec![],
        rccl_label: None,
        rdma_port: None,
        engine: "vllm".into(),
        programs: Vec::new(),
        cpu_only: false,
    };
    let mut wanted = desired("sha256:a", "h");
    wanted.verify = Some(expected);
    let plan = plan_refresh(&wanted, &CurrentState::default(), 2, false);
    assert_eq!(kinds(&plan), ["create", "verify", "swap"]);
    let Step::Verify { name, .. } = &plan.steps[1] else { panic!() };
    assert_eq!(name, "vllm-strix-new");
    // Staging for a cluster keeps the verification: every node proves its replacement first.
    assert_eq!(kinds(&plan.staging_only()), ["create", "verify"]);
    // A no-op verifies nothing: it stays fast.
    let current = CurrentState { container: Some(container("vllm", "sha256:a", "h")), ..Default::default() };
    assert!(kinds(&plan_refresh(&wanted, &current, 2, false)).is_empty());
}
