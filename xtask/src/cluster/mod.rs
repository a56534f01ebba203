//! `cargo xtask cluster`: Airlock on a real cluster engine. A single-node Docker Swarm is made on
//! this machine (and left afterwards), `deploy/swarm/airlock.yml` is deployed with two replicas
//! behind its HAProxy balancer (HTTPS, with a certificate made for the proof and given as a
//! secret), and then, with the official MCP Python SDK through the balancer's published port:
//!
//! 1. six tasks at once complete, both replicas' `/metrics` show some of them, and squid (the
//!    company proxy every task's route goes through, `parent.rs`) logged a tunnel for each;
//! 2. a wrong token is refused at the balancer's address, plain HTTP gets no answer there, and a
//!    CDP client's `?token=` is in no container's log;
//! 3. one replica's container is killed mid-task: its tasks fail with an error, the other
//!    replica's complete, the engine restores the replica, and the killed replica's task
//!    containers are removed (by its successor's orphan cleanup, which asks Docker whether the
//!    owner's container still runs);
//! 4. a rolling update to a new image tag with tasks running cuts none of them off;
//! 5. at the end no task container, no proxy directory, no stack and no swarm is left.
//!
//! The worker is a script and the page a lab page served inside the stack (`--allow lab:8000`), so
//! nothing outside this machine is reached. As root (it makes the swarm and the host directory).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::util::{free_port, output, run_loud, succeeds, workspace_root};

mod followed;
mod manifests;
mod parent;
mod proofs;

use manifests::check_manifests;
use proofs::{
    Client, cleartext_refused, gated, kill_one, no_token_in_logs, refused, rolling_update, spread,
};

/// The stack's name; its services are `airlock-ci_airlock`, `_balancer`, `_lab`.
const STACK: &str = "airlock-ci";
/// The host path of the proxies' directories (the same path inside the replicas).
const STATE_DIR: &str = "/var/lib/airlock";
/// The host directory of the gate's socket (the same path in the gate and the replicas).
const GATE_DIR: &str = "/run/airlock-gate";
/// The uid the server image runs as.
pub(super) const SERVER_UID: &str = "10001";
/// The secret holding the tokens.
const SECRET: &str = "airlock_tokens";
/// The secret holding the balancer's certificate chain and key (one PEM).
const TLS_SECRET: &str = "airlock_tls";
/// The secret holding the model provider's key (the proof's worker is a script, so it holds a
/// placeholder; the stack reads it as a file all the same).
const MODEL_KEY_SECRET: &str = "airlock_model_key";

/// What the proof adds to the stack: a scripted worker, a lab page inside the stack, a company
/// proxy every task goes through, light settings for a 2-core machine. `DIR` is the folder of its files (relative paths in a second
/// stack file would be read from the first one's folder).
const PROOF_STACK: &str = r#"version: "3.8"
services:
  airlock:
    environment:
      AIRLOCK_MODEL: script:/etc/airlock/script.json
      AIRLOCK_ALLOW: lab:8000
      AIRLOCK_MAX_STEPS: "2"
      AIRLOCK_POOL_SIZE: "0"
      # Every task through the company proxy below (parent.rs).
      AIRLOCK_PARENTS: corp=http://parent:3128
      AIRLOCK_PARENT_CREDENTIALS: corp=file:/run/secrets/airlock_parent
      AIRLOCK_ROUTE: corp
    secrets:
      - airlock_parent
    deploy:
      update_config:
        # The stack's 20 s watch after each replica's update, shortened for the proof.
        monitor: 5s
    configs:
      - source: script
        target: /etc/airlock/script.json
        mode: 0444
  lab:
    image: airlock-balancer:${AIRLOCK_VERSION}
    command: ["busybox", "httpd", "-f", "-p", "8000", "-h", "/srv/lab"]
    # Reached by its name's own address: a service's virtual IP needs IPVS, which this kernel
    # may lack (as the ingress mesh does; see deploy/swarm/airlock.yml).
    deploy:
      endpoint_mode: dnsrr
    configs:
      - source: lab_page
        target: /srv/lab/index.html
        mode: 0444
    networks:
      - airlock
  parent:
    image: airlock-cluster-parent:${AIRLOCK_VERSION}
    deploy:
      endpoint_mode: dnsrr
    configs:
      - source: parent_conf
        target: /etc/squid/proof.conf
        mode: 0444
      - source: parent_passwd
        target: /etc/squid/proof.passwd
        mode: 0444
    networks:
      - airlock
secrets:
  airlock_parent:
    external: true
configs:
  script:
    file: DIR/script.json
  lab_page:
    file: DIR/index.html
  parent_conf:
    file: DIR/squid.conf
  parent_passwd:
    file: DIR/parent.passwd
"#;

/// Something the proof made, undone when it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Swarm,
    StateDir,
    GateDir,
    Secret,
    Stack,
}

/// Everything made for the proof, undone in reverse when dropped (also on failure).
#[derive(Default)]
struct Made {
    steps: Vec<Step>,
    clients: Vec<Child>,
}

impl Drop for Made {
    fn drop(&mut self) {
        for client in &mut self.clients {
            let _ = client.kill();
            let _ = client.wait();
        }
        while let Some(step) = self.steps.pop() {
            undo(step);
        }
    }
}

fn undo(step: Step) {
    match step {
        Step::Stack => {
            let _ = Command::new("docker").args(["stack", "rm", STACK]).status();
            // The replicas drain and remove their own task containers as they stop.
            let _ = wait_for(
                "the stack's containers to go",
                Duration::from_mins(3),
                || stack_containers().is_empty(),
            );
            // Task containers a killed replica left, if its successor did not get to them.
            for id in
                output(Command::new("docker").args(["ps", "-aq", "--filter", "label=airlock.task"]))
                    .unwrap_or_default()
                    .split_whitespace()
            {
                let _ = Command::new("docker").args(["rm", "-f", id]).status();
            }
        }
        Step::Secret => {
            let _ = Command::new("docker")
                .args(["secret", "rm", SECRET, MODEL_KEY_SECRET, TLS_SECRET])
                .arg(parent::PARENT_SECRET)
                .status();
        }
        Step::StateDir => {
            let _ = fs::remove_dir_all(STATE_DIR);
        }
        Step::GateDir => {
            let _ = fs::remove_dir_all(GATE_DIR);
        }
        Step::Swarm => {
            let _ = Command::new("docker")
                .args(["swarm", "leave", "--force"])
                .status();
        }
    }
}

pub(crate) fn run() -> anyhow::Result<()> {
    if !crate::util::is_root() {
        bail!("cargo xtask cluster makes a swarm and {STATE_DIR}: run it as root");
    }
    if swarm_state()? != "inactive" {
        bail!(
            "this Docker daemon is already in a swarm: the proof makes and leaves its own, so run it where no swarm is (or `docker swarm leave --force` first)"
        );
    }
    let root = workspace_root();
    check_manifests(&root)?;
    let python = crate::clients::ensure_clients()?.python;
    let version = env!("CARGO_PKG_VERSION");
    crate::image::run(&crate::image::ImageArgs::for_integration())?;
    crate::image::run(&crate::image::ImageArgs::for_cluster())?;
    let base = build_balancer(&root, version)?;
    parent::build_image(&root.join("target/cluster"), base, version)?;

    let mut made = Made::default();
    let (host, token, ca, password) = deploy(&root, version, &mut made)?;
    let client = Client {
        python,
        script: root.join("crates/cli/tests/support/mcp_http_client.py"),
        url: format!("https://{host}/mcp"),
        host: host.clone(),
        token,
        ca,
    };
    spread(&client)?;
    parent::through_the_parent(&client)?;
    followed::followed(&client)?;
    refused(&client)?;
    cleartext_refused(&client)?;
    gated()?;
    no_token_in_logs(&client, &password)?;
    kill_one(&client, &mut made)?;
    rolling_update(&client, &mut made, version)?;

    // Leave everything as it was, then check that nothing is left.
    drop(made);
    let _ = Command::new("docker")
        .args(["rmi", &format!("airlock-server:{version}-next")])
        .stdout(Stdio::null())
        .status();
    let left =
        output(Command::new("docker").args(["ps", "-aq", "--filter", "label=airlock.task"]))?;
    if !left.trim().is_empty() {
        bail!("task containers were left behind: {left}");
    }
    if Path::new(STATE_DIR).exists() && fs::read_dir(STATE_DIR)?.next().is_some() {
        bail!("proxy directories were left in {STATE_DIR}");
    }
    if swarm_state()? != "inactive" {
        bail!("the swarm was not left");
    }
    eprintln!("== cluster proof passed: nothing left behind, swarm left");
    Ok(())
}

fn swarm_state() -> anyhow::Result<String> {
    Ok(
        output(Command::new("docker").args(["info", "--format", "{{.Swarm.LocalNodeState}}"]))?
            .trim()
            .to_owned(),
    )
}

/// Make the swarm, the host directory and the secrets, deploy the stack, and wait until both
/// replicas are ready behind the balancer. The balancer's address, the token, the certificate
/// clients trust for it, and the parent proxy's password.
fn deploy(
    root: &Path,
    version: &str,
    made: &mut Made,
) -> anyhow::Result<(String, String, PathBuf, String)> {
    let dir = root.join("target/cluster");
    fs::create_dir_all(&dir)?;
    run_loud(Command::new("docker").args(["swarm", "init", "--advertise-addr", "127.0.0.1"]))?;
    made.steps.push(Step::Swarm);
    if !Path::new(STATE_DIR).exists() {
        made.steps.push(Step::StateDir);
    }
    run_loud(Command::new("install").args([
        "-d", "-o", SERVER_UID, "-g", SERVER_UID, "-m", "0700", STATE_DIR,
    ]))?;
    if !Path::new(GATE_DIR).exists() {
        made.steps.push(Step::GateDir);
    }
    run_loud(Command::new("install").args([
        "-d", "-o", SERVER_UID, "-g", SERVER_UID, "-m", "0700", GATE_DIR,
    ]))?;
    let token = random_token()?;
    made.steps.push(Step::Secret);
    create_secret(SECRET, &token)?;
    create_secret(MODEL_KEY_SECRET, "unused: the proof's worker is a script")?;
    let ca = balancer_certificate(&dir)?;
    let password = parent::prepare(&dir)?;

    let port = free_port()?;
    let host = format!("127.0.0.1:{port}");
    fs::write(
        dir.join("proof.yml"),
        PROOF_STACK.replace("DIR", &dir.display().to_string()),
    )?;
    fs::write(dir.join("script.json"), script())?;
    fs::write(
        dir.join("index.html"),
        "<!doctype html><html><head><title>Cluster lab</title></head><body><h1>Served inside the stack</h1></body></html>",
    )?;
    let docker_gid = output(Command::new("stat").args(["-c", "%g", "/var/run/docker.sock"]))?;
    made.steps.push(Step::Stack);
    run_loud(
        Command::new("docker")
            .args(["stack", "deploy", "-c"])
            .arg(root.join("deploy/swarm/airlock.yml"))
            .arg("-c")
            .arg(dir.join("proof.yml"))
            .arg(STACK)
            .current_dir(&dir)
            .env("AIRLOCK_VERSION", version)
            .env("DOCKER_GID", docker_gid.trim())
            .env("AIRLOCK_PORT", port.to_string())
            .env("AIRLOCK_PUBLIC_HOSTS", &host)
            .env("AIRLOCK_MODEL", "script:/etc/airlock/script.json")
            .env("AIRLOCK_REPLICAS", "2"),
    )?;
    wait_for(
        "two ready replicas behind the balancer",
        Duration::from_mins(3),
        || {
            succeeds(
                Command::new("curl")
                    .args(["-fsS", "-o", "/dev/null", "--max-time", "3", "--cacert"])
                    .arg(&ca)
                    .arg(format!("https://{host}/readyz")),
            ) && replicas().len() == 2
        },
    )?;
    eprintln!("== the stack is up: 2 replicas behind the balancer on https://{host}");
    Ok((host, token, ca, password))
}

/// A self-signed certificate for the balancer's address, its chain and key made into the TLS
/// secret (through stdin); the key's file is removed at once. The certificate's path.
fn balancer_certificate(dir: &Path) -> anyhow::Result<PathBuf> {
    let (cert, key) = (dir.join("balancer.crt"), dir.join("balancer.key"));
    run_loud(
        Command::new("openssl")
            .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
            .args(["ec_paramgen_curve:prime256v1", "-nodes", "-days", "1"])
            .args([
                "-subj",
                "/CN=127.0.0.1",
                "-addext",
                "subjectAltName=IP:127.0.0.1",
            ])
            .arg("-keyout")
            .arg(&key)
            .arg("-out")
            .arg(&cert),
    )?;
    let pem = fs::read_to_string(&cert)? + &fs::read_to_string(&key)?;
    fs::remove_file(&key)?;
    create_secret(TLS_SECRET, &pem)?;
    Ok(cert)
}

/// A Swarm secret holding `value`, which is written to docker's stdin, never to its arguments.
fn create_secret(name: &str, value: &str) -> anyhow::Result<()> {
    let mut secret = Command::new("docker")
        .args(["secret", "create", name, "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()?;
    if let Some(mut stdin) = secret.stdin.take() {
        std::io::Write::write_all(&mut stdin, value.as_bytes())?;
    }
    if !secret.wait()?.success() {
        bail!("docker secret create {name} failed");
    }
    Ok(())
}

/// The balancer image (HAProxy and busybox from Debian) on the same base as the others. The
/// base it was built on.
fn build_balancer(root: &Path, version: &str) -> anyhow::Result<&'static str> {
    let base =
        if succeeds(Command::new("docker").args(["image", "inspect", "debian:bookworm-slim"])) {
            "debian:bookworm-slim"
        } else {
            crate::image::LOCAL_BASE
        };
    run_loud(
        Command::new("docker")
            .args(["build", "--quiet", "--build-arg"])
            .arg(format!("BASE_IMAGE={base}"))
            .args(["--tag", &format!("airlock-balancer:{version}")])
            .arg(root.join("deploy/swarm/balancer")),
    )?;
    Ok(base)
}

/// Identical turns, so tasks sharing a replica's scripted worker never get each other's turn:
/// open the lab page and wait five seconds (two steps), then a refused call, then the report.
fn script() -> String {
    let turn = serde_json::json!({"text": "done", "tool_calls": [
        {"name": "agent_browser", "input": {"args": ["open", "http://lab:8000/"]}},
        {"name": "agent_browser", "input": {"args": ["wait", "5000"]}}
    ]});
    serde_json::json!({"turns": vec![turn; 400]}).to_string()
}

fn random_token() -> anyhow::Result<String> {
    let mut bytes = [0_u8; 24];
    fs::File::open("/dev/urandom")
        .and_then(|mut file| std::io::Read::read_exact(&mut file, &mut bytes))
        .context("reading /dev/urandom")?;
    Ok(crate::image::hex(&bytes))
}

/// Poll `done` (a cluster converges on its own schedule; there is no event to wait on) until it
/// holds or `limit` passes.
pub(super) fn wait_for(
    what: &str,
    limit: Duration,
    mut done: impl FnMut() -> bool,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + limit;
    while !done() {
        if Instant::now() > deadline {
            bail!("timed out after {} s waiting for {what}", limit.as_secs());
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    Ok(())
}

/// The running replica containers' ids.
pub(super) fn replicas() -> Vec<String> {
    output(Command::new("docker").args([
        "ps",
        "-q",
        "--no-trunc",
        "--filter",
        &format!("label=com.docker.swarm.service.name={STACK}_airlock"),
        "--filter",
        "status=running",
    ]))
    .map(|text| text.split_whitespace().map(str::to_owned).collect())
    .unwrap_or_default()
}

fn stack_containers() -> Vec<String> {
    output(Command::new("docker").args([
        "ps",
        "-aq",
        "--filter",
        &format!("label=com.docker.stack.namespace={STACK}"),
        "--filter",
        "status=running",
    ]))
    .map(|text| text.split_whitespace().map(str::to_owned).collect())
    .unwrap_or_default()
}

/// A replica's metric, read inside its container (the replicas publish no port of their own).
fn replica_metric(container: &str, host: &str, token: &str, name: &str) -> u64 {
    replica_metrics(container, host, token)
        .lines()
        .filter(|line| line.starts_with(name))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// A replica's `/metrics`, asked from inside it; empty if it would not answer.
fn replica_metrics(container: &str, host: &str, token: &str) -> String {
    output(Command::new("docker").args([
        "exec",
        container,
        "curl",
        "-fsS",
        "-H",
        &format!("host: {host}"),
        "-H",
        &format!("authorization: Bearer {token}"),
        "http://127.0.0.1:8700/metrics",
    ]))
    .unwrap_or_default()
}
