//! Where a provider's API key comes from: its variable, or a file a second variable names
//! (`ANTHROPIC_API_KEY_FILE`), which is how Swarm and Kubernetes mount secrets. Nothing here ever
//! puts a key in an error.

use std::path::{Path, PathBuf};

use crate::ModelSetupError;

/// The key from `variable` or `{variable}_FILE`, read through `env` and `read` (tests pass
/// their own).
pub(crate) fn api_key(
    variable: &'static str,
    env: &dyn Fn(&str) -> Option<String>,
    read: &dyn Fn(&Path) -> std::io::Result<String>,
) -> Result<String, ModelSetupError> {
    let direct = env(variable).filter(|key| !key.trim().is_empty());
    let file = env(&format!("{variable}_FILE")).filter(|path| !path.trim().is_empty());
    match (direct, file) {
        (Some(_), Some(_)) => Err(ModelSetupError::KeyTwice { variable }),
        (Some(key), None) => Ok(key),
        (None, Some(path)) => {
            let path = PathBuf::from(path.trim());
            let bad = |why: String| ModelSetupError::KeyFile {
                variable,
                path: path.clone(),
                why,
            };
            let text = read(&path).map_err(|error| bad(format!("cannot be read ({error})")))?;
            // A secret file usually ends with a newline; a key has no spaces of its own.
            let key = text.trim();
            if key.is_empty() {
                return Err(bad("is empty".to_owned()));
            }
            if key.lines().count() > 1 {
                return Err(bad("holds more than one line".to_owned()));
            }
            Ok(key.to_owned())
        }
        (None, None) => Err(ModelSetupError::MissingKey { variable }),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    const KEY: &str = "sk-ant-api03-secret-value-0123456789";

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| map.get(name).cloned()
    }

    fn files(path: &Path) -> std::io::Result<String> {
        match path.to_str() {
            Some("/run/secrets/key") => Ok(format!("{KEY}\n")),
            Some("/run/secrets/empty") => Ok("\n".to_owned()),
            Some("/run/secrets/two") => Ok(format!("{KEY}\nother\n")),
            _ => Err(std::io::ErrorKind::NotFound.into()),
        }
    }

    #[test]
    fn the_key_comes_from_its_variable_or_the_file_the_other_names() {
        let from_env = api_key(
            "ANTHROPIC_API_KEY",
            &env(&[("ANTHROPIC_API_KEY", KEY)]),
            &files,
        );
        assert_eq!(from_env.unwrap(), KEY);
        let from_file = api_key(
            "ANTHROPIC_API_KEY",
            &env(&[("ANTHROPIC_API_KEY_FILE", "/run/secrets/key")]),
            &files,
        );
        assert_eq!(
            from_file.unwrap(),
            KEY,
            "the trailing newline is not the key's"
        );
    }

    #[test]
    fn every_wrong_setting_names_the_variable_and_never_the_key() {
        for (pairs, says) in [
            (vec![], "ANTHROPIC_API_KEY is not set"),
            (
                vec![("ANTHROPIC_API_KEY", "  ")],
                "ANTHROPIC_API_KEY is not set",
            ),
            (
                vec![
                    ("ANTHROPIC_API_KEY", KEY),
                    ("ANTHROPIC_API_KEY_FILE", "/run/secrets/key"),
                ],
                "both ANTHROPIC_API_KEY and ANTHROPIC_API_KEY_FILE",
            ),
            (
                vec![("ANTHROPIC_API_KEY_FILE", "/run/secrets/missing")],
                "cannot be read",
            ),
            (
                vec![("ANTHROPIC_API_KEY_FILE", "/run/secrets/empty")],
                "is empty",
            ),
            (
                vec![("ANTHROPIC_API_KEY_FILE", "/run/secrets/two")],
                "more than one line",
            ),
        ] {
            let error = api_key("ANTHROPIC_API_KEY", &env(&pairs), &files)
                .unwrap_err()
                .to_string();
            assert!(error.contains(says), "{error}");
            assert!(!error.contains(KEY), "{error}");
        }
    }
}
