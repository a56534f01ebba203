//! The command policy for agent-browser 0.41.x: which commands the worker may run.
//!
//! This policy is not the security boundary (the sealed container and the egress proxy are). It
//! keeps the worker from wasting steps on commands that cannot work in the sealed browser, and it
//! keeps the browser's launch settings fixed: one command with `--proxy` or `--args` would make
//! agent-browser relaunch Chromium with them. Everything not listed is refused, so a new
//! agent-browser command stays closed until someone reads what it does and lists it in the table
//! (`command_table.rs`); this file only reads the table.

use crate::Refusal;
use crate::command_table::{COMMANDS, PLAIN_FLAGS, REFUSED_FLAGS, Rule, Sub, Urls, VALUE_FLAGS};
use crate::url::parse_http_url;

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
pub(crate) fn operands(args: &[String]) -> Result<Vec<&str>, CommandRefusal> {
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
