use super::super::fonts::system_fonts;
use super::super::{layout_pages, with_shaper};
use super::*;

fn words_of(lines: &[Line]) -> Vec<String> {
    let text: String = lines
        .iter()
        .map(|l| {
            l.pieces
                .iter()
                .map(|(_, r)| r.text.as_str())
                .collect::<String>()
                + " "
        })
        .collect();
    text.split_whitespace().map(String::from).collect()
}

#[test]
fn each_character_gets_the_first_face_that_has_it() {
    let fonts = system_fonts().unwrap();
    with_shaper(&fonts, "a가".chars(), |sh, faces| {
        let mut name = |style, c| sh.face_for(style, c).map(|i| faces[i].name.clone());
        let slanted = |n: &str| n.contains("Oblique") || n.contains("Italic");
        let korean = |n: &str| n.contains("Nanum") || n.contains("CJK");
        let italic_latin = name(Face::Italic, 'a').unwrap();
        assert!(slanted(&italic_latin), "{italic_latin}");
        // CJK fonts have no italic: emphasised Korean stays upright.
        let italic_korean = name(Face::Italic, '가').unwrap();
        assert!(
            korean(&italic_korean) && !slanted(&italic_korean),
            "{italic_korean}"
        );
        let bold_korean = name(Face::Bold, '가').unwrap();
        assert!(
            korean(&bold_korean) && bold_korean.contains("Bold"),
            "{bold_korean}"
        );
        let regular_korean = name(Face::Regular, '가').unwrap();
        assert!(korean(&regular_korean) && !regular_korean.contains("Bold"));
        let mono = name(Face::Mono, 'x').unwrap();
        assert!(mono.contains("Mono") || mono.contains("Coding"), "{mono}");
        // Controls and invisible format characters are dropped, not
        // reported; a character no font has is drawn with the first
        // face and reported.
        assert_eq!(name(Face::Regular, '\u{7}'), None);
        assert_eq!(name(Face::Regular, '\u{E0041}'), None);
        assert!(name(Face::Regular, '\u{10FFFD}').is_some());
        assert_eq!(
            sh.missing.iter().copied().collect::<Vec<_>>(),
            vec!['\u{10FFFD}']
        );
    })
    .unwrap();
}

#[test]
fn lines_fit_the_width_and_keep_every_word_in_order() {
    let fonts = system_fonts().unwrap();
    let text =
        "The quick brown fox 다람쥐 헌 쳇바퀴에 타고파 jumps over **the** lazy dog. ".repeat(12);
    with_shaper(&fonts, text.chars(), |sh, _| {
        let spans = [Span {
            text: text.clone(),
            style: Style::default(),
        }];
        let atoms = sh.atoms(&spans, 11.0, TEXT);
        let lines = wrap(atoms, 200.0);
        assert!(lines.len() > 10, "{} lines", lines.len());
        for l in &lines {
            let (x, r) = l.pieces.last().unwrap();
            let end = x + r.width;
            // A trailing space may hang over; the words may not.
            let words_end = if r.text.trim().is_empty() { *x } else { end };
            assert!(words_end <= 200.01, "line ends at {words_end}");
            // Pieces are laid left to right without overlap.
            for w in l.pieces.windows(2) {
                assert!((w[0].0 + w[0].1.width - w[1].0).abs() < 0.01);
            }
        }
        let want: Vec<String> = text.split_whitespace().map(String::from).collect();
        assert_eq!(words_of(&lines), want);
    })
    .unwrap();
}

#[test]
fn an_overlong_word_is_cut_at_cluster_boundaries() {
    let fonts = system_fonts().unwrap();
    let word = "abcdefghij".repeat(20);
    with_shaper(&fonts, word.chars(), |sh, _| {
        let runs = sh.runs(&word, Face::Mono, 9.0, TEXT, false);
        let lines = wrap(vec![Atom::Word(runs)], 100.0);
        assert!(lines.len() > 5);
        let mut joined = String::new();
        for l in &lines {
            for (x, r) in &l.pieces {
                assert!(x + r.width <= 100.01);
                for g in &r.glyphs {
                    assert!(
                        g.text_range.end <= r.text.len() && g.text_range.start < g.text_range.end
                    );
                }
                joined.push_str(&r.text);
            }
        }
        assert_eq!(joined, word);
        // CJK ideographs break between characters without spaces.
        let cjk = "漢字".repeat(60);
        let spans = [Span {
            text: cjk.clone(),
            style: Style::default(),
        }];
        let atoms = sh.atoms(&spans, 11.0, TEXT);
        assert_eq!(atoms.len(), 120);
        let lines = wrap(atoms, 150.0);
        assert!(lines.len() > 5);
        let joined: String = lines
            .iter()
            .flat_map(|l| l.pieces.iter().map(|(_, r)| r.text.clone()))
            .collect();
        assert_eq!(joined, cjk);
    })
    .unwrap();
}

#[test]
fn pages_keep_everything_inside_the_margins() {
    let fonts = system_fonts().unwrap();
    let mut md = String::new();
    for i in 0..60 {
        md.push_str(&format!("## Section {i}\n\nSome text 본문 {i} that is long enough to wrap at least once on an A4 page with margins, twice even.\n\n- item\n  - sub\n\n```\ncode {i}\n```\n\n> quote\n\n---\n\n"));
    }
    let pages = with_shaper(&fonts, md.chars(), |sh, _| layout_pages(sh, Some("T"), &md)).unwrap();
    assert!(pages.len() > 5, "{} pages", pages.len());
    let mut sections = 0;
    for ops in &pages {
        assert!(!ops.is_empty());
        for op in ops {
            match op {
                Op::Text { x, y, run } => {
                    assert!(*y > MARGIN && *y <= BOTTOM, "baseline {y}");
                    assert!(
                        *x >= MARGIN - 20.0 && x + run.width <= PAGE_W - MARGIN + 0.5,
                        "x {x}"
                    );
                    if run.text.starts_with("Section") {
                        sections += 1;
                    }
                }
                Op::Rect { x, y, w, h, .. } => {
                    assert!(
                        *y >= MARGIN - 0.01 && y + h <= BOTTOM + 0.01,
                        "rect {y}+{h}"
                    );
                    assert!(*x >= MARGIN - 0.01 && x + w <= PAGE_W - MARGIN + 0.01);
                }
            }
        }
    }
    assert_eq!(sections, 60);
}

#[test]
fn tabs_expand_to_four_columns() {
    assert_eq!(expand_tabs("\tx"), "    x");
    assert_eq!(expand_tabs("ab\tc"), "ab  c");
    assert_eq!(expand_tabs("abcd\t"), "abcd    ");
}
