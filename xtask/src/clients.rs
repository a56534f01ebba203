//! The real clients and peers the tests drive Airlock with, installed once from PyPI and npm into
//! `/opt/airlock-ci` (nothing is fetched while tests run), where the non-root test user can run
//! them.

use std::fs;
use std::path::Path;
use std::process::Command;

use anyhow::Context;

use crate::util::{is_root, run_loud, succeeds};

/// Where each client is.
#[derive(Debug, Clone)]
pub(crate) struct Clients {
    /// The Python interpreter of the clients' venv.
    pub(crate) python: String,
    /// The Node clients' `node_modules`.
    pub(crate) node_modules: String,
    /// mitmproxy's `mitmdump`: a TLS-inspecting parent proxy with its own CA.
    pub(crate) mitmdump: String,
}

/// mitmproxy, in a venv of its own: it pins versions of libraries the MCP SDK also uses.
const MITM_VENV: &str = "/opt/airlock-ci/mitm";
const MITMPROXY: &str = "mitmproxy==11.0.2";

/// Where the real protocol clients' Python lives: a virtual environment every user can run.
const CLIENTS_VENV: &str = "/opt/airlock-ci/venv";
/// The Python clients, pinned: the official MCP SDK (for `serve`), Playwright and browser-use
/// (for the CDP endpoint), and the OpenAPI validator `/v1/openapi.json` must pass. Playwright's
/// wheel carries its own driver; no browser is downloaded.
const PYTHON_CLIENTS: &[&str] = &[
    "mcp==2.1.1",
    "playwright==1.65.2",
    "browser-use==0.13.14",
    "openapi-spec-validator==0.9.0",
];
/// Where the Node clients live: a folder of node_modules every user can read.
const CLIENTS_NODE: &str = "/opt/airlock-ci/node";
/// The Node clients, pinned: Playwright's and Puppeteer's cores (they connect over CDP and never
/// download a browser) and `ws` for raw WebSocket messages.
const NODE_CLIENTS: &[(&str, &str)] = &[
    ("playwright-core", "1.65.1"),
    ("puppeteer-core", "24.43.1"),
    ("ws", "8.23.0"),
];

/// The real protocol clients the tests drive Airlock with, installed once from PyPI and npm
/// (nothing is fetched while tests run) where the test user can run them. Returns the Python
/// interpreter and the node_modules folder.
pub(crate) fn ensure_clients() -> anyhow::Result<Clients> {
    let python = format!("{CLIENTS_VENV}/bin/python");
    let modules = format!("{CLIENTS_NODE}/node_modules");
    let python_ready = succeeds(Command::new(&python).args([
        "-c",
        "import mcp.client.streamable_http, playwright.async_api, browser_use, openapi_spec_validator",
    ]));
    let node_ready = NODE_CLIENTS.iter().all(|(name, version)| {
        fs::read_to_string(format!("{modules}/{name}/package.json"))
            .is_ok_and(|text| text.contains(&format!("\"version\": \"{version}\"")))
    });
    let mitmdump = format!("{MITM_VENV}/bin/mitmdump");
    let mitm_ready = succeeds(Command::new(&mitmdump).arg("--version"));
    let clients = Clients {
        python: python.clone(),
        node_modules: modules.clone(),
        mitmdump: mitmdump.clone(),
    };
    if python_ready && node_ready && mitm_ready {
        return Ok(clients);
    }
    if !is_root() {
        anyhow::bail!(
            "the test clients are missing under /opt/airlock-ci: run `cargo xtask integration` once as root (it installs {} {MITMPROXY} from PyPI and {} from npm)",
            PYTHON_CLIENTS.join(" "),
            NODE_CLIENTS
                .iter()
                .map(|(name, version)| format!("{name}@{version}"))
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    if !python_ready {
        // Debian's interpreter, not a per-user one, so the test user can run it too.
        run_loud(Command::new("/usr/bin/python3").args(["-m", "venv", CLIENTS_VENV]))?;
        run_loud(
            Command::new(format!("{CLIENTS_VENV}/bin/pip"))
                .args(["install", "--quiet"])
                .args(PYTHON_CLIENTS),
        )?;
    }
    if !mitm_ready {
        run_loud(Command::new("/usr/bin/python3").args(["-m", "venv", MITM_VENV]))?;
        run_loud(
            Command::new(format!("{MITM_VENV}/bin/pip")).args(["install", "--quiet", MITMPROXY]),
        )?;
    }
    if !node_ready {
        fs::create_dir_all(CLIENTS_NODE).with_context(|| format!("creating {CLIENTS_NODE}"))?;
        let manifest = format!("{CLIENTS_NODE}/package.json");
        if !Path::new(&manifest).exists() {
            fs::write(
                &manifest,
                "{\"name\": \"airlock-ci-clients\", \"private\": true}\n",
            )
            .with_context(|| format!("writing {manifest}"))?;
        }
        run_loud(
            Command::new("npm")
                .args([
                    "install",
                    "--no-audit",
                    "--no-fund",
                    "--prefix",
                    CLIENTS_NODE,
                ])
                .args(
                    NODE_CLIENTS
                        .iter()
                        .map(|(name, version)| format!("{name}@{version}")),
                )
                .env("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
                .env("PUPPETEER_SKIP_DOWNLOAD", "1"),
        )?;
    }
    run_loud(Command::new("chmod").args(["-R", "a+rX", "/opt/airlock-ci"]))?;
    Ok(clients)
}
