use super::*;
use proptest::prelude::*;

fn names(pairs: &[(&str, &str)]) -> Vec<(String, String, String)> {
    assign(pairs, SERVER_NAME)
        .unwrap()
        .tools
        .into_iter()
        .map(|a| (a.plugin_id, a.tool, a.mcp_name))
        .collect()
}

#[test]
fn the_cli_rule_is_reproduced_exactly() {
    // Outputs of the CLI's own normalizeToolNameForProvider (0.24.4).
    assert_eq!(
        cli_registered_name("qwen-companion-plugins", "hello_greet"),
        "mcp__qwen-companion-plugins__hello_greet"
    );
    assert_eq!(
        cli_registered_name("my.srv", "fs.read"),
        "mcp__my_srv__fs_read_1urjewd"
    );
    assert_eq!(
        cli_registered_name(
            "qwen-companion-plugins",
            "a_very_long_tool_name_that_goes_beyond_the_limit_x"
        ),
        "mcp__qwen-companion-plugins__a_very_long_tool_name_that_1sunnfa"
    );
    assert_eq!(
        cli_registered_name("s", "caf\u{e9}"),
        "mcp__s__caf__0bl6y5p"
    );
}

#[test]
fn our_server_name_is_valid_and_leaves_34_characters() {
    assert_eq!(server_name_error(SERVER_NAME), None);
    assert_eq!(tool_budget(SERVER_NAME), 34);
    for bad in [
        "",
        "Qwen",
        "a_b",
        "a.b",
        "a--b",
        "a-",
        "1a",
        &"a".repeat(41),
    ] {
        assert!(server_name_error(bad).is_some(), "{bad:?}");
    }
    assert!(assign(&[("a.b", "t")], "a__b").is_err());
}

#[test]
fn readable_names_from_the_last_label() {
    let n = names(&[("com.example.notes", "search"), ("org.acme.pdf", "render")]);
    assert_eq!(n[0].2, "notes_search");
    assert_eq!(n[1].2, "pdf_render");
}

#[test]
fn a_collision_takes_more_labels_on_both_sides() {
    let n = names(&[("com.alpha.notes", "search"), ("com.beta.notes", "search")]);
    assert_eq!(n[0].2, "alpha-notes_search");
    assert_eq!(n[1].2, "beta-notes_search");
    // Identical up to the root: hashed, still distinct, still readable in front.
    let n = names(&[("a.notes", "x"), ("a-notes", "x")]);
    assert_ne!(n[0].2, n[1].2);
}

#[test]
fn a_label_collision_that_cannot_be_resolved_by_labels_is_hashed() {
    // "notes" + "a_b" and "notes_a" + "b" read the same at every level.
    let n = names(&[("com.notes", "a_b"), ("com.notes_a", "b")]);
    assert_ne!(n[0].2, n[1].2);
    for (_, _, name) in &n {
        assert!(name.len() <= 34 && name.rsplit('_').next().unwrap().len() == 7);
    }
}

#[test]
fn too_long_names_are_hashed_and_fit() {
    let tool = "t".repeat(64);
    let n = names(&[("com.example.x", &tool)]);
    assert_eq!(n[0].2.len(), 34);
    assert!(n[0].2.starts_with("x_ttt"));
    assert_eq!(
        cli_registered_name(SERVER_NAME, &n[0].2),
        format!("mcp__{SERVER_NAME}__{}", n[0].2)
    );
}

#[test]
fn order_does_not_matter_and_duplicates_count_once() {
    let a = names(&[("a.x", "t"), ("b.x", "t"), ("c.y", "u")]);
    let b = names(&[("c.y", "u"), ("b.x", "t"), ("a.x", "t"), ("b.x", "t")]);
    assert_eq!(a, b);
    assert_eq!(a.len(), 3);
}

#[test]
fn lookup_is_exact() {
    let a = assign(
        &[("com.alpha.notes", "s"), ("com.beta.notes", "s")],
        SERVER_NAME,
    )
    .unwrap();
    assert_eq!(a.lookup("alpha-notes_s"), Some(("com.alpha.notes", "s")));
    assert_eq!(a.lookup("notes_s"), None);
    assert_eq!(a.name_of("com.beta.notes", "s"), Some("beta-notes_s"));
    assert_eq!(
        a.tools[0].registered_name,
        "mcp__qwen-companion-plugins__alpha-notes_s"
    );
}

fn label() -> impl Strategy<Value = String> {
    "[A-Za-z0-9][A-Za-z0-9_-]{0,12}"
}
fn id() -> impl Strategy<Value = String> {
    proptest::collection::vec(label(), 2..5).prop_map(|l| l.join("."))
}
fn tool() -> impl Strategy<Value = String> {
    "[A-Za-z0-9_-]{1,64}"
}

proptest! {
    #[test]
    fn any_set_gives_valid_unique_reversible_names(
        pairs in proptest::collection::vec((id(), tool()), 1..40),
        // Force label collisions: reuse the same few last labels.
        shared in proptest::collection::vec((label(), tool()), 0..10),
        server in prop_oneof![Just(SERVER_NAME.to_string()), "[a-z][a-z0-9]{0,39}"],
    ) {
        let mut all: Vec<(String, String)> = pairs.clone();
        for (i, (l, t)) in shared.iter().enumerate() {
            all.push((format!("p{i}.{l}"), t.clone()));
            all.push((format!("q{i}.{l}"), t.clone()));
        }
        let refs: Vec<(&str, &str)> = all.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        let a = assign(&refs, &server).unwrap();
        let distinct: BTreeSet<_> = refs.iter().collect();
        prop_assert_eq!(a.tools.len(), distinct.len());
        let mut seen = BTreeSet::new();
        for t in &a.tools {
            prop_assert!(seen.insert(t.mcp_name.clone()), "duplicate {}", t.mcp_name);
            prop_assert!(t.mcp_name.len() <= tool_budget(&server));
            let full = format!("mcp__{server}__{}", t.mcp_name);
            prop_assert_eq!(cli_registered_name(&server, &t.mcp_name), full.clone());
            prop_assert_eq!(&t.registered_name, &full);
            prop_assert_eq!(a.lookup(&t.mcp_name), Some((t.plugin_id.as_str(), t.tool.as_str())));
            prop_assert_eq!(a.name_of(&t.plugin_id, &t.tool), Some(t.mcp_name.as_str()));
        }
        let mut rev = refs.clone();
        rev.reverse();
        let b = assign(&rev, &server).unwrap();
        prop_assert_eq!(&a.tools, &b.tools);
    }
}
