//! Typing a named secret the worker never sees.
//!
//! The worker writes `{{secret:NAME}}` as the whole text of `fill SELECTOR …` or `type SELECTOR
//! …`. The driver then, in the task's container:
//! 1. reads the page's URL from the browser and refuses unless its host is one of the secret's
//!    sites and inside the task's scope;
//! 2. focuses the field through agent-browser (so `@e3` references work);
//! 3. sets the value with a script fed on standard input (never on a command line, where the
//!    host's `ps` would show it) that first checks, in the page itself, that the document is
//!    still on that host and that the focused element is a text field of its own document; the
//!    check and the typing are one step in the page, so a navigation in between cannot receive
//!    the value.
//!
//! The field's type comes back, so the tool can tell when the text now shows on screen.

use airlock_address::Host;
use airlock_policy::UrlTarget;
use std::sync::atomic::{AtomicBool, Ordering};

use airlock_worker::{
    Secret, Secrets, TaskContext, ToolOutput, mentions_placeholder, placeholder_name,
};

use crate::runner::DriverCommands;

/// A command that types a secret: the selector and the secret.
pub(crate) struct SecretTyping<'a> {
    pub(crate) selector: &'a str,
    pub(crate) secret: &'a Secret,
}

/// Judge a command for placeholders. `Ok(None)`: there are none. `Err`: the refusal the worker
/// reads.
pub(crate) fn judge<'a>(
    args: &'a [String],
    secrets: &'a Secrets,
) -> Result<Option<SecretTyping<'a>>, String> {
    if !args.iter().any(|arg| mentions_placeholder(arg)) {
        return Ok(None);
    }
    let usage = "a secret is typed with [\"fill\", SELECTOR, \"{{secret:NAME}}\"] (or \"type\"), \
                 the placeholder as the whole text";
    let [command, selector, text] = args else {
        return Err(format!("{usage}."));
    };
    if !matches!(command.as_str(), "fill" | "type") || mentions_placeholder(selector) {
        return Err(format!("{usage}."));
    }
    let Some(name) = placeholder_name(text) else {
        return Err(format!("{usage}."));
    };
    let Some(secret) = secrets.get(name) else {
        let known = if secrets.is_empty() {
            "this task holds none".to_owned()
        } else {
            format!("this task holds {}", secrets.names())
        };
        return Err(format!(
            "there is no secret `{}` ({known}).",
            name.chars().take(64).collect::<String>()
        ));
    };
    Ok(Some(SecretTyping { selector, secret }))
}

/// The host of the page the browser says it is on, if it is an http(s) page with a name.
pub(crate) fn page_host(target: Option<&UrlTarget>) -> Option<String> {
    match &target?.host {
        Host::Domain(name) => Some(name.clone()),
        Host::Ip(_) => None,
    }
}

/// The script that types the value: it checks the page's host and the focused field first, in
/// the page, and answers `typed:<field type>`, `moved:<host>` or `no-field:<what is focused>`.
pub(crate) fn typing_script(host: &str, secret: &Secret) -> String {
    // JSON string literals are JavaScript string literals.
    let host = serde_json::to_string(host).unwrap_or_default();
    let value = serde_json::to_string(secret.value().expose()).unwrap_or_default();
    format!(
        "(() => {{
  if (location.hostname !== {host}) return 'moved:' + location.hostname;
  const field = document.activeElement;
  const tag = field ? field.tagName : 'nothing';
  const textual = tag === 'TEXTAREA' || (tag === 'INPUT' && !['checkbox', 'radio', 'file', 'submit', 'button', 'image', 'reset', 'hidden', 'range', 'color'].includes(field.type));
  if (!textual || field.disabled || field.readOnly) return 'no-field:' + tag.toLowerCase();
  const proto = tag === 'TEXTAREA' ? HTMLTextAreaElement.prototype : HTMLInputElement.prototype;
  Object.getOwnPropertyDescriptor(proto, 'value').set.call(field, {value});
  field.dispatchEvent(new Event('input', {{ bubbles: true }}));
  field.dispatchEvent(new Event('change', {{ bubbles: true }}));
  return 'typed:' + (tag === 'TEXTAREA' ? 'textarea' : field.type);
}})()"
    )
}

/// What the typing script answered.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Typed {
    /// Typed into a field of this type (`password` hides it on screen).
    Into(String),
    /// The page had moved to another host: nothing typed.
    Moved(String),
    /// The focused element is not a text field of the page's own document: nothing typed.
    NoField(String),
}

/// Read the script's answer out of agent-browser's output (which may quote it).
pub(crate) fn typed(output: &str) -> Option<Typed> {
    let answer = output.lines().next()?.trim().trim_matches('"');
    let short = |s: &str| s.chars().take(100).collect::<String>();
    if let Some(kind) = answer.strip_prefix("typed:") {
        Some(Typed::Into(short(kind)))
    } else if let Some(host) = answer.strip_prefix("moved:") {
        Some(Typed::Moved(short(host)))
    } else {
        answer
            .strip_prefix("no-field:")
            .map(|what| Typed::NoField(short(what)))
    }
}

/// Type a secret (see `secret_input`): on its site only, checked again in the page as it
/// is typed, its value fed on standard input.
pub(crate) async fn type_secret(
    commands: &DriverCommands<'_>,
    context: &TaskContext,
    typing: &SecretTyping<'_>,
    on_screen: &AtomicBool,
    narrow: Option<&airlock_proxy::ScopeHandle>,
) -> ToolOutput {
    let secret = typing.secret;
    let target = match commands.page().await {
        Ok((_, target)) => target,
        Err(error) => {
            return ToolOutput::failed(format!(
                "Could not read the page's address, so nothing was typed: {error}"
            ));
        }
    };
    let Some(host) = page_host(target.as_ref()) else {
        return ToolOutput::refused(format!(
            "the page is not on a named http(s) site, so secret `{}` is not typed here.",
            secret.name()
        ));
    };
    let in_scope = context
        .scope
        .judge(&airlock_address::Host::Domain(host.clone()))
        .is_ok();
    if !secret.belongs_to(&host) || !in_scope {
        let sites: Vec<String> = secret.domains().iter().map(ToString::to_string).collect();
        return ToolOutput::refused(format!(
            "secret `{}` is typed only on {} inside the task's scope; this page is on {host}. Nothing was typed.",
            secret.name(),
            sites.join(", ")
        ));
    }
    // Before anything is typed: the page reacts to the value the moment it lands (an `input`
    // handler), so its egress must already be narrowed then.
    let narrowed = narrow.map(|scope| narrow_to_secrets(scope, context));
    let mut output = focus_and_type(commands, &host, typing, on_screen).await;
    if let Some(note) = narrowed {
        output.text.push_str(&note);
    }
    output
}

/// Focus the field and type the value (the page's host checked again in the page).
async fn focus_and_type(
    commands: &DriverCommands<'_>,
    host: &str,
    typing: &SecretTyping<'_>,
    on_screen: &AtomicBool,
) -> ToolOutput {
    let secret = typing.secret;
    let focus = commands
        .agent_browser(&["focus", typing.selector], None)
        .await;
    if let Err(error) = &focus {
        return ToolOutput::failed(format!("Could not focus {}: {error}", typing.selector));
    }
    let script = typing_script(host, secret);
    let answer = match commands
        .agent_browser(&["eval", "--stdin"], Some(script.as_bytes()))
        .await
    {
        Ok(answer) => answer,
        Err(error) => {
            return ToolOutput::failed(format!(
                "Typing the secret failed: {error}. Nothing is known to be typed; look at the page."
            ));
        }
    };
    match typed(&answer) {
        Some(Typed::Into(kind)) if kind == "password" => ToolOutput::text(format!(
            "Typed secret `{}` into the password field.",
            secret.name()
        )),
        Some(Typed::Into(kind)) => {
            on_screen.store(true, Ordering::SeqCst);
            ToolOutput::text(format!(
                "Typed secret `{}` into the field (type {kind}: its text shows on screen, so screenshots are refused from now on).",
                secret.name()
            ))
        }
        Some(Typed::Moved(to)) => ToolOutput::refused(format!(
            "the page moved to {to} before the secret was typed. Nothing was typed."
        )),
        Some(Typed::NoField(what)) => ToolOutput::refused(format!(
            "{} is not a text field of this page (the focus is on: {what}). Nothing was typed; pick the field from a snapshot.",
            typing.selector
        )),
        None => ToolOutput::failed(
            "Typing the secret did not answer as expected. Nothing is known to be typed; look at the page.",
        ),
    }
}

/// Once a secret is typed, the task's egress reaches only its secrets' sites until it ends: a
/// page that received the value (a script on the sign-in page, say) cannot send it on, even to
/// another site the scope allows. Sign in, then work on that site is the usual flow; a site the
/// task must reach after signing in goes among the secret's sites. Returns what the worker is
/// told.
pub(crate) fn narrow_to_secrets(
    scope: &airlock_proxy::ScopeHandle,
    context: &TaskContext,
) -> String {
    let sites: Vec<_> = context
        .secrets
        .iter()
        .flat_map(|secret| secret.domains().iter().cloned())
        .collect();
    let narrowed = context.scope.after_secret(sites);
    let listed: Vec<String> = narrowed.allowed().iter().map(ToString::to_string).collect();
    scope.set_scope(narrowed);
    format!(
        " From now on this task reaches only its secrets' sites ({}).",
        listed.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::page_target;

    fn secrets() -> Secrets {
        Secrets::new(vec![
            Secret::new("pw", "s3cret-value".into(), ["login.example"]).unwrap(),
        ])
        .unwrap()
    }

    fn args(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn a_placeholder_is_typed_only_as_the_whole_text_of_fill_or_type() {
        let secrets = secrets();
        let fill = args(&["fill", "#password", "{{secret:pw}}"]);
        let typing = judge(&fill, &secrets).unwrap().unwrap();
        assert_eq!(typing.selector, "#password");
        assert_eq!(typing.secret.name(), "pw");
        assert!(judge(&args(&["type", "@e3", "{{secret:pw}}"]), &secrets).is_ok());
        assert!(judge(&args(&["click", "@e3"]), &secrets).unwrap().is_none());
        for refused in [
            &["open", "https://x.example/?p={{secret:pw}}"][..],
            &["fill", "#password", "x{{secret:pw}}"],
            &["fill", "{{secret:pw}}", "text"],
            &["keyboard", "type", "{{secret:pw}}"],
            &["eval", "'{{secret:pw}}'"],
            &["fill", "#password", "{{secret:other}}"],
        ] {
            let why = judge(&args(refused), &secrets).err().unwrap();
            assert!(why.ends_with('.'), "{refused:?}: {why}");
            assert!(!why.contains("s3cret-value"));
        }
    }

    #[test]
    fn the_page_host_and_the_scripts_answer_are_read_as_agent_browser_prints_them() {
        assert_eq!(
            page_host(page_target("https://Login.Example./path?q=1\n").1.as_ref()).as_deref(),
            Some("login.example")
        );
        assert_eq!(page_host(page_target("about:blank").1.as_ref()), None);
        assert_eq!(
            page_host(page_target("\"http://127.0.0.1:8080/\"").1.as_ref()),
            None
        );
        assert_eq!(
            typed("\"typed:password\""),
            Some(Typed::Into("password".into()))
        );
        assert_eq!(
            typed("moved:evil.example"),
            Some(Typed::Moved("evil.example".into()))
        );
        assert_eq!(
            typed("no-field:iframe"),
            Some(Typed::NoField("iframe".into()))
        );
        assert_eq!(typed("something else"), None);
        let script = typing_script("login.example", secrets().get("pw").unwrap());
        assert!(script.contains("location.hostname !== \"login.example\""));
    }
}
