//! `docs/reference.md`, generated: every flag of every command with its environment variable,
//! its `airlock.toml` key and its words (default and range), and every metric `serve` exports.
//! It is made from clap's own definitions and the metrics registry, so it cannot drift; the test
//! below fails when the file is stale and says how to write it again.

use std::fmt::Write as _;

use clap::CommandFactory;

use crate::Cli;

const UPDATE: &str = "AIRLOCK_UPDATE_REFERENCE";

/// The whole page.
fn reference() -> String {
    let mut page = String::from(
        "# Reference\n\n\
         Generated from the code by `AIRLOCK_UPDATE_REFERENCE=1 cargo test -p airlock reference`; \
         `cargo test` fails when it is stale. Do not edit by hand.\n\n\
         A setting is taken from its flag, else its `AIRLOCK_*` variable, else its key in \
         `airlock.toml` (in `~/.config/airlock/`, or where `AIRLOCK_CONFIG` names), else its \
         default; `airlock doctor` shows which.\n",
    );
    flags(&mut page);
    metrics(&mut page);
    page
}

/// One row per flag, in each command's own table.
fn flags(page: &mut String) {
    let keys = file_keys();
    let mut root = Cli::command();
    // Built, so each argument knows how many values it takes (a switch takes none).
    root.build();
    let mut commands: Vec<(String, clap::Command)> = Vec::new();
    for command in root.get_subcommands().filter(|c| c.get_name() != "help") {
        let name = command.get_name().to_owned();
        if command.has_subcommands() {
            for inner in command.get_subcommands().filter(|c| c.get_name() != "help") {
                commands.push((format!("{name} {}", inner.get_name()), inner.clone()));
            }
        } else {
            commands.push((name, command.clone()));
        }
    }
    for (name, command) in commands {
        let rows: Vec<_> = command
            .get_arguments()
            .filter(|arg| !arg.is_hide_set() && arg.get_id() != "help")
            .collect();
        let _ = write!(page, "\n## `airlock {name}`\n\n");
        if let Some(about) = command.get_about() {
            let _ = writeln!(page, "{}\n", one_line(&about.to_string()));
        }
        if rows.is_empty() {
            page.push_str("No flags.\n");
            continue;
        }
        page.push_str("| flag | environment | `airlock.toml` | what |\n|---|---|---|---|\n");
        for arg in rows {
            let flag = match (arg.get_long(), arg.get_value_names()) {
                (Some(long), Some(names))
                    if arg.get_num_args().is_none_or(|n| n.takes_values()) =>
                {
                    format!("`--{long} {}`", names.join(" "))
                }
                (Some(long), _) => format!("`--{long}`"),
                (None, names) => format!(
                    "`{}`",
                    names.map_or_else(|| arg.get_id().to_string(), |n| n.join(" "))
                ),
            };
            let env = arg
                .get_env()
                .map(|env| format!("`{}`", env.to_string_lossy()))
                .unwrap_or_default();
            let key = arg
                .get_env()
                .and_then(|env| file_key(&keys, &env.to_string_lossy()))
                .unwrap_or_default();
            let mut help = arg
                .get_long_help()
                .or_else(|| arg.get_help())
                .map(|help| one_line(&help.to_string()))
                .unwrap_or_default();
            let defaults: Vec<_> = arg
                .get_default_values()
                .iter()
                .map(|value| value.to_string_lossy())
                .collect();
            if !defaults.is_empty() && arg.get_num_args().is_none_or(|n| n.takes_values()) {
                let _ = write!(help, " (default: `{}`)", defaults.join(","));
            }
            let _ = writeln!(
                page,
                "| {flag} | {env} | {key} | {} |",
                help.replace('|', "\\|")
            );
        }
    }
}

/// The key of `airlock.toml` that sets what variable `env` sets, if any.
fn file_key(keys: &[String], env: &str) -> Option<String> {
    let name = env.strip_prefix("AIRLOCK_")?.to_ascii_lowercase();
    if keys.contains(&name) {
        return Some(format!("`{name}`"));
    }
    let opposite = name.strip_prefix("no_")?;
    keys.iter()
        .any(|key| key == opposite)
        .then(|| format!("`{opposite} = false`"))
}

/// The keys `airlock.toml` takes.
fn file_keys() -> Vec<String> {
    let schema = schemars::schema_for!(crate::setting_flags::FileSettings);
    schema
        .get("properties")
        .and_then(serde_json::Value::as_object)
        .map(|properties| properties.keys().cloned().collect())
        .unwrap_or_default()
}

/// Every metric `serve` and `cdp` export, from the registry itself.
fn metrics(page: &mut String) {
    let unlisted = airlock_service::metric_families::registered_without_a_series();
    assert!(
        unlisted.is_empty(),
        "metrics {unlisted:?} are registered but not in the reference: give each a series in `with_a_series_in_every_family`"
    );
    page.push_str("\n## Metrics (`/metrics` on `serve` and `cdp`)\n\n| metric | type | what |\n|---|---|---|\n");
    for family in airlock_service::metric_families::families() {
        let _ = writeln!(
            page,
            "| `{}` | {} | {} |",
            family.name, family.kind, family.help
        );
    }
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn reference_is_fresh() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/reference.md");
    let made = reference();
    if std::env::var_os(UPDATE).is_some() {
        std::fs::write(&path, &made).unwrap();
        return;
    }
    let kept = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        kept == made,
        "docs/reference.md is stale: run `{UPDATE}=1 cargo test -p airlock reference` and commit it"
    );
}
