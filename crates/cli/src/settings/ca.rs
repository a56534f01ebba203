//! `--ca-cert FILE`: a company's CA the sealed browser trusts as well as the public roots, for a
//! parent that inspects TLS. Only certificates are taken: a file holding a private key is
//! refused (the key has no business on a host that runs browsers), and each certificate must
//! parse as one a trust store can hold.

use tokio_rustls::rustls::RootCertStore;
use tokio_rustls::rustls::pki_types::CertificateDer;
use tokio_rustls::rustls::pki_types::pem::{PemObject, SectionKind};

use super::Resolver;
use crate::setting_flags::{FileSettings, SettingFlags};

/// The most bytes one CA file may hold (a bundle of a few certificates is a few KiB).
const MAX_CA_FILE_BYTES: usize = 256 * 1024;
/// The most certificates in all.
const MAX_CA_CERTS: usize = 16;

impl Resolver<'_> {
    /// The extra CA certificates, DER-encoded, in the order given.
    pub(super) fn ca_certs(
        &mut self,
        flags: &SettingFlags,
        file: &FileSettings,
    ) -> anyhow::Result<Vec<Vec<u8>>> {
        let paths = self.pick(
            "ca_certs",
            "AIRLOCK_CA_CERTS",
            (!flags.ca_certs.is_empty()).then(|| flags.ca_certs.clone()),
            file.ca_certs.clone(),
            Vec::new(),
            |paths| {
                if paths.is_empty() {
                    "(none: the public roots only)".to_owned()
                } else {
                    paths
                        .iter()
                        .map(|p| p.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            },
        );
        read_ca_files(&paths)
    }
}

/// The certificates of every file, in order, each checked, at most [`MAX_CA_CERTS`] in all.
pub(crate) fn read_ca_files(paths: &[std::path::PathBuf]) -> anyhow::Result<Vec<Vec<u8>>> {
    let mut certs = Vec::new();
    for path in paths {
        certs.extend(read_ca_file(path)?);
    }
    if certs.len() > MAX_CA_CERTS {
        anyhow::bail!(
            "--ca-cert: {} certificates in all, over {MAX_CA_CERTS}: give the company's CA and its intermediates only",
            certs.len()
        );
    }
    Ok(certs)
}

/// The certificates of one PEM file, each checked.
fn read_ca_file(path: &std::path::Path) -> anyhow::Result<Vec<Vec<u8>>> {
    let shown = path.display();
    let bytes = std::fs::File::open(path)
        .and_then(|file| airlock_service::state_file::read_bounded(file, MAX_CA_FILE_BYTES))
        .map_err(|e| anyhow::anyhow!("--ca-cert {shown}: cannot read it: {e}"))?;
    let mut certs = Vec::new();
    for section in <(SectionKind, Vec<u8>)>::pem_slice_iter(&bytes) {
        let (kind, der) = section.map_err(|e| {
            anyhow::anyhow!("--ca-cert {shown}: not PEM ({e}): give the CA certificate as PEM")
        })?;
        if kind != SectionKind::Certificate {
            anyhow::bail!(
                "--ca-cert {shown}: holds a {kind:?} section, not only certificates: give only the CA's certificate (never a private key)"
            );
        }
        let mut store = RootCertStore::empty();
        store
            .add(CertificateDer::from(der.as_slice()))
            .map_err(|e| {
                anyhow::anyhow!("--ca-cert {shown}: a certificate does not parse ({e})")
            })?;
        certs.push(der);
    }
    if certs.is_empty() {
        anyhow::bail!(
            "--ca-cert {shown}: no certificate in it: give the CA certificate as PEM (-----BEGIN CERTIFICATE-----)"
        );
    }
    Ok(certs)
}
