//! The agent-browser 0.41.x command table, as data: every command and alias, every flag, and what
//! the policy says about each. The checking logic is in `command.rs`; changing what the worker may
//! run means changing this table, nothing else.

/// Which operands of an allowed command are URLs that must be http(s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Urls {
    /// No operand is a URL.
    None,
    /// Every operand after the command (or after the subcommand) is a URL.
    Operands,
}

/// What the policy says about one command name.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Rule {
    /// Allowed with any operands.
    Any(Urls),
    /// Allowed only with one of these subcommands (an empty string allows none).
    Subcommands(&'static [Sub]),
    /// Refused, with a reason the worker can act on.
    Refused(&'static str),
}

/// A subcommand and what it allows.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Sub {
    Allowed(&'static str, Urls),
    Refused(&'static str, &'static str),
    /// Anything not listed, such as a tab id or label.
    Other,
    /// No subcommand at all.
    Nothing,
}

const NO_FILES: &str =
    "files never leave the sealed browser; read the page instead (snapshot, get text)";
const NO_DOWNLOADS: &str = "downloads are off for this task (its caller turns them on with max_download_bytes); read the page instead (snapshot, get text)";
const CLOSED_BY_AIRLOCK: &str =
    "Airlock closes the browser when the task ends; write your report instead";
const NO_STATE: &str =
    "the browser starts empty and keeps nothing; you have no credentials and must not sign in";
const NOT_FOR_WORKER: &str =
    "it is a tool for people at a terminal, not for a worker in a sealed browser";
const ONE_AT_A_TIME: &str = "run one command per call so each is checked";
const FIXED_SETUP: &str = "Airlock sets up the browser once and keeps it that way";

/// Every command name agent-browser 0.41 knows, with its aliases, and what the policy says.
/// The first name of each entry is the canonical one.
pub(crate) static COMMANDS: &[(&[&str], Rule)] = &[
    (&["open", "goto", "navigate"], Rule::Any(Urls::Operands)),
    (&["read"], Rule::Any(Urls::Operands)),
    (&["pushstate"], Rule::Any(Urls::Operands)),
    (&["vitals"], Rule::Any(Urls::Operands)),
    (&["a11y"], Rule::Any(Urls::Operands)),
    (&["back"], Rule::Any(Urls::None)),
    (&["forward"], Rule::Any(Urls::None)),
    (&["reload"], Rule::Any(Urls::None)),
    (&["click"], Rule::Any(Urls::None)),
    (&["dblclick"], Rule::Any(Urls::None)),
    (&["type"], Rule::Any(Urls::None)),
    (&["fill"], Rule::Any(Urls::None)),
    (&["press", "key"], Rule::Any(Urls::None)),
    (&["keydown"], Rule::Any(Urls::None)),
    (&["keyup"], Rule::Any(Urls::None)),
    (&["hover"], Rule::Any(Urls::None)),
    (&["focus"], Rule::Any(Urls::None)),
    (&["check"], Rule::Any(Urls::None)),
    (&["uncheck"], Rule::Any(Urls::None)),
    (&["select"], Rule::Any(Urls::None)),
    (&["drag"], Rule::Any(Urls::None)),
    (&["scroll"], Rule::Any(Urls::None)),
    (&["scrollintoview", "scrollinto"], Rule::Any(Urls::None)),
    (&["wait"], Rule::Any(Urls::None)),
    (&["snapshot"], Rule::Any(Urls::None)),
    (&["screenshot"], Rule::Any(Urls::None)),
    (&["eval"], Rule::Any(Urls::None)),
    (&["frame"], Rule::Any(Urls::None)),
    (&["console"], Rule::Any(Urls::None)),
    (&["errors"], Rule::Any(Urls::None)),
    (&["highlight"], Rule::Any(Urls::None)),
    (
        &["keyboard"],
        Rule::Subcommands(&[
            Sub::Allowed("type", Urls::None),
            Sub::Allowed("inserttext", Urls::None),
        ]),
    ),
    (
        &["get"],
        Rule::Subcommands(&[
            Sub::Allowed("text", Urls::None),
            Sub::Allowed("html", Urls::None),
            Sub::Allowed("value", Urls::None),
            Sub::Allowed("attr", Urls::None),
            Sub::Allowed("title", Urls::None),
            Sub::Allowed("url", Urls::None),
            Sub::Allowed("count", Urls::None),
            Sub::Allowed("box", Urls::None),
            Sub::Allowed("styles", Urls::None),
            Sub::Refused(
                "cdp-url",
                "the browser's control endpoint is not for the worker",
            ),
        ]),
    ),
    (
        &["is"],
        Rule::Subcommands(&[
            Sub::Allowed("visible", Urls::None),
            Sub::Allowed("enabled", Urls::None),
            Sub::Allowed("checked", Urls::None),
        ]),
    ),
    (
        &["find"],
        Rule::Subcommands(&[
            Sub::Allowed("role", Urls::None),
            Sub::Allowed("text", Urls::None),
            Sub::Allowed("label", Urls::None),
            Sub::Allowed("placeholder", Urls::None),
            Sub::Allowed("alt", Urls::None),
            Sub::Allowed("title", Urls::None),
            Sub::Allowed("testid", Urls::None),
            Sub::Allowed("first", Urls::None),
            Sub::Allowed("last", Urls::None),
            Sub::Allowed("nth", Urls::None),
        ]),
    ),
    (
        &["mouse"],
        Rule::Subcommands(&[
            Sub::Allowed("move", Urls::None),
            Sub::Allowed("down", Urls::None),
            Sub::Allowed("up", Urls::None),
            Sub::Allowed("wheel", Urls::None),
        ]),
    ),
    (
        &["set"],
        Rule::Subcommands(&[
            Sub::Allowed("viewport", Urls::None),
            Sub::Allowed("device", Urls::None),
            Sub::Allowed("geo", Urls::None),
            Sub::Allowed("geolocation", Urls::None),
            Sub::Allowed("media", Urls::None),
            Sub::Refused(
                "headers",
                "request headers are fixed; you have no credentials to send",
            ),
            Sub::Refused("credentials", NO_STATE),
            Sub::Refused("auth", NO_STATE),
            Sub::Refused("offline", FIXED_SETUP),
        ]),
    ),
    (
        &["network"],
        Rule::Subcommands(&[
            Sub::Allowed("requests", Urls::None),
            Sub::Allowed("request", Urls::None),
            Sub::Refused(
                "route",
                "requests cannot be rewritten; the egress proxy decides what leaves",
            ),
            Sub::Refused(
                "unroute",
                "requests cannot be rewritten; the egress proxy decides what leaves",
            ),
            Sub::Refused("har", NO_FILES),
        ]),
    ),
    (
        &["tab"],
        Rule::Subcommands(&[
            Sub::Nothing,
            Sub::Allowed("list", Urls::None),
            Sub::Allowed("new", Urls::Operands),
            Sub::Allowed("close", Urls::None),
            Sub::Other,
        ]),
    ),
    (
        &["window"],
        Rule::Subcommands(&[Sub::Allowed("new", Urls::None)]),
    ),
    (
        &["dialog"],
        Rule::Subcommands(&[
            Sub::Allowed("accept", Urls::None),
            Sub::Allowed("dismiss", Urls::None),
            Sub::Allowed("status", Urls::None),
        ]),
    ),
    (
        &["diff"],
        Rule::Subcommands(&[
            Sub::Allowed("snapshot", Urls::None),
            Sub::Allowed("url", Urls::Operands),
            Sub::Refused(
                "screenshot",
                "it compares against an image file, and files stay out of reach",
            ),
        ]),
    ),
    (
        &["skills"],
        Rule::Subcommands(&[
            Sub::Nothing,
            Sub::Allowed("list", Urls::None),
            Sub::Allowed("get", Urls::None),
            Sub::Refused("path", NOT_FOR_WORKER),
        ]),
    ),
    (&["download"], Rule::Refused(NO_DOWNLOADS)),
    (&["upload"], Rule::Refused(NO_FILES)),
    (&["pdf"], Rule::Refused(NO_FILES)),
    (&["install"], Rule::Refused(FIXED_SETUP)),
    (&["upgrade"], Rule::Refused(FIXED_SETUP)),
    (&["cookies"], Rule::Refused(NO_STATE)),
    (&["storage"], Rule::Refused(NO_STATE)),
    (&["state"], Rule::Refused(NO_STATE)),
    (&["auth"], Rule::Refused(NO_STATE)),
    (&["plugin", "plugins"], Rule::Refused(FIXED_SETUP)),
    (&["profiles"], Rule::Refused(NO_STATE)),
    (&["connect"], Rule::Refused(FIXED_SETUP)),
    (&["close", "quit", "exit"], Rule::Refused(CLOSED_BY_AIRLOCK)),
    (&["batch"], Rule::Refused(ONE_AT_A_TIME)),
    (&["record"], Rule::Refused(NO_FILES)),
    (&["trace"], Rule::Refused(NO_FILES)),
    (&["profiler"], Rule::Refused(NO_FILES)),
    (&["stream"], Rule::Refused(NOT_FOR_WORKER)),
    (&["dashboard"], Rule::Refused(NOT_FOR_WORKER)),
    (&["inspect"], Rule::Refused(NOT_FOR_WORKER)),
    (&["mcp"], Rule::Refused(NOT_FOR_WORKER)),
    (&["chat"], Rule::Refused(NOT_FOR_WORKER)),
    (&["session"], Rule::Refused(NOT_FOR_WORKER)),
    (&["doctor"], Rule::Refused(NOT_FOR_WORKER)),
    (
        &["clipboard"],
        Rule::Refused("the clipboard is not shared with the sealed browser"),
    ),
    (
        &["confirm", "deny"],
        Rule::Refused("no action in Airlock waits for confirmation"),
    ),
    (
        &["webmcp"],
        Rule::Refused("tools offered by pages are untrusted and not available"),
    ),
    (&["react"], Rule::Refused(FIXED_SETUP)),
    (
        &["addinitscript", "removeinitscript"],
        Rule::Refused(FIXED_SETUP),
    ),
];

/// Flags that take no value and change nothing but what one command does or prints.
pub(crate) static PLAIN_FLAGS: &[&str] = &[
    "--json",
    "-i",
    "--interactive",
    "-c",
    "--compact",
    "--delta",
    "--full",
    "--if-changed",
    "--annotate",
    "--new-tab",
    "--exact",
    "--clear",
    "--raw",
    "--outline",
    "--require-md",
    "--stdin",
    "--human",
    "--only-dynamic",
    "--content-boundaries",
    "-h",
    "--help",
];

/// Flags that take one value and change nothing but what one command does or prints.
pub(crate) static VALUE_FLAGS: &[&str] = &[
    "-d",
    "--depth",
    "-s",
    "--selector",
    "--threshold",
    "--timeout",
    "--name",
    "--filter",
    "-t",
    "--text",
    "-u",
    "--url",
    "-l",
    "--load",
    "-f",
    "--fn",
    "--seed",
    "--duration",
    "--steps",
    "--frame",
    "--tags",
    "--max-output",
    "--screenshot-format",
    "--screenshot-quality",
    "--llms",
    "-b",
    "--base64",
    "--label",
];

/// Flags refused everywhere, each with the reason the worker reads.
pub(crate) static REFUSED_FLAGS: &[(&[&str], &str)] = &[
    (
        &["--proxy", "--proxy-bypass"],
        "the egress proxy is the browser's only way out and cannot be changed",
    ),
    (
        &[
            "--args",
            "--executable-path",
            "--extension",
            "--init-script",
            "--enable",
            "--engine",
            "-p",
            "--provider",
            "--cdp",
            "--cdp-headers",
            "--auto-connect",
            "--headed",
            "--webgpu",
            "--user-agent",
            "--hide-scrollbars",
            "--color-scheme",
            "--device",
            "--input-mode",
            "--no-webmcp",
            "--idle-timeout",
            "--no-auto-dialog",
            "--pin-tab",
            "--no-pin-tab",
            "--config",
            "--debug",
            "--model",
            "--allowed-domains",
            "--action-policy",
            "--confirm-actions",
            "--confirm-interactive",
            "-v",
            "--verbose",
            "-q",
            "--quiet",
        ],
        "it changes how the browser is launched or driven; Airlock launches it one fixed way",
    ),
    (
        &[
            "--ignore-https-errors",
            "--ca-cert",
            "--no-ca-cert",
            "--use-system-ca",
        ],
        "certificate checks stay on",
    ),
    (
        &[
            "--profile",
            "--state",
            "--restore",
            "--restore-save",
            "--restore-check-url",
            "--restore-check-text",
            "--restore-check-fn",
            "--session",
            "--session-name",
            "--namespace",
            "--headers",
            "--password-stdin",
            "--username",
            "--password",
            "--credential-provider",
        ],
        NO_STATE,
    ),
    (
        &["--allow-file-access", "--download-path", "--screenshot-dir"],
        NO_FILES,
    ),
];
