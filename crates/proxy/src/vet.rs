//! The whole security story of a request: judge the destination, resolve a name once with the
//! proxy's own resolver, judge every answer, and connect only to an address that passed.

use std::net::{IpAddr, SocketAddr};

use airlock_policy::Decision;

use crate::connection::Shared;
use tokio::net::TcpStream;

use crate::bounded::Bounded;
use crate::stop::Stop;

impl Shared {
    /// Vet, then connect to a vetted address.
    pub(crate) async fn open(
        &self,
        decision: Decision,
    ) -> Result<(Bounded<TcpStream>, SocketAddr), Stop> {
        let (addresses, port) = self.vet(decision).await?;
        self.connect(&addresses, port).await
    }

    /// The addresses the policy lets this request reach. A name is looked up once, here, and
    /// refused as a whole if any answer is refused, so a later lookup cannot rebind it.
    pub(crate) async fn vet(&self, decision: Decision) -> Result<(Vec<IpAddr>, u16), Stop> {
        match decision {
            Decision::Refuse(refusal) => Err(Stop::Refused(refusal)),
            // The exact address vetted: never another spelling of it.
            Decision::Allow { ip, port, .. } => Ok((vec![ip], port)),
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
                Ok((vetted, port))
            }
        }
    }

    /// Connect to the first vetted address that answers; nothing else is ever dialled.
    pub(crate) async fn connect(
        &self,
        addresses: &[IpAddr],
        port: u16,
    ) -> Result<(Bounded<TcpStream>, SocketAddr), Stop> {
        let mut last = Stop::NoAddress;
        for &ip in addresses {
            let address = SocketAddr::new(ip, port);
            match tokio::time::timeout(self.limits.connect_timeout, self.connector.connect(address))
                .await
            {
                Ok(Ok(stream)) => {
                    let bounded = Bounded::new(
                        stream,
                        self.limits.idle_timeout,
                        self.limits.max_bytes_per_connection,
                        self.counters.upstream_bytes(),
                    );
                    return Ok((bounded, address));
                }
                Ok(Err(source)) => last = Stop::ConnectFailed { address, source },
                Err(_) => last = Stop::ConnectTimedOut { address },
            }
        }
        Err(last)
    }
}
