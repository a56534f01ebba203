//! The host's own proxy variables (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`, `NO_PROXY`, either
//! case): shown by `doctor`, and made a route named `environment` only when the operator says so
//! (`--parent-from-environment`), since they were written for the host's own tools. Their
//! credentials (`http://user:password@proxy:3128`) are kept apart and never shown.

use airlock_policy::{Credentials, DomainPattern};
use percent_encoding::percent_decode_str;

/// The route the host's variables make.
pub(crate) const ENVIRONMENT_ROUTE: &str = "environment";

/// The variables that name a proxy, in the order one is taken.
const PROXY_VARIABLES: [&str; 3] = ["HTTPS_PROXY", "ALL_PROXY", "HTTP_PROXY"];

/// What the host's variables say.
#[derive(Debug, Default)]
pub(crate) struct HostProxy {
    /// Each variable set, with its value as it may be shown (credentials replaced by `***`).
    pub shown: Vec<(String, String)>,
    /// The proxy to use, without credentials (`scheme://host:port`), and the variable it came
    /// from.
    pub proxy: Option<(String, &'static str)>,
    /// The credentials written into that variable.
    pub credentials: Option<Credentials>,
    /// `NO_PROXY`'s names, as site patterns reached directly.
    pub direct_sites: Vec<DomainPattern>,
    /// `NO_PROXY` entries no site pattern can say (addresses, ranges, ports, `*`).
    pub left_out: Vec<String>,
}

impl HostProxy {
    /// Read this process's environment.
    pub(crate) fn from_env() -> anyhow::Result<Self> {
        Self::read(|name| std::env::var(name).ok())
    }

    /// Read the variables `get` gives (upper case first, then lower).
    pub(crate) fn read(get: impl Fn(&str) -> Option<String>) -> anyhow::Result<Self> {
        let lookup = |name: &str| -> Option<(String, String)> {
            [name.to_owned(), name.to_ascii_lowercase()]
                .into_iter()
                .find_map(|key| get(&key).filter(|v| !v.is_empty()).map(|v| (key, v)))
        };
        let mut host = Self::default();
        for name in PROXY_VARIABLES {
            let Some((key, value)) = lookup(name) else {
                continue;
            };
            let (proxy, credentials) = split_credentials(&key, &value)?;
            host.shown
                .push((key, shown_url(&proxy, credentials.is_some())));
            if host.proxy.is_none() {
                host.proxy = Some((proxy, name));
                host.credentials = credentials;
            }
        }
        if let Some((key, value)) = lookup("NO_PROXY") {
            host.shown.push((key, value.clone()));
            for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
                match sites_of(entry) {
                    Some(sites) => host.direct_sites.extend(sites),
                    None => host.left_out.push(entry.to_owned()),
                }
            }
        }
        Ok(host)
    }
}

/// A proxy URL without its credentials (`http://` when it names no scheme, as curl reads it),
/// and the credentials. Errors name the variable, never its value.
fn split_credentials(key: &str, value: &str) -> anyhow::Result<(String, Option<Credentials>)> {
    let text = if value.contains("://") {
        value.to_owned()
    } else {
        format!("http://{value}")
    };
    let mut url = url::Url::parse(&text).map_err(|_| {
        anyhow::anyhow!(
            "{key} is not a proxy URL: write http://host:port, https://host:port or socks5://host:port (credentials may go before an @)"
        )
    })?;
    let decoded = |part: &str| percent_decode_str(part).decode_utf8_lossy().into_owned();
    let credentials = (!url.username().is_empty()).then(|| Credentials {
        user: decoded(url.username()),
        password: decoded(url.password().unwrap_or_default()),
    });
    // Both setters fail only for URLs that cannot have credentials, which `parse` gave no host.
    let _ = url.set_username("");
    let _ = url.set_password(None);
    let host = url.host_str().unwrap_or_default();
    let Some(port) = url.port_or_known_default() else {
        anyhow::bail!("{key} names no port: write {}://host:port", url.scheme());
    };
    Ok((format!("{}://{host}:{port}", url.scheme()), credentials))
}

fn shown_url(proxy: &str, has_credentials: bool) -> String {
    match (has_credentials, proxy.split_once("://")) {
        (true, Some((scheme, rest))) => format!("{scheme}://***@{rest}"),
        _ => proxy.to_owned(),
    }
}

/// The site patterns a `NO_PROXY` entry means: `corp.example` and `.corp.example` both mean the
/// name and every name under it. `None` for what names no site.
fn sites_of(entry: &str) -> Option<Vec<DomainPattern>> {
    let name = entry.trim_start_matches("*.").trim_start_matches('.');
    if name.parse::<std::net::IpAddr>().is_ok() || name.contains(['/', ':', '*']) {
        return None;
    }
    let bare = name.parse::<DomainPattern>().ok()?;
    let under = format!("*.{name}").parse::<DomainPattern>().ok()?;
    Some(vec![bare, under])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(vars: &[(&str, &str)]) -> anyhow::Result<HostProxy> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        HostProxy::read(|name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
    }

    #[test]
    fn the_hosts_variables_make_a_proxy_whose_credentials_are_never_shown() {
        let host = read(&[
            (
                "https_proxy",
                "http://al%40ice:hunter2@proxy.corp.example:3128/",
            ),
            ("HTTP_PROXY", "proxy.corp.example:8080"),
            ("NO_PROXY", "localhost,.corp.example,10.0.0.0/8,127.0.0.1,*"),
        ])
        .unwrap();
        assert_eq!(
            host.proxy,
            Some(("http://proxy.corp.example:3128".into(), "HTTPS_PROXY"))
        );
        let credentials = host.credentials.unwrap();
        assert_eq!(
            (credentials.user.as_str(), credentials.password.as_str()),
            ("al@ice", "hunter2")
        );
        let shown = format!("{:?}", host.shown);
        assert!(
            !shown.contains("hunter2") && !shown.contains("al%40ice"),
            "{shown}"
        );
        assert!(
            shown.contains("http://***@proxy.corp.example:3128"),
            "{shown}"
        );
        let sites: Vec<String> = host.direct_sites.iter().map(ToString::to_string).collect();
        assert!(sites.contains(&"*.corp.example".to_owned()), "{sites:?}");
        assert_eq!(host.left_out, ["localhost", "10.0.0.0/8", "127.0.0.1", "*"]);
        let error = read(&[("ALL_PROXY", "socks5://user:hunter2@[::1")])
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("ALL_PROXY") && !error.contains("hunter2"),
            "{error}"
        );
    }
}
