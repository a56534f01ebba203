//! The proof's steps against the deployed stack, through the balancer, with the official MCP SDK.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::bail;

use crate::util::curl_status;

use super::{Made, PathBuf, STACK, output, replica_metric, replicas, run_loud, succeeds, wait_for};

/// The official MCP SDK client, one task per process.
pub(super) struct Client {
    pub(super) python: String,
    pub(super) script: PathBuf,
    pub(super) url: String,
    /// The balancer's `host:port`.
    pub(super) host: String,
    pub(super) token: String,
    /// The balancer's certificate, which the clients trust.
    pub(super) ca: PathBuf,
}

impl Client {
    fn start(&self) -> anyhow::Result<Child> {
        Ok(Command::new(&self.python)
            .env("SSL_CERT_FILE", &self.ca)
            .arg(&self.script)
            .arg(&self.url)
            .arg(serde_json::json!({"Authorization": format!("Bearer {}", self.token)}).to_string())
            .arg("Open the lab page")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?)
    }

    /// curl, trusting the balancer's certificate.
    pub(super) fn curl(&self) -> Command {
        let mut curl = Command::new("curl");
        curl.arg("--cacert").arg(&self.ca);
        curl
    }

    /// `curl_status`, trusting the balancer's certificate.
    fn curl_status(&self) -> Command {
        let mut curl = curl_status();
        curl.arg("--cacert").arg(&self.ca);
        curl
    }

    /// Whether the task came back with a result (the client's JSON has texts and no failure).
    fn finished(child: Child) -> bool {
        Self::outcome(child).is_ok()
    }

    /// The task's report, or what the client saw instead.
    fn outcome(child: Child) -> Result<String, String> {
        let out = child.wait_with_output().map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&out.stdout);
        let value: serde_json::Value =
            serde_json::from_str(text.trim()).map_err(|_| format!("the client printed {text}"))?;
        match (&value["failed"], &value["texts"][0]) {
            (serde_json::Value::String(failed), _) => Err(failed.clone()),
            (_, serde_json::Value::String(report)) if report == "done" => Ok(report.clone()),
            _ => Err(format!("no report: {value}")),
        }
    }
}

/// Six tasks at once through the balancer complete, and both replicas ran some.
pub(super) fn spread(client: &Client) -> anyhow::Result<()> {
    eprintln!("== six tasks at once through the balancer");
    let children: Vec<Child> = (0..6).map(|_| client.start()).collect::<Result<_, _>>()?;
    let done = children
        .into_iter()
        .map(Client::finished)
        .filter(|ok| *ok)
        .count();
    if done != 6 {
        bail!("{done} of 6 tasks through the balancer completed");
    }
    let per_replica: Vec<u64> = replicas()
        .iter()
        .map(|replica| {
            replica_metric(
                replica,
                &client.host,
                &client.token,
                "airlock_tasks_finished_total",
            )
        })
        .collect();
    eprintln!("   tasks finished per replica: {per_replica:?}");
    if per_replica.len() != 2 || per_replica.contains(&0) || per_replica.iter().sum::<u64>() != 6 {
        bail!("the six tasks were not spread over both replicas: {per_replica:?}");
    }
    Ok(())
}

/// A wrong token is refused at the balancer's address.
pub(super) fn refused(client: &Client) -> anyhow::Result<()> {
    let status = output(client.curl_status().args([
        "-H",
        "authorization: Bearer wrong-token-0123456789abcdef",
        "-H",
        "content-type: application/json",
        "--data",
        r#"{"task": "x"}"#,
        &format!("https://{}/v1/tasks", client.host),
    ]))?;
    if status.trim() != "401" {
        bail!(
            "a wrong token got {} at the balancer, not 401",
            status.trim()
        );
    }
    eprintln!("== a wrong token is refused at the balancer (401)");
    Ok(())
}

/// The replicas hold no Docker socket, only the gate's; through it, a privileged create with
/// the host's root bound, an exec as root into the replica's own container, and a list without
/// Airlock's label are refused (403) from inside a replica.
pub(super) fn gated() -> anyhow::Result<()> {
    let since = unix_seconds();
    let replicas = super::replicas();
    for replica in &replicas {
        let mounts = output(Command::new("docker").args([
            "inspect",
            "--format",
            "{{range .Mounts}}{{.Source}} {{end}}",
            replica,
        ]))?;
        if mounts.contains("docker.sock") {
            bail!("replica {replica} holds the Docker socket: {mounts}");
        }
        let groups = output(Command::new("docker").args(["exec", replica, "id", "-G"]))?;
        if groups
            .split_whitespace()
            .any(|gid| gid != super::SERVER_UID)
        {
            bail!("replica {replica} runs with groups {groups}, not only its own");
        }
        let privileged =
            r#"{"Image":"airlock-browser","HostConfig":{"Privileged":true,"Binds":["/:/host"]}}"#;
        // An exec into the replica's own container (not one the gate made), as root.
        let exec = r#"{"AttachStdout":true,"AttachStderr":true,"User":"0","Cmd":["sh"]}"#;
        let own_container = format!("/v1.41/containers/{replica}/exec");
        for (method, path, body) in [
            ("POST", "/v1.41/containers/create?name=owned", privileged),
            ("POST", own_container.as_str(), exec),
            ("GET", "/v1.41/containers/json", ""),
        ] {
            let status = output(Command::new("docker").args([
                "exec",
                replica,
                "curl",
                "-sS",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                "--unix-socket",
                "/run/airlock-gate/docker.sock",
                "-X",
                method,
                "-H",
                "content-type: application/json",
                "--data-raw",
                body,
                &format!("http://docker{path}"),
            ]))?;
            if status.trim() != "403" {
                bail!(
                    "{method} {path} through the gate from replica {replica} got {status}, not 403"
                );
            }
        }
    }
    // dockerd's own record: no container was created or started meanwhile.
    let made = output(Command::new("docker").args([
        "events",
        "--since",
        &since.to_string(),
        "--until",
        &unix_seconds().to_string(),
        "--filter",
        "type=container",
        "--filter",
        "event=create",
        "--filter",
        "event=start",
        "--format",
        "{{.Action}} {{.Actor.Attributes.name}}",
    ]))?;
    if !made.trim().is_empty() {
        bail!("containers were made while the gate refused: {made}");
    }
    eprintln!(
        "== {} replicas hold only the gate's socket: a privileged create and calls outside Airlock's are refused (403), and dockerd's events show nothing made",
        replicas.len()
    );
    Ok(())
}

/// Seconds since the epoch, as `docker events` takes them.
fn unix_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}

/// Plain HTTP to the balancer's port gets no HTTP answer: a token sent that way is never served.
pub(super) fn cleartext_refused(client: &Client) -> anyhow::Result<()> {
    let plain = curl_status()
        .args(["--max-time", "5"])
        .args(["-H", &format!("authorization: Bearer {}", client.token)])
        .arg(format!("http://{}/readyz", client.host))
        .output()?;
    let status = String::from_utf8_lossy(&plain.stdout);
    if plain.status.success() || status.trim() != "000" {
        bail!(
            "plain HTTP to the balancer got an answer ({}): it must serve HTTPS only",
            status.trim()
        );
    }
    eprintln!("== the balancer serves HTTPS only (plain HTTP gets no answer)");
    Ok(())
}

/// A CDP client's `?token=` (discovery, then a WebSocket upgrade that leases a browser) through
/// the balancer leaves the token in no container's log: HAProxy logs paths without queries.
pub(super) fn no_token_in_logs(client: &Client, parent_password: &str) -> anyhow::Result<()> {
    let discovery = format!(
        "https://{}/json/version?token={}",
        client.host, client.token
    );
    let status = output(client.curl_status().arg(&discovery))?;
    if status.trim() != "200" {
        bail!(
            "CDP discovery with ?token= got {} at the balancer",
            status.trim()
        );
    }
    // A real upgrade: the lease starts, curl gives up after a moment, the lease ends.
    let upgrade = format!("https://{}/cdp?token={}", client.host, client.token);
    let _ = client
        .curl()
        .args([
            "-sS",
            "-o",
            "/dev/null",
            "--max-time",
            "5",
            "-H",
            "Connection: Upgrade",
            "-H",
            "Upgrade: websocket",
            "-H",
            "Sec-WebSocket-Version: 13",
            "-H",
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
            &upgrade,
        ])
        .stderr(Stdio::null())
        .status();
    let containers = output(Command::new("docker").args([
        "ps",
        "-aq",
        "--filter",
        &format!("label=com.docker.stack.namespace={STACK}"),
    ]))?;
    let mut read = 0;
    for id in containers.split_whitespace() {
        let logs = Command::new("docker").args(["logs", id]).output()?;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&logs.stdout),
            String::from_utf8_lossy(&logs.stderr)
        );
        if text.contains(&client.token) {
            bail!("container {id}'s log holds the token a CDP client sent in its URL");
        }
        if text.contains(parent_password) {
            bail!("container {id}'s log holds the parent proxy's password");
        }
        read += 1;
    }
    if read < 3 {
        bail!("only {read} of the stack's containers had logs to read");
    }
    eprintln!(
        "== a ?token= CDP client leaves no token, and the parent no password, in any of {read} containers' logs"
    );
    Ok(())
}

/// Kill one replica mid-task: its tasks fail, the other's complete, the engine restores it, and
/// its task containers are removed.
pub(super) fn kill_one(client: &Client, made: &mut Made) -> anyhow::Result<()> {
    eprintln!("== killing one replica mid-task");
    let before = replicas();
    let host = client.host.clone();
    let children: Vec<Child> = (0..4).map(|_| client.start()).collect::<Result<_, _>>()?;
    made.clients.extend(children);
    wait_for(
        "tasks running on both replicas",
        Duration::from_mins(1),
        || {
            before
                .iter()
                .all(|r| replica_metric(r, &host, &client.token, "airlock_tasks_running") > 0)
        },
    )?;
    let victim = before[0].clone();
    let victims_tasks = task_containers_of(&victim);
    if victims_tasks.is_empty() {
        bail!("the replica to kill runs no task container");
    }
    run_loud(Command::new("docker").args(["kill", &victim]))?;
    let results: Vec<Result<String, String>> =
        made.clients.drain(..).map(Client::outcome).collect();
    let completed = results.iter().filter(|r| r.is_ok()).count();
    eprintln!("   {completed} of 4 tasks completed; the killed replica's failed:");
    for failure in results.iter().filter_map(|r| r.as_ref().err()) {
        eprintln!("     the client saw: {failure}");
    }
    if completed == 0 || completed == 4 {
        bail!(
            "expected the killed replica's tasks to fail and the other's to complete: {results:?}"
        );
    }
    wait_for(
        "the engine to restore the replica",
        Duration::from_mins(2),
        || {
            let now = replicas();
            now.len() == 2 && !now.contains(&victim)
        },
    )?;
    wait_for(
        "the killed replica's task containers to be removed",
        Duration::from_mins(1),
        || {
            victims_tasks
                .iter()
                .all(|c| !succeeds(Command::new("docker").args(["inspect", c])))
        },
    )?;
    eprintln!(
        "   the replica was restored and its {} task container(s) removed",
        victims_tasks.len()
    );
    Ok(())
}

/// The task containers whose owner label names this replica's container.
fn task_containers_of(replica: &str) -> Vec<String> {
    output(Command::new("docker").args([
        "ps",
        "-a",
        "--filter",
        "label=airlock.task",
        "--format",
        "{{.ID}} {{.Label \"airlock.owner\"}}",
    ]))
    .unwrap_or_default()
    .lines()
    .filter(|line| line.contains(&format!("ctr={replica}")))
    .filter_map(|line| line.split_whitespace().next().map(str::to_owned))
    .collect()
}

/// A rolling update to a new tag while tasks run: every task completes.
pub(super) fn rolling_update(
    client: &Client,
    made: &mut Made,
    version: &str,
) -> anyhow::Result<()> {
    eprintln!("== a rolling update with tasks running");
    let next = format!("airlock-server:{version}-next");
    run_loud(Command::new("docker").args(["tag", &crate::image::server_tag(), &next]))?;
    let host = client.host.clone();
    // All four admitted (running, or already done) before the update starts: one still on its
    // way could reach a replica that is already draining, which refuses new work (that is not a
    // cut-off task).
    let admitted = || -> u64 {
        replicas()
            .iter()
            .map(|r| {
                replica_metric(r, &host, &client.token, "airlock_tasks_running")
                    + replica_metric(r, &host, &client.token, "airlock_tasks_finished_total")
            })
            .sum()
    };
    let before = admitted();
    let children: Vec<Child> = (0..4).map(|_| client.start()).collect::<Result<_, _>>()?;
    made.clients.extend(children);
    wait_for("all four tasks admitted", Duration::from_mins(1), || {
        admitted() >= before + 4
    })?;
    run_loud(Command::new("docker").args([
        "service",
        "update",
        "--detach",
        "--image",
        &next,
        &format!("{STACK}_airlock"),
    ]))?;
    let results: Vec<Result<String, String>> =
        made.clients.drain(..).map(Client::outcome).collect();
    if let Some(Err(failure)) = results.iter().find(|r| r.is_err()) {
        bail!("a task was cut off by the rolling update: {failure}");
    }
    wait_for("the update to finish", Duration::from_mins(4), || {
        output(Command::new("docker").args([
            "service",
            "inspect",
            "--format",
            "{{if .UpdateStatus}}{{.UpdateStatus.State}}{{end}}",
            &format!("{STACK}_airlock"),
        ]))
        .is_ok_and(|state| state.trim() == "completed")
    })?;
    eprintln!("   all 4 tasks completed across the update; both replicas run {next}");
    Ok(())
}
