//! What the proxy does with one request: a `CONNECT` becomes a tunnel, an absolute-form `http://`
//! request is forwarded on its own upstream connection, and anything stopped on the way is
//! answered with its status and reason (and reported as an event).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::SystemTime;

use http::header::{self, HeaderValue};
use http::{Method, Request, Response, StatusCode, Version};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;

use crate::REFUSED_HEADER;
use crate::bounded::Bounded;
use crate::client::LingeringClose;
use crate::closing::ClosingReport;
use crate::connection::Shared;
use crate::events::{Outcome, ProxyEvent, Via};
use crate::http::{
    ProxyBody, empty_response, event_target, origin_form, strip_hop_by_hop, text_response,
};
use crate::slot::Ticket;
use crate::stop::Stop;
use crate::tunnel::Tunnel;

/// The client's socket as hyper holds it (`connection::serve`), taken back for a tunnel.
type ClientIo = TokioIo<Bounded<LingeringClose>>;

impl Shared {
    pub(crate) async fn handle(
        &self,
        request: Request<Incoming>,
        ticket: Arc<Ticket>,
    ) -> Response<ProxyBody> {
        if request.method() == Method::CONNECT {
            self.tunnel(request, ticket).await
        } else {
            self.forward(request).await
        }
    }

    async fn tunnel(&self, request: Request<Incoming>, ticket: Arc<Ticket>) -> Response<ProxyBody> {
        let Some(authority) = request.uri().authority().map(ToString::to_string) else {
            let target = request.uri().to_string();
            return self.answer(Via::Connect, &target, &Stop::ConnectWithoutAuthority);
        };
        let swapped = self.policy.watch();
        let decision = self.policy().decide_authority(&authority);
        let (upstream, address, route) = match self.open(decision).await {
            Ok(opened) => opened,
            Err(stop) => return self.answer(Via::Connect, &authority, &stop),
        };
        let allowed = Outcome::Allowed {
            address,
            route: route.clone(),
        };
        self.emit(Via::Connect, &authority, allowed);
        let closing = self.closing_report(Via::Connect, &authority, &upstream, &route);
        self.counters.tunnels.fetch_add(1, Ordering::Relaxed);

        let shutdown = self.shutdown.clone();
        let policy = Arc::clone(&self.policy);
        self.tasks.spawn(async move {
            let _ticket = ticket;
            let _closing = closing;
            // A tunnel outlives the request that judged it: should the scope narrow to exclude
            // its destination (a secret was typed), it closes, so a connection a page opened
            // beforehand cannot carry what it learns afterwards; and one opened before the task
            // picked its route never carries the task's traffic by another.
            let rescoped = policy.changes_later(swapped, &authority, &route);
            tokio::pin!(rescoped);
            let upgraded = match hyper::upgrade::on(request).await {
                Ok(upgraded) => upgraded,
                Err(error) => {
                    tracing::debug!(%error, "CONNECT client left before the tunnel opened");
                    return;
                }
            };
            // The sockets themselves, for the kernel to splice between; the parser's buffer
            // goes once its early bytes are sent.
            let Ok(parts) = upgraded.downcast::<ClientIo>() else {
                tracing::warn!("a CONNECT's upgraded connection was not the client's socket");
                return;
            };
            let (mut lingering, ..) = parts.io.into_inner().into_parts();
            let Some(client) = lingering.0.take() else {
                return;
            };
            let (upstream, idle, budget, counters) = upstream.into_parts();
            let tunnel = Tunnel {
                client,
                upstream,
                early: parts.read_buf,
                idle,
                budget,
                counters,
            };
            tokio::select! {
                ended = tunnel.run(&shutdown) => {
                    if let Err(error) = ended {
                        tracing::debug!(%error, %address, "tunnel ended with an error");
                    }
                }
                () = &mut rescoped => {
                    tracing::debug!(%address, "tunnel closed: the task's scope or route no longer admits it");
                }
            }
        });
        empty_response(StatusCode::OK)
    }

    async fn forward(&self, request: Request<Incoming>) -> Response<ProxyBody> {
        let uri = request.uri().clone();
        let target = event_target(&uri);
        let refused_scheme = match uri.scheme_str() {
            Some("http") => None,
            None => Some(Stop::NotAbsoluteForm),
            Some("https") => Some(Stop::HttpsWithoutConnect),
            Some(other) => Some(Stop::SchemeNotProxied {
                scheme: other.to_owned(),
            }),
        };
        if let Some(stop) = refused_scheme {
            return self.answer(Via::Forward, &target, &stop);
        }
        let decision = self.policy().decide_url(&uri.to_string());
        let vetted = match self.vet(decision).await {
            Ok(vetted) => vetted,
            Err(stop) => return self.answer(Via::Forward, &target, &stop),
        };
        if request.headers().contains_key(header::UPGRADE) {
            return self.answer(Via::Forward, &target, &Stop::UpgradeOverHttp);
        }
        let (upstream, address) = match self.connect(&vetted).await {
            Ok(opened) => opened,
            Err(stop) => return self.answer(Via::Forward, &target, &stop),
        };
        let route = vetted.route_name();
        let allowed = Outcome::Allowed {
            address,
            route: route.to_owned(),
        };
        self.emit(Via::Forward, &target, allowed);
        let closing = self.closing_report(Via::Forward, &target, &upstream, route);
        self.counters.forwarded.fetch_add(1, Ordering::Relaxed);

        match self.exchange(request, upstream, closing).await {
            Ok(response) => response,
            Err(error) => self.answer(Via::Forward, &target, &Stop::upstream(error)),
        }
    }

    /// Send one request on its own upstream connection and return the response to relay.
    async fn exchange(
        &self,
        request: Request<Incoming>,
        upstream: Bounded<crate::upstream::Upstream>,
        closing: Option<ClosingReport>,
    ) -> Result<Response<ProxyBody>, hyper::Error> {
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(upstream)).await?;
        let shutdown = self.shutdown.clone();
        self.tasks.spawn(async move {
            // Reported once the connection is done: the response's body has passed by then.
            let _closing = closing;
            tokio::select! {
                result = connection => {
                    if let Err(error) = result {
                        tracing::debug!(%error, "forwarded connection ended with an error");
                    }
                }
                () = shutdown.cancelled() => {}
            }
        });

        let (mut parts, body) = request.into_parts();
        let authority = parts.uri.authority().map(ToString::to_string);
        parts.uri = origin_form(&parts.uri);
        parts.version = Version::HTTP_11;
        strip_hop_by_hop(&mut parts.headers);
        if let Some(host) = authority.and_then(|a| HeaderValue::from_str(&a).ok()) {
            // The upstream sees the host that was vetted, whatever the client's Host header said.
            parts.headers.insert(header::HOST, host);
        }
        let response = sender
            .send_request(Request::from_parts(parts, body))
            .await?;
        let (mut parts, body) = response.into_parts();
        strip_hop_by_hop(&mut parts.headers);
        Ok(Response::from_parts(parts, body.boxed_unsync()))
    }

    /// Answer a stopped request with its status and reason, and report it.
    fn answer(&self, via: Via, target: &str, stop: &Stop) -> Response<ProxyBody> {
        let status = stop.status();
        let reason = stop.to_string();
        let outcome = match stop.refusal_class() {
            Some(class) => {
                self.counters.count_refusal(class);
                Outcome::Refused {
                    reason: reason.clone(),
                    page_reason: stop.page_text(),
                    class,
                }
            }
            None => Outcome::Failed {
                status: status.as_u16(),
                class: stop.failure_class(),
                reason: reason.clone(),
            },
        };
        // Not the target or the reason: a page chooses them, and may put what was typed in them.
        // Whoever started the proxy gets both in the event and decides what to keep.
        tracing::debug!(
            via = via.label(),
            status = status.as_u16(),
            "egress stopped"
        );
        self.emit(via, target, outcome);
        let header_name = if stop.refusal_class().is_some() {
            REFUSED_HEADER
        } else {
            "x-airlock-error"
        };
        text_response(status, header_name, &stop.page_text())
    }

    pub(crate) fn emit(&self, via: Via, target: &str, outcome: Outcome) {
        if let Some(sink) = &self.events {
            sink(ProxyEvent {
                at: SystemTime::now(),
                via,
                target: target.to_owned(),
                outcome,
            });
        }
    }
}
