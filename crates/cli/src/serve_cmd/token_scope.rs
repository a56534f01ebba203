//! Tokens with ceilings of their own: a tokens-file line may follow its token with
//! `allowed_domains=…` and `blocked_domains=…` (comma-separated patterns), `secrets=…` and
//! `routes=…` (comma-separated names). A token's ceiling lies inside the server's; tokens never
//! share anything but the server.

use std::sync::Arc;

use airlock_policy::Scope;
use airlock_worker::Secrets;

use airlock_service::scope_request::{Ceiling, RouteNames};

/// One accepted token, and its own scope if its line gave one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TokenEntry {
    pub(crate) token: String,
    pub(crate) scope: Option<Scope>,
    /// The configured secrets it may name (`None`: all of them).
    pub(crate) secrets: Option<Vec<String>>,
    /// The routes it may pick (`None`: all of them).
    pub(crate) routes: Option<Vec<String>>,
}

impl TokenEntry {
    /// A token with no ceiling of its own (from `AIRLOCK_TOKENS`).
    pub(crate) fn plain(token: String) -> Self {
        Self {
            token,
            scope: None,
            secrets: None,
            routes: None,
        }
    }
}

/// Read one tokens-file line: `TOKEN [allowed_domains=P,P…] [blocked_domains=P,P…]`. Errors
/// name the line, never the token.
pub(crate) fn parse_line(line: &str, number: usize) -> anyhow::Result<TokenEntry> {
    let mut words = line.split_whitespace();
    let token = words.next().unwrap_or_default().to_owned();
    let mut allowed: Option<Vec<String>> = None;
    let mut blocked: Option<Vec<String>> = None;
    let mut secrets: Option<Vec<String>> = None;
    let mut routes: Option<Vec<String>> = None;
    for word in words {
        let (key, value) = word.split_once('=').unwrap_or((word, ""));
        let slot = match key {
            "allowed_domains" => &mut allowed,
            "blocked_domains" => &mut blocked,
            "secrets" => &mut secrets,
            "routes" => &mut routes,
            _ => anyhow::bail!(
                "--tokens-file line {number}: `{key}` is not a token setting: after the token write allowed_domains=P,P…, blocked_domains=P,P…, secrets=NAME,NAME… and/or routes=NAME,NAME…"
            ),
        };
        if slot.is_some() {
            anyhow::bail!("--tokens-file line {number}: `{key}` is given twice: give it once");
        }
        *slot = Some(
            value
                .split(',')
                .filter(|p| !p.is_empty())
                .map(str::to_owned)
                .collect(),
        );
    }
    let scope = if allowed.is_none() && blocked.is_none() {
        None
    } else {
        let scope = Scope::parse(allowed.unwrap_or_default(), blocked.unwrap_or_default())
            .map_err(|e| anyhow::anyhow!("--tokens-file line {number}: {e}"))?;
        Some(scope)
    };
    Ok(TokenEntry {
        token,
        scope,
        secrets,
        routes,
    })
}

/// Each token's ceiling, in the tokens' order: its own (inside the server's: a token asking for
/// more fails the start, naming its line), else the server's.
pub(crate) fn ceilings(
    entries: &[(TokenEntry, Option<usize>)],
    server: &Scope,
    (configured, routes): (&Secrets, &RouteNames),
) -> anyhow::Result<Vec<Arc<Ceiling>>> {
    entries
        .iter()
        .map(|(entry, line)| {
            let line = line.map_or_else(|| "?".to_owned(), |l| l.to_string());
            if let Some(unknown) = entry
                .secrets
                .iter()
                .flatten()
                .find(|name| configured.get(name).is_none())
            {
                anyhow::bail!(
                    "--tokens-file line {line}: secret `{unknown}` is not configured: give it with --secret"
                );
            }
            if let Some(unknown) = entry
                .routes
                .iter()
                .flatten()
                .find(|name| !routes.all.contains(name))
            {
                anyhow::bail!(
                    "--tokens-file line {line}: route `{unknown}` is not configured: name it with --parent {unknown}=URL, or use direct"
                );
            }
            if entry.routes.as_ref().is_some_and(Vec::is_empty) {
                anyhow::bail!(
                    "--tokens-file line {line}: routes= names no route: give one or more, or leave it out for all"
                );
            }
            let (scope, owner) = match &entry.scope {
                None => (server.clone(), "the server"),
                Some(own) => (
                    own.within(server, "the server")
                        .map_err(|e| anyhow::anyhow!("--tokens-file line {line}: {e}"))?,
                    "this token",
                ),
            };
            // Every token has its own: its named contexts are its alone.
            Ok(Arc::new(Ceiling {
                scope,
                owner,
                secret_names: entry.secrets.clone(),
                context_owner: airlock_service::contexts::token_owner(entry.token.as_bytes()),
                route_names: entry.routes.clone(),
            }))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_reads_its_token_and_its_ceiling_and_errors_never_show_the_token() {
        let plain = parse_line("secret-token-0123456789", 1).unwrap();
        assert_eq!(plain.scope, None);
        let scoped = parse_line(
            "secret-token-0123456789 allowed_domains=shop.example,*.corp.example blocked_domains=admin.corp.example",
            2,
        )
        .unwrap();
        assert_eq!(
            scoped.scope.unwrap().to_string(),
            "only shop.example, *.corp.example, except admin.corp.example"
        );
        for (line, says) in [
            (
                "secret-token-0123456789 allowed=shop.example",
                "`allowed` is not a token setting",
            ),
            ("secret-token-0123456789 allowed_domains=*.com", "`*.com`"),
            (
                "secret-token-0123456789 blocked_domains=a.example blocked_domains=b.example",
                "given twice",
            ),
        ] {
            let error = parse_line(line, 7).unwrap_err().to_string();
            assert!(error.contains("line 7") && error.contains(says), "{error}");
            assert!(!error.contains("secret-token"), "{error}");
        }
    }

    #[test]
    fn a_tokens_ceiling_lies_inside_the_servers() {
        let server = Scope::parse(["*.corp.example"], ["admin.corp.example"]).unwrap();
        let inside = parse_line("t allowed_domains=wiki.corp.example", 1).unwrap();
        let plain = TokenEntry::plain("u".into());
        let ceilings = ceilings(
            &[(inside, Some(1)), (plain, None)],
            &server,
            (&Secrets::default(), &RouteNames::default()),
        )
        .unwrap();
        assert_eq!(ceilings[0].owner, "this token");
        assert_eq!(
            ceilings[0].scope.to_string(),
            "only wiki.corp.example, except admin.corp.example"
        );
        assert_eq!(ceilings[1].owner, "the server");
        assert_ne!(ceilings[0].context_owner, ceilings[1].context_owner);
        let beyond = parse_line("t allowed_domains=evil.example", 3).unwrap();
        let error = super::ceilings(
            &[(beyond, Some(3))],
            &server,
            (&Secrets::default(), &RouteNames::default()),
        )
        .unwrap_err()
        .to_string();
        assert!(
            error.contains("line 3")
                && error.contains("`evil.example` is beyond what the server allows"),
            "{error}"
        );
    }
}
