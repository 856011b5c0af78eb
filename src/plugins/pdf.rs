//! The library's default `render_pdf` host capability: Markdown → PDF.
//!
//! A plugin asks its host `host_request` `render_pdf` with
//! `{outputPath, title?, content}` (content is Markdown); the host answers
//! `{outputPath, bytes, pages}` (plus `missingGlyphs` when some characters
//! had no font) or a `host_error` with the message of [`render_pdf_request`].
//!
//! ## How it renders
//! - pulldown-cmark parses the Markdown (CommonMark, no extensions) into a
//!   small block tree: headings, paragraphs, nested bullet and numbered
//!   lists, block quotes, fenced/indented code, horizontal rules. Links and
//!   images are kept as their text; raw HTML is shown as text.
//! - Our own layout wraps words greedily (at spaces, between CJK ideographs,
//!   and inside a word only when it alone is wider than the line), and
//!   paginates onto A4 pages with 56 pt margins.
//! - Text is drawn with krilla's low-level `draw_glyphs`: every character gets
//!   the first face of its style's fallback chain whose cmap has it, each run
//!   of one face is shaped with rustybuzz, and every glyph carries the byte
//!   range of its cluster in the text handed to krilla — which is what makes
//!   the text extractable (copy/paste, `pdftotext`). krilla subsets the fonts
//!   and writes their ToUnicode maps. (krilla's own `draw_text` handles only
//!   one font and one script, so it cannot mix Korean and Latin.)
//!
//! ## Fonts
//! Found at run time among the system fonts (fontdb), by family, in this
//! order: proportional "Noto Sans CJK KR", "NanumGothic", "DejaVu Sans" (with
//! their bold and italic/oblique faces where they exist); monospace
//! "DejaVu Sans Mono", "NanumGothicCoding", "Noto Sans Mono CJK KR". A
//! character none of these has is looked up in every other system font; if
//! no font at all has it, the PDF is still written (with the font's .notdef
//! box) and the answer lists the character under `missingGlyphs`. CJK fonts
//! have no italic faces, so emphasised Korean stays upright. Debian/Ubuntu
//! packages: `fonts-dejavu-core` plus `fonts-nanum` (or `fonts-noto-cjk`).
//!
//! Each font file is read once per process and shared (the Noto CJK
//! collection is ~19 MB and also holds the mono face); the system font list
//! is scanned once, on the first successful render, and kept. The krilla
//! document is `!Send`, so rendering is a plain synchronous function: call it
//! from a blocking thread (`spawn_blocking`), never on a runtime worker.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use krilla::color::rgb;
use krilla::geom::{PathBuilder, Point, Rect};
use krilla::metadata::Metadata;
use krilla::page::PageSettings;
use krilla::paint::Fill;
use krilla::Document;
use serde_json::{json, Value};

use crate::error::{Error, Result, Status};
use crate::shared::fs::{write_atomic, AtomicWrite};

/// Largest Markdown `content` a `render_pdf` request may carry (bytes).
pub const MAX_CONTENT_BYTES: usize = 4 * 1024 * 1024;
/// Largest `title` a `render_pdf` request may carry (bytes).
pub const MAX_TITLE_BYTES: usize = 1024;

/// What a render produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PdfReport {
    /// Size of the written file.
    pub bytes: u64,
    /// Number of pages.
    pub pages: usize,
    /// Characters no installed font covers (drawn as .notdef boxes), in
    /// code-point order, each once.
    pub missing_glyphs: Vec<char>,
}

/// Renders `markdown` (with `title`, when given, as a first heading and as
/// the document title) to a PDF at `output_path`, written atomically (a
/// temporary sibling renamed over the target, mode 0644, fsynced). Returns
/// the number of bytes written. Characters without any font are drawn as
/// boxes; [`render_markdown_pdf_report`] says which.
pub fn render_markdown_pdf(title: Option<&str>, markdown: &str, output_path: &Path) -> Result<u64> {
    render_markdown_pdf_report(title, markdown, output_path).map(|r| r.bytes)
}

/// [`render_markdown_pdf`] with the full report (pages, missing glyphs).
pub fn render_markdown_pdf_report(
    title: Option<&str>,
    markdown: &str,
    output_path: &Path,
) -> Result<PdfReport> {
    let fonts = system_fonts()?;
    // A panic in a dependency must not take the caller's thread down with a
    // plugin's document: it becomes an error, and nothing is written.
    let rendered = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        render_with(&fonts, title, markdown)
    }))
    .unwrap_or_else(|p| {
        let what = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Err(Error::new(
            Status::Panic,
            format!("the PDF renderer failed unexpectedly: {what}"),
        ))
    });
    let (pdf, pages, missing) = rendered?;
    write_atomic(
        output_path,
        &pdf,
        AtomicWrite {
            mode: 0o644,
            durable: true,
            private_dir: false,
        },
    )?;
    Ok(PdfReport {
        bytes: pdf.len() as u64,
        pages,
        missing_glyphs: missing,
    })
}

/// The `render_pdf` host capability: validates `params`
/// (`{outputPath: absolute path string, content: Markdown string, title?:
/// string}`), renders, writes the file atomically, and answers
/// `{outputPath, bytes, pages}` plus `missingGlyphs` (an array of one-character
/// strings) and `warning` when some characters had no font. The `Err` string
/// is the `host_error` message for the plugin. Nothing is written unless the
/// whole render succeeded.
pub fn render_pdf_request(params: &Value) -> std::result::Result<Value, String> {
    let req = validate(params)?;
    let report = render_markdown_pdf_report(req.title.as_deref(), &req.content, &req.output)
        .map_err(|e| format!("render_pdf: {}", e.message))?;
    let mut answer = json!({
        "outputPath": req.output.to_string_lossy(),
        "bytes": report.bytes,
        "pages": report.pages,
    });
    if !report.missing_glyphs.is_empty() {
        let list: Vec<String> = report
            .missing_glyphs
            .iter()
            .map(|c| c.to_string())
            .collect();
        answer["warning"] = json!(format!(
            "no installed font has {} of the characters (drawn as boxes): {}",
            list.len(),
            describe_chars(&report.missing_glyphs)
        ));
        answer["missingGlyphs"] = json!(list);
    }
    Ok(answer)
}

struct Request {
    output: PathBuf,
    title: Option<String>,
    content: String,
}

fn validate(params: &Value) -> std::result::Result<Request, String> {
    let obj = params
        .as_object()
        .ok_or("render_pdf: params must be an object {outputPath, title?, content}")?;
    let output = match obj.get("outputPath") {
        None | Some(Value::Null) => return Err("render_pdf: outputPath is required".into()),
        Some(Value::String(s)) => s.as_str(),
        Some(_) => return Err("render_pdf: outputPath must be a string".into()),
    };
    if output.contains('\0') {
        return Err("render_pdf: outputPath contains a NUL character".into());
    }
    let path = Path::new(output);
    if !path.is_absolute() {
        return Err(format!(
            "render_pdf: outputPath must be an absolute path (got {output:?})"
        ));
    }
    if output.ends_with('/') || path.file_name().is_none() {
        return Err(format!("render_pdf: outputPath {output:?} names no file"));
    }
    let content = match obj.get("content") {
        None | Some(Value::Null) => return Err("render_pdf: content is required".into()),
        Some(Value::String(s)) => s,
        Some(_) => return Err("render_pdf: content must be a string (Markdown)".into()),
    };
    if content.len() > MAX_CONTENT_BYTES {
        return Err(format!(
            "render_pdf: content is {} bytes, more than the limit of {MAX_CONTENT_BYTES} bytes",
            content.len()
        ));
    }
    let title = match obj.get("title") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.len() > MAX_TITLE_BYTES => {
            return Err(format!(
                "render_pdf: title is {} bytes, more than the limit of {MAX_TITLE_BYTES} bytes",
                s.len()
            ))
        }
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err("render_pdf: title must be a string".into()),
    };
    let parent = path.parent().unwrap_or(Path::new("/"));
    match std::fs::metadata(parent) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(format!(
                "render_pdf: {} is not a directory",
                parent.display()
            ))
        }
        Err(_) => {
            return Err(format!(
                "render_pdf: the directory {} does not exist",
                parent.display()
            ))
        }
    }
    if std::fs::metadata(path).is_ok_and(|m| m.is_dir()) {
        return Err(format!("render_pdf: {output} is a directory"));
    }
    Ok(Request {
        output: path.to_path_buf(),
        title,
        content: content.clone(),
    })
}

fn describe_chars(chars: &[char]) -> String {
    let shown: Vec<String> = chars
        .iter()
        .take(40)
        .map(|c| format!("{c} (U+{:04X})", *c as u32))
        .collect();
    let more = chars.len().saturating_sub(40);
    if more > 0 {
        format!("{} and {more} more", shown.join(", "))
    } else {
        shown.join(", ")
    }
}

mod fonts;
mod layout;
mod markdown;

use fonts::{system_fonts, FontSet, LoadedFace};
use layout::{Layout, Op, Shaper, MARGIN, PAGE_H, PAGE_W, TEXT, TITLE_SIZE};
use markdown::{parse_markdown, Span, Style};

// ---------------------------------------------------------------------------
// Rendering

/// Renders to PDF bytes: (pdf, page count, characters without a font).
pub(crate) fn render_with(
    fonts: &FontSet,
    title: Option<&str>,
    markdown: &str,
) -> Result<(Vec<u8>, usize, Vec<char>)> {
    let markdown = markdown.strip_prefix('\u{FEFF}').unwrap_or(markdown);
    let title = title.map(|t| t.trim()).filter(|t| !t.is_empty());
    let chars = title.unwrap_or("").chars().chain(markdown.chars());
    with_shaper(fonts, chars, |shaper, faces| {
        render_pages(shaper, faces, title, markdown)
    })?
}

/// Runs `f` with a shaper over `fonts`, every character of `chars` looked
/// up first.
fn with_shaper<R>(
    fonts: &FontSet,
    chars: impl Iterator<Item = char>,
    f: impl FnOnce(&mut Shaper<'_>, &[Arc<LoadedFace>]) -> R,
) -> Result<R> {
    fonts.prepare(chars.chain("•◦▪.0123456789".chars()));
    let faces: Vec<Arc<LoadedFace>> = fonts
        .faces
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let extra = fonts
        .extra
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let hb = faces
        .iter()
        .map(|f| {
            rustybuzz::Face::from_slice(&f.data, f.index).ok_or_else(|| {
                Error::new(
                    Status::Internal,
                    format!("the font {} no longer parses", f.name),
                )
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let mut shaper = Shaper {
        hb,
        chains: &fonts.chains,
        extra,
        memo: HashMap::new(),
        missing: BTreeSet::new(),
    };
    Ok(f(&mut shaper, &faces))
}

fn layout_pages(shaper: &mut Shaper<'_>, title: Option<&str>, markdown: &str) -> Vec<Vec<Op>> {
    let blocks = parse_markdown(markdown);
    let mut layout = Layout::new(shaper);
    let width = PAGE_W - 2.0 * MARGIN;
    if let Some(t) = title {
        let spans = [Span {
            text: t.to_string(),
            style: Style::default(),
        }];
        layout.heading(&spans, TITLE_SIZE, MARGIN, width);
        layout.gap(6.0);
    }
    layout.blocks(&blocks, MARGIN, width, TEXT);
    std::mem::take(&mut layout.pages)
}

fn render_pages(
    shaper: &mut Shaper<'_>,
    faces: &[Arc<LoadedFace>],
    title: Option<&str>,
    markdown: &str,
) -> Result<(Vec<u8>, usize, Vec<char>)> {
    let pages = layout_pages(shaper, title, markdown);
    let page_count = pages.len();

    let mut doc = Document::new();
    let mut meta = Metadata::new().creator("qwen-companion".to_string());
    if let Some(t) = title {
        meta = meta.title(t.to_string());
    }
    doc.set_metadata(meta);
    let settings = PageSettings::from_wh(PAGE_W, PAGE_H)
        .ok_or_else(|| Error::new(Status::Internal, "bad page size"))?;
    for ops in pages {
        let mut page = doc.start_page_with(settings.clone());
        let mut surface = page.surface();
        for op in ops {
            match op {
                Op::Rect { x, y, w, h, gray } => {
                    let Some(rect) = Rect::from_xywh(x, y, w, h) else {
                        continue;
                    };
                    let mut pb = PathBuilder::new();
                    pb.push_rect(rect);
                    if let Some(path) = pb.finish() {
                        surface.set_fill(Some(fill(rgb::Color::new(gray, gray, gray))));
                        surface.draw_path(&path);
                    }
                }
                Op::Text { x, y, run } => {
                    if run.glyphs.is_empty() {
                        continue;
                    }
                    let (r, g, b) = run.color;
                    surface.set_fill(Some(fill(rgb::Color::new(r, g, b))));
                    surface.draw_glyphs(
                        Point::from_xy(x, y),
                        &run.glyphs,
                        faces[run.face].font.clone(),
                        &run.text,
                        run.size,
                        false,
                    );
                }
            }
        }
        surface.finish();
        page.finish();
    }
    let pdf = doc
        .finish()
        .map_err(|e| Error::new(Status::Internal, format!("PDF serialisation failed: {e:?}")))?;
    let missing = std::mem::take(&mut shaper.missing);
    Ok((pdf, page_count, missing.into_iter().collect()))
}

fn fill(color: rgb::Color) -> Fill {
    Fill {
        paint: color.into(),
        ..Fill::default()
    }
}
