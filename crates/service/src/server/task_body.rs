//! The body of `POST /v1/tasks`: read (JSON, bounded, never echoing a value back) and made into
//! a task request held to its caller's ceiling.

use airlock_worker::{MAX_STATE_BYTES, MAX_UPLOAD_TOTAL_BYTES, Secret, SessionState};
use base64::Engine;
use http::{HeaderMap, StatusCode};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::request_refusal::RequestRefusal;
use crate::scope_request::Caller;
use crate::task_request::{Asked, Ready, prepare};

/// The most a task body may be: a task, a URL and its settings, a session state and its files
/// in base64.
pub(super) const MAX_TASK_BODY_BYTES: usize =
    64 * 1024 + MAX_STATE_BYTES + MAX_UPLOAD_TOTAL_BYTES / 3 * 4 + 1024;

/// The body of `POST /v1/tasks`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct TaskBody {
    /// What to do in the browser, in plain words.
    pub task: String,
    /// Where to start (http or https).
    #[serde(default)]
    url: Option<String>,
    /// Confine the task to these sites: names (`shop.example`: that name only) or `*.` before a
    /// name (`*.shop.example`: every name under it, not the bare name). Omitted: what the
    /// operator allows. Asking beyond that is refused (400), never narrowed.
    #[serde(default)]
    allowed_domains: Vec<String>,
    /// Refuse these sites even where allowed (same patterns). The operator's blocked list
    /// always applies too.
    #[serde(default)]
    blocked_domains: Vec<String>,
    /// Secrets the worker may type (by placeholder) on their sites without seeing them: the name
    /// of one the operator configured, or `{name, value, domains}` given here. Values are never
    /// logged, echoed or returned.
    #[serde(default)]
    #[schemars(length(max = 32))]
    secrets: Vec<SecretAsk>,
    /// Start from this session state (Playwright's storageState: cookies and localStorage);
    /// every cookie and origin must lie inside the task's scope.
    #[serde(default)]
    state: Option<SessionState>,
    /// Return the browser's final state in the result's `state`, restricted to the scope.
    #[serde(default)]
    return_state: bool,
    /// Start from the named context Airlock keeps for this token and save the final state back
    /// into it (one task at a time per context: a second is refused).
    #[serde(default)]
    context: Option<String>,
    /// Files the worker may upload, by name, into a file input on a page inside the scope (at
    /// most 8, 10 MiB each).
    #[serde(default)]
    #[schemars(length(max = 8))]
    files: Vec<FileGiven>,
    /// Let the worker download files, up to this many bytes in all (at most what the operator
    /// allows with --max-download-bytes; asking more is refused). They come back in the
    /// result's `downloads`, base64, with their type sniffed from their bytes. Omitted: off.
    #[serde(default)]
    max_download_bytes: Option<u64>,
    /// The operator's route to leave by (`direct`, or a company proxy the operator named);
    /// omitted: the operator's default. Sites the operator sends by a route of their own still
    /// take it. An unknown name is refused with the list.
    #[serde(default)]
    route: Option<String>,
    /// A JSON Schema the answer must match (at most 32 KiB, 32 levels deep; `$ref` only inside
    /// it). The worker hands its answer in and is told where it does not match (3 tries); the
    /// result carries it as `data` beside the report, or ends `no_valid_answer` without one.
    /// Omitted: a report only.
    #[serde(default)]
    output_schema: Option<serde_json::Value>,
    /// How the browser is set for this task: `viewport` {width, height, scale?} or a mobile
    /// `device` (`iPhone 15`, `Pixel 7`, …), `locale` (`fr-FR`), `time_zone` (`Europe/Paris`),
    /// `geolocation` {latitude, longitude}, `color_scheme` (`light`, `dark`); each within the
    /// operator's ceiling (`--max-viewport`). The worker cannot change what is set here, and the
    /// task's record keeps it. Omitted: a 1280×720 desktop, en-US, UTC, light.
    #[serde(default)]
    browser: airlock_policy::BrowserSettings,
    /// Wait for the task and answer with its result (the default), or answer `202` at once
    /// with its `id` and `links` (`false`), to follow it with `GET /v1/tasks/{id}` and its
    /// `events`, cancel it with `DELETE`, and fetch its record when it is done.
    #[serde(default = "yes")]
    pub wait: bool,
}

fn yes() -> bool {
    true
}

/// One entry of `files`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct FileGiven {
    /// Its name (letters, digits, `.`, `_`, `-`), as the worker writes it.
    name: String,
    /// Its bytes, in base64.
    content_base64: String,
}

/// One entry of `secrets`.
#[derive(Deserialize, JsonSchema)]
#[serde(untagged)]
enum SecretAsk {
    /// A secret the operator configured, by name.
    Named(String),
    /// A secret given with the request.
    Inline {
        /// What the worker writes: `{{secret:NAME}}`.
        name: String,
        /// The value (4–4096 bytes, no control characters).
        value: String,
        /// The sites it may be typed on (names or `*.` wildcards, inside the task's scope).
        domains: Vec<String>,
    },
}

// A value must never reach a log through Debug.
impl std::fmt::Debug for SecretAsk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Named(name) => write!(f, "Named({name:?})"),
            Self::Inline { name, domains, .. } => {
                write!(f, "Inline {{ name: {name:?}, domains: {domains:?}, .. }}")
            }
        }
    }
}

/// The body, or the answer that refuses it.
/// Errors are the status and the words to answer with.
pub(super) fn read(headers: &HeaderMap, body: &[u8]) -> Result<TaskBody, (StatusCode, String)> {
    let json_type = headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
    if !json_type {
        return Err((
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "the body must be JSON: send `Content-Type: application/json` and {\"task\": \"…\", \"url\": \"…\"}".to_owned(),
        ));
    }
    serde_json::from_slice(body).map_err(|error| {
        // serde's words may quote a value (a secret's, a cookie's): they are repeated only when
        // they name a field, never for a wrong value.
        let said = error.to_string();
        let what = if said.starts_with("unknown field") || said.starts_with("missing field") {
            said
        } else if error.classify() == serde_json::error::Category::Data {
            format!(
                "a value is of the wrong type, at line {} column {}",
                error.line(),
                error.column()
            )
        } else {
            format!("not JSON, at line {} column {}", error.line(), error.column())
        };
        (
            StatusCode::BAD_REQUEST,
            format!(
                "the body is not a task ({what}): send {{\"task\": \"what to do\", \"url\": \"https://…\"}}; the schema is at /v1/schema"
            ),
        )
    })
}

impl TaskBody {
    /// The request to run, or why not.
    pub(super) fn into_ready(self, caller: Caller<'_>) -> Result<Ready, RequestRefusal> {
        let mut secret_names = Vec::new();
        let mut inline_secrets = Vec::new();
        for ask in self.secrets {
            match ask {
                SecretAsk::Named(name) => secret_names.push(name),
                SecretAsk::Inline {
                    name,
                    value,
                    domains,
                } => inline_secrets
                    .push(Secret::new(&name, value, &domains).map_err(|e| e.to_string())?),
            }
        }
        let mut files = Vec::with_capacity(self.files.len());
        for file in self.files {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(file.content_base64.as_bytes())
                .map_err(|_| {
                    format!(
                        "file `{}`: content_base64 is not base64",
                        file.name.chars().take(100).collect::<String>()
                    )
                })?;
            files.push((file.name, bytes));
        }
        let uploads = airlock_worker::Uploads::new(files).map_err(|e| e.to_string())?;
        let asked = Asked {
            allowed_domains: &self.allowed_domains,
            blocked_domains: &self.blocked_domains,
            secret_names,
            inline_secrets,
            state: self.state,
            context: self.context.as_deref(),
            return_state: self.return_state,
            uploads,
            max_download_bytes: self.max_download_bytes,
            route: self.route.as_deref(),
            output_schema: self.output_schema,
            browser: self.browser,
        };
        prepare(self.task, self.url, asked, caller)
    }
}
