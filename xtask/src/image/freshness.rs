//! The image's Chromium and build date as labels (`airlock.chromium`,
//! `org.opencontainers.image.created`), written after the build, since the version is known only
//! once apt has installed it; the driver, `airlock doctor` and a server read them back.

use std::collections::HashMap;
use std::io::Write;
use std::process::{Command, Stdio};

use airlock_driver_docker::{
    ImageAge, LABEL_BUILT, LABEL_CHROMIUM, host_apt_chromium, is_older_version,
};
use anyhow::{Context, bail};

use crate::util::output;

/// What the tag's labels say of its Chromium and age.
pub(super) fn age_of(tag: &str) -> anyhow::Result<ImageAge> {
    let text = output(Command::new("docker").args([
        "image",
        "inspect",
        "--format",
        "{{json .Config.Labels}}",
        tag,
    ]))?;
    let labels: Option<HashMap<String, String>> =
        serde_json::from_str(text.trim()).with_context(|| format!("reading {tag}'s labels"))?;
    Ok(ImageAge::from_labels(tag, &labels.unwrap_or_default()))
}

/// Label the freshly built `tag` with the Chromium it installed and the time, by a build of
/// `FROM tag` alone (no layer, no context), and say when this host's apt knows a newer Chromium.
pub(super) fn label(tag: &str) -> anyhow::Result<()> {
    let chromium = output(Command::new("docker").args([
        "run",
        "--rm",
        "--network",
        "none",
        "--entrypoint",
        "dpkg-query",
        tag,
        "-W",
        "-f=${Version}",
        "chromium",
    ]))?;
    let chromium = chromium.trim();
    if chromium.is_empty() {
        bail!("{tag} has no chromium package");
    }
    let created = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let mut build = Command::new("docker")
        .args(["build", "--quiet", "--tag", tag])
        .arg("--label")
        .arg(format!("{LABEL_CHROMIUM}={chromium}"))
        .arg("--label")
        .arg(format!("{LABEL_BUILT}={created}"))
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .context("starting docker build for the labels")?;
    build
        .stdin
        .take()
        .context("docker build has no stdin")?
        .write_all(format!("FROM {tag}\n").as_bytes())
        .context("writing the labels' Dockerfile")?;
    let status = build.wait().context("waiting for docker build")?;
    if !status.success() {
        bail!("labelling {tag} failed ({status})");
    }
    eprintln!("  {tag} carries Chromium {chromium}, built {created}");
    if let Some(host) = host_apt_chromium()
        && is_older_version(chromium, &host)
    {
        eprintln!(
            "  note: this host's apt offers Chromium {host}, newer than the image's: the host lists archives the base does not (or a newer suite)"
        );
    }
    Ok(())
}
