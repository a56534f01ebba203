//! TLS with rustls, from PEM files: the certificate chain and its private key.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// An acceptor for `cert` (PEM chain, leaf first) and `key` (PEM private key).
pub(crate) fn acceptor(cert: &Path, key: &Path) -> anyhow::Result<TlsAcceptor> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .with_context(|| format!("--tls-cert {}: cannot read it as PEM", cert.display()))?
        .collect::<Result<_, _>>()
        .with_context(|| format!("--tls-cert {}: not a PEM certificate chain", cert.display()))?;
    if chain.is_empty() {
        anyhow::bail!(
            "--tls-cert {} holds no certificate: give the PEM chain, leaf first",
            cert.display()
        );
    }
    let key = PrivateKeyDer::from_pem_file(key).with_context(|| {
        format!(
            "--tls-key {}: no PEM private key in it (PKCS#8, PKCS#1 or SEC1)",
            key.display()
        )
    })?;
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS: the default protocol versions are not available")?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .context("--tls-cert and --tls-key do not make a usable pair: does the key belong to the certificate?")?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
