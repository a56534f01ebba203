//! A caller's files, uploaded by name: placed in the task's container (0600, through the
//! runner's stdin) before its first command, and uploaded only into a file input on a page inside
//! the task's scope. The worker names a file; it never gives a path, so nothing else on any disk
//! is reachable.

use std::time::Duration;

use airlock_worker::{TaskContext, ToolOutput, Upload, Uploads};

use crate::error::DockerError;
use crate::runner::{Commands, DriverCommands};

/// Where the files wait in the container.
const UPLOAD_DIR: &str = "/tmp/airlock-uploads";

/// Place every file before the task's first command.
pub(crate) async fn place(
    commands: &Commands,
    uploads: &Uploads,
    timeout: Duration,
) -> Result<(), DockerError> {
    let driver = DriverCommands { commands, timeout };
    for upload in uploads.iter() {
        driver
            .write_private(UPLOAD_DIR, upload.name(), upload.bytes())
            .await
            .map_err(|why| DockerError::PlaceFile {
                name: upload.name().to_owned(),
                why,
            })?;
    }
    Ok(())
}

/// What an `upload` command asks, judged: `None` when it is not one the driver handles (no files:
/// the command policy refuses it), else the selector and files, or the refusal.
pub(crate) fn judge<'a>(
    args: &'a [String],
    uploads: &'a Uploads,
) -> Option<Result<(&'a str, Vec<&'a Upload>), String>> {
    if args.first().map(String::as_str) != Some("upload") || uploads.is_empty() {
        return None;
    }
    let usage = format!(
        "upload takes a selector and the names of the task's files, [\"upload\", SELECTOR, NAME]; the files are {}.",
        uploads.listed()
    );
    let (Some(selector), names) = (args.get(1), args.get(2..).unwrap_or_default()) else {
        return Some(Err(usage));
    };
    if names.is_empty() || selector.starts_with('-') || names.iter().any(|n| n.starts_with('-')) {
        return Some(Err(usage));
    }
    let mut files = Vec::with_capacity(names.len());
    for name in names {
        match uploads.get(name) {
            Some(file) => files.push(file),
            None => {
                return Some(Err(format!(
                    "`{}` is not one of this task's files ({}); no other file can be uploaded.",
                    name.chars().take(100).collect::<String>(),
                    uploads.listed()
                )));
            }
        }
    }
    Some(Ok((selector.as_str(), files)))
}

/// Upload `files` into `selector`, if the page is inside the task's scope.
pub(crate) async fn upload(
    commands: &DriverCommands<'_>,
    context: &TaskContext,
    selector: &str,
    files: &[&Upload],
) -> ToolOutput {
    let (page, target) = match commands.page().await {
        Ok(page) => page,
        Err(error) => {
            return ToolOutput::failed(format!(
                "Could not read the page's address, so nothing was uploaded: {error}"
            ));
        }
    };
    let in_scope = target.is_some_and(|target| context.scope.judge(&target.host).is_ok());
    if !in_scope {
        return ToolOutput::refused(format!(
            "files are uploaded only to a page inside the task's scope; this page is {}. Nothing was uploaded.",
            page.chars().take(200).collect::<String>()
        ));
    }
    let paths: Vec<String> = files
        .iter()
        .map(|file| format!("{UPLOAD_DIR}/{}", file.name()))
        .collect();
    let mut args = vec!["upload", selector];
    args.extend(paths.iter().map(String::as_str));
    match commands.agent_browser(&args, None).await {
        Ok(_) => ToolOutput::text(format!(
            "Uploaded {} into {selector}.",
            files
                .iter()
                .map(|f| format!("{} ({} bytes)", f.name(), f.bytes().len()))
                .collect::<Vec<_>>()
                .join(", ")
        )),
        Err(error) => ToolOutput::failed(format!("The upload failed: {error}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn only_the_tasks_files_by_name_are_uploaded() {
        let uploads = Uploads::new(vec![("report.csv".into(), b"a,b".to_vec())]).unwrap();
        let ok = args(&["upload", "#file", "report.csv"]);
        let (selector, files) = judge(&ok, &uploads).unwrap().unwrap();
        assert_eq!((selector, files[0].name()), ("#file", "report.csv"));
        for refused in [
            &["upload", "#file", "/etc/passwd"][..],
            &["upload", "#file", "../report.csv"],
            &["upload", "#file"],
            &["upload", "--force", "report.csv"],
        ] {
            let why = judge(&args(refused), &uploads).unwrap().unwrap_err();
            assert!(why.contains("report.csv (3 bytes)"), "{why}");
        }
        assert!(judge(&args(&["click", "#file"]), &uploads).is_none());
        assert!(
            judge(&ok, &Uploads::default()).is_none(),
            "no files: the policy refuses it"
        );
    }
}
