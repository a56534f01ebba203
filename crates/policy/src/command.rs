//! The command policy for agent-browser 0.41.x: which commands the worker may run.
//!
//! This policy is not the security boundary (the sealed container and the egress proxy are). It
//! keeps the worker from wasting steps on commands that cannot work in the sealed browser, and it
//! keeps the browser's launch settings fixed: one command with `--proxy` or `--args` would make
//! agent-browser relaunch Chromium with them. Everything not listed is refused, so a new
//! agent-browser command stays closed until someone reads what it does and lists it here.

use crate::Refusal;
use crate::url::parse_http_url;

/// Which operands of an allowed command are URLs that must be http(s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Urls {
    /// No operand is a URL.
    None,
    /// Every operand after the command (or after the subcommand) is a URL.
    Operands,
}

/// What the policy says about one command name.
#[derive(Debug, Clone, Copy)]
enum Rule {
    /// Allowed with any operands.
    Any(Urls),
    /// Allowed only with one of these subcommands (an empty string allows none).
    Subcommands(&'static [Sub]),
    /// Refused, with a reason the worker can act on.
    Refused(&'static str),
}

/// A subcommand and what it allows.
#[derive(Debug, Clone, Copy)]
enum Sub {
    Allowed(&'static str, Urls),
    Refused(&'static str, &'static str),
    /// Anything not listed, such as a tab id or label.
    Other,
    /// No subcommand at all.
    Nothing,
}

const NO_FILES: &str =
    "files never leave the sealed browser; read the page instead (snapshot, get text)";
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
static COMMANDS: &[(&[&str], Rule)] = &[
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
    (&["download"], Rule::Refused(NO_FILES)),
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
static PLAIN_FLAGS: &[&str] = &[
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
static VALUE_FLAGS: &[&str] = &[
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
static REFUSED_FLAGS: &[(&[&str], &str)] = &[
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

/// A command the policy let through, with its canonical name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedCommand {
    /// The canonical command name (`open` for `goto`).
    pub command: &'static str,
    /// The arguments exactly as given, to pass on unchanged.
    pub args: Vec<String>,
}

/// Why a command was refused. Every message tells the worker what to do instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommandRefusal {
    /// No command at all.
    #[error(
        "no command given: pass agent-browser's arguments as a list, like [\"open\", \"https://example.com\"]"
    )]
    Empty,
    /// A name that is not an agent-browser command.
    #[error(
        "`{command}` is not an agent-browser command Airlock allows; see the guide for the commands you can use"
    )]
    Unknown {
        /// The name given.
        command: String,
    },
    /// A command that is refused as a whole.
    #[error("`{command}` is not available: {why}")]
    Refused {
        /// The name given.
        command: String,
        /// Why, and what to do instead.
        why: &'static str,
    },
    /// A subcommand that is refused or unknown.
    #[error("`{command} {subcommand}` is not available: {why}")]
    Subcommand {
        /// The command.
        command: &'static str,
        /// The subcommand given (empty when missing).
        subcommand: String,
        /// Why, and what to use instead.
        why: String,
    },
    /// A command that needs a subcommand got none.
    #[error("`{command}` needs a subcommand: {why}")]
    MissingSubcommand {
        /// The command.
        command: &'static str,
        /// Which subcommands exist.
        why: String,
    },
    /// A flag refused everywhere.
    #[error("flag `{flag}` is refused: {why}")]
    Flag {
        /// The flag as given, without its value.
        flag: String,
        /// Why.
        why: &'static str,
    },
    /// A flag the policy does not know.
    #[error(
        "flag `{flag}` is not one Airlock allows (arguments that start with `-` are read as flags); see the guide for the flags you can use"
    )]
    UnknownFlag {
        /// The flag as given, without its value.
        flag: String,
    },
    /// A flag that needs a value got none.
    #[error("flag `{flag}` needs a value after it")]
    MissingValue {
        /// The flag.
        flag: String,
    },
    /// A URL operand that is not an http(s) URL a browser would read the same way.
    #[error("`{command}` was given `{url}`, which is refused: {refusal}")]
    Url {
        /// The command.
        command: &'static str,
        /// The operand as given.
        url: String,
        /// Why.
        refusal: Refusal,
    },
}

/// Check an agent-browser argument list (everything after `agent-browser`).
///
/// ```
/// use airlock_policy::check_command;
/// let args = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
///
/// assert_eq!(check_command(&args(&["goto", "https://example.com"])).unwrap().command, "open");
/// assert!(check_command(&args(&["open", "file:///etc/passwd"])).is_err());
/// assert!(check_command(&args(&["snapshot", "--proxy=http://evil:8080"])).is_err());
/// assert!(check_command(&args(&["download", "@e1", "/tmp/x"])).is_err());
/// ```
pub fn check_command(args: &[String]) -> Result<AllowedCommand, CommandRefusal> {
    let operands = operands(args)?;
    let Some((name, rest)) = operands.split_first() else {
        return Err(CommandRefusal::Empty);
    };
    let Some((names, rule)) = COMMANDS.iter().find(|(names, _)| names.contains(name)) else {
        return Err(CommandRefusal::Unknown {
            command: (*name).to_owned(),
        });
    };
    let command = names[0];
    let (urls, url_operands) = match rule {
        Rule::Refused(why) => {
            return Err(CommandRefusal::Refused {
                command: (*name).to_owned(),
                why,
            });
        }
        Rule::Any(urls) => (*urls, rest),
        Rule::Subcommands(subs) => {
            let (urls, rest) = check_subcommand(command, subs, rest)?;
            (urls, rest)
        }
    };
    if urls == Urls::Operands {
        for url in url_operands {
            if let Err(refusal) = parse_http_url(url) {
                return Err(CommandRefusal::Url {
                    command,
                    url: (*url).to_owned(),
                    refusal,
                });
            }
        }
    }
    Ok(AllowedCommand {
        command,
        args: args.to_vec(),
    })
}

fn check_subcommand<'a>(
    command: &'static str,
    subs: &[Sub],
    rest: &'a [&'a str],
) -> Result<(Urls, &'a [&'a str]), CommandRefusal> {
    let allowed_names = || {
        let names: Vec<&str> = subs
            .iter()
            .filter_map(|sub| match sub {
                Sub::Allowed(name, _) => Some(*name),
                _ => None,
            })
            .collect();
        format!("use one of: {}", names.join(", "))
    };
    let Some((sub, after)) = rest.split_first() else {
        return if subs.iter().any(|s| matches!(s, Sub::Nothing)) {
            Ok((Urls::None, rest))
        } else {
            Err(CommandRefusal::MissingSubcommand {
                command,
                why: allowed_names(),
            })
        };
    };
    for entry in subs {
        match entry {
            Sub::Allowed(name, urls) if name == sub => return Ok((*urls, after)),
            Sub::Refused(name, why) if name == sub => {
                return Err(CommandRefusal::Subcommand {
                    command,
                    subcommand: (*sub).to_owned(),
                    why: (*why).to_owned(),
                });
            }
            _ => {}
        }
    }
    if subs.iter().any(|s| matches!(s, Sub::Other)) {
        return Ok((Urls::None, after));
    }
    Err(CommandRefusal::Subcommand {
        command,
        subcommand: (*sub).to_owned(),
        why: allowed_names(),
    })
}

/// Check every flag anywhere in the list and return the operands (arguments that are not flags
/// or flag values), in order.
fn operands(args: &[String]) -> Result<Vec<&str>, CommandRefusal> {
    // Refused flags first, wherever they stand, even where they could pass for another flag's value.
    for arg in args.iter().filter(|arg| is_flag(arg)) {
        let flag = arg.split_once('=').map_or(arg.as_str(), |(flag, _)| flag);
        if let Some((_, why)) = REFUSED_FLAGS
            .iter()
            .find(|(flags, _)| flags.contains(&flag))
        {
            return Err(CommandRefusal::Flag {
                flag: flag.to_owned(),
                why,
            });
        }
    }
    let mut operands = Vec::with_capacity(args.len());
    let mut iter = args.iter().peekable();
    while let Some(arg) = iter.next() {
        if !is_flag(arg) {
            operands.push(arg.as_str());
            continue;
        }
        let (flag, inline_value) = match arg.split_once('=') {
            Some((flag, value)) => (flag, Some(value)),
            None => (arg.as_str(), None),
        };
        if VALUE_FLAGS.contains(&flag) {
            if inline_value.is_none() && iter.next_if(|next| !is_flag(next)).is_none() {
                return Err(CommandRefusal::MissingValue {
                    flag: flag.to_owned(),
                });
            }
        } else if !PLAIN_FLAGS.contains(&flag) || inline_value.is_some() {
            return Err(CommandRefusal::UnknownFlag {
                flag: flag.to_owned(),
            });
        }
    }
    Ok(operands)
}

/// Anything starting with `-` is a flag to agent-browser, except negative numbers
/// (`scroll up -200`, `set geo 37.7 -122.4`).
fn is_flag(arg: &str) -> bool {
    arg.starts_with('-') && arg.len() > 1 && arg.parse::<f64>().is_err()
}

/// Every command name the policy allows (canonical names and aliases), for guides and tests.
pub fn allowed_commands() -> impl Iterator<Item = &'static str> {
    COMMANDS
        .iter()
        .filter(|(_, rule)| !matches!(rule, Rule::Refused(_)))
        .flat_map(|(names, _)| names.iter().copied())
}

/// Every command name the policy knows and refuses, for docs and tests.
pub fn refused_commands() -> impl Iterator<Item = &'static str> {
    COMMANDS
        .iter()
        .filter(|(_, rule)| matches!(rule, Rule::Refused(_)))
        .flat_map(|(names, _)| names.iter().copied())
}

/// Every flag refused everywhere, for docs and tests.
pub fn refused_flags() -> impl Iterator<Item = &'static str> {
    REFUSED_FLAGS
        .iter()
        .flat_map(|(flags, _)| flags.iter().copied())
}
