//! The default `render_pdf` host capability, checked by reading the PDFs back
//! with poppler (`pdftotext`, `pdffonts`, `pdfinfo`: Debian/Ubuntu package
//! `poppler-utils`) and a Korean system font (`fonts-nanum` or
//! `fonts-noto-cjk`). Missing tools make the tests fail, not skip.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use qc_test_support::TempDir;
use qwen_companion::plugins::pdf::{render_markdown_pdf, render_pdf_request, MAX_CONTENT_BYTES};
use serde_json::{json, Value};

/// A scratch directory for the rendered files.
struct Scratch(TempDir);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        Scratch(TempDir::new(&format!("pdf-{tag}")))
    }
    fn path(&self, name: &str) -> PathBuf {
        self.0.path().join(name)
    }
    fn entries(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.0.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }
}

/// Runs a poppler tool; fails the test with what to install when absent.
fn poppler(tool: &str, args: &[&str]) -> String {
    let out = match Command::new(tool).args(args).output() {
        Ok(o) => o,
        Err(e) => panic!(
            "{tool} could not be run ({e}): install poppler-utils \
             (apt-get install poppler-utils) — the PDF tests need it"
        ),
    };
    assert!(
        out.status.success(),
        "{tool} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("poppler prints UTF-8")
}

fn text_of(pdf: &Path, layout: bool) -> String {
    let p = pdf.to_str().unwrap();
    if layout {
        poppler("pdftotext", &["-enc", "UTF-8", "-layout", p, "-"])
    } else {
        poppler("pdftotext", &["-enc", "UTF-8", p, "-"])
    }
}

fn pdfinfo_field(pdf: &Path, field: &str) -> String {
    let info = poppler("pdfinfo", &["-enc", "UTF-8", pdf.to_str().unwrap()]);
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("pdfinfo has no {field}: {info}"))
        .trim()
        .to_string()
}

/// Collapses runs of whitespace so that line wrapping does not matter.
fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

const EVERYTHING: &str = r#"# Quarterly Report

Plain paragraph with *emphasis text* and **strong text** and `inline_code_token` and a [link text](https://example.com/x).

## Second level heading

### Third level heading

- Bullet one
- Bullet two
  - Nested bullet
    - Deeper bullet
- Bullet three

1. Numbered one
2. Numbered two
   1. Nested numbered

> Quoted wisdom line
>
> > Nested quote line

---

```rust
fn main() {
    println!("fenced_code_line");
        deeply_indented_code();
}
```

안녕하세요 세계

Mixed line: Hello 세계 and 한국어 text with *기울임 emphasis* and **굵게 bold**.

Trailing paragraph after everything.
"#;

#[test]
fn every_construct_and_korean_text_come_back_out() {
    let dir = Scratch::new("all");
    let out = dir.path("report.pdf");
    let bytes = render_markdown_pdf(Some("Document Title 제목"), EVERYTHING, &out).unwrap();
    assert_eq!(bytes, std::fs::metadata(&out).unwrap().len());
    assert!(std::fs::read(&out).unwrap().starts_with(b"%PDF-"));

    let text = squash(&text_of(&out, false));
    for want in [
        "Document Title 제목",
        "Quarterly Report",
        "Plain paragraph with emphasis text and strong text and inline_code_token and a link text.",
        "Second level heading",
        "Third level heading",
        "• Bullet one",
        "• Bullet two",
        "Nested bullet",
        "Deeper bullet",
        "• Bullet three",
        "1. Numbered one",
        "2. Numbered two",
        "1. Nested numbered",
        "Quoted wisdom line",
        "Nested quote line",
        "fn main() {",
        "println!(\"fenced_code_line\");",
        "deeply_indented_code();",
        "안녕하세요 세계",
        "Mixed line: Hello 세계 and 한국어 text with 기울임 emphasis and 굵게 bold.",
        "Trailing paragraph after everything.",
    ] {
        assert!(
            text.contains(want),
            "{want:?} not in the extracted text:\n{text}"
        );
    }
    // `-layout` keeps the code's indentation.
    let layout = text_of(&out, true);
    let line = |needle: &str| {
        layout
            .lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("{needle} not in:\n{layout}"))
            .to_string()
    };
    let indent = |l: &str| l.len() - l.trim_start().len();
    let (l0, l1, l2) = (
        line("fn main()"),
        line("println!"),
        line("deeply_indented_code"),
    );
    assert!(indent(&l1) > indent(&l0), "{l0:?} / {l1:?}");
    assert!(indent(&l2) > indent(&l1), "{l1:?} / {l2:?}");

    // Fonts: embedded, subset, with ToUnicode maps; a Korean one among them,
    // bold and italic faces, and a monospace face for code.
    let fonts = poppler("pdffonts", &[out.to_str().unwrap()]);
    let rows: Vec<&str> = fonts.lines().skip(2).collect();
    assert!(
        rows.len() >= 4,
        "expected regular, bold, italic, mono fonts:\n{fonts}"
    );
    for row in &rows {
        let cols: Vec<&str> = row.split_whitespace().collect();
        // name type [type] encoding emb sub uni object ID
        let n = cols.len();
        assert_eq!(
            &cols[n - 5..n - 2],
            &["yes", "yes", "yes"],
            "not emb/sub/uni: {row}"
        );
    }
    let lower = fonts.to_lowercase();
    assert!(
        lower.contains("nanum") || lower.contains("cjk"),
        "no Korean font:\n{fonts}"
    );
    assert!(lower.contains("bold"), "no bold face:\n{fonts}");
    assert!(
        lower.contains("oblique") || lower.contains("italic"),
        "no italic face:\n{fonts}"
    );
    assert!(
        lower.contains("mono") || lower.contains("coding"),
        "no monospace face:\n{fonts}"
    );

    assert_eq!(pdfinfo_field(&out, "Title"), "Document Title 제목");
    assert_eq!(pdfinfo_field(&out, "Pages"), "1");
    assert!(
        pdfinfo_field(&out, "Page size").starts_with("595.27"),
        "not A4"
    );
}

#[test]
fn a_long_document_paginates_and_keeps_every_line() {
    let dir = Scratch::new("long");
    let out = dir.path("long.pdf");
    let mut md = String::from("# Long\n\n");
    for i in 0..120 {
        md.push_str(&format!(
            "Paragraph number {i} 문단 번호 {i}: the quick brown fox jumps over the lazy dog, \
             다람쥐 헌 쳇바퀴에 타고파 — wrapped onto several lines of an A4 page.\n\n"
        ));
    }
    md.push_str("```\n");
    for i in 0..80 {
        md.push_str(&format!("code_line_{i}();\n"));
    }
    md.push_str("```\n\nTHE END\n");
    render_markdown_pdf(None, &md, &out).unwrap();
    let pages: usize = pdfinfo_field(&out, "Pages").parse().unwrap();
    assert!(pages > 3, "{pages} pages");
    let text = squash(&text_of(&out, false));
    for i in [0, 57, 119] {
        let want = format!("Paragraph number {i} 문단 번호 {i}:");
        assert!(text.contains(&want), "{want}");
    }
    for i in [0, 41, 79] {
        assert!(text.contains(&format!("code_line_{i}();")), "code_line_{i}");
    }
    assert!(text.contains("THE END"));
    // No title given: no Title metadata.
    let info = poppler("pdfinfo", &[out.to_str().unwrap()]);
    assert!(!info.lines().any(|l| l.starts_with("Title:")), "{info}");
}

#[test]
fn an_overlong_word_is_cut_to_fit_the_page() {
    let dir = Scratch::new("word");
    let out = dir.path("w.pdf");
    let word: String = (0..60).map(|i| format!("{:02}", i)).collect();
    render_markdown_pdf(None, &format!("{word}\n\n`{word}`\n"), &out).unwrap();
    let layout = text_of(&out, false);
    // The 120-digit word does not fit one line: it comes back in pieces that
    // join up to the whole word, on more than one line.
    let lines: Vec<&str> = layout.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(lines.len() >= 4, "{lines:?}");
    let joined: String = layout.split_whitespace().collect();
    assert_eq!(joined, format!("{word}{word}"));
}

#[test]
fn request_answers_output_path_and_bytes_and_replaces_atomically() {
    let dir = Scratch::new("req");
    let out = dir.path("r.pdf");
    std::fs::write(&out, b"old").unwrap();
    let answer = render_pdf_request(&json!({
        "outputPath": out.to_str().unwrap(),
        "title": "Report",
        "content": "\u{FEFF}# Title\n\nBody (Markdown)",
    }))
    .unwrap();
    let len = std::fs::metadata(&out).unwrap().len();
    assert_eq!(answer["outputPath"], json!(out.to_str().unwrap()));
    assert_eq!(answer["bytes"], json!(len));
    assert_eq!(answer["pages"], json!(1));
    assert!(answer.get("missingGlyphs").is_none(), "{answer}");
    assert_eq!(
        dir.entries(),
        vec!["r.pdf".to_string()],
        "leftover temp files"
    );
    let mode = std::fs::metadata(&out).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o644);
    let text = squash(&text_of(&out, false));
    assert!(text.starts_with("Report Title Body (Markdown)"), "{text}");
    assert_eq!(pdfinfo_field(&out, "Title"), "Report");
}

#[test]
fn characters_no_font_has_are_reported_and_the_pdf_is_still_written() {
    let dir = Scratch::new("missing");
    let out = dir.path("m.pdf");
    let answer = render_pdf_request(&json!({
        "outputPath": out.to_str().unwrap(),
        "content": "Private use \u{10FFFD} and \u{10FFFC} here, 한국어 fine.",
    }))
    .unwrap();
    assert_eq!(answer["missingGlyphs"], json!(["\u{10FFFC}", "\u{10FFFD}"]));
    let warning = answer["warning"].as_str().unwrap();
    assert!(
        warning.contains("U+10FFFD") && warning.contains("U+10FFFC"),
        "{warning}"
    );
    assert!(out.exists());
    assert!(squash(&text_of(&out, false)).contains("한국어 fine."));
}

fn err(params: Value) -> String {
    render_pdf_request(&params).expect_err("must be refused")
}

#[test]
fn bad_params_get_clear_errors_and_write_nothing() {
    let dir = Scratch::new("bad");
    let ok_path = dir.path("x.pdf");
    let p = ok_path.to_str().unwrap();
    let cases: Vec<(Value, &str)> = vec![
        (json!("text"), "params must be an object"),
        (json!(null), "params must be an object"),
        (json!({"content": "x"}), "outputPath is required"),
        (
            json!({"outputPath": 7, "content": "x"}),
            "outputPath must be a string",
        ),
        (
            json!({"outputPath": "rel/x.pdf", "content": "x"}),
            "outputPath must be an absolute path",
        ),
        (json!({"outputPath": "/", "content": "x"}), "names no file"),
        (
            json!({"outputPath": format!("{p}/"), "content": "x"}),
            "names no file",
        ),
        (
            json!({"outputPath": "/tmp/a\u{0}b.pdf", "content": "x"}),
            "NUL",
        ),
        (json!({"outputPath": p}), "content is required"),
        (
            json!({"outputPath": p, "content": ["x"]}),
            "content must be a string",
        ),
        (
            json!({"outputPath": p, "content": "x", "title": 3}),
            "title must be a string",
        ),
        (
            json!({"outputPath": p, "content": "x", "title": "t".repeat(5000)}),
            "title is 5000 bytes, more than the limit",
        ),
        (
            json!({"outputPath": p, "content": "x".repeat(MAX_CONTENT_BYTES + 1)}),
            "more than the limit of 4194304 bytes",
        ),
        (
            json!({"outputPath": dir.path("no/such/dir/x.pdf").to_str().unwrap(), "content": "x"}),
            "does not exist",
        ),
        (
            json!({"outputPath": dir.0.path().to_str().unwrap(), "content": "x"}),
            "is a directory",
        ),
    ];
    for (params, want) in cases {
        let e = err(params.clone());
        assert!(e.starts_with("render_pdf: "), "{e}");
        assert!(e.contains(want), "{params:.80}: {e:?} lacks {want:?}");
    }
    assert!(dir.entries().is_empty(), "written: {:?}", dir.entries());
    // A file as the "directory".
    let file = dir.path("plain");
    std::fs::write(&file, b"f").unwrap();
    let e = err(json!({"outputPath": file.join("x.pdf").to_str().unwrap(), "content": "x"}));
    assert!(e.contains("is not a directory"), "{e}");
    assert_eq!(dir.entries(), vec!["plain".to_string()]);
    // A missing directory through the plain Rust API: an error, nothing made.
    let gone = dir.path("gone");
    assert!(render_markdown_pdf(None, "x", &gone.join("x.pdf")).is_err());
    assert!(!gone.exists());
}

#[test]
fn hostile_nesting_renders_without_losing_text() {
    let dir = Scratch::new("deep");
    let out = dir.path("deep.pdf");
    let mut md = format!("{} deepest quote\n\n", ">".repeat(20_000));
    for i in 0..200 {
        md.push_str(&"  ".repeat(i));
        md.push_str(&format!("- level{i}\n"));
    }
    let answer =
        render_pdf_request(&json!({"outputPath": out.to_str().unwrap(), "content": md})).unwrap();
    assert!(answer["bytes"].as_u64().unwrap() > 0);
    let text = squash(&text_of(&out, false));
    assert!(text.contains("deepest quote"), "{text:.200}");
    for i in [0, 30, 199] {
        assert!(text.contains(&format!("level{i}")), "level{i}");
    }
}
