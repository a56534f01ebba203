//! TLS to an `https://` parent: the parent's certificate must check out for the host the operator
//! wrote, against the public roots (Mozilla's, compiled in: the host's store is not read) and the
//! operator's own CAs (`--ca-cert`, the CA a company's proxy is usually signed by). Nothing here
//! turns a check off.

use std::sync::Arc;

use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::{ClientConfig, RootCertStore};

use crate::ProxyError;

/// How the proxy speaks TLS to its parents.
#[derive(Clone)]
pub(crate) struct ParentTls(TlsConnector);

impl ParentTls {
    /// The public roots and `extra` (DER certificates).
    pub(crate) fn new(extra: &[Vec<u8>]) -> Result<Self, ProxyError> {
        let mut roots = RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        };
        for (index, der) in extra.iter().enumerate() {
            roots
                .add(CertificateDer::from(der.as_slice()))
                .map_err(|error| ProxyError::ParentCa {
                    index,
                    reason: error.to_string(),
                })?;
        }
        // The ring provider the workspace builds rustls with; its defaults are what rustls
        // calls safe. (`ClientConfig::builder` would need a process-wide provider installed.)
        let config = ClientConfig::builder_with_provider(Arc::new(
            tokio_rustls::rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|error| ProxyError::ParentTls(error.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
        Ok(Self(TlsConnector::from(Arc::new(config))))
    }

    /// A TLS session on `socket` with the parent named `host` (a name or an address, as the
    /// operator wrote it; the certificate must carry it), or why there is none.
    pub(crate) async fn connect(
        &self,
        host: &str,
        socket: TcpStream,
    ) -> Result<TlsStream<TcpStream>, String> {
        let name = ServerName::try_from(host.to_owned())
            .map_err(|_| format!("`{host}` is not a name TLS can check"))?;
        self.0
            .connect(name, socket)
            .await
            .map_err(|error| error.to_string())
    }
}
