//! The proof's company proxy: Debian's squid in the stack, asking for a user and password, and
//! the route every replica's tasks take (`AIRLOCK_ROUTE=corp`), its credentials a secret's file.
//! Every other proof of the cluster therefore runs through it; this one reads squid's own log
//! after the six tasks: each page load was asked of squid by the proof's user, for the lab's
//! vetted address (pinned: never the name), and the replicas count the bytes under the route.

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::bail;

use super::{Client, STACK, create_secret, random_token, replica_metrics, wait_for};
use crate::util::{output, run_loud};

/// The secret holding `user:password` for the parent, read by the replicas as a file.
pub(super) const PARENT_SECRET: &str = "airlock_parent";
/// The user squid asks for.
const USER: &str = "airlock-proof";

/// squid's configuration in the stack: no cache, basic authentication, its log in a file the
/// proof reads with `docker exec`.
const SQUID_CONF: &str = "http_port 3128
pid_filename none
access_log stdio:/var/log/squid/access.log
cache_log /var/log/squid/cache.log
cache_store_log none
cache deny all
cache_mem 8 MB
shutdown_lifetime 0 seconds
auth_param basic program /usr/lib/squid/basic_ncsa_auth /etc/squid/proof.passwd
acl authed proxy_auth REQUIRED
http_access allow authed
http_access deny all
";

/// The parent's image: squid from Debian, on the base the balancer is built on.
const DOCKERFILE: &str = r#"ARG BASE_IMAGE
FROM ${BASE_IMAGE}
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends squid \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*
CMD ["squid", "-N", "-f", "/etc/squid/proof.conf"]
"#;

/// Build the parent's image (`airlock-cluster-parent:VERSION`) on `base`.
pub(super) fn build_image(dir: &Path, base: &str, version: &str) -> anyhow::Result<()> {
    let context = dir.join("parent-image");
    fs::create_dir_all(&context)?;
    fs::write(context.join("Dockerfile"), DOCKERFILE)?;
    run_loud(
        Command::new("docker")
            .args(["build", "--quiet", "--build-arg"])
            .arg(format!("BASE_IMAGE={base}"))
            .args(["--tag", &format!("airlock-cluster-parent:{version}")])
            .arg(&context),
    )
}

/// Write squid's files for the stack's configs and make the credentials' secret. The password.
pub(super) fn prepare(dir: &Path) -> anyhow::Result<String> {
    let password = random_token()?;
    let hashed = output(Command::new("openssl").args(["passwd", "-apr1", &password]))?;
    fs::write(dir.join("squid.conf"), SQUID_CONF)?;
    fs::write(
        dir.join("parent.passwd"),
        format!("{USER}:{}\n", hashed.trim()),
    )?;
    create_secret(PARENT_SECRET, &format!("{USER}:{password}"))?;
    Ok(password)
}

/// After the six tasks: squid logged a tunnel for each, for the proof's user, asked for an
/// address (the replicas resolved and vetted `lab` themselves), and the replicas counted bytes
/// on the route.
pub(super) fn through_the_parent(client: &Client) -> anyhow::Result<()> {
    let parent = output(Command::new("docker").args([
        "ps",
        "-q",
        "--filter",
        &format!("label=com.docker.swarm.service.name={STACK}_parent"),
        "--filter",
        "status=running",
    ]))?;
    let Some(parent) = parent.split_whitespace().next() else {
        bail!("the parent proxy's container is not running");
    };
    let read_log = || {
        output(Command::new("docker").args(["exec", parent, "cat", "/var/log/squid/access.log"]))
            .unwrap_or_default()
    };
    // squid logs a tunnel when it closes, as the task's browser goes: wait for the six.
    let _ = wait_for("squid to log six tunnels", Duration::from_mins(1), || {
        tunnels(&read_log()).len() >= 6
    });
    let log = read_log();
    let loads = tunnels(&log);
    if loads.len() < 6 {
        // What the replicas said shows where the route broke.
        let replicas = Command::new("docker")
            .args([
                "service",
                "logs",
                "--tail",
                "40",
                &format!("{STACK}_airlock"),
            ])
            .output()?;
        bail!(
            "squid logged {} tunnels by {USER} for six tasks; its log:\n{log}\nthe replicas' last lines:\n{}{}",
            loads.len(),
            String::from_utf8_lossy(&replicas.stdout),
            String::from_utf8_lossy(&replicas.stderr)
        );
    }
    for fields in &loads {
        let target = fields.get(6).copied().unwrap_or_default();
        let host = target.strip_suffix(":8000").unwrap_or_default();
        if host.parse::<std::net::IpAddr>().is_err() {
            bail!("squid was asked for {target}: a pinned route asks for the vetted address");
        }
        if !fields.get(3).is_some_and(|status| status.ends_with("/200")) {
            bail!("squid answered {fields:?}");
        }
    }
    let bytes: u64 = super::replicas()
        .iter()
        .map(|replica| {
            replica_metrics(replica, &client.host, &client.token)
                .lines()
                .filter(|line| {
                    line.starts_with("airlock_egress_bytes_total")
                        && line.contains("route=\"corp\"")
                })
                .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
                .sum::<u64>()
        })
        .sum();
    if bytes == 0 {
        bail!("the replicas counted no bytes on the route corp");
    }
    eprintln!(
        "== every task went through the company proxy: squid logged {} tunnels by {USER}, each to a vetted address; {bytes} bytes on the route corp",
        loads.len()
    );
    Ok(())
}

/// The tunnels squid's log holds for the proof's user, each line's fields (squid's native
/// format: time elapsed client code/status bytes method target user hierarchy type).
fn tunnels(log: &str) -> Vec<Vec<&str>> {
    log.lines()
        .map(|line| line.split_whitespace().collect::<Vec<_>>())
        .filter(|fields| fields.get(5) == Some(&"CONNECT") && fields.get(7) == Some(&USER))
        .collect()
}
