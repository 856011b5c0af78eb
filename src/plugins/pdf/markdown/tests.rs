use super::*;

fn plain(t: &str) -> Span {
    Span {
        text: t.into(),
        style: Style::default(),
    }
}

fn para(t: &str) -> Block {
    Block::Para(vec![plain(t)])
}

#[test]
fn blocks_nest_as_written() {
    let md = "# H1\n\n### H3\n\n- a\n- b\n  - c\n    1. d\n\n3. x\n4. y\n\n> q\n>\n> > qq\n\n---\n\n```\n  code\n\tx\n```\n";
    let b = parse_markdown(md);
    assert_eq!(
        b,
        vec![
            Block::Heading(1, vec![plain("H1")]),
            Block::Heading(3, vec![plain("H3")]),
            Block::List {
                start: None,
                items: vec![
                    vec![para("a")],
                    vec![
                        para("b"),
                        Block::List {
                            start: None,
                            items: vec![vec![
                                para("c"),
                                Block::List {
                                    start: Some(1),
                                    items: vec![vec![para("d")]],
                                }
                            ]],
                        }
                    ],
                ],
            },
            Block::List {
                start: Some(3),
                items: vec![vec![para("x")], vec![para("y")]],
            },
            Block::Quote(vec![para("q"), Block::Quote(vec![para("qq")])]),
            Block::Rule,
            Block::Code("  code\n\tx\n".into()),
        ]
    );
}

#[test]
fn inline_styles_and_breaks() {
    let b = parse_markdown("a *i **bi*** `c` [l](http://x) ![img alt](y.png)\nsoft  \nhard");
    let Block::Para(spans) = &b[0] else {
        panic!("{b:?}")
    };
    let st = |bold, italic, code, link| Style {
        bold,
        italic,
        code,
        link,
    };
    assert_eq!(
        spans,
        &vec![
            Span {
                text: "a ".into(),
                style: st(false, false, false, false)
            },
            Span {
                text: "i ".into(),
                style: st(false, true, false, false)
            },
            Span {
                text: "bi".into(),
                style: st(true, true, false, false)
            },
            Span {
                text: " ".into(),
                style: st(false, false, false, false)
            },
            Span {
                text: "c".into(),
                style: st(false, false, true, false)
            },
            Span {
                text: " ".into(),
                style: st(false, false, false, false)
            },
            Span {
                text: "l".into(),
                style: st(false, false, false, true)
            },
            Span {
                text: " img alt soft\nhard".into(),
                style: st(false, false, false, false)
            },
        ]
    );
    assert_eq!(spans[2].style.face(), Face::BoldItalic);
    assert_eq!(spans[4].style.face(), Face::Mono);
}

#[test]
fn unterminated_constructs_and_html_keep_their_text() {
    let b = parse_markdown("```\nnever closed\n\n- still code");
    assert_eq!(b, vec![Block::Code("never closed\n\n- still code".into())]);
    let b = parse_markdown("<div>raw & html</div>\n\n> - quoted item");
    assert_eq!(b[0], Block::Para(vec![plain("<div>raw & html</div>\n")]));
    assert_eq!(
        b[1],
        Block::Quote(vec![Block::List {
            start: None,
            items: vec![vec![para("quoted item")]]
        }])
    );
    assert!(parse_markdown("").is_empty());
    assert!(parse_markdown("   \n\n  ").is_empty());
}

fn depth(blocks: &[Block]) -> usize {
    blocks
        .iter()
        .map(|b| match b {
            Block::Quote(inner) => 1 + depth(inner),
            Block::List { items, .. } => 1 + items.iter().map(|i| depth(i)).max().unwrap_or(0),
            _ => 0,
        })
        .max()
        .unwrap_or(0)
}

#[test]
fn hostile_nesting_is_flattened_and_loses_no_text() {
    let quotes = format!("{} deep quote\n\nafter", ">".repeat(50_000));
    let b = parse_markdown(&quotes);
    assert!(depth(&b) <= MAX_NESTING, "{}", depth(&b));
    let mut lists = String::new();
    for i in 0..300 {
        lists.push_str(&"  ".repeat(i));
        lists.push_str(&format!("- level{i}\n"));
    }
    let b = parse_markdown(&lists);
    assert!(depth(&b) <= MAX_NESTING);
    let text = format!("{b:?}");
    for i in [0, 11, 12, 13, 150, 299] {
        assert!(text.contains(&format!("\"level{i}\"")), "level{i} lost");
    }
}
