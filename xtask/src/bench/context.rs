//! Context economy: what a worker is shown to find facts planted at the start, middle and end
//! of demanding pages (a 300 KB article, a 5,000-row table, 2,000 links, a long list built by
//! script), with today's defaults (a long output cut at 24,000 characters, nothing kept) against
//! paging (a preview with an id, searched with `read_output`). The worker is a fixed strategy in
//! the bench example, so the counts are exact and repeatable; the same run measures how long each
//! snapshot form of agent-browser is on each page.

use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use super::gvisor::example;

/// The facts every page hides, by label; their values are what the worker must report.
pub(super) const FACTS: [(&str, &str); 3] = [
    ("start code", "ALPHA-1111"),
    ("middle code", "BRAVO-2222"),
    ("end code", "CHARLIE-3333"),
];

/// The pages of the corpus, by file name.
pub(super) const PAGES: [&str; 4] = ["article", "table", "links", "list"];

const WORDS: [&str; 24] = [
    "harbour", "lantern", "granite", "meadow", "signal", "copper", "orchard", "ledger", "violet",
    "timber", "canvas", "beacon", "thistle", "marble", "quarry", "saddle", "willow", "ember",
    "falcon", "pebble", "juniper", "anchor", "cobalt", "prairie",
];

/// Deterministic filler prose: `count` words starting at `seed`.
fn prose(seed: usize, count: usize) -> String {
    (0..count)
        .map(|i| WORDS[(seed * 7 + i * 5 + i / 3) % WORDS.len()])
        .collect::<Vec<_>>()
        .join(" ")
}

/// Where fact `index` goes among `items`: near the start, in the middle, near the end.
fn fact_at(items: usize, position: usize) -> Option<usize> {
    [2, items / 2, items - 3]
        .iter()
        .position(|&at| at == position)
}

fn fact_sentence(index: usize) -> String {
    let (label, value) = FACTS[index];
    format!("The {label} is {value}.")
}

/// Write the corpus under `dir/context/`.
pub(super) fn write_corpus(dir: &Path) -> anyhow::Result<()> {
    let dir = dir.join("context");
    fs::create_dir_all(&dir)?;
    let page = |title: &str, body: &str| {
        format!(
            "<!doctype html><html><head><meta charset=utf-8><title>{title}</title></head><body>{body}</body></html>"
        )
    };

    // About 300 KB of article: 600 paragraphs of about 500 characters.
    let mut article = String::from("<article><h1>A long report</h1>");
    for p in 0..600 {
        let fact = fact_at(600, p).map(fact_sentence).unwrap_or_default();
        let _ = write!(
            article,
            "<p>{} {fact} {}</p>",
            prose(p, 35),
            prose(p + 1, 35)
        );
    }
    article.push_str("</article>");
    fs::write(dir.join("article.html"), page("Article", &article))?;

    let mut table = String::from(
        "<table><thead><tr><th>Row</th><th>Item</th><th>Quantity</th><th>Note</th></tr></thead><tbody>",
    );
    for r in 0..5000 {
        let note = fact_at(5000, r).map_or_else(|| prose(r, 2), fact_sentence);
        let _ = write!(
            table,
            "<tr><td>{r}</td><td>item-{r}</td><td>{}</td><td>{note}</td></tr>",
            r % 97
        );
    }
    table.push_str("</tbody></table>");
    fs::write(dir.join("table.html"), page("Table", &table))?;

    let mut links = String::from("<nav><ul>");
    for l in 0..2000 {
        let text =
            fact_at(2000, l).map_or_else(|| format!("Link {l}: {}", prose(l, 3)), fact_sentence);
        let _ = write!(
            links,
            "<li><a href=\"/context/item-{l}.html\">{text}</a></li>"
        );
    }
    links.push_str("</ul></nav>");
    fs::write(dir.join("links.html"), page("Links", &links))?;

    // A single-page app: the list exists only once its script has run.
    let mut items = Vec::new();
    for i in 0..3000 {
        let text =
            fact_at(3000, i).map_or_else(|| format!("Entry {i}: {}", prose(i, 4)), fact_sentence);
        items.push(serde_json::Value::String(text));
    }
    let script = format!(
        "<ul id=app></ul><script>const items = {};\nconst app = document.getElementById('app');\nfor (const text of items) {{ const li = document.createElement('li'); li.textContent = text; app.appendChild(li); }}</script>",
        serde_json::Value::Array(items)
    );
    fs::write(dir.join("list.html"), page("List", &script))?;
    Ok(())
}

pub(super) fn context(root: &Path, site: u16, report: &mut String) {
    eprintln!("== context economy: facts found, characters and image bytes shown");
    let base = format!("http://127.0.0.1:{site}/context/");
    let lines = example(root, &[], &["context", "1", &base]);
    facts_table(&lines, report);
    let measured = |page: &str| {
        lines
            .iter()
            .find(|l| l["page"] == page && l["forms"].is_object())
            .cloned()
            .unwrap_or_default()
    };
    let _ = writeln!(
        report,
        "\n### Snapshot forms: characters of each command's whole output\n\n\
         | page | snapshot | snapshot -c | snapshot -i | get text body |\n|---|---|---|---|---|"
    );
    for page in PAGES {
        let form = &measured(page)["forms"];
        let cell = |name: &str| number(form[name].as_u64());
        let _ = writeln!(
            report,
            "| {page} | {} | {} | {} | {} |",
            cell("snapshot"),
            cell("snapshot -c"),
            cell("snapshot -i"),
            cell("get text body"),
        );
    }
    let _ = writeln!(
        report,
        "\n### Screenshots: bytes as taken (and kept) against as shown to the model\n\n\
         Shown: scaled to 1568 px at most, then the smaller of PNG and JPEG. A dash: Chromium could not \
         take it (a page too tall for one picture).\n\n\
         | page | viewport taken | shown | ratio | full page taken | shown | ratio |\n|---|---|---|---|---|---|---|"
    );
    for page in PAGES {
        let shot = &measured(page)["screenshots"];
        let pair = |name: &str| {
            let taken = shot[name]["taken_bytes"].as_u64();
            let shown = shot[name]["shown_bytes"].as_u64();
            let kind = shot[name]["shown_type"]
                .as_str()
                .unwrap_or("")
                .trim_start_matches("image/")
                .to_owned();
            format!(
                "{} | {} {kind} | {}",
                number(taken),
                number(shown),
                ratio(shown, taken)
            )
        };
        let _ = writeln!(
            report,
            "| {page} | {} | {} |",
            pair("screenshot"),
            pair("screenshot --full")
        );
    }
    let _ = writeln!(report);
}

/// Facts found and characters shown, per page, cut against paged.
fn facts_table(lines: &[serde_json::Value], report: &mut String) {
    let _ = writeln!(
        report,
        "## Context economy: what the worker is shown to find planted facts\n\n\
         Each page hides three facts (near the start, in the middle, near the end). The worker is a fixed \
         strategy: open the page, take one screenshot, read the page, then (with paging) search the kept \
         output with `read_output` for each fact not yet seen. **Today** is the old default: `snapshot`, \
         cut at 24,000 characters, nothing kept. **Paged** is the new default: the same `snapshot` shown \
         as a preview of `max_output_chars` (10,000) with an id, and `read_output` searches. Characters are \
         those of tool output shown to the worker; image bytes are the screenshot as sent to the model \
         (today: the full PNG).\n"
    );
    let _ = writeln!(
        report,
        "| page | facts found today | found paged | characters today | paged, to the facts today found | ratio | paged, to all facts | image bytes today | paged | ratio |\n|---|---|---|---|---|---|---|---|---|---|"
    );
    for page in PAGES {
        let find = |strategy: &str| {
            lines
                .iter()
                .find(|l| l["page"] == page && l["strategy"] == strategy)
                .cloned()
                .unwrap_or_default()
        };
        let (today, paged) = (find("today"), find("paged"));
        let found_at = |run: &serde_json::Value, label: &str| run["found_at_chars"][label].as_u64();
        let found_in = |run: &serde_json::Value| {
            FACTS
                .iter()
                .filter(|(label, _)| found_at(run, label).is_some())
                .count()
        };
        // The characters paging needed to reach the facts today also found.
        let paged_to_same = FACTS
            .iter()
            .filter(|(label, _)| found_at(&today, label).is_some())
            .filter_map(|(label, _)| found_at(&paged, label))
            .max();
        let paged_to_all = (found_in(&paged) == FACTS.len())
            .then(|| FACTS.iter().filter_map(|(l, _)| found_at(&paged, l)).max())
            .flatten();
        let today_chars = today["chars_shown"].as_u64();
        let today_image = today["kept_image_bytes"].as_u64();
        let paged_image = paged["image_bytes_shown"].as_u64();
        let _ = writeln!(
            report,
            "| {page} | {}/3 | {}/3 | {} | {} | {} | {} | {} | {} | {} |",
            found_in(&today),
            found_in(&paged),
            number(today_chars),
            number(paged_to_same),
            ratio(paged_to_same, today_chars),
            number(paged_to_all),
            number(today_image),
            number(paged_image),
            ratio(paged_image, today_image),
        );
    }
}

fn number(value: Option<u64>) -> String {
    value.map_or_else(|| "–".to_owned(), |v| v.to_string())
}

fn ratio(value: Option<u64>, baseline: Option<u64>) -> String {
    match (value, baseline) {
        (Some(v), Some(b)) if b > 0 => format!("{:.2}×", as_f64(v) / as_f64(b)),
        _ => "–".to_owned(),
    }
}

/// Counts here are far below 2^32, where the conversion is exact.
fn as_f64(value: u64) -> f64 {
    u32::try_from(value).map_or(f64::from(u32::MAX), f64::from)
}
