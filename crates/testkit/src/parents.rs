//! Real parent proxies on loopback, from Debian: squid (HTTP CONNECT, basic auth, its own access
//! log and hosts file; over plain TCP, or over TLS on its `https_port`) and microsocks (SOCKS5 with a username and password). Each runs in the
//! foreground as a child process and is killed when dropped.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use crate::http::within;
use tokio::net::TcpStream;

/// The username every parent here asks for.
pub const USER: &str = "route-user";
/// The password every parent here asks for.
pub const PASSWORD: &str = "parent-password-7f3a";

/// A parent proxy process.
pub struct ParentProxy {
    /// Where it listens (loopback).
    pub address: SocketAddr,
    /// Its files (squid's configuration and logs).
    pub dir: tempfile::TempDir,
    child: Child,
    /// squid's service name, which names its shared-memory segments in `/dev/shm`.
    service: Option<String>,
}

impl Drop for ParentProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // Killed, squid leaves its segments behind; another user's squid could not make its own
        // under the same names, so each instance has a name of its own and its segments go.
        if let Some(service) = &self.service
            && let Ok(entries) = std::fs::read_dir("/dev/shm")
        {
            for entry in entries.flatten() {
                if entry
                    .file_name()
                    .to_string_lossy()
                    .starts_with(&format!("{service}-"))
                {
                    let _ = std::fs::remove_file(entry.path());
                }
            }
        }
    }
}

impl ParentProxy {
    /// squid's access log so far: one line per request it handled (less the line for the
    /// start's readiness probe, a connection that sent nothing).
    pub fn access_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("access.log"))
            .unwrap_or_default()
            .lines()
            .filter(|line| !line.contains("transaction-end-before-headers"))
            .flat_map(|line| [line, "\n"])
            .collect()
    }

    /// squid's access log once it has `count` lines, bounded.
    pub async fn lines(&self, count: usize) -> String {
        within(async {
            loop {
                let log = self.access_log();
                if log.lines().count() >= count {
                    return log;
                }
                tokio::task::yield_now().await;
            }
        })
        .await
    }

    /// squid's access log once it holds `needle` (squid writes a tunnel's line when the tunnel
    /// closes, after its client has its answer), bounded.
    pub async fn logged(&self, needle: &str) -> String {
        within(async {
            loop {
                let log = self.access_log();
                if log.contains(needle) {
                    return log;
                }
                tokio::task::yield_now().await;
            }
        })
        .await
    }
}

fn installed(program: &str, package: &str) -> PathBuf {
    for dir in ["/usr/sbin", "/usr/bin"] {
        let path = Path::new(dir).join(program);
        if path.exists() {
            return path;
        }
    }
    panic!("{program} is missing: install Debian's `{package}` (cargo xtask ci does)");
}

/// A loopback port free now (the child binds it next).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Wait until something listens at `address` (the child has started), bounded.
async fn listening(address: SocketAddr, child: &mut Child) {
    within(async {
        loop {
            // A connection to itself (the kernel may pick the port being probed as the probe's
            // own, and then the two ends meet) proves nothing listens; keep waiting.
            if let Ok(stream) = TcpStream::connect(address).await
                && stream.local_addr().ok() != Some(address)
            {
                return;
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("the parent proxy exited at start: {status}");
            }
            tokio::task::yield_now().await;
        }
    })
    .await;
}

/// squid on loopback asking for [`USER`] and [`PASSWORD`]; `hosts` is its own hosts file (for
/// names the parent resolves).
pub async fn squid(hosts: &str) -> ParentProxy {
    squid_on(hosts, Listener::Plain).await
}

/// squid as [`squid`] does, spoken to over TLS (`https_port`, Debian's GnuTLS build) with a
/// certificate for `127.0.0.1` signed by a CA of its own ([`ParentProxy::tls_ca`]).
pub async fn squid_tls(hosts: &str) -> ParentProxy {
    squid_on(hosts, Listener::Tls).await
}

/// How squid listens.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Listener {
    Plain,
    Tls,
}

async fn squid_on(hosts: &str, listener: Listener) -> ParentProxy {
    let program = installed("squid", "squid");
    let helper = Path::new("/usr/lib/squid/basic_ncsa_auth");
    assert!(helper.exists(), "squid's basic_ncsa_auth is missing");
    let dir = tempfile::tempdir().unwrap();
    // squid started as root runs as `proxy`, which must reach its files.
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let hashed = Command::new("openssl")
        .args(["passwd", "-apr1", PASSWORD])
        .output()
        .unwrap();
    assert!(hashed.status.success(), "openssl passwd failed");
    let hashed = String::from_utf8(hashed.stdout).unwrap();
    let path = |name: &str| dir.path().join(name).display().to_string();
    std::fs::write(path("passwd"), format!("{USER}:{}", hashed.trim())).unwrap();
    std::fs::write(path("hosts"), hosts).unwrap();
    let port = free_port();
    let listen = match listener {
        Listener::Plain => format!("http_port 127.0.0.1:{port}"),
        Listener::Tls => {
            let (_, cert, key) =
                crate::certs::signed_by_a_new_ca(dir.path(), "/CN=squid.test", "IP:127.0.0.1");
            // squid reads it as root at start; a test key, readable like the rest.
            std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o644))
                .unwrap();
            format!(
                "https_port 127.0.0.1:{port} tls-cert={} tls-key={}",
                cert.display(),
                key.display()
            )
        }
    };
    let config = format!(
        "{listen}
pid_filename {pid}
access_log stdio:{access}
cache_log {cache}
cache_store_log none
cache deny all
cache_mem 8 MB
coredump_dir {dir}
hosts_file {hosts}
dns_nameservers 127.0.0.1
shutdown_lifetime 0 seconds
auth_param basic program {helper} {passwd}
acl authed proxy_auth REQUIRED
http_access allow authed
http_access deny all
",
        pid = path("squid.pid"),
        access = path("access.log"),
        cache = path("cache.log"),
        dir = dir.path().display(),
        hosts = path("hosts"),
        helper = helper.display(),
        passwd = path("passwd"),
    );
    std::fs::write(path("squid.conf"), config).unwrap();
    for file in ["passwd", "hosts", "squid.conf"] {
        std::fs::set_permissions(
            path(file),
            std::os::unix::fs::PermissionsExt::from_mode(0o644),
        )
        .unwrap();
    }
    let service = format!("airlocktest{port}");
    let mut command = Command::new(program);
    command.args(["-N", "-n", &service, "-f", &path("squid.conf")]);
    let mut parent = run(command, port, dir).await;
    parent.service = Some(service);
    parent
}

/// microsocks on loopback asking for [`USER`] and [`PASSWORD`].
pub async fn microsocks() -> ParentProxy {
    let program = installed("microsocks", "microsocks");
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut command = Command::new(program);
    command
        .args(["-i", "127.0.0.1", "-p", &port.to_string()])
        .args(["-u", USER, "-P", PASSWORD]);
    run(command, port, dir).await
}

/// Start `command` (a parent that will listen on loopback `port`) and wait until it does.
async fn run(mut command: Command, port: u16, dir: tempfile::TempDir) -> ParentProxy {
    // What it says goes to its directory, for a failing test to show.
    let log = std::fs::File::create(dir.path().join("output.log")).unwrap();
    let mut child = command
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    let address = SocketAddr::from(([127, 0, 0, 1], port));
    listening(address, &mut child).await;
    ParentProxy {
        address,
        dir,
        child,
        service: None,
    }
}

/// What the inspecting parent answers every request with, under a certificate its CA signed.
pub const INSPECTED_PAGE: &str = "Served by the inspecting proxy under its own CA.";

/// mitmproxy's `mitmdump` (`AIRLOCK_TEST_MITMDUMP`, which `cargo xtask integration` sets) on
/// loopback as a TLS-inspecting parent: it terminates every tunnel's TLS with a certificate its
/// own CA signs ([`ParentProxy::ca_cert`]) and answers each request itself with
/// [`INSPECTED_PAGE`], dialling nothing (`connection_strategy=lazy`); each URL it answered is
/// logged to `seen.log`.
pub async fn mitmproxy() -> ParentProxy {
    let program = std::env::var("AIRLOCK_TEST_MITMDUMP").unwrap_or_else(|_| {
        panic!("AIRLOCK_TEST_MITMDUMP is not set: run `cargo xtask integration` (it installs mitmproxy from PyPI)")
    });
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("answer.py");
    let seen = dir.path().join("seen.log");
    std::fs::write(
        &script,
        format!(
            "from mitmproxy import http\n\
             def request(flow):\n\
             \x20   with open({seen:?}, 'a') as log:\n\
             \x20       log.write(flow.request.pretty_url + '\\n')\n\
             \x20   flow.response = http.Response.make(200, b'<html><head><title>Inspected</title></head><body><p>{INSPECTED_PAGE}</p></body></html>', {{'content-type': 'text/html'}})\n",
            seen = seen.display().to_string(),
        ),
    )
    .unwrap();
    let port = free_port();
    let mut command = Command::new(program);
    command
        .args([
            "--listen-host",
            "127.0.0.1",
            "--listen-port",
            &port.to_string(),
        ])
        .args(["--set", &format!("confdir={}", dir.path().display())])
        .args(["--set", "connection_strategy=lazy", "-q", "-s"])
        .arg(&script);
    let parent = run(command, port, dir).await;
    // The CA is written at start, before the port opens; checked so a missing one says so.
    assert!(
        parent.ca_cert().exists(),
        "mitmproxy made no CA in {}",
        parent.dir.path().display()
    );
    parent
}

impl ParentProxy {
    /// The CA (PEM) that signed a TLS parent's certificate ([`squid_tls`]).
    pub fn tls_ca(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// The CA certificate (PEM) an inspecting parent signs with.
    pub fn ca_cert(&self) -> PathBuf {
        self.dir.path().join("mitmproxy-ca-cert.pem")
    }

    /// What the parent printed so far.
    pub fn output(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("output.log")).unwrap_or_default()
    }

    /// The URLs an inspecting parent answered so far.
    pub fn seen(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("seen.log")).unwrap_or_default()
    }
}
