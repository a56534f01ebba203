//! The container spec and the tool schema, as data.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use airlock_driver_docker::{
    AgentBrowserInput, ContainerOptions, Resources, SECCOMP_PROFILE, container_spec, relay_mode,
};

/// A task's options, as the driver makes them, under `runtime`.
fn options(runtime: &str) -> ContainerOptions {
    ContainerOptions {
        image: "airlock-browser:0.1.0".into(),
        task_id: "t1".into(),
        owner: "boot=b;pid=1;start=2".into(),
        version: "0.1.0".into(),
        user: (1000, 1000),
        socket_dir: "/tmp/airlock-egress-abc".into(),
        lifetime_secs: 360,
        resources: Resources::default(),
        browser_sandbox: true,
        runtime: runtime.into(),
        extra_ca: false,
        launch_env: Vec::new(),
    }
}

#[test]
fn container_spec_snapshot() {
    let options = options("runc");
    assert_eq!(options.name(), "airlock-task-t1");
    let mut spec = serde_json::to_value(container_spec(&options)).unwrap();
    // The profile is data of its own (docker/seccomp.json, checked below); the snapshot names it.
    let seccomp = spec["HostConfig"]["SecurityOpt"][1].take();
    assert_eq!(seccomp, format!("seccomp={SECCOMP_PROFILE}"));
    spec["HostConfig"]["SecurityOpt"][1] = "seccomp=<docker/seccomp.json>".into();
    insta::assert_json_snapshot!(spec);

    // An extra CA is named to agent-browser; without one, nothing is.
    let env = |extra_ca| {
        let spec = container_spec(&ContainerOptions {
            extra_ca,
            ..options.clone()
        });
        spec.env.unwrap_or_default().join(" ")
    };
    assert!(
        env(true).contains("AGENT_BROWSER_CA_CERT=/tmp/airlock-ca/ca.pem"),
        "{}",
        env(true)
    );
    assert!(!env(false).contains("AGENT_BROWSER_CA_CERT"));

    // Opting out of Chromium's sandbox drops the profile (Docker's default applies) and tells
    // the image's launcher.
    let plain = serde_json::to_value(container_spec(&ContainerOptions {
        browser_sandbox: false,
        ..options
    }))
    .unwrap();
    assert_eq!(
        plain["HostConfig"]["SecurityOpt"],
        serde_json::json!(["no-new-privileges"])
    );
    assert!(
        plain["Env"]
            .as_array()
            .unwrap()
            .contains(&"AIRLOCK_BROWSER_SANDBOX=off".into())
    );
}

#[test]
fn a_sized_dev_shm_is_set_and_announced_only_when_asked() {
    let default = serde_json::to_value(container_spec(&options("runc"))).unwrap();
    assert!(default["HostConfig"].get("ShmSize").is_none());
    let env = |spec: &serde_json::Value, entry: &str| {
        spec["Env"].as_array().unwrap().contains(&entry.into())
    };
    assert!(env(&default, "AIRLOCK_DEV_SHM=off"));
    let sized = serde_json::to_value(container_spec(&ContainerOptions {
        resources: Resources {
            dev_shm_mib: 256,
            ..Resources::default()
        },
        ..options("runc")
    }))
    .unwrap();
    assert_eq!(sized["HostConfig"]["ShmSize"], 256 * 1024 * 1024);
    // The image's launcher drops --disable-dev-shm-usage only on this.
    assert!(env(&sized, "AIRLOCK_DEV_SHM=on"));
}

#[test]
fn gvisor_gets_its_runtime_and_the_copying_relay() {
    let options = options("runsc");
    let spec = serde_json::to_value(container_spec(&options)).unwrap();
    assert_eq!(spec["HostConfig"]["Runtime"], "runsc");
    assert_eq!(spec["HostConfig"]["NetworkMode"], "none");
    assert!(
        spec["Env"]
            .as_array()
            .unwrap()
            .contains(&"AIRLOCK_RELAY_MODE=copy".into())
    );
    // gVisor's ptrace platform spends host pids on stub threads: the runc limit (512) made its
    // sentry panic mid-page, so the host limit is raised for it and only for it.
    assert_eq!(spec["HostConfig"]["PidsLimit"], 4096);
    let runc = serde_json::to_value(container_spec(&self::options("runc"))).unwrap();
    assert_eq!(runc["HostConfig"]["PidsLimit"], 512);
    assert_eq!(relay_mode("runc"), "handoff");
    assert_eq!(relay_mode("crun"), "handoff");
    assert_eq!(relay_mode("runsc"), "copy");
    assert_eq!(relay_mode("kata-runtime"), "copy");
}

// Namespace flags of clone(2) and unshare(2).
const CLONE_NEWNS: u64 = 0x0002_0000;
const CLONE_NEWCGROUP: u64 = 0x0200_0000;
const CLONE_NEWUTS: u64 = 0x0400_0000;
const CLONE_NEWIPC: u64 = 0x0800_0000;
const CLONE_NEWUSER: u64 = 0x1000_0000;
const CLONE_NEWPID: u64 = 0x2000_0000;
const CLONE_NEWNET: u64 = 0x4000_0000;

#[test]
fn the_seccomp_profile_refuses_by_default_and_opens_only_what_chromium_needs() {
    let profile: serde_json::Value = serde_json::from_str(SECCOMP_PROFILE).unwrap();
    assert_eq!(profile["defaultAction"], "SCMP_ACT_ERRNO");
    let rules = profile["syscalls"].as_array().unwrap();
    let allowed_unconditionally: Vec<&str> = rules
        .iter()
        .filter(|rule| rule["action"] == "SCMP_ACT_ALLOW" && rule.get("args").is_none())
        .flat_map(|rule| rule["names"].as_array().unwrap())
        .filter_map(serde_json::Value::as_str)
        .collect();
    for refused in [
        "mount",
        "umount2",
        "pivot_root",
        "setns",
        "ptrace",
        "bpf",
        "perf_event_open",
        "keyctl",
        "add_key",
        "init_module",
        "finit_module",
        "kexec_load",
        "open_by_handle_at",
        "userfaultfd",
        "io_uring_setup",
        "process_vm_readv",
        "reboot",
        "swapon",
        "clock_settime",
        "unshare",
        "clone",
        "clone3",
        "personality",
        "socket",
    ] {
        assert!(
            !allowed_unconditionally.contains(&refused),
            "{refused} is allowed outright"
        );
    }
    for needed in [
        "chroot",
        "seccomp",
        "prctl",
        "futex",
        "mmap",
        "socketpair",
        "execve",
    ] {
        assert!(
            allowed_unconditionally.contains(&needed),
            "{needed} is missing"
        );
    }
    // clone and unshare: only with flags outside mount, UTS, IPC, cgroup and time namespaces.
    let namespaces = rules
        .iter()
        .find(|rule| rule["names"] == serde_json::json!(["clone", "unshare"]))
        .unwrap();
    let forbidden = namespaces["args"][0]["value"].as_u64().unwrap();
    assert_eq!(namespaces["args"][0]["op"], "SCMP_CMP_MASKED_EQ");
    assert_eq!(namespaces["args"][0]["valueTwo"], 0);
    for refused in [CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC] {
        assert_ne!(forbidden & refused, 0, "{refused:#x} is not refused");
    }
    for needed in [CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET] {
        assert_eq!(forbidden & needed, 0, "{needed:#x} is refused");
    }
    assert!(
        rules
            .iter()
            .all(|rule| rule["comment"].as_str().is_some_and(|c| !c.is_empty())),
        "every rule says why"
    );
}

#[test]
fn the_seccomp_profile_opens_unix_sockets_and_inet_streams_and_datagrams_only() {
    const AF_UNIX: u64 = 1;
    const AF_INET: u64 = 2;
    const AF_INET6: u64 = 10;
    const STREAM: Option<u64> = Some(1);
    const DGRAM: Option<u64> = Some(2);
    let profile: serde_json::Value = serde_json::from_str(SECCOMP_PROFILE).unwrap();
    let rules = profile["syscalls"].as_array().unwrap();
    // socket: Unix in any kind, IPv4 and IPv6 as streams or datagrams; no other family or kind.
    let mut sockets: Vec<(u64, Option<u64>)> = rules
        .iter()
        .filter(|rule| rule["names"] == serde_json::json!(["socket"]))
        .map(|rule| {
            assert_eq!(rule["action"], "SCMP_ACT_ALLOW");
            let args = rule["args"].as_array().unwrap();
            assert_eq!(args[0]["op"], "SCMP_CMP_EQ");
            let kind = args.get(1).map(|kind| {
                assert_eq!(kind["op"], "SCMP_CMP_MASKED_EQ");
                assert_eq!(kind["value"], 0xf, "the kind without its flags");
                kind["valueTwo"].as_u64().unwrap()
            });
            (args[0]["value"].as_u64().unwrap(), kind)
        })
        .collect();
    sockets.sort_unstable();
    assert_eq!(
        sockets,
        [
            (AF_UNIX, None),
            (AF_INET, STREAM),
            (AF_INET, DGRAM),
            (AF_INET6, STREAM),
            (AF_INET6, DGRAM)
        ]
    );
}

#[test]
fn tool_schema_snapshot() {
    let schema = serde_json::to_value(schemars::schema_for!(AgentBrowserInput)).unwrap();
    insta::assert_json_snapshot!(schema);
}

/// The Docker gate admits every container the driver makes, exactly as made (plus its own label),
/// so a change to the spec that the gate does not know fails here.
#[test]
fn the_docker_gate_admits_every_spec_the_driver_makes_as_made() {
    use airlock_policy::{GateLimits, GateRules, LABEL_GATE, judge_docker_call};
    let rules = GateRules {
        image: "airlock-browser:0.1.0".into(),
        runtimes: vec!["runc".into(), "runsc".into()],
        egress_parent: "/tmp".into(),
        gate_id: "node-1".into(),
        seccomp_profile: SECCOMP_PROFILE.into(),
        // The no-sandbox variant is among the specs below; a gate admits it only when told to.
        allow_no_browser_sandbox: true,
        limits: GateLimits::default(),
    };
    let made = |options: ContainerOptions| ContainerOptions {
        user: airlock_driver_docker::CONTAINER_USER,
        socket_dir: "/tmp/airlock-egress-b1p2s3-AbC123/sockets".into(),
        ..options
    };
    let variants = [
        made(options("runc")),
        made(options("runsc")),
        made(ContainerOptions {
            browser_sandbox: false,
            ..options("runc")
        }),
        made(ContainerOptions {
            resources: Resources {
                dev_shm_mib: 256,
                ..Resources::default()
            },
            ..options("runc")
        }),
    ];
    for options in variants {
        let spec = serde_json::to_value(container_spec(&options)).unwrap();
        let target = format!("/v1.41/containers/create?name={}", options.name());
        let forward =
            judge_docker_call("POST", &target, &serde_json::to_vec(&spec).unwrap(), &rules)
                .unwrap_or_else(|refusal| panic!("{}: {refusal}", options.runtime));
        let mut expected = spec;
        expected["Labels"][LABEL_GATE] = "node-1".into();
        let written: serde_json::Value = serde_json::from_slice(&forward.body.unwrap()).unwrap();
        assert_eq!(written, expected);
        let admitted = forward.create.unwrap();
        assert_eq!(admitted.browser_sandbox, options.browser_sandbox);
        assert_eq!(admitted.bind_source, options.socket_dir.to_str().unwrap());
    }
    // A gate left at its default refuses the no-sandbox spec, naming the switch.
    let plain = made(ContainerOptions {
        browser_sandbox: false,
        ..options("runc")
    });
    let spec = serde_json::to_vec(&container_spec(&plain)).unwrap();
    let target = format!("/v1.41/containers/create?name={}", plain.name());
    let strict = GateRules {
        allow_no_browser_sandbox: false,
        ..rules
    };
    let refusal = judge_docker_call("POST", &target, &spec, &strict).unwrap_err();
    assert!(
        refusal.to_string().contains("--allow-no-browser-sandbox"),
        "{refusal}"
    );
}
