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

/// A CA (`ca.pem`, self-signed) and a server certificate it signed (`cert.pem`, `key.pem`) in
/// `dir`: P-256, valid for a day, the server's for `subject` with `alt_names` (`IP:127.0.0.1`,
/// …). The way a company's proxy is certified: a client trusts the CA, never the leaf itself.
pub fn signed_by_a_new_ca(
    dir: &Path,
    subject: &str,
    alt_names: &str,
) -> (PathBuf, PathBuf, PathBuf) {
    let ca_dir = dir.join("ca");
    std::fs::create_dir_all(&ca_dir).unwrap();
    let (ca_cert, ca_key) = self_signed(&ca_dir, "/CN=Airlock test CA", None);
    let (cert, key, request) = (
        dir.join("cert.pem"),
        dir.join("key.pem"),
        dir.join("req.pem"),
    );
    openssl(
        Command::new("openssl")
            .args(["req", "-new", "-newkey", "ec", "-pkeyopt"])
            .args(["ec_paramgen_curve:prime256v1", "-nodes", "-subj", subject])
            .arg("-keyout")
            .arg(&key)
            .arg("-out")
            .arg(&request),
    );
    let extensions = dir.join("leaf.ext");
    std::fs::write(
        &extensions,
        format!("basicConstraints=CA:FALSE\nsubjectAltName={alt_names}\n"),
    )
    .unwrap();
    openssl(
        Command::new("openssl")
            .args(["x509", "-req", "-days", "1", "-in"])
            .arg(&request)
            .arg("-CA")
            .arg(&ca_cert)
            .arg("-CAkey")
            .arg(&ca_key)
            .arg("-CAcreateserial")
            .arg("-extfile")
            .arg(&extensions)
            .arg("-out")
            .arg(&cert),
    );
    let ca = dir.join("ca.pem");
    std::fs::copy(&ca_cert, &ca).unwrap();
    std::fs::remove_dir_all(&ca_dir).unwrap();
    (ca, cert, key)
}

fn openssl(command: &mut Command) {
    let made = command.output().unwrap();
    assert!(
        made.status.success(),
        "openssl failed: {}",
        String::from_utf8_lossy(&made.stderr)
    );
}
