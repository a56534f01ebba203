//! The operator's extra CA in the sealed browser: written as PEM to the container's tmpfs before
//! Chromium launches, where agent-browser (`AGENT_BROWSER_CA_CERT`, set in the container's
//! environment) imports it into the NSS database of the Chromium it launches and trusts it for its
//! own fetches (`read`), and `airlock-cdp-browser` imports it for a CDP lease. Nothing on the host
//! changes, and the file goes with the container.

use std::time::Duration;

use base64::Engine as _;

use crate::error::DockerError;
use crate::runner::{Commands, DriverCommands};
use crate::spec::{CA_DIR, CA_NAME};

/// `certs` (DER) as one PEM bundle.
fn pem(certs: &[Vec<u8>]) -> Vec<u8> {
    let mut text = String::new();
    for der in certs {
        let encoded = base64::engine::general_purpose::STANDARD.encode(der);
        text.push_str("-----BEGIN CERTIFICATE-----\n");
        for line in encoded.as_bytes().chunks(64) {
            // Base64's alphabet is ASCII, so every chunk is text.
            text.push_str(&String::from_utf8_lossy(line));
            text.push('\n');
        }
        text.push_str("-----END CERTIFICATE-----\n");
    }
    text.into_bytes()
}

/// Write `certs` where the browser's launch reads them (nothing when there are none).
pub(crate) async fn place(
    commands: &Commands,
    certs: &[Vec<u8>],
    timeout: Duration,
) -> Result<(), DockerError> {
    if certs.is_empty() {
        return Ok(());
    }
    DriverCommands { commands, timeout }
        .write_private(CA_DIR, CA_NAME, &pem(certs))
        .await
        .map_err(|why| DockerError::PlaceFile {
            name: CA_NAME.to_owned(),
            why,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn certificates_become_one_pem_bundle_in_64_column_lines() {
        let text = String::from_utf8(pem(&[vec![0_u8; 100], vec![1, 2, 3]])).unwrap();
        assert_eq!(text.matches("-----BEGIN CERTIFICATE-----\n").count(), 2);
        assert!(text.lines().all(|line| line.len() <= 64), "{text}");
        assert!(
            text.contains("-----END CERTIFICATE-----\n-----BEGIN"),
            "{text}"
        );
        assert!(
            text.ends_with("AQID\n-----END CERTIFICATE-----\n"),
            "{text}"
        );
    }
}
