//! Pure policy for Airlock: which agent-browser commands the worker may run, and which
//! destinations the browser may reach.
//!
//! Nothing here does I/O or resolves a name: callers bring the data (a command line, a URL, the
//! addresses a resolver returned) and get a decision with a reason.
//!
//! - [`check_command`]: the command policy for agent-browser 0.41.x. It saves the worker wasted
//!   steps and keeps the browser's launch fixed; it is **not** the security boundary. The sealed
//!   container and the egress proxy are.
//! - [`CdpGuard`]: the guard on a DevTools Protocol connection to a sealed browser (what a
//!   Playwright or Puppeteer client may ask); like the command policy, not the boundary.
//! - [`Scope`]: a task's named sites (`allowed_domains`, `blocked_domains`), which an
//!   [`EgressPolicy`] judges first for a name and after the address rule for a literal.
//! - [`EgressPolicy`]: ports, profile and exact allow entries, deciding on a URL or authority
//!   before resolution ([`EgressPolicy::decide_url`]) and on every resolved address after it
//!   ([`EgressPolicy::decide_resolved`]). The egress proxy enforces it.
//! - [`judge_docker_call`]: the Docker gate's judgement (`airlock-gate`): which Docker Engine API
//!   requests a client that should only make Airlock's sealed browsers may send, re-written by
//!   the gate, or a [`GateRefusal`] naming the refused call or field.
//!
//! ```
//! use airlock_policy::{check_command, Decision, EgressPolicy};
//!
//! let policy = EgressPolicy::default();
//! let Decision::Refuse(why) = policy.decide_url("http://169.254.169.254/latest/meta-data") else {
//!     panic!("metadata must be refused")
//! };
//! assert!(why.to_string().contains("metadata"));
//!
//! // A name passes the pre-check; every address it resolves to is judged afterwards.
//! let Decision::Resolve { name, port } = policy.decide_url("https://example.com") else { panic!() };
//! let mixed = ["93.184.216.34".parse().unwrap(), "10.0.0.1".parse().unwrap()];
//! assert!(policy.decide_resolved(&name, port, &mixed).is_err());
//!
//! let args: Vec<String> = vec!["open".into(), "javascript:alert(1)".into()];
//! assert!(check_command(&args).is_err());
//! ```

mod browser_settings;
mod cdp;
mod cdp_dialogs;
mod cdp_ids;
mod cdp_message;
mod cdp_table;
mod cdp_watch;
mod command;
mod command_table;
mod docker_api;
mod egress;
mod human_input;
mod route;
mod scope;
mod secret_commands;
mod url;

use std::net::IpAddr;

use airlock_address::{HostError, NotPublic};

pub use browser_settings::{
    BrowserSettings, BrowserSettingsError, ColorScheme, DEFAULT_MAX_VIEWPORT, DEVICES, Geolocation,
    MAX_SCALE, MAX_VIEWPORT, MIN_VIEWPORT_SIDE, Viewport,
};
pub use cdp::{
    CdpGuard, HISTORY_ASKED_LIMIT, HISTORY_LIMIT, RECORD_LIMIT, Recorded, Verdict, page_refusal,
};
pub use cdp_dialogs::{DialogAnswers, DialogSetting, DialogSettingError, DialogStep};
pub use cdp_ids::{DIALOG_ID_BASE, SERVER_ID_BASE};
pub use cdp_message::MAX_JSON_ELEMENTS;
pub use cdp_watch::{CdpWatch, LIVE_MAX_FPS, MAX_FRAME_BASE64, MAX_LIVE_WATCHES, WatchAction};
pub use command::{
    AllowedCommand, CommandRefusal, allowed_commands, check_command, refused_commands,
    refused_flags,
};
pub use docker_api::{
    Call as DockerCall, ContainerCall, Forward, GateLimits, GateRefusal, GateRules, LABEL_GATE,
    LIVE_VIEW_EXEC, MAX_BODY_BYTES as MAX_DOCKER_BODY_BYTES, SealedCreate,
    judge as judge_docker_call, loopback_relay_exec,
};
pub use egress::{AllowEntry, Allowance, Decision, EgressPolicy, PolicyError, Profile};
pub use human_input::{
    HumanAction, HumanInput, InputRefusal, KeyEvent, KeyInput, MAX_HUMAN_MESSAGE_BYTES,
    MouseButton, MouseEvent, MouseInput, TouchEvent, TouchInput, TouchPoint,
};
pub use route::{
    Credentials, DIRECT, MAX_ROUTES, Parent, ParentKind, Resolution, Route, RouteError, Routes,
};
pub use scope::{DomainPattern, MAX_PATTERNS, Scope, ScopeError};
pub use secret_commands::refused_while_secrets_held;
pub use url::{UrlTarget, parse_http_url};

/// Why a destination is refused. The `Display` text is what users, logs and the worker read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// A URL scheme other than http or https.
    #[error("scheme `{scheme}:` is refused: only http and https URLs are allowed")]
    Scheme {
        /// The scheme, lower case.
        scheme: String,
    },
    /// `user:password@` in a URL.
    #[error("URLs with credentials (user:password@) are refused")]
    Userinfo,
    /// Text that cannot be read as a URL or authority.
    #[error("`{input}` cannot be read as a destination: {why}")]
    Unreadable {
        /// The text as given.
        input: String,
        /// What to write instead.
        why: &'static str,
    },
    /// A URL that a browser (WHATWG) and an RFC 3986 parser would read with different hosts, so
    /// a check by one could be walked around by a fetch with the other.
    #[error("`{input}` is refused: {why}")]
    Ambiguous {
        /// The URL as given.
        input: String,
        /// How the parsers would disagree, and what to write instead.
        why: &'static str,
    },
    /// A host spelling refused by the address crate.
    #[error(transparent)]
    Host(HostError),
    /// A port that is not a number from 1 to 65535.
    #[error("`{port}` is not a valid port: use a number from 1 to 65535")]
    BadPort {
        /// The port text.
        port: String,
    },
    /// A valid port that the policy does not open.
    #[error(
        "port {port} is not allowed (allowed: {allowed}); open it with --port {port}, or with an exact --allow host:{port} entry"
    )]
    PortNotAllowed {
        /// The port.
        port: u16,
        /// The allowed ports, listed.
        allowed: String,
    },
    /// An address that nothing opens, such as cloud metadata.
    #[error("{ip} is {what}, which nothing may open")]
    Never {
        /// The address.
        ip: IpAddr,
        /// What lives there.
        what: &'static str,
    },
    /// A non-public address the profile and entries do not open.
    #[error("{} address {ip} ({})", why.kind().label(), range_detail(why))]
    Address {
        /// The address.
        ip: IpAddr,
        /// The block that refuses it.
        why: NotPublic,
    },
    /// A name whose answers include a refused address.
    #[error("`{name}` resolves to {}{refusal}", allowed_part(*allowed_answers))]
    Resolved {
        /// The name.
        name: String,
        /// How many of its answers passed on their own (a name is refused as a whole when any
        /// answer is refused).
        allowed_answers: usize,
        /// The first refused answer.
        refusal: Box<Refusal>,
    },
    /// A destination outside the task's scope (`allowed_domains`, `blocked_domains`).
    #[error("`{host}` is out of this task's scope: {why}")]
    OutOfScope {
        /// The normalised name or address literal.
        host: String,
        /// Which scope rule refused it.
        why: String,
    },
    /// A name that resolved to nothing.
    #[error("`{name}` resolved to no addresses")]
    NoAddresses {
        /// The name.
        name: String,
    },
}

impl Refusal {
    /// What the page is told (and so whatever reads the browser: the worker, a CDP client): the
    /// same reason, except that a name's refused answer is named by its class, never by its
    /// address, so a page cannot use the proxy to map the host's internal names. The whole
    /// reason stays on the host side (logs, the caller's refusal record).
    pub fn for_page(&self) -> String {
        match self {
            Self::Resolved { name, .. } => {
                format!(
                    "`{name}` resolves to a non-public address ({})",
                    self.class()
                )
            }
            other => other.to_string(),
        }
    }

    /// A short, stable class for counters and logs: the range kind for address refusals
    /// (`loopback`, `private`, …), otherwise the kind of refusal (`scheme`, `port`, `metadata`, …).
    pub fn class(&self) -> &'static str {
        match self {
            Self::Scheme { .. } => "scheme",
            Self::Userinfo => "userinfo",
            Self::Unreadable { .. } => "unreadable",
            Self::Ambiguous { .. } => "ambiguous-url",
            Self::Host(_) => "host-spelling",
            Self::BadPort { .. } | Self::PortNotAllowed { .. } => "port",
            Self::Never { .. } => "never-opened",
            Self::Address { why, .. } => why.kind().label(),
            Self::Resolved { refusal, .. } => refusal.class(),
            Self::NoAddresses { .. } => "no-address",
            Self::OutOfScope { .. } => "out-of-scope",
        }
    }
}

/// What a mixed answer adds to the refusal: the answers that passed do not open the name.
fn allowed_part(allowed_answers: usize) -> String {
    match allowed_answers {
        0 => String::new(),
        1 => {
            "one allowed address and a refused one, so the name is refused as a whole; ".to_owned()
        }
        n => {
            format!("{n} allowed addresses and a refused one, so the name is refused as a whole; ")
        }
    }
}

/// `10.0.0.0/8`, plus the note and the embedding when there are any.
fn range_detail(why: &NotPublic) -> String {
    let note = why.range.note.map(|note| format!(", {note}"));
    if let Some(e) = why.embedded
        && why.range.kind.embeds_ipv4()
    {
        // Refused for its spelling: say what it carries before why the spelling is refused.
        return format!(
            "{}, carrying {}{}",
            why.range.net,
            e.ipv4,
            note.unwrap_or_default()
        );
    }
    let embedded = why
        .embedded
        .map(|e| format!(", embedded as {} {}", e.via.label(), e.ipv4));
    format!(
        "{}{}{}",
        why.range.net,
        note.unwrap_or_default(),
        embedded.unwrap_or_default()
    )
}
