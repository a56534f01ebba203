//! Downloads, when a task allows them: the worker clicks what starts one and names the file
//! (`["download", SELECTOR, NAME]`); agent-browser saves it inside the container, where the driver
//! measures it against what is left of the task's limit (deleting it when over), reads it back and
//! keeps it for the caller. The `read_document` tool shows a kept PDF (through `pdftotext`, run in
//! the container) or text file as text. Nothing downloaded is run or opened on the host.

use std::time::Duration;

use airlock_worker::{
    BoxFuture, Download, DownloadRefusal, Downloads, Secrets, Tool, ToolDefinition, ToolFailure,
    ToolOutput,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::runner::{Commands, DriverCommands};

/// Where downloads are saved in the container (its tmpfs, beside the browser's own files).
const DOWNLOAD_DIR: &str = "/tmp/airlock-downloads";

/// Whether `args` is a download this driver handles (the task allows downloads); without, the
/// command policy refuses `download` with its reason.
pub(crate) fn handles(args: &[String], downloads: &Downloads) -> bool {
    args.first().map(String::as_str) == Some("download") && downloads.limit().is_some()
}

/// Run `["download", SELECTOR, NAME]`: save, measure, keep, and tell the worker what came. A
/// file that carries one of the task's secrets is not kept: no secret leaves in a file.
pub(crate) async fn download(
    commands: &DriverCommands<'_>,
    downloads: &Downloads,
    secrets: &Secrets,
    args: &[String],
) -> ToolOutput {
    let (selector, name) = match args {
        [_, selector, name] if !selector.starts_with('-') && !name.starts_with('-') => {
            (selector.as_str(), name.as_str())
        }
        _ => {
            return ToolOutput::refused(
                "download takes what to click and a file name you choose, [\"download\", SELECTOR, NAME], such as [\"download\", \"@e4\", \"report.pdf\"].",
            );
        }
    };
    let left = match downloads.room_for(name) {
        Ok(left) => left,
        Err(refusal) => return ToolOutput::refused(format!("{refusal}.")),
    };
    let path = format!("{DOWNLOAD_DIR}/{name}");
    if let Err(error) = commands
        .agent_browser(&["download", selector, &path], None)
        .await
    {
        return ToolOutput::failed(format!("The download failed: {error}"));
    }
    match keep(commands, downloads, secrets, name, &path, left).await {
        Ok(file) => ToolOutput::text(format!(
            "Downloaded {}. It goes to the person who asked for the task.{}",
            file.listed(),
            if readable(&file.media_type) {
                format!(
                    " Read it as text with read_document {{\"name\": \"{}\"}}.",
                    file.name
                )
            } else {
                String::new()
            }
        )),
        Err(why) => {
            // Over the limit or unreadable: the file goes, so it cannot fill the container.
            let _ = commands.run(&rm(&path), None).await;
            why
        }
    }
}

/// Measure the saved file, refuse it when over `left` bytes, else read it back and keep it.
async fn keep(
    commands: &DriverCommands<'_>,
    downloads: &Downloads,
    secrets: &Secrets,
    name: &str,
    path: &str,
    left: u64,
) -> Result<Download, ToolOutput> {
    let size_text = commands
        .run(&["stat", "-c", "%s", path].map(str::to_owned), None)
        .await
        .map_err(|error| ToolOutput::failed(format!("The download saved no file: {error}")))?;
    let size: u64 = size_text.parse().map_err(|_| {
        ToolOutput::failed(format!(
            "The downloaded file's size could not be read ({size_text})."
        ))
    })?;
    let limit = downloads.limit().unwrap_or(0);
    if size > left {
        return Err(ToolOutput::refused(format!(
            "{}.",
            DownloadRefusal::TooLarge {
                name: name.to_owned(),
                bytes: size,
                left,
                limit,
            }
        )));
    }
    let data = commands
        .read_file(path, usize::try_from(size).unwrap_or(usize::MAX))
        .await
        .map_err(|error| {
            ToolOutput::failed(format!("The downloaded file could not be read: {error}"))
        })?;
    if u64::try_from(data.len()).ok() != Some(size) {
        return Err(ToolOutput::failed(
            "The downloaded file changed while it was read; download it again.",
        ));
    }
    if secrets.found_in(&data) {
        return Err(ToolOutput::refused(format!(
            "`{name}` carries one of this task's secrets; it was deleted, so no secret leaves the browser in a file."
        )));
    }
    let file = Download::new(name.to_owned(), data);
    downloads
        .keep(file.clone())
        .map_err(|refusal| ToolOutput::refused(format!("{refusal}.")))?;
    Ok(file)
}

fn rm(path: &str) -> [String; 3] {
    ["rm", "-f", path].map(str::to_owned)
}

/// Whether `read_document` shows files of this type.
fn readable(media_type: &str) -> bool {
    media_type == "application/pdf" || media_type.starts_with("text/")
}

/// The `read_document` tool's input.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReadDocumentInput {
    /// The name a file was downloaded under.
    pub name: String,
}

/// The tool's name.
pub(crate) const READ_DOCUMENT: &str = "read_document";

const READ_DOCUMENT_DESCRIPTION: &str = "Read a file you downloaded as text: a PDF (its text, page by \
page), or a plain text, CSV or HTML file (as it is). Long documents come as a first part you page \
with read_output.";

/// Shows a downloaded document to the worker as text.
pub(crate) struct ReadDocumentTool {
    pub(crate) commands: Commands,
    pub(crate) downloads: Downloads,
    pub(crate) timeout: Duration,
    pub(crate) max_output_bytes: usize,
}

impl Tool for ReadDocumentTool {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::for_input::<ReadDocumentInput>(READ_DOCUMENT, READ_DOCUMENT_DESCRIPTION)
    }

    fn execute(&self, input: Value) -> BoxFuture<'_, Result<ToolOutput, ToolFailure>> {
        Box::pin(async move {
            let input: ReadDocumentInput = match serde_json::from_value(input) {
                Ok(input) => input,
                Err(error) => {
                    return Ok(ToolOutput::failed(format!(
                        "The input is not valid ({error}). Pass {{\"name\": \"report.pdf\"}}."
                    )));
                }
            };
            Ok(self.read(&input.name).await)
        })
    }
}

impl ReadDocumentTool {
    async fn read(&self, name: &str) -> ToolOutput {
        let Some(file) = self.downloads.get(name) else {
            let names: Vec<String> = self.downloads.all().iter().map(Download::listed).collect();
            return ToolOutput::failed(format!(
                "No file was downloaded as `{}`. Downloaded: {}.",
                name.chars().take(100).collect::<String>(),
                if names.is_empty() {
                    "nothing yet".to_owned()
                } else {
                    names.join(", ")
                }
            ));
        };
        if !readable(&file.media_type) {
            return ToolOutput::failed(format!(
                "{} is {}: read_document reads PDFs and text (plain, CSV, HTML); this file goes to the person who asked as it is.",
                file.name, file.media_type
            ));
        }
        if file.media_type.starts_with("text/") {
            return ToolOutput::text(String::from_utf8_lossy(&file.data).into_owned());
        }
        // Parsed in the sealed container, never on the host, under the command time limit.
        let path = format!("{DOWNLOAD_DIR}/{}", file.name);
        let command = ["pdftotext", "-enc", "UTF-8", "-eol", "unix", &path, "-"].map(str::to_owned);
        let commands = DriverCommands {
            commands: &self.commands,
            timeout: self.timeout,
        };
        match commands
            .run_bytes(&command, None, self.max_output_bytes)
            .await
        {
            Ok(text) => ToolOutput::text(paged(&String::from_utf8_lossy(&text))),
            Err(error) => {
                ToolOutput::failed(format!("{} could not be read as a PDF: {error}", file.name))
            }
        }
    }
}

/// `pdftotext`'s output with each page under a `--- page N ---` line (it ends pages with a form
/// feed; the last one ends the text).
fn paged(text: &str) -> String {
    let pages: Vec<&str> = text.trim_end_matches('\u{c}').split('\u{c}').collect();
    let mut out = String::with_capacity(text.len() + pages.len() * 16);
    for (index, page) in pages.iter().enumerate() {
        out.push_str(&format!("--- page {} of {} ---\n", index + 1, pages.len()));
        out.push_str(page.trim_end());
        out.push_str("\n\n");
    }
    out.trim_end().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pdf_pages_are_marked() {
        assert_eq!(
            paged("first\n\u{c}second\n\u{c}"),
            "--- page 1 of 2 ---\nfirst\n\n--- page 2 of 2 ---\nsecond"
        );
    }

    #[test]
    fn only_a_download_the_task_allows_is_handled_here() {
        let args = |words: &[&str]| words.iter().map(|w| (*w).to_owned()).collect::<Vec<_>>();
        let on = Downloads::new(Some(100));
        assert!(handles(&args(&["download", "@e1", "a.pdf"]), &on));
        assert!(!handles(&args(&["click", "@e1"]), &on));
        assert!(
            !handles(&args(&["download", "@e1", "a.pdf"]), &Downloads::default()),
            "off: the command policy refuses it"
        );
    }
}
