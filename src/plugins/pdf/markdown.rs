//! Markdown → a small block tree (pulldown-cmark events folded up).

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

use super::fonts::Face;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Style {
    pub(super) bold: bool,
    pub(super) italic: bool,
    pub(super) code: bool,
    pub(super) link: bool,
}

impl Style {
    pub(super) fn face(self) -> Face {
        match (self.code, self.bold, self.italic) {
            (true, _, _) => Face::Mono,
            (false, true, true) => Face::BoldItalic,
            (false, true, false) => Face::Bold,
            (false, false, true) => Face::Italic,
            (false, false, false) => Face::Regular,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Span {
    pub(super) text: String,
    pub(super) style: Style,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Block {
    Heading(u8, Vec<Span>),
    Para(Vec<Span>),
    Code(String),
    Quote(Vec<Block>),
    List {
        start: Option<u64>,
        items: Vec<Vec<Block>>,
    },
    Rule,
}

pub(super) enum Frame {
    Blocks(Vec<Block>),
    Quote(Vec<Block>),
    List {
        start: Option<u64>,
        items: Vec<Vec<Block>>,
    },
    Item(Vec<Block>),
}

impl Frame {
    pub(super) fn blocks(&mut self) -> &mut Vec<Block> {
        match self {
            Frame::Blocks(b) | Frame::Quote(b) | Frame::Item(b) => b,
            // Blocks directly inside a list (never produced by the parser,
            // whose lists hold items only) go into a new item.
            Frame::List { items, .. } => {
                if items.is_empty() {
                    items.push(Vec::new());
                }
                items.last_mut().expect("just pushed")
            }
        }
    }
}

pub(super) struct TreeBuilder {
    pub(super) stack: Vec<Frame>,
    /// The open inline container: `Some(level)` for a heading, `None` for a
    /// paragraph, with its spans.
    pub(super) inline: Option<(Option<u8>, Vec<Span>)>,
    pub(super) code: Option<String>,
    pub(super) bold: u32,
    pub(super) italic: u32,
    pub(super) link: u32,
    /// Quote/list/item levels beyond [`MAX_NESTING`] that were flattened
    /// into the deepest kept level (bounded depth: no recursion blow-up on
    /// hostile input such as 100 000 nested `>`).
    pub(super) flattened: u32,
}

/// Deepest stack of block containers kept (a list level is two: list + item).
pub(super) const MAX_NESTING: usize = 24;

pub(super) fn parse_markdown(markdown: &str) -> Vec<Block> {
    let mut b = TreeBuilder {
        stack: vec![Frame::Blocks(Vec::new())],
        inline: None,
        code: None,
        bold: 0,
        italic: 0,
        link: 0,
        flattened: 0,
    };
    for ev in Parser::new_ext(markdown, Options::empty()) {
        b.event(ev);
    }
    b.flush_inline();
    if let Some(code) = b.code.take() {
        b.push_block(Block::Code(code));
    }
    while b.stack.len() > 1 {
        b.close_frame();
    }
    match b.stack.pop() {
        Some(Frame::Blocks(blocks)) => blocks,
        _ => Vec::new(),
    }
}

impl TreeBuilder {
    pub(super) fn style(&self, code: bool) -> Style {
        Style {
            bold: self.bold > 0,
            italic: self.italic > 0,
            code,
            link: self.link > 0,
        }
    }

    pub(super) fn push_text(&mut self, text: &str, code: bool) {
        if let Some(c) = self.code.as_mut() {
            c.push_str(text);
            return;
        }
        let style = self.style(code);
        let spans = &mut self.inline.get_or_insert_with(|| (None, Vec::new())).1;
        match spans.last_mut() {
            Some(last) if last.style == style => last.text.push_str(text),
            _ => spans.push(Span {
                text: text.to_string(),
                style,
            }),
        }
    }

    pub(super) fn flush_inline(&mut self) {
        if let Some((level, spans)) = self.inline.take() {
            if spans.iter().any(|s| !s.text.trim().is_empty()) || level.is_some() {
                self.push_block(match level {
                    Some(l) => Block::Heading(l, spans),
                    None => Block::Para(spans),
                });
            }
        }
    }

    pub(super) fn push_block(&mut self, block: Block) {
        if let Some(top) = self.stack.last_mut() {
            top.blocks().push(block);
        }
    }

    pub(super) fn close_frame(&mut self) {
        self.flush_inline();
        let block = match self.stack.pop() {
            Some(Frame::Quote(b)) => Some(Block::Quote(b)),
            Some(Frame::List { start, items }) => Some(Block::List { start, items }),
            Some(Frame::Item(blocks)) => {
                if let Some(Frame::List { items, .. }) = self.stack.last_mut() {
                    items.push(blocks);
                    None
                } else {
                    Some(Block::Quote(blocks))
                }
            }
            Some(f @ Frame::Blocks(_)) => {
                self.stack.push(f);
                None
            }
            None => None,
        };
        if let Some(b) = block {
            self.push_block(b);
        }
    }

    fn too_deep(&self) -> bool {
        self.flattened > 0 || self.stack.len() > MAX_NESTING
    }

    pub(super) fn event(&mut self, ev: Event<'_>) {
        match ev {
            Event::Start(tag) => match tag {
                Tag::Paragraph => self.flush_inline(),
                Tag::Heading { level, .. } => {
                    self.flush_inline();
                    self.inline = Some((Some(level as u8), Vec::new()));
                }
                Tag::BlockQuote(_) | Tag::List(_) | Tag::Item if self.too_deep() => {
                    self.flush_inline();
                    self.flattened += 1;
                }
                Tag::BlockQuote(_) => {
                    self.flush_inline();
                    self.stack.push(Frame::Quote(Vec::new()));
                }
                Tag::CodeBlock(_) => {
                    self.flush_inline();
                    self.code = Some(String::new());
                }
                Tag::List(start) => {
                    self.flush_inline();
                    self.stack.push(Frame::List {
                        start,
                        items: Vec::new(),
                    });
                }
                Tag::Item => {
                    self.flush_inline();
                    self.stack.push(Frame::Item(Vec::new()));
                }
                Tag::Emphasis => self.italic += 1,
                Tag::Strong => self.bold += 1,
                Tag::Link { .. } => self.link += 1,
                Tag::HtmlBlock => self.flush_inline(),
                _ => {}
            },
            Event::End(tag) => match tag {
                TagEnd::Paragraph | TagEnd::Heading(_) | TagEnd::HtmlBlock => self.flush_inline(),
                TagEnd::CodeBlock => {
                    if let Some(code) = self.code.take() {
                        self.push_block(Block::Code(code));
                    }
                }
                TagEnd::BlockQuote(_) | TagEnd::List(_) | TagEnd::Item if self.flattened > 0 => {
                    self.flush_inline();
                    self.flattened -= 1;
                }
                TagEnd::BlockQuote(_) | TagEnd::List(_) | TagEnd::Item => self.close_frame(),
                TagEnd::Emphasis => self.italic = self.italic.saturating_sub(1),
                TagEnd::Strong => self.bold = self.bold.saturating_sub(1),
                TagEnd::Link => self.link = self.link.saturating_sub(1),
                _ => {}
            },
            Event::Text(t) | Event::Html(t) | Event::InlineHtml(t) => self.push_text(&t, false),
            Event::InlineMath(t) | Event::DisplayMath(t) => self.push_text(&t, false),
            Event::FootnoteReference(t) => self.push_text(&format!("[{t}]"), false),
            Event::Code(t) => self.push_text(&t, true),
            Event::SoftBreak => self.push_text(" ", false),
            Event::HardBreak => self.push_text("\n", false),
            Event::Rule => {
                self.flush_inline();
                self.push_block(Block::Rule);
            }
            Event::TaskListMarker(done) => {
                self.push_text(if done { "[x] " } else { "[ ] " }, false)
            }
        }
    }
}

#[cfg(test)]
mod tests;
