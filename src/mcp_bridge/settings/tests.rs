use super::*;
use serde_json::json;

const NAME: &str = "qwen-companion-plugins";

fn entry() -> Value {
    json!({"command": "/opt/qc/bin/qc-mcp-bridge", "args": ["--stdio"], "timeout": 600000})
}

fn add(text: &str) -> Edit {
    edit_text(text, NAME, Some(&entry())).unwrap()
}

fn remove(text: &str) -> Edit {
    edit_text(text, NAME, None).unwrap()
}

fn read(text: &str) -> Value {
    qwen_parse(text.trim_start_matches(BOM)).unwrap()
}

const REAL_WORLD: &str = r#"// Qwen Code settings — edited by hand
{
  "$version": 4,
  /* theme:
     keep it dark */
  "ui": { "theme": "GitHub" }, // inline after a value
  "mcpServers": {
    // the team's server
    "github": {
      "httpUrl": "https://example.com/mcp",
      "headers": { "Authorization": "Bearer ${GITHUB_TOKEN}" } // keep ${VAR} text
    }
  },
  "ide": { "enabled": true } // trailing comment on the last property
}
"#;

#[test]
fn add_then_remove_gives_back_the_same_bytes_and_keeps_everything_else() {
    let added = add(REAL_WORLD);
    assert_eq!(added.change, Change::Added);
    assert_eq!(added.servers_left, 2);
    for keep in [
        "// Qwen Code settings — edited by hand",
        "/* theme:\n     keep it dark */",
        "// inline after a value",
        "// the team's server",
        "Bearer ${GITHUB_TOKEN}\" } // keep ${VAR} text",
        "\"ide\": { \"enabled\": true } // trailing comment on the last property",
    ] {
        assert!(
            added.text.contains(keep),
            "lost {keep:?} in\n{}",
            added.text
        );
    }
    let v = read(&added.text);
    assert_eq!(v["mcpServers"][NAME], entry());
    assert_eq!(
        v["mcpServers"]["github"]["httpUrl"],
        "https://example.com/mcp"
    );
    assert_eq!(v["ui"]["theme"], "GitHub");
    let removed = remove(&added.text);
    assert_eq!(removed.change, Change::Removed);
    assert_eq!(removed.text, REAL_WORLD);
}

#[test]
fn adding_twice_is_byte_identical_and_reports_unchanged() {
    let once = add(REAL_WORLD);
    let twice = add(&once.text);
    assert_eq!(twice.change, Change::Unchanged);
    assert_eq!(twice.text, once.text);
}

#[test]
fn adding_replaces_an_entry_of_our_name_in_place() {
    let text = "{\n  \"mcpServers\": {\n    // ours, an old version\n    \"qwen-companion-plugins\": {\"command\": \"old\"},\n    \"other\": {\"command\": \"x\"}\n  }\n}\n";
    let e = add(text);
    assert_eq!(e.change, Change::Replaced);
    assert!(e
        .text
        .contains("// ours, an old version\n    \"qwen-companion-plugins\": {"));
    assert!(!e.text.contains("\"old\""));
    // Still before "other": replaced where it stood.
    assert!(e.text.find(NAME).unwrap() < e.text.find("\"other\"").unwrap());
    assert_eq!(read(&e.text)["mcpServers"]["other"]["command"], "x");
}

#[test]
fn crlf_and_tabs_are_kept() {
    let text = "{\r\n\t\"a\": 1,\r\n\t\"mcpServers\": {\r\n\t\t\"x\": {\"command\": \"y\"}\r\n\t}\r\n}\r\n";
    let e = add(text);
    assert!(!e.text.replace("\r\n", "").contains('\n'), "{:?}", e.text);
    assert!(e
        .text
        .contains("\r\n\t\t\"qwen-companion-plugins\": {\r\n\t\t\t\""));
    assert!(
        !e.text.contains("  "),
        "spaces used for indent: {:?}",
        e.text
    );
    assert_eq!(remove(&e.text).text, text);
}

#[test]
fn a_bom_is_kept() {
    let text = "\u{feff}{\n  \"a\": true\n}\n";
    let e = add(text);
    assert!(e.text.starts_with('\u{feff}'));
    assert_eq!(e.text.matches('\u{feff}').count(), 1);
    assert_eq!(read(&e.text)["mcpServers"][NAME], entry());
    let r = remove(&e.text);
    assert!(r.text.starts_with('\u{feff}'));
    assert_eq!(r.servers_left, 0);
    assert_eq!(read(&r.text)["mcpServers"], json!({}));
}

#[test]
fn mcp_servers_is_created_when_missing_and_left_empty_after_the_last_removal() {
    let e = add("{\"a\": 1}");
    assert_eq!(e.change, Change::Added);
    let v = read(&e.text);
    assert_eq!(v["a"], 1);
    assert_eq!(v["mcpServers"][NAME], entry());
    let r = remove(&e.text);
    assert_eq!(r.servers_left, 0);
    assert_eq!(read(&r.text), json!({"a": 1, "mcpServers": {}}));
}

#[test]
fn removing_what_is_not_there_is_a_no_op() {
    for text in ["{}", "{\"mcpServers\": {\"x\": {}}}", REAL_WORLD] {
        let r = remove(text);
        assert_eq!(r.change, Change::Absent);
        assert_eq!(r.text, text);
    }
}

#[test]
fn invalid_files_are_refused_with_line_and_column() {
    let cases = [
        ("{\n  \"a\": 1,\n}\n", "line 3"),    // trailing comma
        ("{\n  'a': 1\n}", "line 2"),         // single quotes
        ("{\n  a: 1\n}", "line 2"),           // unquoted key
        ("{\"a\": 0x10}", "line 1"),          // hex
        ("{\"a\": NaN}", "line 1"),           // NaN
        ("", "line 1"),                       // empty file
        ("{\"a\": \"tab\there\"}", "line 1"), // raw control char
    ];
    for (text, at) in cases {
        let e = edit_text(text, NAME, Some(&entry())).unwrap_err();
        assert_eq!(e.status, Status::InvalidJson, "{text:?}");
        assert!(e.message.contains(at), "{text:?}: {}", e.message);
        assert!(e.message.contains("untouched"), "{}", e.message);
    }
    for text in ["[1]", "\"x\"", "null"] {
        let e = edit_text(text, NAME, None).unwrap_err();
        assert!(e.message.contains("not a JSON object"), "{}", e.message);
    }
}

#[test]
fn mcp_servers_that_is_not_an_object_is_refused_not_replaced() {
    for text in [
        "{\"mcpServers\": []}",
        "{\"mcpServers\": null}",
        "{\"mcpServers\": \"x\"}",
    ] {
        for entry in [Some(entry()), None] {
            let e = edit_text(text, NAME, entry.as_ref()).unwrap_err();
            assert_eq!(e.status, Status::InvalidJson);
            assert!(e.message.contains("not an object"), "{}", e.message);
        }
    }
}

#[test]
fn duplicate_keys_edit_the_last_one_as_json_parse_reads_it() {
    // Two top-level mcpServers: the last one counts.
    let text = "{\n  \"mcpServers\": {\"dead\": {}},\n  \"mcpServers\": {\"live\": {}}\n}";
    let e = add(text);
    let v = read(&e.text);
    assert_eq!(v["mcpServers"]["live"], json!({}));
    assert_eq!(v["mcpServers"][NAME], entry());
    assert!(e.text.contains("{\"dead\": {}}"), "dead text left alone");
    // Duplicates of our own entry: add keeps one, remove takes them all.
    let text = "{\"mcpServers\": {\n  \"qwen-companion-plugins\": {\"command\": \"a\"},\n  \"other\": {},\n  \"qwen-companion-plugins\": {\"command\": \"b\"}\n}}";
    let e = add(text);
    assert_eq!(e.text.matches(NAME).count(), 1);
    assert_eq!(read(&e.text)["mcpServers"][NAME], entry());
    let r = remove(text);
    assert_eq!(r.change, Change::Removed);
    assert!(
        !r.text.contains(NAME),
        "an older duplicate came back: {}",
        r.text
    );
    assert_eq!(read(&r.text)["mcpServers"], json!({"other": {}}));
}

#[test]
fn comments_that_look_like_code_and_strings_that_look_like_comments() {
    let text = r#"{
  "url": "http://example.com/*not a comment*/", // "quoted" in a comment
  "path": "C:\\dir\\", /* a "string" inside */ "n": 1
}"#;
    let v = read(text);
    assert_eq!(v["url"], "http://example.com/*not a comment*/");
    assert_eq!(v["path"], "C:\\dir\\");
    let e = add(text);
    assert!(e.text.contains("/* a \"string\" inside */"));
    assert_eq!(read(&e.text)["n"], 1);
    // An unterminated block comment runs to the end, as in strip-json-comments.
    assert_eq!(read("{\"a\": 1} /* never closed"), json!({"a": 1}));
}

#[test]
fn strip_comments_keeps_positions() {
    let text = "{ // x\n  /* a\n b */ \"k\": 1 }";
    let s = strip_comments(text);
    assert_eq!(s.lines().count(), text.lines().count());
    assert_eq!(s.chars().count(), text.chars().count());
    assert_eq!(s, "{     \n      \n      \"k\": 1 }");
}

/// A private temporary directory (removed on drop).
fn tmpdir(tag: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("qc-settings-{tag}-"))
        .tempdir()
        .unwrap()
}

#[test]
fn a_new_file_is_created_0600_with_version_in_a_new_0700_dir() {
    let tmp = tmpdir("new");
    let d = tmp.path();
    let path = d.join(".qwen").join("settings.json");
    let o = register(&path, NAME, &entry()).unwrap();
    assert_eq!((o.change, o.created), (Change::Added, true));
    assert_eq!(
        crate::sys::fs::mode(std::path::Path::new(&path), &fs::metadata(&path).unwrap()) & 0o777,
        0o600
    );
    assert_eq!(
        crate::sys::fs::mode(
            path.parent().unwrap(),
            &fs::metadata(path.parent().unwrap()).unwrap()
        ) & 0o777,
        0o700
    );
    let v: Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(v, json!({"$version": 4, "mcpServers": {NAME: entry()}}));
    let again = register(&path, NAME, &entry()).unwrap();
    assert_eq!(again.change, Change::Unchanged);
}

#[test]
fn the_mode_is_kept_and_no_temp_file_is_left() {
    let tmp = tmpdir("mode");
    let d = tmp.path();
    let path = d.join("settings.json");
    fs::write(&path, REAL_WORLD).unwrap();
    crate::sys::fs::set_mode(&path, 0o640).unwrap();
    crate::sys::fs::set_mode(d, 0o755).unwrap();
    register(&path, NAME, &entry()).unwrap();
    assert_eq!(
        crate::sys::fs::mode(std::path::Path::new(&path), &fs::metadata(&path).unwrap()) & 0o777,
        0o640
    );
    // The directory's mode is the user's business.
    assert_eq!(
        crate::sys::fs::mode(std::path::Path::new(d), &fs::metadata(d).unwrap()) & 0o777,
        0o755
    );
    let o = unregister(&path, NAME).unwrap();
    assert_eq!(o.change, Change::Removed);
    assert_eq!(fs::read_to_string(&path).unwrap(), REAL_WORLD);
    assert_eq!(
        crate::sys::fs::mode(std::path::Path::new(&path), &fs::metadata(&path).unwrap()) & 0o777,
        0o640
    );
    let names: Vec<_> = fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("settings.json")]);
}

#[test]
fn an_invalid_file_on_disk_is_left_untouched() {
    let tmp = tmpdir("bad");
    let d = tmp.path();
    let path = d.join("settings.json");
    let text = "{\n  \"a\": 1,\n}\n";
    fs::write(&path, text).unwrap();
    let before = fs::metadata(&path).unwrap().modified().unwrap();
    let e = register(&path, NAME, &entry()).unwrap_err();
    assert!(e.message.contains(&path.display().to_string()));
    assert!(e.message.contains("line 3"), "{}", e.message);
    assert_eq!(fs::read_to_string(&path).unwrap(), text);
    assert_eq!(fs::metadata(&path).unwrap().modified().unwrap(), before);
}

#[test]
fn a_symlink_is_read_through_and_replaced_its_target_kept() {
    let tmp = tmpdir("link");
    let d = tmp.path();
    let target = d.join("dotfiles-settings.json");
    fs::write(&target, "{\"a\": 1}").unwrap();
    let path = d.join("settings.json");
    crate::sys::fs::symlink(&target, &path).unwrap();
    let o = register(&path, NAME, &entry()).unwrap();
    assert!(o.replaced_symlink);
    assert!(!fs::symlink_metadata(&path)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(fs::read_to_string(&target).unwrap(), "{\"a\": 1}");
    assert_eq!(read(&fs::read_to_string(&path).unwrap())["a"], 1);
}

#[test]
fn unregister_of_a_missing_file_creates_nothing() {
    let tmp = tmpdir("missing");
    let d = tmp.path();
    let path = d.join("sub").join("settings.json");
    assert_eq!(unregister(&path, NAME).unwrap().change, Change::Absent);
    assert!(!d.join("sub").exists());
}

#[test]
fn bad_arguments_are_refused() {
    let tmp = tmpdir("args");
    let d = tmp.path();
    let path = d.join("settings.json");
    assert!(register(&path, NAME, &json!([1])).is_err());
    assert!(register(&path, "bad name", &entry()).is_err());
    assert!(unregister(&path, "a__b").is_err());
    assert!(!path.exists());
    fs::create_dir(&path).unwrap();
    assert!(register(&path, NAME, &entry()).is_err());
}

#[test]
fn settings_paths() {
    let p = settings_path(Scope::Project, Path::new("/srv/proj")).unwrap();
    assert_eq!(p, PathBuf::from("/srv/proj/.qwen/settings.json"));
    let home = home_dir().unwrap();
    let e = settings_path(Scope::Project, &home).unwrap_err();
    assert_eq!(e.status, Status::Refused);
    let user = settings_path(Scope::User, Path::new("/ignored")).unwrap();
    assert_eq!(user, qwen_home().unwrap().join("settings.json"));
}

mod prop {
    use super::*;
    use proptest::prelude::*;

    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i32>().prop_map(Value::from),
            "[ -~]{0,8}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 16, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                proptest::collection::btree_map("[a-z$]{1,6}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Any settings object, pretty-printed with any indent and line
        /// ending and a comment: add then remove restores the bytes, and
        /// the added file reads as the object plus our entry.
        #[test]
        fn add_remove_round_trip(
            obj in proptest::collection::btree_map("[a-zA-Z]{1,8}", value(), 0..6),
            servers in proptest::option::of(proptest::collection::btree_map("[a-z]{1,8}", value(), 0..3)),
            tabs in any::<bool>(),
            crlf in any::<bool>(),
        ) {
            let mut m: Map<String, Value> = obj.into_iter().collect();
            m.remove("mcpServers");
            if let Some(s) = servers {
                let mut s: Map<String, Value> = s.into_iter().collect();
                s.remove(NAME);
                m.insert("mcpServers".into(), Value::Object(s));
            }
            let base = Value::Object(m);
            let mut text = serde_json::to_string_pretty(&base).unwrap();
            if tabs {
                // Indentation only: a string value may hold two spaces too.
                text = text
                    .lines()
                    .map(|l| {
                        let n = l.len() - l.trim_start_matches(' ').len();
                        format!("{}{}", "\t".repeat(n / 2), &l[n..])
                    })
                    .collect::<Vec<_>>()
                    .join("\n");
            }
            text = format!("// header\n{text}\n");
            if crlf { text = text.replace('\n', "\r\n"); }
            let added = add(&text);
            let mut expected = base.clone();
            let servers = expected.as_object_mut().unwrap()
                .entry("mcpServers").or_insert_with(|| json!({}));
            servers.as_object_mut().unwrap().insert(NAME.into(), entry());
            prop_assert_eq!(read(&added.text), expected);
            let header = if crlf { "// header\r\n" } else { "// header\n" };
            prop_assert!(added.text.starts_with(header), "header lost");
            let removed = remove(&added.text);
            if base.get("mcpServers").is_some() {
                prop_assert_eq!(removed.text, text);
            } else {
                let mut with_empty = base.clone();
                with_empty.as_object_mut().unwrap().insert("mcpServers".into(), json!({}));
                prop_assert_eq!(read(&removed.text), with_empty);
            }
        }
    }
}

#[test]
fn strip_comments_matches_qwens_strip_json_comments() {
    // Outputs of the strip-json-comments bundled in Qwen Code 0.24.4.
    let cases = [
        (
            "{ // x\n  /* a\n b */ \"k\": 1 }",
            "{     \n      \n      \"k\": 1 }",
        ),
        ("{\"a\": 1} /* never closed", "{\"a\": 1}                "),
        (
            "{\"p\": \"C:\\\\dir\\\\\", /* a \"s\" */ \"n\": 1}",
            "{\"p\": \"C:\\\\dir\\\\\",             \"n\": 1}",
        ),
        (
            "{\"u\": \"http://x/*y*/\"} // tail\r\n",
            "{\"u\": \"http://x/*y*/\"}        \r\n",
        ),
        ("{\"a\": \"\\\"//not\"} //c", "{\"a\": \"\\\"//not\"}    "),
        ("// only\r\n{}\r\n", "       \r\n{}\r\n"),
    ];
    for (input, expected) in cases {
        assert_eq!(strip_comments(input), expected, "{input:?}");
    }
}
