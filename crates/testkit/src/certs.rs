//! A self-signed certificate and its key, made by Debian's `openssl` (installed by
//! `cargo xtask ci`): for a server's TLS, or as a CA file to hand Airlock.

use std::path::{Path, PathBuf};
use std::process::Command;

/// `cert.pem` and `key.pem` in `dir`: a P-256 certificate for `subject` (`/CN=…`), valid for a
/// day, with `alt_names` (`IP:127.0.0.1`, …) as its subject alternative names when given.
pub fn self_signed(dir: &Path, subject: &str, alt_names: Option<&str>) -> (PathBuf, PathBuf) {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let mut command = Command::new("openssl");
    command
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
        .args(["ec_paramgen_curve:prime256v1", "-nodes", "-days", "1"])
        .args(["-subj", subject]);
    if let Some(names) = alt_names {
        command.args(["-addext", &format!("subjectAltName={names}")]);
    }
    let made = command
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "openssl req failed: {}",
        String::from_utf8_lossy(&made.stderr)
    );
    (cert, key)
}
