//! `--secret NAME@DOMAIN[,DOMAIN…]=SOURCE`: a named secret bound to its sites, its value read from
//! `env:VAR` or `file:PATH` (never from the command line itself, where `ps` and shell history
//! would show it). Errors name the flag and the secret, never a value.

use airlock_worker::{MAX_SECRET_BYTES, Secret, Secrets};

/// Every `--secret`, loaded and checked.
pub(crate) fn load(specs: &[String]) -> anyhow::Result<Secrets> {
    let secrets = specs
        .iter()
        .map(|spec| load_one(spec))
        .collect::<anyhow::Result<Vec<_>>>()?;
    Secrets::new(secrets).map_err(|e| anyhow::anyhow!("--secret: {e}"))
}

fn load_one(spec: &str) -> anyhow::Result<Secret> {
    let usage = "write NAME@DOMAIN[,DOMAIN…]=env:VAR or NAME@DOMAIN[,DOMAIN…]=file:PATH";
    // The name and domains never hold `=`; the source may (a path can).
    let (head, source) = spec
        .split_once('=')
        .ok_or_else(|| anyhow::anyhow!("--secret `{}`: no source; {usage}", shown(spec)))?;
    let (name, domains) = head
        .split_once('@')
        .ok_or_else(|| anyhow::anyhow!("--secret `{head}=…`: no domains; {usage}"))?;
    let value = read_source(&format!("--secret {name}"), source, usage)?;
    Secret::new(name, value, domains.split(',')).map_err(|e| anyhow::anyhow!("--secret: {e}"))
}

/// A value from `env:VAR` or `file:PATH` (never the command line itself). Errors start with
/// `what` and never show a value.
pub(crate) fn read_source(what: &str, source: &str, usage: &str) -> anyhow::Result<String> {
    if let Some(var) = source.strip_prefix("env:") {
        std::env::var(var).map_err(|_| {
            anyhow::anyhow!("{what}: the environment variable `{var}` is not set (or not UTF-8)")
        })
    } else if let Some(path) = source.strip_prefix("file:") {
        read_bounded(path).map_err(|e| anyhow::anyhow!("{what}: {e}"))
    } else {
        anyhow::bail!(
            "{what}: the value must come from env:VAR or file:PATH, never the command line (ps and shell history show it); {usage}"
        )
    }
}

/// A secret file's text without its final line break, bounded.
fn read_bounded(path: &str) -> anyhow::Result<String> {
    let bytes = std::fs::File::open(path)
        .and_then(|file| airlock_service::state_file::read_bounded(file, MAX_SECRET_BYTES + 1))
        .map_err(|e| anyhow::anyhow!("cannot read the file `{path}`: {e}"))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| anyhow::anyhow!("the file `{path}` is not UTF-8 text"))?;
    let trimmed = text
        .strip_suffix('\n')
        .map_or(text.as_str(), |t| t.strip_suffix('\r').unwrap_or(t));
    Ok(trimmed.to_owned())
}

/// A spec in an error: only up to its first `=`, so a value typed by mistake is not echoed.
fn shown(spec: &str) -> &str {
    spec.split('=').next().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_comes_from_a_file_or_the_environment_and_errors_never_show_a_value() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pw");
        std::fs::write(&path, "from-the-file\n").unwrap();
        let secrets = load(&[format!(
            "shop_pw@login.shop.example,*.shop.example=file:{}",
            path.display()
        )])
        .unwrap();
        let secret = secrets.get("shop_pw").unwrap();
        assert_eq!(secret.value().expose(), "from-the-file");
        assert_eq!(secret.domains().len(), 2);
        for (spec, says) in [
            ("pw@a.example=hunter2-typed", "never the command line"),
            ("pw@a.example", "no source"),
            ("pw=env:X", "no domains"),
            ("pw@a.example=env:AIRLOCK_TEST_UNSET_VARIABLE", "is not set"),
            ("pw@a.example=file:/nonexistent/pw", "cannot read"),
            ("p w@a.example=file:/dev/null", "not valid"),
        ] {
            let error = load(&[spec.to_owned()]).unwrap_err().to_string();
            assert!(
                error.contains("--secret") && error.contains(says),
                "{error}"
            );
            assert!(!error.contains("hunter2"), "{error}");
        }
    }
}
