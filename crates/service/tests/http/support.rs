//! A server of the service, in this process, over a browser port that needs no Docker, with the
//! worker's scripted model; and a plain HTTP/1.1 client over a loopback socket.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use airlock_service::capacity::Admission;
use airlock_service::scope_request::RouteNames;
use airlock_service::server::{
    Callers, Endpoints, Keeping, LeaseLimits, Listening, McpMode, ServerParts, build,
};
use airlock_service::{Browsers, CdpLease, PoolState, TaskSettings};
use airlock_testkit::http::within;
use airlock_worker::{
    BoxFuture, BrowserDriver, BrowserSession, DriverError, Script, ScriptedModel, ScriptedTurn,
    TaskContext, TaskLimits, TaskRunner, ToolDefinition,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, Semaphore};

pub(crate) const TOKEN: &str = "token-of-the-first-caller-0001";
pub(crate) const OTHER_TOKEN: &str = "token-of-the-second-caller-002";

/// Browsers that are nothing but a gate: a task's browser starts once the test lets it.
pub(crate) struct GatedBrowsers {
    pub(crate) starts: Semaphore,
    /// Told each time a task asks for a browser.
    pub(crate) asked: Notify,
    /// The route each task asked its browser for, in order.
    pub(crate) routes: std::sync::Mutex<Vec<Option<String>>>,
    /// The browser settings each task asked for, in order.
    pub(crate) settings: std::sync::Mutex<Vec<airlock_worker::BrowserSettings>>,
}

struct Nothing;

impl airlock_worker::Dispose for Nothing {
    fn dispose(self: Box<Self>) -> BoxFuture<'static, ()> {
        Box::pin(async {})
    }
}

impl BrowserDriver for GatedBrowsers {
    fn check(&self) -> BoxFuture<'_, Result<(), DriverError>> {
        Box::pin(async { Ok(()) })
    }

    fn start(&self, context: TaskContext) -> BoxFuture<'_, Result<BrowserSession, DriverError>> {
        Box::pin(async move {
            self.routes.lock().unwrap().push(context.route.clone());
            self.settings.lock().unwrap().push(context.browser.clone());
            self.asked.notify_one();
            let permit = self.starts.acquire().await.map_err(DriverError::new)?;
            permit.forget();
            Ok(BrowserSession {
                tools: vec![],
                guide: String::new(),
                prompt: String::new(),
                dispose: Box::new(Nothing),
                warm: false,
            })
        })
    }
}

impl Browsers for GatedBrowsers {
    fn pools(&self) -> PoolState {
        PoolState::default()
    }

    fn start_cdp(
        &self,
        _lease: Duration,
        _scope: airlock_worker::Scope,
        _route: Option<String>,
    ) -> BoxFuture<'_, Result<Box<dyn CdpLease>, DriverError>> {
        // A fake: these tests leave CDP to the end-to-end suite, where a real Chromium answers.
        Box::pin(async { Err(DriverError::new("no CDP browsers in this test")) })
    }

    fn direct_tool(&self) -> ToolDefinition {
        ToolDefinition {
            name: "agent_browser".into(),
            description: String::new(),
            input_schema: serde_json::json!({"type": "object"}),
        }
    }
}

/// A server on a loopback port.
pub(crate) struct Served {
    pub(crate) addr: SocketAddr,
    pub(crate) browsers: Arc<GatedBrowsers>,
    _listening: Listening,
}

/// How a test's server is set up.
pub(crate) struct Setup {
    /// Browsers that may start before the test lets more.
    pub(crate) open_starts: usize,
    /// Task slots, and queue places.
    pub(crate) capacity: usize,
    pub(crate) queue: usize,
    /// What the worker says, turn by turn.
    pub(crate) turns: Vec<ScriptedTurn>,
    pub(crate) origins: Vec<String>,
}

impl Default for Setup {
    fn default() -> Self {
        Self {
            open_starts: 100,
            capacity: 2,
            queue: 0,
            turns: (0..20).map(|_| said("Done.")).collect(),
            origins: Vec::new(),
        }
    }
}

/// A turn that ends the task with `text`.
pub(crate) fn said(text: &str) -> ScriptedTurn {
    ScriptedTurn {
        text: text.into(),
        ..ScriptedTurn::default()
    }
}

/// Start a server with two tokens.
pub(crate) async fn serve(setup: Setup) -> Served {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let browsers = Arc::new(GatedBrowsers {
        starts: Semaphore::new(setup.open_starts),
        asked: Notify::new(),
        routes: std::sync::Mutex::default(),
        settings: std::sync::Mutex::default(),
    });
    let model = ScriptedModel::new(Script { turns: setup.turns });
    let limits = TaskLimits::default();
    let runner = TaskRunner::new(browsers.clone(), Arc::new(model), limits).unwrap();
    let callers = Callers::new(
        addr,
        vec![TOKEN.into(), OTHER_TOKEN.into()],
        &[],
        &setup.origins,
    )
    .unwrap();
    let admission = Admission::new(setup.capacity, setup.queue, Duration::from_secs(30));
    let built = build(ServerParts {
        endpoints: Endpoints::All,
        mcp: McpMode::default(),
        tls: false,
        cdp: LeaseLimits {
            lease: Duration::from_secs(60),
            idle: Duration::from_secs(30),
            dialogs: airlock_policy::DialogSetting::Client,
        },
        callers,
        admission: Arc::clone(&admission),
        runner: Some(runner),
        browsers: browsers.clone(),
        max_sessions: 2,
        tasks: TaskSettings {
            limits,
            scope: airlock_worker::Scope::default(),
            secrets: airlock_worker::Secrets::default(),
            max_download_bytes: None,
            routes: RouteNames {
                all: vec!["direct".into(), "corp".into()],
                default: "direct".into(),
            },
            direct: airlock_worker::DirectLimits::default(),
            max_viewport: airlock_policy::DEFAULT_MAX_VIEWPORT,
        },
        keeping: Keeping::default(),
    });
    let listening = Listening::start(
        (listener, None, built.router),
        None,
        "test",
        &admission.metrics,
    );
    Served {
        addr,
        browsers,
        _listening: listening,
    }
}

/// One answer: its status, head and body.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) head: String,
    pub(crate) body: String,
}

impl Answer {
    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|_| panic!("not JSON: {self:?}"))
    }

    /// The `error` field's words.
    pub(crate) fn error(&self) -> String {
        self.json()["error"].as_str().unwrap_or_default().to_owned()
    }

    pub(crate) fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name)
                .then(|| value.trim().to_owned())
        })
    }
}

/// One HTTP/1.1 exchange; `headers` besides Host (given unless one is among them).
pub(crate) async fn request(
    served: &Served,
    method: &str,
    path: &str,
    headers: &[&str],
    body: &str,
) -> Answer {
    let mut stream = within(TcpStream::connect(served.addr)).await.unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\n");
    if !headers
        .iter()
        .any(|h| h.to_ascii_lowercase().starts_with("host:"))
    {
        head.push_str(&format!("host: {}\r\n", served.addr));
    }
    for header in headers {
        head.push_str(header);
        head.push_str("\r\n");
    }
    head.push_str(&format!(
        "content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    ));
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    within(stream.read_to_end(&mut answer)).await.unwrap();
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    Answer {
        status,
        head: head.to_owned(),
        body: body.to_owned(),
    }
}

pub(crate) fn bearer(token: &str) -> String {
    format!("authorization: Bearer {token}")
}

pub(crate) const JSON: &str = "content-type: application/json";
