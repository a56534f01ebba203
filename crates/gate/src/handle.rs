//! One request: read it within bounds, judge it, check what the judgement leaves to the gate,
//! then send dockerd the request the gate wrote (or answer `403` with the reason).

use std::sync::Arc;

use airlock_policy::{
    ContainerCall, DockerCall, Forward, GateRules, MAX_DOCKER_BODY_BYTES, judge_docker_call,
};
use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;

use crate::checks::{self, Ownership};
use crate::known::{self, Known};
use crate::upstream::{self, Docker};

/// What every connection shares.
pub(crate) struct Gate {
    /// What is admitted.
    pub rules: GateRules,
    /// The real daemon.
    pub docker: Docker,
    /// The containers and execs already established as the gate's.
    pub known: Known,
}

/// The most bytes of a create's answer the gate reads to learn the new id.
const MAX_CREATED_ANSWER_BYTES: usize = 64 << 10;

/// A body streamed back to the client.
pub(crate) type Answer = Response<BoxBody<Bytes, hyper::Error>>;

/// Who is asking, for the log.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Peer {
    /// The client's uid, from the socket.
    pub uid: Option<u32>,
}

/// Answer one request; never fails (every failure is an answer).
pub(crate) async fn handle(gate: Arc<Gate>, peer: Peer, mut request: Request<Incoming>) -> Answer {
    let method = request.method().as_str().to_owned();
    let target = request
        .uri()
        .path_and_query()
        .map_or_else(|| request.uri().path().to_owned(), ToString::to_string);
    let client_upgrade = hyper::upgrade::on(&mut request);
    let asks_upgrade = request
        .headers()
        .get(header::UPGRADE)
        .is_some_and(|value| value.as_bytes().eq_ignore_ascii_case(b"tcp"));
    let body = match Limited::new(request.into_body(), MAX_DOCKER_BODY_BYTES)
        .collect()
        .await
    {
        Ok(body) => body.to_bytes(),
        Err(_) => {
            return refuse(
                peer,
                &method,
                &target,
                &format!("the body could not be read within {MAX_DOCKER_BODY_BYTES} bytes"),
            );
        }
    };
    let mut forward = match judge_docker_call(&method, &target, &body, &gate.rules) {
        Ok(forward) => forward,
        Err(refusal) => return refuse(peer, &method, &target, &refusal.to_string()),
    };
    match check(&gate, &mut forward).await {
        Ok(Checked::Pass) => {}
        Ok(Checked::Refuse(why)) => {
            if let DockerCall::Container(id, ContainerCall::Inspect) = &forward.call {
                return state_only(&gate, id).await;
            }
            return refuse(peer, &method, &target, &why);
        }
        Ok(Checked::Missing) => {
            return answer(
                StatusCode::NOT_FOUND,
                &format!("No such container or exec: {target}"),
            );
        }
        Err(error) => return answer(StatusCode::BAD_GATEWAY, &error.to_string()),
    }
    if forward.call == DockerCall::Info {
        return runtimes_only(&gate).await;
    }
    let upgrade = matches!(forward.call, DockerCall::ExecStart(_));
    if upgrade && !asks_upgrade {
        return refuse(
            peer,
            &method,
            &target,
            "an exec is started hijacked: send `Connection: Upgrade` and `Upgrade: tcp`",
        );
    }
    let mut outgoing = upstream::request(forward.method, &forward.target, forward.body.take());
    if upgrade {
        let headers = outgoing.headers_mut();
        headers.insert(
            header::CONNECTION,
            http::HeaderValue::from_static("Upgrade"),
        );
        headers.insert(header::UPGRADE, http::HeaderValue::from_static("tcp"));
    }
    let response = match gate.docker.send(outgoing).await {
        Ok(response) => response,
        Err(error) => return answer(StatusCode::BAD_GATEWAY, &error.to_string()),
    };
    if let Some(create) = &forward.create {
        tracing::info!(
            uid = ?peer.uid,
            container = %create.name,
            status = response.status().as_u16(),
            browser_sandbox = create.browser_sandbox,
            "created a sealed container{}",
            if create.browser_sandbox { "" } else { " WITHOUT Chromium's sandbox (--no-browser-sandbox)" }
        );
    }
    if response.status() == StatusCode::SWITCHING_PROTOCOLS {
        return splice(response, client_upgrade);
    }
    remember(&gate, &forward, response).await
}

/// Learn from dockerd's answer what later calls would otherwise ask it: the id of a container
/// or exec just made through the gate, or that a container is gone.
async fn remember(gate: &Gate, forward: &Forward, response: Response<Incoming>) -> Answer {
    let made = match &forward.call {
        DockerCall::Create => true,
        DockerCall::Container(reference, action) => {
            let gone = response.status() == StatusCode::NOT_FOUND
                || (*action == ContainerCall::Remove && response.status().is_success());
            if gone {
                gate.known.forget_container(reference);
            }
            *action == ContainerCall::Exec
        }
        _ => false,
    };
    if !made || response.status() != StatusCode::CREATED {
        return response.map(BodyExt::boxed);
    }
    let (parts, body) = response.into_parts();
    let Ok(body) = Limited::new(body, MAX_CREATED_ANSWER_BYTES).collect().await else {
        return answer(
            StatusCode::BAD_GATEWAY,
            "the Docker daemon's answer to a create could not be read",
        );
    };
    let body = body.to_bytes();
    let id = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|value| value["Id"].as_str().map(str::to_owned));
    match (&forward.call, &forward.create, id) {
        (DockerCall::Create, Some(create), Some(id)) => {
            gate.known.remember_container(&create.name, &id);
        }
        (DockerCall::Container(..), _, Some(id)) => gate.known.remember_exec(&id),
        _ => {}
    }
    Response::from_parts(
        parts,
        Full::new(body).map_err(|never| match never {}).boxed(),
    )
}

enum Checked {
    Pass,
    Missing,
    Refuse(String),
}

/// What the judgement left to the gate: the bind on disk, the container's or exec's owner. A
/// call on a container is then sent to the id the gate established, not the name it was given.
async fn check(gate: &Gate, forward: &mut Forward) -> Result<Checked, upstream::UpstreamError> {
    let id = &gate.rules.gate_id;
    let ownership = match &forward.call {
        DockerCall::Create => {
            let source = forward
                .create
                .as_ref()
                .map(|create| create.bind_source.as_str())
                .unwrap_or_default();
            return Ok(match checks::bind_is_real(source) {
                Ok(()) => Checked::Pass,
                Err(why) => Checked::Refuse(format!("HostConfig.Binds is refused: {why}")),
            });
        }
        DockerCall::Container(reference, _) => {
            let ownership = if let Some(known) = gate.known.container(reference) {
                forward.target = known::retarget(&forward.target, reference, &known);
                Ownership::Gates
            } else {
                let (ownership, full_id) = checks::container(&gate.docker, reference, id).await?;
                if matches!(ownership, Ownership::Gates) {
                    gate.known.remember_container(reference, &full_id);
                    forward.target = known::retarget(&forward.target, reference, &full_id);
                }
                ownership
            };
            if matches!(ownership, Ownership::Missing) {
                gate.known.forget_container(reference);
            }
            ownership
        }
        DockerCall::ExecStart(exec) | DockerCall::ExecInspect(exec) => {
            if gate.known.exec(exec) {
                Ownership::Gates
            } else {
                let ownership = checks::exec(&gate.docker, exec, id).await?;
                if matches!(ownership, Ownership::Gates) {
                    gate.known.remember_exec(exec);
                }
                ownership
            }
        }
        DockerCall::Ping
        | DockerCall::Version
        | DockerCall::Info
        | DockerCall::ImageInspect(_)
        | DockerCall::List
        | DockerCall::Events => return Ok(Checked::Pass),
    };
    Ok(match ownership {
        Ownership::Gates => Checked::Pass,
        Ownership::Missing => Checked::Missing,
        Ownership::Foreign(why) => Checked::Refuse(why),
    })
}

/// `GET /containers/{id}/json` of a container the gate did not make: whether it runs, and
/// nothing else (no configuration, environment, mounts or labels). A replica asks it of the
/// container another replica ran in, to tell whether that one's browsers are orphans.
async fn state_only(gate: &Gate, id: &str) -> Answer {
    match gate
        .docker
        .get_json(&format!("/containers/{id}/json"))
        .await
    {
        Ok((status, inspect)) if status.is_success() => {
            let state = &inspect["State"];
            json_answer(&serde_json::json!({
                "Id": inspect["Id"],
                "State": {"Running": state["Running"], "Status": state["Status"]},
            }))
        }
        Ok((status, _)) => answer(status, &format!("No such container: {id}")),
        Err(error) => answer(StatusCode::BAD_GATEWAY, &error.to_string()),
    }
}

/// A `200` with a JSON body the gate wrote.
fn json_answer(body: &serde_json::Value) -> Answer {
    json_with_status(StatusCode::OK, body)
}

/// An answer in Docker's error shape, so clients show the message.
fn answer(status: StatusCode, message: &str) -> Answer {
    json_with_status(status, &serde_json::json!({ "message": message }))
}

fn json_with_status(status: StatusCode, body: &serde_json::Value) -> Answer {
    let mut response = Response::new(
        Full::new(Bytes::from(body.to_string()))
            .map_err(|never| match never {})
            .boxed(),
    );
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

/// `GET /info` as the driver needs it (which runtimes the daemon offers, with their arguments),
/// and nothing else of the host's.
async fn runtimes_only(gate: &Gate) -> Answer {
    match gate.docker.get_json("/info").await {
        Ok((status, info)) if status.is_success() => {
            json_answer(&serde_json::json!({ "Runtimes": info["Runtimes"] }))
        }
        Ok((status, _)) => answer(status, "the Docker daemon did not answer /info"),
        Err(error) => answer(StatusCode::BAD_GATEWAY, &error.to_string()),
    }
}

/// Answer `101` and join the client's upgraded connection to dockerd's.
fn splice(response: Response<Incoming>, client: hyper::upgrade::OnUpgrade) -> Answer {
    let mut answer = Response::new(empty());
    *answer.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    for name in [header::CONNECTION, header::UPGRADE, header::CONTENT_TYPE] {
        if let Some(value) = response.headers().get(&name) {
            answer.headers_mut().insert(name, value.clone());
        }
    }
    tokio::spawn(async move {
        let (client, daemon) = tokio::join!(client, hyper::upgrade::on(response));
        if let (Ok(client), Ok(daemon)) = (client, daemon) {
            let _ =
                tokio::io::copy_bidirectional(&mut TokioIo::new(client), &mut TokioIo::new(daemon))
                    .await;
        }
    });
    answer
}

fn refuse(peer: Peer, method: &str, target: &str, why: &str) -> Answer {
    let shown: String = target.chars().take(200).collect();
    tracing::warn!(uid = ?peer.uid, method, target = %shown, reason = why, "refused");
    answer(
        StatusCode::FORBIDDEN,
        &format!("airlock-gate refused {method} {shown}: {why}"),
    )
}

fn empty() -> BoxBody<Bytes, hyper::Error> {
    Full::new(Bytes::new())
        .map_err(|never| match never {})
        .boxed()
}
