//! Tasks followed through the balancer: a task lives in the memory of the replica that runs it,
//! so following it (`GET /v1/tasks/{id}`) must reach that replica whichever one the balancer
//! would pick. Each id begins with its replica's tag, which every answer names in
//! `Airlock-Replica`; the balancer keeps tag → replica and routes by the id.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use super::output;
use super::proofs::Client;

/// Tasks started at once with `"wait": false`.
const TASKS: usize = 4;
/// How long a task may take to be done.
const DONE_WITHIN: Duration = Duration::from_mins(3);

/// A GET through the balancer: (status, the answering replica's tag, the body).
fn get(client: &Client, path: &str) -> anyhow::Result<(u16, String, serde_json::Value)> {
    let text = output(
        client
            .curl()
            .args(["-sS", "-i", "-H"])
            .arg(format!("authorization: Bearer {}", client.token))
            .arg(format!("https://{}{path}", client.host)),
    )?;
    let (head, body) = text
        .split_once("\r\n\r\n")
        .with_context(|| format!("no answer head for {path}: {text}"))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let replica = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("airlock-replica")
                .then(|| value.trim().to_owned())
        })
        .unwrap_or_default();
    Ok((
        status,
        replica,
        serde_json::from_str(body).unwrap_or_default(),
    ))
}

/// Start `TASKS` tasks without waiting; their ids.
fn start(client: &Client) -> anyhow::Result<Vec<String>> {
    let mut ids = Vec::new();
    for _ in 0..TASKS {
        let text = output(
            client
                .curl()
                .args(["-sS", "--fail", "-H"])
                .arg(format!("authorization: Bearer {}", client.token))
                .args(["-H", "content-type: application/json", "--data"])
                .arg(r#"{"task": "Open the lab page", "wait": false}"#)
                .arg(format!("https://{}/v1/tasks", client.host)),
        )?;
        let answer: serde_json::Value = serde_json::from_str(&text)
            .with_context(|| format!("POST /v1/tasks answered {text}"))?;
        let id = answer["id"]
            .as_str()
            .with_context(|| format!("no id in {answer}"))?;
        ids.push(id.to_owned());
    }
    Ok(ids)
}

/// Tasks started on both replicas are followed to their end through the balancer: every look
/// reaches the task's own replica.
pub(super) fn followed(client: &Client) -> anyhow::Result<()> {
    eprintln!("== {TASKS} tasks started without waiting, followed through the balancer");
    let ids = start(client)?;
    let mut tags: Vec<&str> = ids.iter().map(|id| &id["task_".len()..][..8]).collect();
    tags.sort_unstable();
    tags.dedup();
    if tags.len() < 2 {
        bail!("the balancer put all {TASKS} tasks on one replica ({tags:?}): nothing to route");
    }
    let deadline = Instant::now() + DONE_WITHIN;
    let mut looks = 0;
    for id in &ids {
        loop {
            let (status, replica, task) = get(client, &format!("/v1/tasks/{id}"))?;
            looks += 1;
            if status != 200 || !id["task_".len()..].starts_with(&replica) {
                bail!(
                    "GET /v1/tasks/{id} through the balancer got {status} from replica {replica:?}: a task must be followed on the replica that runs it"
                );
            }
            if task["state"] == "done" {
                break;
            }
            if Instant::now() > deadline {
                bail!("task {id} was not done within {DONE_WITHIN:?}: {task}");
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    eprintln!(
        "   {TASKS} tasks on {} replicas, {looks} looks, each answered by the task's own replica",
        tags.len()
    );
    Ok(())
}
