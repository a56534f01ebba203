//! The benchmark's pages, served over HTTP and HTTPS on loopback.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::Context;

use super::processes::{Children, free_port, run_quiet, wait_for_port};

// A 1×1 PNG.
const PIXEL: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d, 0x49, 0x48, 0x44, 0x52, 0, 0, 0,
    1, 0, 0, 0, 1, 8, 6, 0, 0, 0, 0x1f, 0x15, 0xc4, 0x89, 0, 0, 0, 0x0d, 0x49, 0x44, 0x41, 0x54,
    0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0xf0, 0x1f, 0, 5, 0, 1, 0xff, 0x89, 0x99, 0x3d, 0x1d, 0, 0,
    0, 0, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

/// Pages `page-N.html`, each with 100 subresources unique to it: 10 HTML documents (iframes), 30
/// stylesheets, 30 scripts and 30 images.
pub(super) fn write_site(dir: &Path, pages: usize) -> anyhow::Result<()> {
    fs::create_dir_all(dir.join("res"))?;
    for i in 0..30 {
        fs::write(
            dir.join(format!("res/s{i}.css")),
            format!(".c{i} {{ color: #{i:02x}{i:02x}{i:02x}; padding: {i}px; }}\n").repeat(20),
        )?;
        fs::write(
            dir.join(format!("res/j{i}.js")),
            format!("window.v{i} = (window.v{i} || 0) + {i};\n").repeat(20),
        )?;
        fs::write(dir.join(format!("res/i{i}.png")), PIXEL)?;
    }
    for i in 0..10 {
        fs::write(
            dir.join(format!("res/f{i}.html")),
            format!(
                "<!doctype html><title>frame {i}</title><p>{}</p>",
                "frame text ".repeat(50)
            ),
        )?;
    }
    for page in 0..pages {
        let mut html = String::from("<!doctype html><html><head><title>bench</title>");
        for i in 0..30 {
            let _ = write!(html, "<link rel=stylesheet href=\"res/s{i}.css?p={page}\">");
        }
        for i in 0..30 {
            let _ = write!(html, "<script src=\"res/j{i}.js?p={page}\"></script>");
        }
        html.push_str("</head><body><h1>bench</h1>");
        for i in 0..30 {
            let _ = write!(html, "<img src=\"res/i{i}.png?p={page}\">");
        }
        for i in 0..10 {
            let _ = write!(
                html,
                "<iframe src=\"res/f{i}.html?p={page}\" width=40 height=20></iframe>"
            );
        }
        html.push_str("</body></html>");
        fs::write(dir.join(format!("page-{page}.html")), html)?;
    }
    Ok(())
}

/// The HTTPS copy of the site: its port, and a home whose NSS database trusts its CA.
pub(super) struct HttpsSite {
    pub(super) port: u16,
    pub(super) home: PathBuf,
}

/// Serve the bench site over TLS (python's http.server with HTTP/1.1 keep-alive) with a
/// certificate for 127.0.0.1 from a CA made for this run, trusted through an NSS database in a
/// home of its own (nothing on the machine is changed).
pub(super) fn start_https_site(root: &Path, children: &mut Children) -> anyhow::Result<HttpsSite> {
    let dir = root.join("target/bench/https");
    if dir.exists() {
        fs::remove_dir_all(&dir)?;
    }
    let home = dir.join("home");
    let nssdb = home.join(".pki/nssdb");
    fs::create_dir_all(&nssdb)?;
    let path = |name: &str| dir.join(name).display().to_string();
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    run_quiet(
        Command::new("openssl")
            .args(["req", "-x509"])
            .args(ec)
            .args(["-keyout", &path("ca.key"), "-out", &path("ca.pem")])
            .args(["-days", "2", "-subj", "/CN=Airlock bench CA"])
            .args(["-addext", "basicConstraints=critical,CA:TRUE"])
            .args(["-addext", "keyUsage=critical,keyCertSign,cRLSign"]),
    )?;
    run_quiet(
        Command::new("openssl")
            .arg("req")
            .args(ec)
            .args(["-keyout", &path("site.key"), "-out", &path("site.csr")])
            .args(["-subj", "/CN=127.0.0.1"]),
    )?;
    fs::write(
        dir.join("site.ext"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n",
    )?;
    run_quiet(
        Command::new("openssl")
            .args(["x509", "-req", "-in", &path("site.csr")])
            .args(["-CA", &path("ca.pem"), "-CAkey", &path("ca.key")])
            .args(["-CAcreateserial", "-days", "2"])
            .args(["-extfile", &path("site.ext"), "-out", &path("site.pem")]),
    )?;
    let db = format!("sql:{}", nssdb.display());
    run_quiet(Command::new("certutil").args(["-N", "--empty-password", "-d", &db]))?;
    run_quiet(
        Command::new("certutil")
            .args(["-A", "-d", &db, "-n", "airlock-bench-ca", "-t", "C,,", "-i"])
            .arg(dir.join("ca.pem")),
    )?;

    let port = free_port()?;
    let server = r#"
import functools, http.server, ssl, sys
port, directory, cert, key = sys.argv[1:5]
class Handler(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", int(port)), functools.partial(Handler, directory=directory))
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(cert, key)
server.socket = context.wrap_socket(server.socket, server_side=True)
server.serve_forever()
"#;
    children.0.push(
        Command::new("python3")
            .args(["-c", server, &port.to_string()])
            .arg(root.join("target/bench/site"))
            .arg(dir.join("site.pem"))
            .arg(dir.join("site.key"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting the HTTPS site server (python3)")?,
    );
    wait_for_port(port, "the HTTPS site server")?;
    Ok(HttpsSite { port, home })
}
