//! Shaping (per-character font fallback, rustybuzz), line breaking and
//! pagination into drawing operations.

use std::collections::{BTreeSet, HashMap};

use krilla::text::{GlyphId, KrillaGlyph};

use super::fonts::Face;
use super::markdown::{Block, Span, Style};

pub(super) const PAGE_W: f32 = 595.276;
pub(super) const PAGE_H: f32 = 841.89;
pub(super) const MARGIN: f32 = 56.0;
pub(super) const BODY_SIZE: f32 = 11.0;
pub(super) const CODE_SIZE: f32 = 9.0;
pub(super) const TITLE_SIZE: f32 = 24.0;
pub(super) const HEADING_SIZES: [f32; 6] = [20.0, 17.0, 14.5, 13.0, 12.0, 11.0];
pub(super) const LINE_FACTOR: f32 = 1.45;
pub(super) const BULLETS: [&str; 3] = ["•", "◦", "▪"];

pub(super) type Color = (u8, u8, u8);
pub(super) const TEXT: Color = (0x1a, 0x1a, 0x1a);
pub(super) const LINK: Color = (0x1a, 0x55, 0xb0);
pub(super) const QUOTE_TEXT: Color = (0x50, 0x50, 0x50);
pub(super) const CODE_BG: u8 = 0xf0;
pub(super) const QUOTE_BAR: u8 = 0xc8;
pub(super) const RULE: u8 = 0xb4;

/// A shaped run: one face, one size, one colour.
#[derive(Clone)]
pub(super) struct Run {
    pub(super) face: usize,
    pub(super) size: f32,
    pub(super) color: Color,
    pub(super) code_bg: bool,
    pub(super) text: String,
    pub(super) glyphs: Vec<KrillaGlyph>,
    pub(super) width: f32,
}

pub(super) struct Shaper<'a> {
    pub(super) hb: Vec<rustybuzz::Face<'a>>,
    pub(super) chains: &'a [Vec<usize>; 5],
    pub(super) extra: HashMap<char, Option<usize>>,
    pub(super) memo: HashMap<(Face, char), Option<usize>>,
    pub(super) missing: BTreeSet<char>,
}

pub(super) fn is_ignorable(c: char) -> bool {
    use unicode_general_category::{get_general_category, GeneralCategory};
    get_general_category(c) == GeneralCategory::Format
        || ('\u{FE00}'..='\u{FE0F}').contains(&c)
        || ('\u{E0100}'..='\u{E01EF}').contains(&c)
}

/// Whether a line may break after `c` without a space (CJK ideographs,
/// kana and CJK punctuation; Korean breaks at spaces).
pub(super) fn breaks_after(c: char) -> bool {
    matches!(c as u32,
        0x2E80..=0x2FFF | 0x3000..=0x303F | 0x3040..=0x30FF | 0x3400..=0x4DBF
        | 0x4E00..=0x9FFF | 0xF900..=0xFAFF | 0xFF01..=0xFF60 | 0x20000..=0x3FFFF)
}

impl<'a> Shaper<'a> {
    /// The face that draws `c` in `style`; `None` drops the character
    /// (controls, and invisible format characters no font has).
    pub(super) fn face_for(&mut self, style: Face, c: char) -> Option<usize> {
        if let Some(r) = self.memo.get(&(style, c)) {
            return *r;
        }
        let chain = &self.chains[style as usize];
        let r = if c.is_control() {
            None
        } else if let Some(&i) = chain.iter().find(|&&i| self.hb[i].glyph_index(c).is_some()) {
            Some(i)
        } else if let Some(Some(i)) = self.extra.get(&c) {
            Some(*i)
        } else if is_ignorable(c) {
            None
        } else {
            if !c.is_whitespace() {
                self.missing.insert(c);
            }
            chain.first().copied()
        };
        self.memo.insert((style, c), r);
        r
    }

    pub(super) fn shape(
        &self,
        face: usize,
        size: f32,
        color: Color,
        code_bg: bool,
        text: String,
    ) -> Run {
        let hb = &self.hb[face];
        let upem = hb.units_per_em() as f32;
        let mut buf = rustybuzz::UnicodeBuffer::new();
        buf.push_str(&text);
        buf.guess_segment_properties();
        let out = rustybuzz::shape(hb, &[], buf);
        let infos = out.glyph_infos();
        let positions = out.glyph_positions();
        let mut starts: Vec<usize> = infos.iter().map(|i| i.cluster as usize).collect();
        starts.sort_unstable();
        starts.dedup();
        let mut width = 0.0;
        let glyphs = infos
            .iter()
            .zip(positions)
            .map(|(info, pos)| {
                let start = info.cluster as usize;
                let end = match starts.binary_search(&start) {
                    Ok(k) => starts.get(k + 1).copied().unwrap_or(text.len()),
                    Err(_) => text.len(),
                };
                width += pos.x_advance as f32 / upem;
                KrillaGlyph::new(
                    GlyphId::new(info.glyph_id),
                    pos.x_advance as f32 / upem,
                    pos.x_offset as f32 / upem,
                    pos.y_offset as f32 / upem,
                    pos.y_advance as f32 / upem,
                    start..end,
                    None,
                )
            })
            .collect();
        Run {
            face,
            size,
            color,
            code_bg,
            text,
            glyphs,
            width: width * size,
        }
    }

    /// `text` in `style` split into runs of one face each and shaped.
    pub(super) fn runs(
        &mut self,
        text: &str,
        style: Face,
        size: f32,
        color: Color,
        code_bg: bool,
    ) -> Vec<Run> {
        let mut parts: Vec<(usize, String)> = Vec::new();
        for c in text.chars() {
            let Some(face) = self.face_for(style, c) else {
                continue;
            };
            match parts.last_mut() {
                Some((f, s)) if *f == face => s.push(c),
                // Spaces and marks stay in the current face when it has them.
                Some((f, s))
                    if (c == ' ' || is_mark(c)) && self.hb[*f].glyph_index(c).is_some() =>
                {
                    s.push(c)
                }
                _ => parts.push((face, c.to_string())),
            }
        }
        parts
            .into_iter()
            .map(|(f, s)| self.shape(f, size, color, code_bg, s))
            .collect()
    }
}

pub(super) fn is_mark(c: char) -> bool {
    use unicode_general_category::{get_general_category, GeneralCategory};
    matches!(
        get_general_category(c),
        GeneralCategory::NonspacingMark
            | GeneralCategory::SpacingMark
            | GeneralCategory::EnclosingMark
    )
}

/// Splits `run` so that the head is at most `max_w` wide (at a cluster
/// boundary, at least one cluster). `None` when it cannot be split
/// (it fits, is one cluster, or its clusters are not in logical order).
pub(super) fn split_run(run: &Run, max_w: f32) -> Option<(Run, Run)> {
    let mut acc = 0.0;
    let mut cut = None;
    for (k, g) in run.glyphs.iter().enumerate() {
        if k > 0 && run.glyphs[k - 1].text_range.start > g.text_range.start {
            return None;
        }
        let w = g.x_advance * run.size;
        if acc + w > max_w && k > 0 && g.text_range.start > 0 {
            cut = Some(k);
            break;
        }
        acc += w;
    }
    let k = match cut {
        Some(k) => k,
        // Even the first cluster is too wide: cut after it.
        None if acc > max_w => run.glyphs.iter().position(|g| g.text_range.start > 0)?,
        None => return None,
    };
    let offset = run.glyphs[k].text_range.start;
    let head_glyphs = run.glyphs[..k].to_vec();
    let tail_glyphs: Vec<KrillaGlyph> = run.glyphs[k..]
        .iter()
        .map(|g| {
            let mut g = g.clone();
            g.text_range = g.text_range.start - offset..g.text_range.end - offset;
            g
        })
        .collect();
    let w = |gs: &[KrillaGlyph]| gs.iter().map(|g| g.x_advance).sum::<f32>() * run.size;
    let head = Run {
        text: run.text[..offset].to_string(),
        width: w(&head_glyphs),
        glyphs: head_glyphs,
        ..run.clone()
    };
    let tail = Run {
        text: run.text[offset..].to_string(),
        width: w(&tail_glyphs),
        glyphs: tail_glyphs,
        ..run.clone()
    };
    Some((head, tail))
}

// ---------------------------------------------------------------------------
// Line breaking

pub(super) enum Atom {
    Word(Vec<Run>),
    Space(Run),
    Break,
}

pub(super) fn width_of(runs: &[Run]) -> f32 {
    runs.iter().map(|r| r.width).sum()
}

pub(super) struct Line {
    /// Runs with their x offset from the line start.
    pub(super) pieces: Vec<(f32, Run)>,
}

impl<'a> Shaper<'a> {
    pub(super) fn atoms(&mut self, spans: &[Span], size: f32, color: Color) -> Vec<Atom> {
        let mut atoms = Vec::new();
        // The word being built: (face style, size, colour, code) + text parts.
        let mut word: Vec<(Face, f32, Color, bool, String)> = Vec::new();
        let flush = |sh: &mut Self,
                     word: &mut Vec<(Face, f32, Color, bool, String)>,
                     atoms: &mut Vec<Atom>| {
            if word.is_empty() {
                return;
            }
            let mut runs = Vec::new();
            for (style, size, color, code, text) in word.drain(..) {
                runs.extend(sh.runs(&text, style, size, color, code));
            }
            if !runs.is_empty() {
                atoms.push(Atom::Word(runs));
            }
        };
        for span in spans {
            let style = span.style.face();
            let size = if span.style.code { size * 0.9 } else { size };
            let color = if span.style.link { LINK } else { color };
            let code = span.style.code;
            for c in span.text.chars() {
                if c == '\n' {
                    flush(self, &mut word, &mut atoms);
                    atoms.push(Atom::Break);
                } else if c.is_whitespace() {
                    flush(self, &mut word, &mut atoms);
                    if !matches!(
                        atoms.last(),
                        Some(Atom::Space(_)) | None | Some(Atom::Break)
                    ) {
                        if let Some(r) = self.runs(" ", style, size, color, code).pop() {
                            atoms.push(Atom::Space(r));
                        }
                    }
                } else {
                    match word.last_mut() {
                        Some((s, z, col, cd, t))
                            if *s == style && *z == size && *col == color && *cd == code =>
                        {
                            t.push(c)
                        }
                        _ => word.push((style, size, color, code, c.to_string())),
                    }
                    if breaks_after(c) {
                        flush(self, &mut word, &mut atoms);
                    }
                }
            }
        }
        flush(self, &mut word, &mut atoms);
        atoms
    }
}

/// Greedy line filling. A word wider than the whole line is cut at a
/// cluster boundary.
pub(super) fn wrap(atoms: Vec<Atom>, max_w: f32) -> Vec<Line> {
    let mut lines = Vec::new();
    let mut line: Vec<(f32, Run)> = Vec::new();
    let mut x = 0.0;
    let mut space: Option<Run> = None;
    let mut queue: std::collections::VecDeque<Atom> = atoms.into();
    while let Some(atom) = queue.pop_front() {
        match atom {
            Atom::Break => {
                lines.push(Line {
                    pieces: std::mem::take(&mut line),
                });
                x = 0.0;
                space = None;
            }
            Atom::Space(r) => {
                if !line.is_empty() {
                    space = Some(r);
                }
            }
            Atom::Word(runs) => {
                let w = width_of(&runs);
                let sw = space.as_ref().map_or(0.0, |s| s.width);
                if !line.is_empty() && x + sw + w > max_w {
                    lines.push(Line {
                        pieces: std::mem::take(&mut line),
                    });
                    x = 0.0;
                    space = None;
                    queue.push_front(Atom::Word(runs));
                    continue;
                }
                if line.is_empty() && w > max_w {
                    if let Some((head, tail)) = split_word(runs.clone(), max_w) {
                        queue.push_front(Atom::Word(tail));
                        queue.push_front(Atom::Break);
                        queue.push_front(Atom::Word(head));
                        continue;
                    }
                }
                if let Some(s) = space.take() {
                    let sw = s.width;
                    line.push((x, s));
                    x += sw;
                }
                for r in runs {
                    let rw = r.width;
                    line.push((x, r));
                    x += rw;
                }
            }
        }
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(Line { pieces: line });
    }
    lines
}

pub(super) fn split_word(runs: Vec<Run>, max_w: f32) -> Option<(Vec<Run>, Vec<Run>)> {
    let mut head = Vec::new();
    let mut acc = 0.0;
    let mut iter = runs.into_iter();
    while let Some(r) = iter.next() {
        if acc + r.width <= max_w {
            acc += r.width;
            head.push(r);
            continue;
        }
        let mut tail = Vec::new();
        match split_run(&r, max_w - acc) {
            Some((h, t)) => {
                head.push(h);
                tail.push(t);
            }
            None if !head.is_empty() => tail.push(r),
            None => return None,
        }
        tail.extend(iter);
        return Some((head, tail));
    }
    None
}

// ---------------------------------------------------------------------------
// Pages

pub(super) enum Op {
    Text {
        x: f32,
        y: f32,
        run: Run,
    },
    Rect {
        x: f32,
        y: f32,
        w: f32,
        h: f32,
        gray: u8,
    },
}

pub(super) struct Layout<'s, 'a> {
    pub(super) sh: &'s mut Shaper<'a>,
    pub(super) pages: Vec<Vec<Op>>,
    pub(super) y: f32,
    /// x of each open block quote's bar.
    pub(super) bars: Vec<f32>,
    /// A list marker waiting for the first line of its item, right-aligned
    /// at the given x.
    pub(super) marker: Option<(Vec<Run>, f32)>,
    pub(super) list_depth: usize,
}

pub(super) const BOTTOM: f32 = PAGE_H - MARGIN;
/// Narrowest text column nesting may leave.
pub(super) const MIN_COLUMN: f32 = 120.0;

impl<'s, 'a> Layout<'s, 'a> {
    pub(super) fn new(sh: &'s mut Shaper<'a>) -> Self {
        Layout {
            sh,
            pages: vec![Vec::new()],
            y: MARGIN,
            bars: Vec::new(),
            marker: None,
            list_depth: 0,
        }
    }

    pub(super) fn ops(&mut self) -> &mut Vec<Op> {
        self.pages.last_mut().expect("at least one page")
    }

    /// Starts a new page unless `h` more points fit on this one (a block
    /// taller than a page starts at the top of one and is cut at its lines).
    pub(super) fn ensure(&mut self, h: f32) {
        if self.y + h > BOTTOM && self.y > MARGIN {
            self.pages.push(Vec::new());
            self.y = MARGIN;
        }
    }

    /// Vertical space, dropped at the top of a page.
    pub(super) fn gap(&mut self, h: f32) {
        if self.y > MARGIN {
            self.y = (self.y + h).min(BOTTOM);
        }
    }

    pub(super) fn rect(&mut self, x: f32, y: f32, w: f32, h: f32, gray: u8) {
        if w > 0.0 && h > 0.0 {
            self.ops().push(Op::Rect { x, y, w, h, gray });
        }
    }

    /// Places one line of `line_h` at the cursor: backgrounds, quote bars,
    /// the pending list marker, then the text (adjacent runs of one face
    /// merged into one text object so that spaces are extractable).
    pub(super) fn emit(&mut self, line: Line, x0: f32, line_h: f32, ascent: f32) {
        self.ensure(line_h);
        let top = self.y;
        let baseline = top + ascent;
        for i in 0..self.bars.len() {
            let bx = self.bars[i];
            self.rect(bx, top, 2.5, line_h, QUOTE_BAR);
        }
        for (x, r) in &line.pieces {
            if r.code_bg {
                let (rx, rw) = (x0 + x - 1.0, r.width + 2.0);
                self.rect(rx, baseline - r.size * 0.92, rw, r.size * 1.22, CODE_BG);
            }
        }
        if let Some((runs, right)) = self.marker.take() {
            let mut x = right - width_of(&runs);
            for r in runs {
                let w = r.width;
                self.ops().push(Op::Text {
                    x,
                    y: baseline,
                    run: r,
                });
                x += w;
            }
        }
        let mut merged: Vec<(f32, Run)> = Vec::new();
        for (x, r) in line.pieces {
            if let Some((mx, m)) = merged.last_mut() {
                if m.face == r.face
                    && m.size == r.size
                    && m.color == r.color
                    && (*mx + m.width - x).abs() < 0.01
                {
                    let off = m.text.len();
                    m.text.push_str(&r.text);
                    m.glyphs.extend(r.glyphs.into_iter().map(|mut g| {
                        g.text_range = g.text_range.start + off..g.text_range.end + off;
                        g
                    }));
                    m.width += r.width;
                    continue;
                }
            }
            merged.push((x, r));
        }
        for (x, run) in merged {
            self.ops().push(Op::Text {
                x: x0 + x,
                y: baseline,
                run,
            });
        }
        self.y = top + line_h;
    }

    pub(super) fn inline(&mut self, spans: &[Span], size: f32, color: Color, x0: f32, width: f32) {
        let atoms = self.sh.atoms(spans, size, color);
        let lines = wrap(atoms, width);
        let line_h = size * LINE_FACTOR;
        for line in lines {
            self.emit(line, x0, line_h, size * 1.08);
        }
    }

    pub(super) fn blocks(&mut self, blocks: &[Block], x0: f32, width: f32, color: Color) {
        for (i, b) in blocks.iter().enumerate() {
            let last = i + 1 == blocks.len();
            self.block(b, x0, width, color, last);
        }
    }

    pub(super) fn block(&mut self, block: &Block, x0: f32, width: f32, color: Color, last: bool) {
        let para_gap = if self.list_depth > 0 { 3.0 } else { 7.0 };
        match block {
            Block::Heading(level, spans) => {
                let size = HEADING_SIZES[(*level as usize).clamp(1, 6) - 1];
                self.heading(spans, size, x0, width);
            }
            Block::Para(spans) => {
                self.inline(spans, BODY_SIZE, color, x0, width);
                if !last || self.list_depth == 0 {
                    self.gap(para_gap);
                }
            }
            Block::Code(text) => {
                self.code(text, x0, width);
                self.gap(para_gap + 2.0);
            }
            Block::Quote(inner) => {
                // Never narrower than a usable column.
                let ind = if width - 14.0 >= MIN_COLUMN {
                    14.0
                } else {
                    0.0
                };
                self.bars.push(x0 + 2.0);
                self.blocks(inner, x0 + ind, width - ind, QUOTE_TEXT);
                self.bars.pop();
                self.gap(para_gap);
            }
            Block::List { start, items } => {
                self.list(*start, items, x0, width, color);
                if self.list_depth == 0 {
                    self.gap(para_gap);
                }
            }
            Block::Rule => {
                self.gap(6.0);
                self.ensure(8.0);
                let y = self.y + 3.5;
                self.rect(x0, y, width, 0.8, RULE);
                self.y += 8.0;
                self.gap(6.0);
            }
        }
    }

    pub(super) fn heading(&mut self, spans: &[Span], size: f32, x0: f32, width: f32) {
        self.gap(size * 0.7);
        // Keep a heading with (about) the first line after it.
        self.ensure(size * LINE_FACTOR + BODY_SIZE * LINE_FACTOR * 2.0);
        let bold: Vec<Span> = spans
            .iter()
            .map(|s| Span {
                text: s.text.clone(),
                style: Style {
                    bold: true,
                    ..s.style
                },
            })
            .collect();
        self.inline(&bold, size, TEXT, x0, width);
        self.gap(size * 0.3);
    }

    pub(super) fn list(
        &mut self,
        start: Option<u64>,
        items: &[Vec<Block>],
        x0: f32,
        width: f32,
        color: Color,
    ) {
        let depth = self.list_depth;
        let markers: Vec<String> = (0..items.len())
            .map(|i| match start {
                Some(n) => format!("{}.", n.saturating_add(i as u64)),
                None => BULLETS[depth % BULLETS.len()].to_string(),
            })
            .collect();
        let marker_runs: Vec<Vec<Run>> = markers
            .iter()
            .map(|m| self.sh.runs(m, Face::Regular, BODY_SIZE, color, false))
            .collect();
        let widest = marker_runs.iter().map(|r| width_of(r)).fold(0.0, f32::max);
        let indent = (widest + 6.0).max(18.0);
        let indent = if width - indent >= MIN_COLUMN {
            indent
        } else {
            0.0
        };
        self.list_depth += 1;
        for (item, runs) in items.iter().zip(marker_runs) {
            self.marker = Some((runs, x0 + indent - 5.0));
            if item.is_empty() {
                self.emit(
                    Line { pieces: Vec::new() },
                    x0 + indent,
                    BODY_SIZE * LINE_FACTOR,
                    BODY_SIZE * 1.08,
                );
            }
            self.blocks(item, x0 + indent, width - indent, color);
            // An item that began with a nested list or a rule: drop the marker.
            self.marker = None;
            self.gap(2.0);
        }
        self.list_depth -= 1;
    }

    pub(super) fn code(&mut self, text: &str, x0: f32, width: f32) {
        let pad = 6.0;
        let line_h = CODE_SIZE * 1.4;
        let text = text.strip_suffix('\n').unwrap_or(text);
        let mut rows: Vec<Line> = Vec::new();
        for src in text.split('\n') {
            let expanded = expand_tabs(src.strip_suffix('\r').unwrap_or(src));
            let runs = self.sh.runs(&expanded, Face::Mono, CODE_SIZE, TEXT, false);
            let atoms = if runs.is_empty() {
                Vec::new()
            } else {
                vec![Atom::Word(runs)]
            };
            rows.extend(wrap(atoms, width - 2.0 * pad));
        }
        let n = rows.len();
        for (i, row) in rows.into_iter().enumerate() {
            let top_pad = if i == 0 { pad } else { 0.0 };
            let bottom_pad = if i + 1 == n { pad } else { 0.0 };
            let h = top_pad + line_h + bottom_pad;
            self.ensure(h);
            let y = self.y;
            self.rect(x0, y, width, h, CODE_BG);
            self.y += top_pad;
            self.emit(row, x0 + pad, line_h, CODE_SIZE * 1.05);
            self.y += bottom_pad;
        }
    }
}

pub(super) fn expand_tabs(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut col = 0;
    for c in s.chars() {
        if c == '\t' {
            let n = 4 - col % 4;
            out.extend(std::iter::repeat_n(' ', n));
            col += n;
        } else {
            out.push(c);
            col += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests;
