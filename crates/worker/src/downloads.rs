//! Files a task downloads, when its caller allows it (`max_download_bytes`; off by default):
//! saved inside the container under a name the worker gives, bounded in count and bytes, typed
//! from their first bytes, listed to the worker by name, size and type, and returned to the
//! caller. Nothing downloaded is ever run or opened on the host.

use std::sync::{Arc, Mutex, PoisonError};

use serde::Serialize;

use crate::uploads::plain_file_name;

/// The most files one task may download.
pub(crate) const MAX_DOWNLOAD_FILES: usize = 8;
/// The most bytes a caller may allow a task to download: the files live on the container's
/// `/tmp` (512 MiB by default), beside the browser's own.
pub const MAX_DOWNLOAD_BYTES_CEILING: u64 = 256 * 1024 * 1024;

/// One downloaded file.
#[derive(Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Download {
    /// The name the worker gave it (letters, digits, `.`, `_`, `-`).
    pub name: String,
    /// Its type, from its first bytes (`application/pdf`, `text/plain`, …), never from the name
    /// or the server's word.
    pub media_type: String,
    /// Its size.
    pub bytes: u64,
    /// The file (base64 in JSON).
    #[serde(with = "crate::messages::base64_bytes")]
    #[schemars(with = "String")]
    pub data: Vec<u8>,
}

impl std::fmt::Debug for Download {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Download({}, {}, {} bytes)",
            self.name, self.media_type, self.bytes
        )
    }
}

impl Download {
    /// A downloaded file, typed from its bytes.
    pub fn new(name: String, data: Vec<u8>) -> Self {
        let media_type = sniff(&name, &data).to_owned();
        Self {
            name,
            media_type,
            bytes: u64::try_from(data.len()).unwrap_or(u64::MAX),
            data,
        }
    }

    /// `name (N bytes, type)`, for the worker.
    pub fn listed(&self) -> String {
        format!("{} ({} bytes, {})", self.name, self.bytes, self.media_type)
    }
}

/// A file's type from its first bytes: a known signature (PDF, images, archives, …), else text
/// (HTML when it opens like HTML; CSV only when it is text and named `.csv`), else
/// `application/octet-stream`.
pub(crate) fn sniff(name: &str, data: &[u8]) -> &'static str {
    if let Some(kind) = infer::get(data) {
        return kind.mime_type();
    }
    let head = &data[..data.len().min(8192)];
    let text = match std::str::from_utf8(head) {
        Ok(text) => Some(text),
        // A character cut at the 8 KiB mark is still text.
        Err(error) if error.error_len().is_none() => {
            std::str::from_utf8(&head[..error.valid_up_to()]).ok()
        }
        Err(_) => None,
    };
    match text {
        Some(text) if !text.contains('\0') => {
            let start = text
                .trim_start()
                .get(..15)
                .unwrap_or("")
                .to_ascii_lowercase();
            if start.starts_with("<!doctype html") || start.starts_with("<html") {
                "text/html"
            } else if name.to_ascii_lowercase().ends_with(".csv") {
                "text/csv"
            } else {
                "text/plain"
            }
        }
        _ => "application/octet-stream",
    }
}

/// Why a download is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DownloadRefusal {
    /// The caller did not allow downloads.
    #[error(
        "downloads are off for this task: the caller allows them with max_download_bytes; read the page instead"
    )]
    Off,
    /// A name that is not a plain file name.
    #[error(
        "`{name}` is not a file name Airlock saves under: use 1 to 100 letters, digits, `.`, `_` or `-`, not starting with `.`"
    )]
    Name {
        /// The name given (cut).
        name: String,
    },
    /// The name is taken.
    #[error("a file named `{name}` was already downloaded: give another name")]
    Taken {
        /// The name.
        name: String,
    },
    /// No more files.
    #[error("this task has downloaded its {MAX_DOWNLOAD_FILES} files, the most a task may")]
    TooMany,
    /// Over the byte budget.
    #[error(
        "`{name}` is {bytes} bytes, over what is left of this task's download limit ({left} of {limit} bytes); it was deleted"
    )]
    TooLarge {
        /// The name.
        name: String,
        /// Its size.
        bytes: u64,
        /// What was left.
        left: u64,
        /// The task's limit.
        limit: u64,
    },
}

/// A task's downloads: the limit its caller set and the files so far. Cheap to clone; clones
/// share the files.
#[derive(Debug, Clone, Default)]
pub struct Downloads {
    limit: Option<u64>,
    files: Arc<Mutex<Vec<Download>>>,
}

impl Downloads {
    /// Downloads allowed up to `limit` bytes in all (`None`: off).
    pub fn new(limit: Option<u64>) -> Self {
        Self {
            limit,
            files: Arc::default(),
        }
    }

    /// The limit, if downloads are on.
    pub fn limit(&self) -> Option<u64> {
        self.limit
    }

    /// Whether another file named `name` may be downloaded, and how many bytes it may hold.
    pub fn room_for(&self, name: &str) -> Result<u64, DownloadRefusal> {
        let limit = self.limit.ok_or(DownloadRefusal::Off)?;
        if !plain_file_name(name) {
            return Err(DownloadRefusal::Name {
                name: name.chars().take(100).collect(),
            });
        }
        let files = self.files.lock().unwrap_or_else(PoisonError::into_inner);
        if files.iter().any(|file| file.name == name) {
            return Err(DownloadRefusal::Taken {
                name: name.to_owned(),
            });
        }
        if files.len() >= MAX_DOWNLOAD_FILES {
            return Err(DownloadRefusal::TooMany);
        }
        let used: u64 = files.iter().map(|file| file.bytes).sum();
        Ok(limit.saturating_sub(used))
    }

    /// Keep a downloaded file, if it fits (checked again: two commands could race).
    pub fn keep(&self, file: Download) -> Result<(), DownloadRefusal> {
        let left = self.room_for(&file.name)?;
        if file.bytes > left {
            return Err(DownloadRefusal::TooLarge {
                name: file.name,
                bytes: file.bytes,
                left,
                limit: self.limit.unwrap_or(0),
            });
        }
        self.files
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(file);
        Ok(())
    }

    /// The file called `name`.
    pub fn get(&self, name: &str) -> Option<Download> {
        self.files
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .find(|file| file.name == name)
            .cloned()
    }

    /// Every file, in the order they came.
    pub fn all(&self) -> Vec<Download> {
        self.files
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_come_from_the_bytes_not_the_name() {
        assert_eq!(sniff("x.txt", b"%PDF-1.7\n%\xe2\xe3"), "application/pdf");
        assert_eq!(sniff("report.pdf", b"just words"), "text/plain");
        assert_eq!(sniff("a.csv", b"name,score\nada,3\n"), "text/csv");
        assert_eq!(sniff("page", b"  <!DOCTYPE html><p>hi"), "text/html");
        assert_eq!(
            sniff("a.csv", b"\x00\x01\x02binary"),
            "application/octet-stream"
        );
        assert_eq!(sniff("x", b"PK\x03\x04\x14\x00\x00\x00"), "application/zip");
        // A multibyte character cut at the 8 KiB mark is still text.
        let mut cut = vec![b'a'; 8191];
        cut.extend("é".as_bytes());
        assert_eq!(sniff("t", &cut), "text/plain");
    }

    #[test]
    fn downloads_are_off_unless_allowed_and_stay_within_count_and_bytes() {
        assert_eq!(
            Downloads::default().room_for("a.pdf"),
            Err(DownloadRefusal::Off)
        );
        let downloads = Downloads::new(Some(10));
        assert_eq!(downloads.room_for("a.pdf"), Ok(10));
        for name in ["../a", ".hidden", "a b", ""] {
            assert!(
                matches!(downloads.room_for(name), Err(DownloadRefusal::Name { .. })),
                "{name}"
            );
        }
        downloads
            .keep(Download::new("a.txt".into(), b"123456".to_vec()))
            .unwrap();
        assert_eq!(downloads.room_for("b.txt"), Ok(4));
        assert_eq!(
            downloads.room_for("a.txt"),
            Err(DownloadRefusal::Taken {
                name: "a.txt".into()
            })
        );
        let refused = downloads
            .keep(Download::new("b.txt".into(), b"12345".to_vec()))
            .unwrap_err();
        assert_eq!(
            refused.to_string(),
            "`b.txt` is 5 bytes, over what is left of this task's download limit (4 of 10 bytes); it was deleted"
        );
        let many = Downloads::new(Some(1000));
        for index in 0..MAX_DOWNLOAD_FILES {
            many.keep(Download::new(format!("f{index}"), vec![b'x']))
                .unwrap();
        }
        assert_eq!(many.room_for("one-more"), Err(DownloadRefusal::TooMany));
        assert_eq!(many.all().len(), MAX_DOWNLOAD_FILES);
        assert_eq!(
            downloads.get("a.txt").unwrap().listed(),
            "a.txt (6 bytes, text/plain)"
        );
    }
}
