//! A lab site with files to download on 127.0.0.1: `/` links a two-page PDF (`#pdf`, served as
//! `application/pdf`, which the browser downloads instead of showing), a CSV served as an
//! attachment (`#csv`), a file of [`BIG_FILE_BYTES`] zero bytes (`#big`) and a text file carrying
//! [`EXPORTED_SECRET`] (`#export`). It records each path asked for.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

/// The text that opens the PDF's first page (forty filler lines follow it, so the document is
/// longer than a worker is shown at once).
pub const PDF_FIRST_PAGE: &str = "Revenue grew by 42 percent in the lab quarter";
/// The text on the PDF's second page.
pub const PDF_SECOND_PAGE: &str = "The second page says lighthouse";
/// The CSV's bytes.
pub const CSV: &str = "name,score\nada,3\nbob,5\n";
/// A value `/export.txt` carries (a test makes it a secret of the task).
pub const EXPORTED_SECRET: &str = "lab-export-secret-42";
/// The size of `/big.bin`.
pub const BIG_FILE_BYTES: usize = 300 * 1024;

/// The paths the site was asked for, in order.
pub type Asked = Arc<Mutex<Vec<String>>>;

/// Serve the files; returns the port and what was asked.
pub fn files_site() -> (u16, Asked) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let asked: Asked = Arc::default();
    let record = Arc::clone(&asked);
    let pdf = report_pdf();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            if reader.read_line(&mut line).is_err() {
                continue;
            }
            let mut header = String::new();
            while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
                header.clear();
            }
            let path = line.split(' ').nth(1).unwrap_or("/").to_owned();
            record.lock().unwrap().push(path.clone());
            let (kind, extra, body): (&str, &str, Vec<u8>) = match path.as_str() {
                "/" => ("text/html; charset=utf-8", "", index().into_bytes()),
                "/report.pdf" => ("application/pdf", "", pdf.clone()),
                "/data.csv" => (
                    "text/csv",
                    "content-disposition: attachment; filename=\"data.csv\"\r\n",
                    CSV.as_bytes().to_vec(),
                ),
                "/export.txt" => (
                    "text/plain",
                    "content-disposition: attachment; filename=\"export.txt\"\r\n",
                    format!("Account export: {EXPORTED_SECRET}\n").into_bytes(),
                ),
                "/big.bin" => (
                    "application/octet-stream",
                    "content-disposition: attachment; filename=\"big.bin\"\r\n",
                    vec![0; BIG_FILE_BYTES],
                ),
                _ => ("text/plain", "", b"not here".to_vec()),
            };
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: {kind}\r\ncontent-length: {}\r\n{extra}connection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(&body);
        }
    });
    (port, asked)
}

/// The PDF the site serves at `/report.pdf`.
pub fn report_pdf() -> Vec<u8> {
    let mut first = vec![PDF_FIRST_PAGE.to_owned()];
    first.extend((1..=40).map(|n| format!("Filler line {n} of the lab report, to be paged")));
    let first: Vec<&str> = first.iter().map(String::as_str).collect();
    two_page_pdf(&first, &[PDF_SECOND_PAGE])
}

fn index() -> String {
    "<html><head><meta charset=\"utf-8\"><title>Files</title></head><body>\
     <a id=\"pdf\" href=\"/report.pdf\">Quarterly report (PDF)</a>\
     <a id=\"csv\" href=\"/data.csv\">Scores (CSV)</a>\
     <a id=\"big\" href=\"/big.bin\">Everything (large)</a>\
     <a id=\"export\" href=\"/export.txt\">Account export</a>\
     </body></html>"
        .to_owned()
}

/// A valid two-page PDF whose pages show the lines `first` and `second` in Helvetica (ASCII text
/// without parentheses or backslashes), with a correct cross-reference table.
pub fn two_page_pdf(first: &[&str], second: &[&str]) -> Vec<u8> {
    let stream = |lines: &[&str]| {
        let shown: Vec<String> = lines.iter().map(|line| format!("({line}) Tj T*")).collect();
        format!("BT /F1 10 Tf 14 TL 72 760 Td {} ET", shown.join(" "))
    };
    let page = |contents: u32| {
        format!(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 7 0 R >> >> /Contents {contents} 0 R >>"
        )
    };
    let first_stream = stream(first);
    let second_stream = stream(second);
    let objects = [
        "<< /Type /Catalog /Pages 2 0 R >>".to_owned(),
        "<< /Type /Pages /Kids [3 0 R 5 0 R] /Count 2 >>".to_owned(),
        page(4),
        format!(
            "<< /Length {} >>\nstream\n{first_stream}\nendstream",
            first_stream.len()
        ),
        page(6),
        format!(
            "<< /Length {} >>\nstream\n{second_stream}\nendstream",
            second_stream.len()
        ),
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".to_owned(),
    ];
    let mut pdf = String::from("%PDF-1.4\n");
    let mut offsets = Vec::with_capacity(objects.len());
    for (index, object) in objects.iter().enumerate() {
        offsets.push(pdf.len());
        pdf.push_str(&format!("{} 0 obj\n{object}\nendobj\n", index + 1));
    }
    let xref = pdf.len();
    pdf.push_str(&format!(
        "xref\n0 {}\n0000000000 65535 f \n",
        objects.len() + 1
    ));
    for offset in offsets {
        pdf.push_str(&format!("{offset:010} 00000 n \n"));
    }
    pdf.push_str(&format!(
        "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
        objects.len() + 1
    ));
    pdf.into_bytes()
}
