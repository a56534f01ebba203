//! The Docker gate's judgement, table-driven: every field of a create body that changes
//! isolation, in each spelling dockerd would read, is refused; the calls Airlock makes are
//! admitted and re-written; everything else is refused with a reason naming it. (The driver's
//! real specs are judged in `crates/driver-docker/tests/spec.rs`, from its own spec function.)

#![allow(clippy::unwrap_used, clippy::expect_used)]
// The tables read top to bottom; splitting them would hide which fields are covered.
#![allow(clippy::too_many_lines)]

use airlock_policy::{GateLimits, GateRefusal, GateRules, judge_docker_call};
use serde_json::{Value, json};

const PROFILE: &str = r#"{"defaultAction":"SCMP_ACT_ERRNO"}"#;

fn rules() -> GateRules {
    GateRules {
        image: "airlock-browser:0.1.0".into(),
        runtimes: vec!["runc".into(), "runsc".into()],
        egress_parent: "/tmp".into(),
        gate_id: "node-1".into(),
        seccomp_profile: PROFILE.into(),
        allow_no_browser_sandbox: false,
        limits: GateLimits::default(),
    }
}

/// A create body of the driver's shape.
fn sealed() -> Value {
    json!({
        "Env": ["BROWSER_LIFETIME_SECONDS=360", "AIRLOCK_BROWSER_SANDBOX=on",
                "AIRLOCK_RELAY_MODE=handoff", "AIRLOCK_DEV_SHM=off"],
        "HostConfig": {
            "AutoRemove": true,
            "Binds": ["/tmp/airlock-egress-b1p2s3-AbC123/sockets:/egress:ro"],
            "CapDrop": ["ALL"],
            "Init": true,
            "IpcMode": "private",
            "Memory": 1_073_741_824_u64,
            "MemorySwap": 1_073_741_824_u64,
            "NanoCpus": 1_500_000_000_u64,
            "NetworkMode": "none",
            "PidsLimit": 512,
            "ReadonlyRootfs": true,
            "Runtime": "runc",
            "SecurityOpt": ["no-new-privileges", format!("seccomp={PROFILE}")],
            "Tmpfs": {"/tmp": "rw,nosuid,nodev,size=512m,mode=1777"},
            "Ulimits": [{"Hard": 4096, "Name": "nofile", "Soft": 4096}]
        },
        "Image": "airlock-browser:0.1.0",
        "Labels": {"airlock.owner": "boot=b;pid=1;start=2", "airlock.task": "t1",
                   "airlock.version": "0.1.0"},
        "NetworkDisabled": true,
        "User": "2000000000:2000000000"
    })
}

fn create(body: &Value) -> Result<airlock_policy::Forward, GateRefusal> {
    judge_docker_call(
        "POST",
        "/v1.41/containers/create?name=airlock-task-t1",
        &serde_json::to_vec(body).unwrap(),
        &rules(),
    )
}

fn refused(body: &Value) -> String {
    create(body).expect_err(&body.to_string()).to_string()
}

#[test]
fn the_sealed_container_is_admitted_and_written_by_the_gate() {
    let forward = create(&sealed()).unwrap();
    assert_eq!(
        forward.target,
        "/v1.41/containers/create?name=airlock-task-t1"
    );
    let written: Value = serde_json::from_slice(forward.body.as_ref().unwrap()).unwrap();
    let mut expected = sealed();
    expected["Labels"]["airlock.gate"] = json!("node-1");
    assert_eq!(written, expected);
    let admitted = forward.create.unwrap();
    assert_eq!(
        admitted.bind_source,
        "/tmp/airlock-egress-b1p2s3-AbC123/sockets"
    );
    assert!(admitted.browser_sandbox);
}

/// The explicit no-sandbox variant (Docker's default profile, `AIRLOCK_BROWSER_SANDBOX=off`) is
/// refused, naming the switch, unless the gate's operator allows it; then it is admitted (and
/// logged by the gate).
#[test]
fn the_no_sandbox_variant_needs_the_operators_switch() {
    let mut plain = sealed();
    plain["HostConfig"]["SecurityOpt"] = json!(["no-new-privileges"]);
    plain["Env"][1] = json!("AIRLOCK_BROWSER_SANDBOX=off");
    let why = refused(&plain);
    assert!(why.contains("--allow-no-browser-sandbox"), "{why}");
    let allowing = GateRules {
        allow_no_browser_sandbox: true,
        ..rules()
    };
    let forward = judge_docker_call(
        "POST",
        "/v1.41/containers/create?name=airlock-task-t1",
        &serde_json::to_vec(&plain).unwrap(),
        &allowing,
    )
    .unwrap();
    assert!(!forward.create.unwrap().browser_sandbox);
}

/// The environment and the seccomp profile must tell one story: the sandbox switched off under
/// the profile that opens user namespaces for it (weaker than either variant), on under Docker's
/// default profile, or not said at all, is refused, whatever the operator allows.
#[test]
fn the_sandbox_setting_must_match_the_seccomp_profile() {
    let allowing = GateRules {
        allow_no_browser_sandbox: true,
        ..rules()
    };
    let judged = |body: &Value| {
        judge_docker_call(
            "POST",
            "/v1.41/containers/create?name=airlock-task-t1",
            &serde_json::to_vec(body).unwrap(),
            &allowing,
        )
    };
    let mut off_under_profile = sealed();
    off_under_profile["Env"][1] = json!("AIRLOCK_BROWSER_SANDBOX=off");
    let mut on_without_profile = sealed();
    on_without_profile["HostConfig"]["SecurityOpt"] = json!(["no-new-privileges"]);
    let mut unsaid = sealed();
    unsaid["Env"] = json!(["BROWSER_LIFETIME_SECONDS=360", "AIRLOCK_RELAY_MODE=handoff"]);
    for body in [off_under_profile, on_without_profile, unsaid] {
        let why = judged(&body).unwrap_err().to_string();
        assert!(why.contains("AIRLOCK_BROWSER_SANDBOX must be"), "{why}");
    }
}

/// Each field that would open the seal, as a HostConfig key, in Docker's spelling, lower case,
/// upper case, and beside the right spelling (a duplicate under folding).
#[test]
fn every_isolation_field_is_refused_in_every_spelling() {
    let opening = [
        ("Privileged", json!(true)),
        ("CapAdd", json!(["SYS_ADMIN"])),
        (
            "Devices",
            json!([{"PathOnHost": "/dev/mem", "PathInContainer": "/dev/mem"}]),
        ),
        ("DeviceRequests", json!([{"Count": -1}])),
        ("DeviceCgroupRules", json!(["a *:* rwm"])),
        ("PidMode", json!("host")),
        ("UTSMode", json!("host")),
        ("UsernsMode", json!("host")),
        ("CgroupnsMode", json!("host")),
        ("Cgroup", json!("host")),
        ("CgroupParent", json!("/")),
        (
            "Mounts",
            json!([{"Type": "bind", "Source": "/", "Target": "/host"}]),
        ),
        ("VolumesFrom", json!(["other"])),
        ("VolumeDriver", json!("local")),
        ("Sysctls", json!({"kernel.core_pattern": "|/tmp/x"})),
        ("PortBindings", json!({"9222/tcp": [{"HostPort": "9222"}]})),
        ("PublishAllPorts", json!(true)),
        ("ExtraHosts", json!(["metadata:169.254.169.254"])),
        ("Links", json!(["db"])),
        ("MaskedPaths", json!([])),
        ("ReadonlyPaths", json!([])),
        ("OomKillDisable", json!(true)),
        ("OomScoreAdj", json!(-1000)),
        ("Dns", json!(["10.0.0.2"])),
        (
            "LogConfig",
            json!({"Type": "syslog", "Config": {"syslog-address": "tcp://10.0.0.1:514"}}),
        ),
    ];
    for (key, value) in opening {
        for spelling in [key.to_owned(), key.to_lowercase(), key.to_uppercase()] {
            let mut body = sealed();
            body["HostConfig"][&spelling] = value.clone();
            let why = refused(&body);
            assert!(why.contains(&spelling), "{spelling}: {why}");
        }
    }
    // Top-level keys that change what runs or where.
    for (key, value) in [
        ("Entrypoint", json!(["/bin/sh"])),
        ("Cmd", json!(["sh", "-c", "id"])),
        ("Volumes", json!({"/host": {}})),
        (
            "NetworkingConfig",
            json!({"EndpointsConfig": {"bridge": {}}}),
        ),
        ("Hostname", json!("x")),
        ("WorkingDir", json!("/")),
        ("Healthcheck", json!({"Test": ["CMD", "sh"]})),
        ("Privileged", json!(true)),
        ("Binds", json!(["/:/host"])),
    ] {
        let mut body = sealed();
        body[key] = value;
        assert!(refused(&body).contains(key), "{key}");
    }
}

#[test]
fn every_sealed_field_must_hold_its_value() {
    let changes: Vec<(&str, &str, Value)> = vec![
        ("HostConfig", "Binds", json!(["/:/egress:ro"])),
        (
            "HostConfig",
            "Binds",
            json!(["/tmp/airlock-egress-x/sockets:/egress"]),
        ),
        (
            "HostConfig",
            "Binds",
            json!(["/tmp/airlock-egress-x/../../etc:/egress:ro"]),
        ),
        (
            "HostConfig",
            "Binds",
            json!(["/tmp/airlock-egress-x/sockets:/egress:ro", "/:/host:ro"]),
        ),
        (
            "HostConfig",
            "Binds",
            json!(["/tmp/airlock-egress-x/sockets:/egress:rw"]),
        ),
        ("HostConfig", "NetworkMode", json!("host")),
        ("HostConfig", "NetworkMode", json!("bridge")),
        ("HostConfig", "ReadonlyRootfs", json!(false)),
        ("HostConfig", "CapDrop", json!([])),
        ("HostConfig", "CapDrop", json!(["NET_RAW"])),
        ("HostConfig", "IpcMode", json!("host")),
        ("HostConfig", "Init", json!(false)),
        ("HostConfig", "AutoRemove", json!(false)),
        ("HostConfig", "SecurityOpt", json!(["seccomp=unconfined"])),
        (
            "HostConfig",
            "SecurityOpt",
            json!(["no-new-privileges", "seccomp=unconfined"]),
        ),
        (
            "HostConfig",
            "SecurityOpt",
            json!(["no-new-privileges", "apparmor=unconfined"]),
        ),
        (
            "HostConfig",
            "SecurityOpt",
            json!([
                "no-new-privileges",
                format!("seccomp={PROFILE}"),
                "label=disable"
            ]),
        ),
        ("HostConfig", "SecurityOpt", json!([])),
        ("HostConfig", "Runtime", json!("kata")),
        ("HostConfig", "Memory", json!(0)),
        ("HostConfig", "Memory", json!(-1)),
        ("HostConfig", "Memory", json!(1e30)),
        ("HostConfig", "MemorySwap", json!(-1)),
        ("HostConfig", "PidsLimit", json!(-1)),
        ("HostConfig", "PidsLimit", json!(0)),
        ("HostConfig", "NanoCpus", json!(64_000_000_000_u64)),
        (
            "HostConfig",
            "Tmpfs",
            json!({"/tmp": "rw,size=512m,mode=1777"}),
        ),
        (
            "HostConfig",
            "Tmpfs",
            json!({"/tmp": "rw,nosuid,nodev,size=999999m,mode=1777"}),
        ),
        (
            "HostConfig",
            "Tmpfs",
            json!({"/tmp": "rw,nosuid,nodev,size=512m,mode=1777", "/run": "rw"}),
        ),
        (
            "HostConfig",
            "Tmpfs",
            json!({"/etc": "rw,nosuid,nodev,size=512m,mode=1777"}),
        ),
        (
            "HostConfig",
            "Ulimits",
            json!([{"Name": "nofile", "Soft": 4096, "Hard": 1_000_000}]),
        ),
        (
            "HostConfig",
            "Ulimits",
            json!([{"Name": "core", "Soft": -1, "Hard": -1}]),
        ),
        ("", "Image", json!("alpine")),
        ("", "User", json!("0:0")),
        ("", "User", json!("root")),
        ("", "User", json!("2000000000")),
        ("", "User", json!("0:2000000000")),
        ("", "NetworkDisabled", json!(false)),
        ("", "Env", json!(["LD_PRELOAD=/tmp/x.so"])),
        ("", "Env", json!(["AIRLOCK_RELAY_MODE=tcp"])),
        (
            "",
            "Labels",
            json!({"airlock.task": "t1", "airlock.owner": "o", "airlock.version": "v", "airlock.gate": "node-1"}),
        ),
        (
            "",
            "Labels",
            json!({"airlock.task": "other", "airlock.owner": "o", "airlock.version": "v"}),
        ),
    ];
    for (parent, key, value) in changes {
        let mut body = sealed();
        if parent.is_empty() {
            body[key] = value.clone();
        } else {
            body[parent][key] = value.clone();
        }
        assert!(create(&body).is_err(), "{parent}.{key} = {value}");
    }
    for missing in ["NetworkDisabled", "HostConfig", "User", "Image"] {
        let mut body = sealed();
        body.as_object_mut().unwrap().remove(missing);
        assert!(create(&body).is_err(), "without {missing}");
    }
    for missing in [
        "NetworkMode",
        "ReadonlyRootfs",
        "CapDrop",
        "SecurityOpt",
        "Memory",
        "PidsLimit",
        "Binds",
        "Runtime",
    ] {
        let mut body = sealed();
        body["HostConfig"].as_object_mut().unwrap().remove(missing);
        assert!(create(&body).is_err(), "without HostConfig.{missing}");
    }
}

/// Raw bytes: duplicates dockerd would read its own way, and keys it would fold.
#[test]
fn bodies_with_a_second_reading_are_refused() {
    let text = serde_json::to_string(&sealed()).unwrap();
    for (from, to) in [
        (
            r#""NetworkDisabled":true"#,
            r#""NetworkDisabled":true,"NetworkDisabled":false"#,
        ),
        (
            r#""NetworkDisabled":true"#,
            r#""NetworkDisabled":true,"networkdisabled":false"#,
        ),
        (
            r#""ReadonlyRootfs":true"#,
            r#""ReadonlyRootfs":true,"READONLYROOTFS":false"#,
        ),
        (
            r#""Init":true"#,
            r#""Init":true,"Privileged":false,"privileged":true"#,
        ),
        (r#""Init":true"#, "\"Init\":true,\"Privi\u{17f}ged\":true"),
        (r#""Init":true"#, r#""Init":true,"Unknown":1"#),
    ] {
        assert!(text.contains(from));
        let body = text.replacen(from, to, 1);
        let result = judge_docker_call(
            "POST",
            "/containers/create?name=airlock-task-t1",
            body.as_bytes(),
            &rules(),
        );
        assert!(result.is_err(), "{to}");
    }
    // Another name, or a second parameter.
    for target in [
        "/containers/create?name=other",
        "/containers/create",
        "/containers/create?name=airlock-task-t1&platform=linux",
        "/containers/create?name=airlock-task-t1&name=airlock-task-t1",
    ] {
        assert!(
            judge_docker_call("POST", target, text.as_bytes(), &rules()).is_err(),
            "{target}"
        );
    }
    // bollard's empty platform is the daemon's own: admitted, and not passed on.
    for target in [
        "/containers/create?name=airlock-task-t1&platform=",
        "/containers/create?platform=&name=airlock-task-t1",
    ] {
        let forward = judge_docker_call("POST", target, text.as_bytes(), &rules()).unwrap();
        assert_eq!(forward.target, "/containers/create?name=airlock-task-t1");
    }
}

#[test]
fn execs_run_the_drivers_commands_only_as_the_containers_user() {
    let exec = |body: Value| {
        judge_docker_call(
            "POST",
            "/v1.41/containers/airlock-task-t1/exec",
            &serde_json::to_vec(&body).unwrap(),
            &rules(),
        )
    };
    let attached = |cmd: Value| json!({"AttachStdin": true, "AttachStdout": true, "AttachStderr": true, "Tty": false, "Cmd": cmd});
    for cmd in [
        json!(["/usr/local/bin/airlock-runner"]),
        json!(["/usr/local/bin/airlock-cdp-browser"]),
        json!([
            "timeout",
            "--kill-after=2",
            "30",
            "agent-browser",
            "open",
            "https://example.com"
        ]),
        json!([
            "timeout",
            "--kill-after=2",
            "5",
            "sh",
            "-c",
            "pgrep chromium"
        ]),
        // The live view's relay to agent-browser's stream server.
        json!([
            "/usr/local/bin/airlock-relay",
            "--stdio-to",
            "127.0.0.1:9223"
        ]),
        // The driver's DevTools session (a device's touch), on the port Chromium chose.
        json!([
            "/usr/local/bin/airlock-relay",
            "--stdio-to",
            "127.0.0.1:41235"
        ]),
    ] {
        assert!(exec(attached(cmd.clone())).is_ok(), "{cmd}");
    }
    for cmd in [
        // The relay to any place but the container's loopback, spelled otherwise, or as
        // anything else.
        json!([
            "/usr/local/bin/airlock-relay",
            "--stdio-to",
            "127.0.0.1:09223"
        ]),
        json!(["/usr/local/bin/airlock-relay", "--stdio-to", "127.0.0.1:0"]),
        json!([
            "/usr/local/bin/airlock-relay",
            "--stdio-to",
            "127.0.0.1:65536"
        ]),
        json!([
            "/usr/local/bin/airlock-relay",
            "--stdio-to",
            "localhost:9223"
        ]),
        json!([
            "/usr/local/bin/airlock-relay",
            "--copy-to",
            "127.0.0.1:9223"
        ]),
        json!([
            "/usr/local/bin/airlock-relay",
            "--stdio-to",
            "10.0.0.1:9223"
        ]),
        json!(["/usr/local/bin/airlock-relay", "--stdio-to", "0.0.0.0:9224"]),
        json!(["/usr/local/bin/airlock-relay"]),
        json!([
            "/usr/local/bin/airlock-relay",
            "--stdio-to",
            "127.0.0.1:9223",
            "x"
        ]),
        json!(["sh"]),
        json!(["/bin/bash", "-c", "id"]),
        json!(["timeout", "30", "sh"]),
        json!([]),
    ] {
        assert!(exec(attached(cmd.clone())).is_err(), "{cmd}");
    }
    let runner = json!(["/usr/local/bin/airlock-runner"]);
    for (key, value) in [
        ("User", json!("0")),
        ("user", json!("root")),
        ("Privileged", json!(true)),
        ("privileged", json!(false)),
        ("Env", json!(["LD_PRELOAD=x"])),
        ("WorkingDir", json!("/")),
        ("Tty", json!(true)),
    ] {
        let mut body = attached(runner.clone());
        body[key] = value;
        assert!(exec(body).unwrap_err().to_string().contains(key), "{key}");
    }
    let start =
        |body: &str| judge_docker_call("POST", "/exec/abc123/start", body.as_bytes(), &rules());
    assert!(start(r#"{"Detach":false,"Tty":false}"#).is_ok());
    assert!(start(r#"{"Detach":false,"Tty":false,"OutputCapacity":65536}"#).is_ok());
    assert!(start(r#"{"Detach":true,"Tty":false}"#).is_err());
    assert!(start(r#"{"Detach":false,"Tty":true}"#).is_err());
}

#[test]
fn lists_and_events_are_narrowed_to_the_gates_containers() {
    let list = judge_docker_call(
        "GET",
        "/v1.41/containers/json?all=true&filters=%7B%22label%22%3A%5B%22airlock.task%22%5D%7D",
        b"",
        &rules(),
    )
    .unwrap();
    assert!(
        list.target.ends_with(
            "filters=%7B%22label%22%3A%5B%22airlock.task%22%2C%22airlock.gate%3Dnode-1%22%5D%7D"
        ),
        "{}",
        list.target
    );
    for target in [
        "/containers/json",
        "/containers/json?all=true",
        "/containers/json?filters=%7B%7D",
        "/containers/json?filters=%7B%22label%22%3A%7B%22airlock.task%22%3Atrue%7D%7D",
        "/containers/json?filters=%7B%22label%22%3A%5B%22x%22%5D%7D",
        "/containers/json?filters=%7B%22label%22%3A%5B%22airlock.task%22%5D%7D&size=true",
        "/events",
        "/events?filters=%7B%22container%22%3A%5B%22airlock-task-t1%22%5D%7D",
        "/events?filters=%7B%22label%22%3A%5B%22airlock.task%22%5D%2C%22type%22%3A%5B%22image%22%5D%7D",
    ] {
        assert!(
            judge_docker_call("GET", target, b"", &rules()).is_err(),
            "{target}"
        );
    }
    let events = judge_docker_call(
        "GET",
        "/events?since=1700000000&filters=%7B%22label%22%3A%5B%22airlock.task%3Dt1%22%5D%7D",
        b"",
        &rules(),
    )
    .unwrap();
    assert!(
        events.target.contains("type%22%3A%5B%22container"),
        "{}",
        events.target
    );
}

#[test]
fn the_other_calls_airlock_makes_are_admitted_with_their_own_parameters_only() {
    let r = rules();
    for (method, target, body) in [
        ("GET", "/_ping", ""),
        ("HEAD", "/_ping", ""),
        ("GET", "/v1.41/version", ""),
        ("GET", "/v1.41/info", ""),
        ("GET", "/v1.41/images/airlock-browser:0.1.0/json", ""),
        ("POST", "/v1.41/containers/airlock-task-t1/start", ""),
        ("POST", "/v1.41/containers/airlock-task-t1/pause", ""),
        ("POST", "/v1.41/containers/airlock-task-t1/unpause", ""),
        (
            "POST",
            "/v1.41/containers/airlock-task-t1/kill?signal=KILL",
            "",
        ),
        (
            "POST",
            "/v1.41/containers/airlock-task-t1/wait?condition=removed",
            "",
        ),
        (
            "POST",
            "/v1.41/containers/airlock-task-t1/update",
            r#"{"CpuShares":2}"#,
        ),
        ("GET", "/v1.41/containers/airlock-task-t1/json", ""),
        ("DELETE", "/v1.41/containers/airlock-task-t1?force=true", ""),
        (
            "DELETE",
            "/v1.41/containers/airlock-task-t1?v=false&force=true&link=false",
            "",
        ),
        (
            "GET",
            "/v1.41/containers/airlock-task-t1/json?size=false",
            "",
        ),
        ("GET", "/v1.41/exec/abc/json", ""),
    ] {
        let forward = judge_docker_call(method, target, body.as_bytes(), &r);
        assert!(forward.is_ok(), "{method} {target}: {forward:?}");
    }
    for (method, target, body) in [
        ("GET", "/v1.41/images/alpine/json", ""),
        (
            "POST",
            "/v1.41/containers/airlock-task-t1/start?detachKeys=ctrl-x",
            "",
        ),
        (
            "POST",
            "/v1.41/containers/airlock-task-t1/update",
            r#"{"CpuShares":2,"Memory":-1}"#,
        ),
        (
            "POST",
            "/v1.41/containers/airlock-task-t1/update",
            r#"{"CpuShares":999999}"#,
        ),
        ("POST", "/v1.41/containers/airlock-task-t1/start", "{}"),
        (
            "DELETE",
            "/v1.41/containers/airlock-task-t1?force=true&link=true",
            "",
        ),
        (
            "GET",
            "/containers/json?all=true&size=true&filters=%7B%22label%22%3A%5B%22airlock.task%22%5D%7D",
            "",
        ),
        (
            "GET",
            "/v1.41/containers/airlock-task-t1/json?size=true",
            "",
        ),
        (
            "POST",
            "/v1.41/containers/airlock-task-t1/kill?signal=../../x",
            "",
        ),
        ("POST", "/v1.41/containers/prune", ""),
        ("POST", "/v1.41/volumes/create", "{}"),
        ("POST", "/v1.41/networks/create", "{}"),
        ("POST", "/v1.41/plugins/pull", ""),
        ("POST", "/v1.41/session", ""),
        (
            "PUT",
            "/v1.41/containers/airlock-task-t1/archive?path=/",
            "",
        ),
        (
            "GET",
            "/v1.41/containers/airlock-task-t1/archive?path=/",
            "",
        ),
        ("POST", "/v1.41/containers/airlock-task-t1/attach", ""),
        ("POST", "/v1.41/containers/airlock-task-t1/commit", ""),
    ] {
        let refusal = judge_docker_call(method, target, body.as_bytes(), &r);
        assert!(refusal.is_err(), "{method} {target}");
    }
}
