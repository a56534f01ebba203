//! Files a caller gives a task to upload: placed in the task's container, uploaded by name only,
//! and only into a file input on a page inside the task's scope. The worker never gives a path.

use std::sync::Arc;

/// The most files one task may carry.
pub(crate) const MAX_UPLOAD_FILES: usize = 8;
/// The largest file.
pub const MAX_UPLOAD_BYTES: usize = 10 * 1024 * 1024;
/// The most bytes all of a task's files may hold together.
pub const MAX_UPLOAD_TOTAL_BYTES: usize = 20 * 1024 * 1024;

/// Whether `name` is a plain file name: 1 to 100 letters, digits, `.`, `_` or `-`, not starting
/// with `.`. Uploads and downloads are named so: never a path, never hidden.
pub(crate) fn plain_file_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 100
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// One file to upload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upload {
    name: String,
    bytes: Arc<Vec<u8>>,
}

impl Upload {
    /// Its name, as the worker writes it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

/// Why a task's files are refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UploadError {
    /// A name that is not a plain file name.
    #[error(
        "file name `{name}` is not valid: use 1 to 100 letters, digits, `.`, `_` or `-`, not starting with `.`"
    )]
    Name {
        /// The name given.
        name: String,
    },
    /// Two files with one name.
    #[error("file `{name}` is given twice: give each name once")]
    Duplicate {
        /// The name.
        name: String,
    },
    /// Too many, or too large.
    #[error(
        "the files are over a limit ({what}): at most {MAX_UPLOAD_FILES} files, {MAX_UPLOAD_BYTES} bytes each and {MAX_UPLOAD_TOTAL_BYTES} in all"
    )]
    TooMuch {
        /// Which limit.
        what: String,
    },
}

/// A task's files. Cheap to clone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Uploads(Arc<Vec<Upload>>);

impl Uploads {
    /// A task's files, checked.
    pub fn new(files: Vec<(String, Vec<u8>)>) -> Result<Self, UploadError> {
        if files.len() > MAX_UPLOAD_FILES {
            return Err(UploadError::TooMuch {
                what: format!("{} files", files.len()),
            });
        }
        let mut total = 0usize;
        let mut uploads: Vec<Upload> = Vec::with_capacity(files.len());
        for (name, bytes) in files {
            if !plain_file_name(&name) {
                return Err(UploadError::Name {
                    name: name.chars().take(120).collect(),
                });
            }
            if uploads.iter().any(|u| u.name == name) {
                return Err(UploadError::Duplicate { name });
            }
            if bytes.len() > MAX_UPLOAD_BYTES {
                return Err(UploadError::TooMuch {
                    what: format!("`{name}` is {} bytes", bytes.len()),
                });
            }
            total += bytes.len();
            if total > MAX_UPLOAD_TOTAL_BYTES {
                return Err(UploadError::TooMuch {
                    what: format!("{total} bytes in all"),
                });
            }
            uploads.push(Upload {
                name,
                bytes: Arc::new(bytes),
            });
        }
        Ok(Self(Arc::new(uploads)))
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The file called `name`.
    pub fn get(&self, name: &str) -> Option<&Upload> {
        self.0.iter().find(|u| u.name == name)
    }

    /// Every file.
    pub fn iter(&self) -> impl Iterator<Item = &Upload> {
        self.0.iter()
    }

    /// `name (N bytes)`, comma-separated, for the worker and for errors.
    pub fn listed(&self) -> String {
        self.0
            .iter()
            .map(|u| format!("{} ({} bytes)", u.name, u.bytes.len()))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_plain_names_within_the_limits() {
        let ok = Uploads::new(vec![("report.csv".into(), b"a,b\n1,2\n".to_vec())]).unwrap();
        assert_eq!(ok.get("report.csv").unwrap().bytes(), b"a,b\n1,2\n");
        assert_eq!(ok.listed(), "report.csv (8 bytes)");
        for name in ["../etc/passwd", ".hidden", "a b", "", "x/y"] {
            let error = Uploads::new(vec![(name.into(), vec![1])]).unwrap_err();
            assert!(matches!(error, UploadError::Name { .. }), "{name}");
        }
        let twice = Uploads::new(vec![("a".into(), vec![]), ("a".into(), vec![])]).unwrap_err();
        assert!(matches!(twice, UploadError::Duplicate { .. }));
        let big = Uploads::new(vec![("big".into(), vec![0; MAX_UPLOAD_BYTES + 1])]).unwrap_err();
        assert!(big.to_string().contains("`big` is"), "{big}");
        let many: Vec<_> = (0..=MAX_UPLOAD_FILES)
            .map(|i| (format!("f{i}"), vec![]))
            .collect();
        assert!(Uploads::new(many).is_err());
    }
}
