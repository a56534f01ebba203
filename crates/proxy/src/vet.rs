//! The whole security story of a request: judge the destination, resolve a name once with the
//! proxy's own resolver, judge every answer, and connect only to an address that passed, directly
//! or through the route's parent, which is asked for exactly that address. Only a route whose
//! parent resolves skips the lookup, and its parent hears only a name the policy judged.

use std::net::{IpAddr, SocketAddr};

use airlock_policy::{Decision, Resolution, Route};

use crate::bounded::Bounded;
use crate::connection::Shared;
use crate::parent::{Target, TunnelStop};
use crate::stop::Stop;
use crate::upstream::Upstream;

/// A destination that passed, and the route it leaves by.
#[derive(Debug)]
pub(crate) struct Vetted {
    reach: Reach,
    port: u16,
    route: Route,
}

impl Vetted {
    /// The name of the route it leaves by.
    pub(crate) fn route_name(&self) -> &str {
        &self.route.name
    }
}

#[derive(Debug)]
enum Reach {
    /// Addresses that passed: dialled (or asked of the parent) in turn, nothing else.
    Addresses(Vec<IpAddr>),
    /// A name the parent resolves (its route allows that).
    Name(String),
}

impl Shared {
    /// Vet, then connect; with the name of the route it left by.
    pub(crate) async fn open(
        &self,
        decision: Decision,
    ) -> Result<(Bounded<Upstream>, SocketAddr, String), Stop> {
        let vetted = self.vet(decision).await?;
        let (stream, address) = self.connect(&vetted).await?;
        Ok((stream, address, vetted.route.name))
    }

    /// What the policy lets this request reach, by which route. A name is looked up once, here,
    /// and refused as a whole if any answer is refused, so a later lookup cannot rebind it.
    pub(crate) async fn vet(&self, decision: Decision) -> Result<Vetted, Stop> {
        let name = match &decision {
            Decision::Resolve { name, .. } => Some(name.as_str()),
            _ => None,
        };
        let route = self.routes().for_host(name).clone();
        match decision {
            Decision::Refuse(refusal) => Err(Stop::Refused(refusal)),
            // The exact address vetted: never another spelling of it.
            Decision::Allow { ip, port, .. } => Ok(Vetted {
                reach: Reach::Addresses(vec![ip]),
                port,
                route,
            }),
            Decision::Resolve { name, port }
                if route.parent.is_some() && route.resolution == Resolution::ParentResolves =>
            {
                Ok(Vetted {
                    reach: Reach::Name(name),
                    port,
                    route,
                })
            }
            Decision::Resolve { name, port } => {
                let lookup =
                    tokio::time::timeout(self.limits.resolve_timeout, self.resolver.resolve(&name));
                let answers = match lookup.await {
                    Ok(Ok(answers)) => answers,
                    Ok(Err(error)) => return Err(Stop::Unresolved(error)),
                    Err(_) => return Err(Stop::ResolveTimedOut { name }),
                };
                let vetted = self
                    .policy()
                    .decide_resolved(&name, port, &answers)
                    .map_err(Stop::Refused)?;
                Ok(Vetted {
                    reach: Reach::Addresses(vetted),
                    port,
                    route,
                })
            }
        }
    }

    /// Connect to the first vetted address that answers, directly or through the route's
    /// parent; nothing else is ever dialled or asked for. The address reported is the one
    /// reached (for a name the parent resolved, the parent's own).
    pub(crate) async fn connect(
        &self,
        vetted: &Vetted,
    ) -> Result<(Bounded<Upstream>, SocketAddr), Stop> {
        let port = vetted.port;
        let opened = match (&vetted.reach, &vetted.route.parent) {
            (Reach::Name(name), Some(parent)) => {
                let target = Target::Name(name, port);
                let stream = self.through(&vetted.route, parent, target).await?;
                let address = stream.peer_addr().map_err(|source| Stop::ConnectFailed {
                    address: SocketAddr::new(IpAddr::from([0, 0, 0, 0]), port),
                    source,
                })?;
                (stream, address)
            }
            (Reach::Name(_), None) => return Err(Stop::NoAddress),
            (Reach::Addresses(addresses), parent) => {
                let mut last = Stop::NoAddress;
                let mut opened = None;
                for &ip in addresses {
                    let address = SocketAddr::new(ip, port);
                    let attempt = match parent {
                        None => self.dial(address).await,
                        Some(parent) => {
                            self.through(&vetted.route, parent, Target::Address(address))
                                .await
                        }
                    };
                    match attempt {
                        Ok(stream) => {
                            opened = Some((stream, address));
                            break;
                        }
                        Err(stop) => last = stop,
                    }
                }
                opened.ok_or(last)?
            }
        };
        let (stream, address) = opened;
        let bounded = Bounded::new(
            stream,
            self.limits.idle_timeout,
            self.limits.max_bytes_per_connection,
            self.counters.upstream_bytes(),
        );
        Ok((bounded, address))
    }

    /// A direct connection to a vetted address.
    async fn dial(&self, address: SocketAddr) -> Result<Upstream, Stop> {
        match tokio::time::timeout(self.limits.connect_timeout, self.connector.connect(address))
            .await
        {
            Ok(Ok(stream)) => Ok(Upstream::Plain(stream)),
            Ok(Err(source)) => Err(Stop::ConnectFailed { address, source }),
            Err(_) => Err(Stop::ConnectTimedOut { address }),
        }
    }

    /// A tunnel through `route`'s parent.
    async fn through(
        &self,
        route: &Route,
        parent: &airlock_policy::Parent,
        target: Target<'_>,
    ) -> Result<Upstream, Stop> {
        crate::parent::tunnel(
            parent,
            target,
            self.limits.connect_timeout,
            &self.parent_tls,
        )
        .await
        .map_err(|stop| match stop {
            TunnelStop::Failed(error) => Stop::Parent {
                route: route.name.clone(),
                error,
            },
            TunnelStop::TimedOut => Stop::ParentTimedOut {
                route: route.name.clone(),
            },
        })
    }
}
