//! The container spec and the tool schema, as data.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use airlock_driver_docker::{AgentBrowserInput, ContainerOptions, Resources, container_spec};

#[test]
fn container_spec_snapshot() {
    let options = ContainerOptions {
        image: "airlock-browser:0.1.0".into(),
        task_id: "t1".into(),
        owner: "boot=b;pid=1;start=2".into(),
        version: "0.1.0".into(),
        user: (1000, 1000),
        socket_dir: "/tmp/airlock-egress-abc".into(),
        lifetime_secs: 360,
        resources: Resources::default(),
    };
    assert_eq!(options.name(), "airlock-task-t1");
    let spec = serde_json::to_value(container_spec(&options)).unwrap();
    insta::assert_json_snapshot!(spec);
}

#[test]
fn tool_schema_snapshot() {
    let schema = serde_json::to_value(schemars::schema_for!(AgentBrowserInput)).unwrap();
    insta::assert_json_snapshot!(schema);
}
