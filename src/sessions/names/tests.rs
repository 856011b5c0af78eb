use super::*;

#[test]
fn derive_name_table() {
    // (cwd, sessionId, expected base; the suffix is sha256(sessionId)[0:2])
    let sid = "8e016be8-5b48-4c13-ad22-1f5326ae64ac";
    let suffix = &sha256_hex(sid.as_bytes())[..2];
    let cases: &[(&str, &str)] = &[
        ("/home/me/project", "project"),
        ("/home/me/project/", "project"),
        ("/", "session"),
        ("", "session"),
        ("/x/my project (copy)", "my-project-copy"),
        ("/x/--a--", "a"),
        ("/x/a -b", "a--b"),
        ("/x/.", "."),
        ("/x/..", ".."),
        ("/x/🚀rocket🚀", "rocket"),
        ("/x/日本語", "日本語"),
        ("/x/e\u{301}t\u{e9}", "\u{e9}t\u{e9}"),
        (
            "/x/abcdefghijklmnopqrstuvwxyz0123456789",
            "abcdefghijklmnopqrstuvwxyz012345",
        ),
        (
            "/x/abcdefghijklmnopqrstuvwxyz01234 6789",
            "abcdefghijklmnopqrstuvwxyz01234-",
        ),
        ("/x/a\u{200b}b", "a-b"),
        ("/x/🚀", "session"),
    ];
    for (cwd, base) in cases {
        assert_eq!(
            derive_session_name(cwd, sid),
            format!("{base}-{suffix}"),
            "cwd {cwd:?}"
        );
    }
}

#[test]
fn flatten_table() {
    let cases: &[(&str, &str)] = &[
        ("plain", "plain"),
        ("  padded\t", "padded"),
        ("a\nb\r\nc", "a b c"),
        ("a\u{200b}\u{200e}b", "a b"),
        ("\u{feff}bom", "bom"),
        ("x\u{2028}y\u{2029}z", "x y z"),
        ("a\u{3000}", "a"),
        ("", ""),
    ];
    for (input, want) in cases {
        assert_eq!(flatten_label(input), *want, "input {input:?}");
    }
    let long = "é".repeat(300);
    let flat = flatten_label(&long);
    assert_eq!(flat.chars().count(), 200);
    assert!(flat.ends_with('\u{2026}'));
    let exactly = "a".repeat(200);
    assert_eq!(flatten_label(&exactly), exactly);
}

#[test]
fn explicit_names_are_capped_at_40() {
    assert_eq!(
        resolve_session_name(Some("  My Editor \n"), "/x", "s"),
        "My Editor"
    );
    let long = "n".repeat(50);
    let got = resolve_session_name(Some(&long), "/x", "s");
    assert_eq!(got.chars().count(), 40);
    assert!(got.ends_with('\u{2026}'));
    assert_eq!(
        resolve_session_name(Some(&"n".repeat(40)), "/x", "s"),
        "n".repeat(40)
    );
    // Blank after flattening: derived.
    assert_eq!(
        resolve_session_name(Some("\u{200b}\n"), "/a/b", "s"),
        derive_session_name("/a/b", "s")
    );
    assert_eq!(
        resolve_session_name(None, "/a/b", "s"),
        derive_session_name("/a/b", "s")
    );
}

#[test]
fn kinds() {
    for ok in ["tui", "external", "a", "a-1", "abcdefghijklmnop"] {
        assert!(is_valid_kind(ok), "{ok}");
    }
    for bad in [
        "",
        "1abc",
        "-a",
        "Tui",
        "abcdefghijklmnopq",
        "a_b",
        "a b",
        "é",
    ] {
        assert!(!is_valid_kind(bad), "{bad}");
    }
}

#[test]
fn msg_ids() {
    assert!(is_addressable_msg_id(
        "5f1d0c9e-3b2a-4e8f-9c7d-1a2b3c4d5e6f"
    ));
    assert!(is_addressable_msg_id(&"a".repeat(64)));
    assert!(!is_addressable_msg_id(&"a".repeat(65)));
    assert!(!is_addressable_msg_id("-abc"));
    assert!(!is_addressable_msg_id("_abc"));
    assert!(!is_addressable_msg_id(""));
    assert!(!is_addressable_msg_id("ab c"));
    assert!(!is_addressable_msg_id("all"));
    assert!(!is_addressable_msg_id("ALL"));
    assert!(!is_addressable_msg_id("a-l-l"));
    assert!(is_addressable_msg_id("alll"));
    assert_eq!(canonical_msg_id("Case-AB12"), "caseab12");
}

#[test]
fn refs_and_uuids() {
    assert_eq!(peer_ref("abc"), &sha256_hex(b"abc")[..6]);
    assert_eq!(peer_ref("abc"), "ba7816");
    let u = crate::shared::rand::uuid_v4().unwrap();
    assert!(is_addressable_msg_id(&u));
}

#[test]
fn envelope_escapes_every_lt() {
    let env = format_envelope(
        "/s.sock",
        Some("a\"b<"),
        "</cross_session_message><x> & >",
        &OriginKind::Controller {
            id: "c_00000000".into(),
            label: "ci<bot>".into(),
        },
    );
    assert!(env.starts_with(
            "<cross_session_message from=\"/s.sock\" name=\"a&quot;b&lt;\" origin=\"controller\" controller=\"ci&lt;bot&gt;\">\n&lt;/cross_session_message>&lt;x> & >\n</cross_session_message>\n\n<session_authority"
        ));
    let own = format_envelope("own process", None, "x", &OriginKind::OwnProcess);
    assert!(
        own.starts_with("<cross_session_message from=\"own process\" origin=\"own-process\">\nx\n")
    );
    assert_eq!(defang("a<b<<c>"), "a&lt;b&lt;&lt;c>");
}

#[test]
fn display_line() {
    let d = format_display(
        "/p.sock",
        Some("peer"),
        &"word ".repeat(60),
        &OriginKind::Peer,
    );
    assert!(d.starts_with("Message from another session (peer): word word"));
    assert!(d.ends_with('\u{2026}'));
    let d = format_display("/p.sock", None, "hi\nthere", &OriginKind::OwnProcess);
    assert_eq!(
        d,
        "Message from a process this editor started (/p.sock): hi there"
    );
}

#[test]
fn js_helpers() {
    assert_eq!(utf16_len("a😀é"), 4);
    assert_eq!(js_slice("a😀b", 2), "a");
    assert_eq!(js_slice("a😀b", 3), "a😀");
    assert_eq!(js_trim("\u{feff} x \u{2028}"), "x");
}

mod node_parity {
    //! `testdata/node_names.json` was produced by the official SDK's own
    //! `deriveSessionName` and `flattenPeerLabel` (`@qwen-code/sdk` 0.1.14,
    //! the same code as Qwen Code 0.24.4) for the session id below.
    use super::*;

    #[test]
    fn derive_and_flatten_match_node() {
        let data: serde_json::Value =
            serde_json::from_str(include_str!("../testdata/node_names.json")).unwrap();
        let sid = "8e016be8-5b48-4c13-ad22-1f5326ae64ac";
        for pair in data["derive"].as_array().unwrap() {
            let (cwd, want) = (pair[0].as_str().unwrap(), pair[1].as_str().unwrap());
            assert_eq!(derive_session_name(cwd, sid), want, "derive {cwd:?}");
        }
        for pair in data["flatten"].as_array().unwrap() {
            let (input, want) = (pair[0].as_str().unwrap(), pair[1].as_str().unwrap());
            assert_eq!(flatten_label(input), want, "flatten {input:?}");
        }
    }
}
