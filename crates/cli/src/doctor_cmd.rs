//! `airlock doctor`: can tasks run here? Each check with its fix, then the effective settings.

use airlock_driver_docker::{CONTAINER_USER, DockerDriver, DockerError, current_user};
use airlock_models::ModelSpec;
use airlock_worker::BrowserDriver;
use clap::{ArgMatches, Args};

use crate::settings::{SettingFlags, Settings, config_path};

/// Arguments of `airlock doctor`.
#[derive(Debug, Args)]
pub(crate) struct DoctorArgs {
    #[command(flatten)]
    settings: SettingFlags,
}

/// Print every check; exit 0 only when tasks can run.
pub(crate) async fn run(args: &DoctorArgs, matches: &ArgMatches) -> anyhow::Result<u8> {
    let mut ok = true;
    let mut report = |passed: bool, what: &str, detail: String| {
        ok &= passed;
        println!("{} {what}: {detail}", if passed { "ok  " } else { "FAIL" });
    };
    let settings = match Settings::resolve(&args.settings, Some(matches)) {
        Ok(settings) => settings,
        Err(error) => {
            report(false, "settings", format!("{error:#}"));
            return Ok(1);
        }
    };
    let (uid, gid) = current_user();
    report(
        uid != 0,
        "user",
        if uid == 0 {
            "running as root: run Airlock as an ordinary user in the docker group".into()
        } else {
            format!("uid {uid}, gid {gid}")
        },
    );
    let (sealed_uid, group) = CONTAINER_USER;
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let named = account_named(&passwd, sealed_uid);
    report(
        named.is_none(),
        "container user",
        match named {
            None => format!(
                "uid {sealed_uid}, gid {group}: no account on this host has it, so a browser that escaped its container owns nothing here"
            ),
            Some(name) => format!(
                "uid {sealed_uid} is the account `{name}` here: a browser that escaped its container would own its files; give that account another uid"
            ),
        },
    );
    docker_checks(&settings, &mut report).await;
    route_checks(&settings, &mut report);
    match settings.model.as_deref().map(ModelSpec::parse) {
        None => report(
            true,
            "model",
            "none set: `airlock task` needs --model (browse and mcp --direct do not)".into(),
        ),
        Some(Err(error)) => report(false, "model", error.to_string()),
        Some(Ok(spec)) => {
            let key = match &spec {
                ModelSpec::Anthropic(_) => Some("ANTHROPIC_API_KEY"),
                ModelSpec::OpenAi(_) if settings.base_url.is_none() => Some("OPENAI_API_KEY"),
                _ => None,
            };
            match key.map(airlock_models::api_key) {
                Some(Err(error)) => report(false, "model", error.to_string()),
                _ => report(
                    true,
                    "model",
                    format!(
                        "{} ({})",
                        settings.model.clone().unwrap_or_default(),
                        spec.provider()
                    ),
                ),
            }
        }
    }
    println!(
        "\nsettings (flag > env > {} > default):",
        config_path().map_or_else(|| "config file".into(), |p| p.display().to_string())
    );
    for shown in &settings.shown {
        println!(
            "  {:<22} {:<30} [{}]",
            shown.name, shown.value, shown.source
        );
    }
    Ok(u8::from(!ok))
}

/// The host's proxy variables (used only when asked) and what each route through a parent that
/// resolves names gives up.
fn route_checks(settings: &Settings, report: &mut dyn FnMut(bool, &str, String)) {
    match crate::host_proxy::HostProxy::from_env() {
        Err(error) => report(false, "host proxy", format!("{error:#}")),
        Ok(host) if host.shown.is_empty() => {}
        Ok(host) => {
            let shown: Vec<String> = host
                .shown
                .iter()
                .map(|(name, value)| format!("{name}={value}"))
                .collect();
            let used = settings
                .driver
                .routes
                .all()
                .iter()
                .any(|route| route.name == crate::host_proxy::ENVIRONMENT_ROUTE);
            let detail = if used {
                let left_out = if host.left_out.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; NO_PROXY entries that name no site are left out (addresses are judged by the policy, not routed): {}",
                        host.left_out.join(", ")
                    )
                };
                format!("{}: the route `environment`{left_out}", shown.join(" "))
            } else {
                format!(
                    "{}: set for this host's own tools; tasks do not use it (Chromium ignores these variables and Airlock's proxy dials itself). To go through it, add --parent-from-environment, or name it with --parent NAME=URL and --parent-credentials",
                    shown.join(" ")
                )
            };
            report(true, "host proxy", detail);
        }
    }
    for route in settings.driver.routes.all() {
        if route.resolution == airlock_policy::Resolution::ParentResolves {
            report(
                true,
                &format!("route {}", route.name),
                "its parent resolves names: Airlock judges each name (scope, name rules, no address spellings, no localhost) and sends it as written, but never sees its addresses, so a public name that points at a private or metadata address is the parent's to refuse. Pinned routes (the default) keep that guarantee Airlock's".into(),
            );
        }
    }
}

/// The daemon, its runtimes, the image and Chromium's sandbox, each as a line of the report.
async fn docker_checks(settings: &Settings, report: &mut dyn FnMut(bool, &str, String)) {
    // The checks need no warm browsers: the pool's setting is shown, never filled here.
    let config = airlock_driver_docker::DriverConfig {
        pool: airlock_driver_docker::PoolConfig {
            size: 0,
            ..settings.driver.pool
        },
        ..settings.driver.clone()
    };
    match DockerDriver::connect(config).await {
        Ok(driver) => {
            report(true, "docker daemon", "answers".into());
            match driver.runtimes().await {
                Ok(runtimes) => {
                    let names: Vec<&str> = runtimes.iter().map(|(name, _)| name.as_str()).collect();
                    report(
                        true,
                        "runtimes",
                        format!(
                            "the daemon offers {}; tasks use {}",
                            names.join(", "),
                            settings.driver.runtime
                        ),
                    );
                }
                Err(error) => report(false, "runtimes", error.to_string()),
            }
            match driver.check().await {
                Ok(()) => {
                    report(
                        true,
                        "image",
                        format!("{} is present", settings.driver.image),
                    );
                    image_age_lines(&driver).await;
                    let sandbox = if settings.driver.browser_sandbox {
                        "on: renderers run in their own user namespace under seccomp-bpf"
                    } else {
                        "OFF (--no-browser-sandbox): Chromium runs without its own sandbox"
                    };
                    report(true, "browser sandbox", sandbox.into());
                }
                Err(error) => {
                    // Name the check that failed, by the driver's own error.
                    let what = match error.downcast_ref::<DockerError>() {
                        Some(DockerError::NoUserNamespaces { .. }) => "browser sandbox",
                        Some(
                            DockerError::RuntimeMissing { .. }
                            | DockerError::RunscCannotReachProxy { .. },
                        ) => "runtimes",
                        Some(DockerError::ImageMissing { .. }) => "image",
                        _ => "driver",
                    };
                    report(false, what, error.to_string());
                }
            }
        }
        Err(error) => report(false, "docker daemon", error.to_string()),
    }
}

/// The image's Chromium and age, and a newer Chromium the host's apt knows: warnings, since a
/// stale image still runs tasks.
async fn image_age_lines(driver: &DockerDriver) {
    let Ok(age) = driver.image_age().await else {
        return;
    };
    let now = std::time::SystemTime::now();
    let word = if age.is_stale(now) { "warn" } else { "ok  " };
    println!("{word} image age: {}", age.describe(now));
    if let Some(image) = &age.chromium
        && let Some(host) = airlock_driver_docker::host_apt_chromium()
        && airlock_driver_docker::is_older_version(image, &host)
    {
        println!(
            "warn image age: this host's apt offers Chromium {host}, newer than the image's {image}: rebuild it with `cargo xtask image --force`"
        );
    }
}

/// The account in `/etc/passwd` text whose uid is `uid`.
fn account_named(passwd: &str, uid: u32) -> Option<String> {
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        let id = fields.nth(1)?.parse::<u32>().ok()?;
        (id == uid).then(|| name.to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_account_holding_the_container_uid_is_named() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\nodd:x:2000000000:100::/home/odd:/bin/sh\n";
        assert_eq!(account_named(passwd, 2_000_000_000).as_deref(), Some("odd"));
        assert_eq!(account_named(passwd, 1000), None);
        assert_eq!(account_named("broken line\n::\n", 0), None);
    }
}
