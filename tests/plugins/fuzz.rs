//! Property tests (bounded, a few seconds) for the manifest parser: arbitrary
//! text, mutated text and structurally mutated manifests never panic, and a
//! manifest written from a random model parses back to the model's values.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use qc_test_support::TempDir;
use qwen_companion::plugins::manifest::{self, ConfigKind};
use serde_json::{json, Map, Value};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/plugins/fixtures")
}

fn full_text() -> String {
    std::fs::read_to_string(fixtures().join("full/manifest.json")).unwrap()
}

/// A plugin folder with the files the generated manifests name, removed on drop.
fn plugin_root() -> TempDir {
    let root = TempDir::new("pf");
    for f in ["index.js", "view.html", "ui.html", "icon.png"] {
        std::fs::write(root.path().join(f), b"x").unwrap();
    }
    root
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        (-1e6f64..1e6).prop_map(|f| json!(f)),
        ".{0,10}".prop_map(Value::String),
        prop_oneof![
            Just("index.js"),
            Just("object"),
            Just("do_something"),
            Just("mod+shift+d"),
            Just("text/markdown"),
            Just("../x"),
            Just("/etc/passwd"),
            Just("select")
        ]
        .prop_map(|s| Value::String(s.into())),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-zA-Z$]{1,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Every JSON pointer of `v` (containers and leaves).
fn pointers(v: &Value, base: String, out: &mut Vec<String>) {
    out.push(base.clone());
    match v {
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                pointers(x, format!("{base}/{i}"), out);
            }
        }
        Value::Object(o) => {
            for (k, x) in o {
                pointers(x, manifest::pointer(&base, k), out);
            }
        }
        _ => {}
    }
}

#[derive(Debug, Clone)]
enum Mutation {
    Replace(usize, Value),
    Remove(usize),
    Insert(usize, String, Value),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), json_value()).prop_map(|(i, v)| Mutation::Replace(i, v)),
        any::<usize>().prop_map(Mutation::Remove),
        (any::<usize>(), "[a-zA-Z]{1,10}", json_value())
            .prop_map(|(i, k, v)| Mutation::Insert(i, k, v)),
    ]
}

fn apply(doc: &mut Value, m: &Mutation) {
    let mut ps = Vec::new();
    pointers(doc, String::new(), &mut ps);
    let pick = |i: usize| ps[i % ps.len()].clone();
    match m {
        Mutation::Replace(i, v) => {
            if let Some(slot) = doc.pointer_mut(&pick(*i)) {
                *slot = v.clone();
            }
        }
        Mutation::Remove(i) => {
            let p = pick(*i);
            if let Some((parent, last)) = p.rsplit_once('/') {
                let last = last.replace("~1", "/").replace("~0", "~");
                match doc.pointer_mut(parent) {
                    Some(Value::Object(o)) => {
                        o.remove(&last);
                    }
                    Some(Value::Array(a)) => {
                        if let Ok(n) = last.parse::<usize>() {
                            if n < a.len() {
                                a.remove(n);
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        Mutation::Insert(i, k, v) => match doc.pointer_mut(&pick(*i)) {
            Some(Value::Object(o)) => {
                o.insert(k.clone(), v.clone());
            }
            Some(Value::Array(a)) => a.push(v.clone()),
            _ => {}
        },
    }
}

/// What a successful parse must always satisfy.
fn check_invariants(m: &manifest::Manifest) {
    let mut names: Vec<&str> = m.tools.iter().map(|t| t.name.as_str()).collect();
    let n = names.len();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), n, "tool names are unique");
    assert!(manifest::id_error(&m.id).is_none());
    assert!(m.main_path.starts_with(&m.root));
    for p in &m.document_parsers {
        assert!(m.tool(&p.tool_name).is_some(), "every parser has a tool");
    }
    for c in &m.configuration {
        assert!(c.kind.accepts(&c.default_value));
    }
    for k in &m.keybindings {
        assert!(manifest::key_error(&k.key).is_none());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        let text = String::from_utf8_lossy(&bytes);
        let _ = manifest::parse(&text, &fixtures().join("full"));
    }

    #[test]
    fn mutated_text_never_panics(edits in prop::collection::vec((any::<usize>(), ".{0,3}", 0usize..4), 1..6)) {
        let mut text = full_text();
        for (at, ins, del) in edits {
            let mut at = at % (text.len() + 1);
            while !text.is_char_boundary(at) { at -= 1; }
            let mut end = (at + del).min(text.len());
            while !text.is_char_boundary(end) { end += 1; }
            text.replace_range(at..end, &ins);
        }
        if let Ok((m, _)) = manifest::parse(&text, &fixtures().join("full")) {
            check_invariants(&m);
        }
    }

    #[test]
    fn mutated_manifests_never_panic(muts in prop::collection::vec(mutation(), 1..5)) {
        let mut doc: Value = serde_json::from_str(&full_text()).unwrap();
        for m in &muts {
            apply(&mut doc, m);
        }
        match manifest::parse(&doc.to_string(), &fixtures().join("full")) {
            Ok((m, _)) => check_invariants(&m),
            Err(problems) => {
                prop_assert!(!problems.is_empty());
                for p in &problems {
                    prop_assert!(p.path.is_empty() || p.path.starts_with('/'), "{:?}", p);
                    prop_assert!(!p.message.is_empty());
                }
            }
        }
    }
}

// ---- model → manifest → parse → model --------------------------------------

#[derive(Debug, Clone)]
struct ToolModel {
    name: String,
    summary: Option<String>,
    props: Vec<(String, &'static str)>,
    read_only: Option<bool>,
}

#[derive(Debug, Clone)]
enum ConfigModel {
    Select(String),
    Boolean(bool),
    Str(String),
    Number(i64),
}

#[derive(Debug, Clone)]
struct Model {
    id: String,
    name: String,
    version: (u64, u64, u64, Option<String>),
    description: Option<String>,
    permissions: Vec<String>,
    tools: Vec<ToolModel>,
    parsers: Vec<(String, bool)>,
    config: Vec<ConfigModel>,
    keys: Vec<(Vec<&'static str>, String)>,
    view: Option<(String, Option<u32>)>,
    menu: Option<String>,
}

fn tool_model() -> impl Strategy<Value = ToolModel> {
    (
        "[A-Za-z0-9_-]{1,20}",
        prop::option::of("[ -~]{0,30}"),
        prop::collection::vec(
            (
                "[a-z]{1,8}",
                prop_oneof![Just("string"), Just("number"), Just("boolean")],
            ),
            0..4,
        ),
        prop::option::of(any::<bool>()),
    )
        .prop_map(|(name, summary, props, read_only)| ToolModel {
            name,
            summary,
            props,
            read_only,
        })
}

fn model() -> impl Strategy<Value = Model> {
    (
        (
            prop::collection::vec("[a-z0-9][a-z0-9_-]{0,8}", 2..5).prop_map(|l| l.join(".")),
            "[ -~]{0,20}[A-Za-z][ -~]{0,20}",
            (
                0u64..100,
                0u64..100,
                0u64..100,
                prop::option::of("[a-z]{1,5}(\\.(0|[1-9][0-9]{0,2}))?"),
            ),
            prop::option::of(".{0,40}"),
            prop::sample::subsequence(vec!["filesystem", "network", "notifications"], 0..=3)
                .prop_map(|v| v.into_iter().map(String::from).collect::<Vec<_>>()),
        ),
        prop::collection::vec(tool_model(), 1..5),
        prop::collection::vec(
            ("[a-z]{1,8}/[a-z0-9]([a-z0-9.+-]{0,8}[a-z])?", any::<bool>()),
            0..3,
        ),
        prop::collection::vec(
            prop_oneof![
                "[a-z]{0,6}".prop_map(ConfigModel::Select),
                any::<bool>().prop_map(ConfigModel::Boolean),
                ".{0,6}".prop_map(ConfigModel::Str),
                any::<i64>().prop_map(ConfigModel::Number),
            ],
            0..4,
        ),
        prop::collection::vec(
            (
                prop::sample::subsequence(vec!["mod", "ctrl", "alt", "shift"], 0..=3),
                prop_oneof![
                    "[a-z0-9]",
                    "f([1-9]|1[0-9]|2[0-4])",
                    Just("enter".to_string())
                ],
            ),
            0..4,
        ),
        (
            prop::option::of(("[A-Za-z0-9_-]{1,12}", prop::option::of(1u32..5000))),
            prop::option::of("[a-z]{1,6}/[a-z]{1,6}"),
        ),
    )
        .prop_map(
            |(
                (id, name, version, description, permissions),
                tools,
                parsers,
                config,
                keys,
                (view, menu),
            )| {
                let mut tools = tools;
                let mut seen = std::collections::HashSet::new();
                tools.retain(|t| seen.insert(t.name.clone()));
                // Unique mime types; parser tools either declared or hidden.
                let mut mimes = std::collections::HashSet::new();
                let parsers = parsers
                    .into_iter()
                    .filter(|(m, _)| mimes.insert(m.clone()))
                    .collect();
                let mut canon = std::collections::HashSet::new();
                let keys = keys
                    .into_iter()
                    .filter(|(mods, k)| {
                        let mut m = mods.clone();
                        m.sort_unstable();
                        canon.insert(format!("{}+{k}", m.join("+")))
                    })
                    .collect();
                Model {
                    id,
                    name,
                    version,
                    description,
                    permissions,
                    tools,
                    parsers,
                    config,
                    keys,
                    view,
                    menu,
                }
            },
        )
}

fn version_string(v: &(u64, u64, u64, Option<String>)) -> String {
    match &v.3 {
        Some(pre) => format!("{}.{}.{}-{pre}", v.0, v.1, v.2),
        None => format!("{}.{}.{}", v.0, v.1, v.2),
    }
}

fn parser_tool(i: usize) -> String {
    format!("hidden_parser_{i}")
}

fn to_json(m: &Model) -> Value {
    let mut doc = Map::new();
    doc.insert("id".into(), json!(m.id));
    doc.insert("name".into(), json!(m.name));
    doc.insert("version".into(), json!(version_string(&m.version)));
    if let Some(d) = &m.description {
        doc.insert("description".into(), json!(d));
    }
    doc.insert("main".into(), json!("index.js"));
    doc.insert("permissions".into(), json!(m.permissions));
    let tools: Vec<Value> = m
        .tools
        .iter()
        .map(|t| {
            let props: Map<String, Value> = t
                .props
                .iter()
                .map(|(k, ty)| (k.clone(), json!({"type": ty})))
                .collect();
            let mut o =
                json!({"name": t.name, "parameters": {"type": "object", "properties": props}});
            if let Some(s) = &t.summary {
                o["summary"] = json!(s);
            }
            if let Some(r) = t.read_only {
                o["annotations"] = json!({"readOnlyHint": r});
            }
            o
        })
        .collect();
    doc.insert("tools".into(), Value::Array(tools));
    let parsers: Vec<Value> = m
        .parsers
        .iter()
        .enumerate()
        .map(|(i, (mime, declared))| {
            let tool = if *declared {
                m.tools[0].name.clone()
            } else {
                parser_tool(i)
            };
            json!({"mimeType": mime, "toolName": tool})
        })
        .collect();
    doc.insert("documentParsers".into(), Value::Array(parsers));
    let config: Vec<Value> = m
        .config
        .iter()
        .enumerate()
        .map(|(i, c)| match c {
            ConfigModel::Select(d) => json!({"id": format!("c{i}"), "type": "select", "defaultValue": d, "optionsTool": m.tools[0].name}),
            ConfigModel::Boolean(b) => json!({"id": format!("c{i}"), "type": "boolean", "defaultValue": b}),
            ConfigModel::Str(s) => json!({"id": format!("c{i}"), "type": "string", "defaultValue": s}),
            ConfigModel::Number(n) => json!({"id": format!("c{i}"), "type": "number", "defaultValue": n}),
        })
        .collect();
    doc.insert("configuration".into(), Value::Array(config));
    let keys: Vec<Value> = m
        .keys
        .iter()
        .map(|(mods, k)| {
            let mut parts: Vec<&str> = mods.clone();
            parts.push(k);
            json!({"command": m.tools[0].name, "key": parts.join("+")})
        })
        .collect();
    doc.insert("keybindings".into(), Value::Array(keys));
    if let Some((id, width)) = &m.view {
        let mut v = json!({"id": id, "entry": "view.html"});
        if let Some(w) = width {
            v["width"] = json!(w);
        }
        doc.insert("views".into(), json!([v]));
    }
    if let Some(loc) = &m.menu {
        doc.insert(
            "menus".into(),
            json!({loc.as_str(): [{"tool": m.tools[0].name}]}),
        );
    }
    Value::Object(doc)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn a_manifest_from_a_model_parses_back_to_the_model(m in model()) {
        let root = plugin_root();
        let text = serde_json::to_string_pretty(&to_json(&m)).unwrap();
        let (parsed, warnings) = match manifest::parse(&text, root.path()) {
            Ok(r) => r,
            Err(e) => return Err(TestCaseError::fail(format!("{e:#?}\n{text}"))),
        };
        // Only the selects' missing optionsTool could warn, and they all have one.
        prop_assert!(warnings.is_empty(), "{:?}", warnings);
        prop_assert_eq!(&parsed.id, &m.id);
        prop_assert_eq!(&parsed.name, &m.name);
        prop_assert_eq!(parsed.version.to_string(), version_string(&m.version));
        prop_assert_eq!(&parsed.description, &m.description);
        prop_assert_eq!(&parsed.permissions, &m.permissions);
        prop_assert_eq!(&parsed.main_path, &qc_test_support::plain(std::fs::canonicalize(root.path().join("index.js")).unwrap()));
        // Declared tools in order, then one hidden tool per undeclared parser.
        let mut want: Vec<(String, bool)> = m.tools.iter().map(|t| (t.name.clone(), true)).collect();
        for (i, (_, declared)) in m.parsers.iter().enumerate() {
            if !declared {
                want.push((parser_tool(i), false));
            }
        }
        let got: Vec<(String, bool)> = parsed.tools.iter().map(|t| (t.name.clone(), t.model_visible)).collect();
        prop_assert_eq!(got, want);
        for (t, tm) in parsed.tools.iter().zip(&m.tools) {
            prop_assert_eq!(&t.summary, &tm.summary);
            prop_assert_eq!(t.annotations.and_then(|a| a.read_only), tm.read_only);
            for (k, _) in &tm.props {
                prop_assert!(t.parameters["properties"].get(k).is_some());
            }
        }
        let mimes: Vec<String> = parsed.document_parsers.iter().map(|p| p.mime_type.clone()).collect();
        let want_mimes: Vec<String> = m.parsers.iter().map(|(mm, _)| mm.clone()).collect();
        prop_assert_eq!(mimes, want_mimes);
        prop_assert_eq!(parsed.configuration.len(), m.config.len());
        for (c, cm) in parsed.configuration.iter().zip(&m.config) {
            let (kind, default) = match cm {
                ConfigModel::Select(d) => (ConfigKind::Select { options_tool: Some(m.tools[0].name.clone()) }, json!(d)),
                ConfigModel::Boolean(b) => (ConfigKind::Boolean, json!(b)),
                ConfigModel::Str(s) => (ConfigKind::String, json!(s)),
                ConfigModel::Number(n) => (ConfigKind::Number, json!(n)),
            };
            prop_assert_eq!(&c.kind, &kind);
            prop_assert_eq!(&c.default_value, &default);
        }
        let keys: Vec<String> = parsed.keybindings.iter().map(|k| k.key.clone()).collect();
        let want_keys: Vec<String> = m.keys.iter().map(|(mods, k)| {
            let mut p: Vec<&str> = mods.clone();
            p.push(k);
            p.join("+")
        }).collect();
        prop_assert_eq!(keys, want_keys);
        match &m.view {
            Some((id, width)) => {
                prop_assert_eq!(parsed.views.len(), 1);
                prop_assert_eq!(&parsed.views[0].id, id);
                prop_assert_eq!(parsed.views[0].width, *width);
            }
            None => prop_assert!(parsed.views.is_empty()),
        }
        let menus: BTreeMap<String, usize> = parsed.menus.iter().map(|(k, v)| (k.clone(), v.len())).collect();
        let want_menus: BTreeMap<String, usize> = m.menu.iter().map(|l| (l.clone(), 1)).collect();
        prop_assert_eq!(menus, want_menus);
        check_invariants(&parsed);
    }
}
