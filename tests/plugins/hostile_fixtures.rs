//! The hostile fixture plugins (tests/plugins/fixtures/hostile) stay what the
//! plugin-host tests rely on: one valid plugin per folder, id
//! `test.hostile.<folder>`, a header comment naming the behaviour, JS that
//! parses under `node --check`, and a README row per fixture listing exactly
//! its tools.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/plugins/fixtures/hostile")
}

fn fixtures() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(root())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

const EXPECTED: &[&str] = &[
    "big-results",
    "busy-hang",
    "content-not-array",
    "crash-loop",
    "crash-mid-call",
    "crash-on-start",
    "exit-after-big-send",
    "grandchildren",
    "handle-passing",
    "idle-hang",
    "malformed-frames",
    "no-listener",
    "no-permission",
    "slow-start",
    "stdout-garbage",
    "ui-push",
    "uncaught-async-throw",
    "unknown-capability",
    "wrong-ids",
];

fn tools_of(name: &str) -> Vec<String> {
    let m: Value =
        serde_json::from_slice(&std::fs::read(root().join(name).join("manifest.json")).unwrap())
            .unwrap_or_else(|e| panic!("{name}/manifest.json: {e}"));
    m["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn every_fixture_is_a_well_formed_plugin() {
    assert_eq!(fixtures(), EXPECTED);
    for name in EXPECTED {
        let dir = root().join(name);
        let m: Value =
            serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
        assert_eq!(m["id"], format!("test.hostile.{name}"), "{name}");
        assert_eq!(m["version"], "1.0.0", "{name}");
        assert_eq!(m["main"], "index.js", "{name}");
        assert!(m["name"].as_str().is_some_and(|s| !s.is_empty()), "{name}");
        assert_eq!(m["permissions"], serde_json::json!([]), "{name}");
        let tools = m["tools"].as_array().unwrap();
        assert!(!tools.is_empty(), "{name}");
        let mut seen = BTreeSet::new();
        for t in tools {
            let tn = t["name"].as_str().unwrap();
            assert!(seen.insert(tn), "{name}: duplicate tool {tn}");
            assert!(
                tn.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
                "{name}: tool name {tn}"
            );
            assert!(t["description"].as_str().is_some_and(|s| !s.is_empty()));
            let params = &t["parameters"];
            assert_eq!(params["type"], "object", "{name}/{tn}");
            jsonschema::meta::validate(params)
                .unwrap_or_else(|e| panic!("{name}/{tn}: parameters not a valid schema: {e}"));
        }
        let js = std::fs::read_to_string(dir.join("index.js")).unwrap();
        assert!(
            js.starts_with(&format!("// Hostile fixture \"{name}\": ")),
            "{name}/index.js must start with its behaviour comment"
        );
        assert!(
            js.contains("A correct host"),
            "{name}: expected host behaviour not stated"
        );
    }
}

#[test]
fn every_fixture_script_parses_under_node() {
    for name in EXPECTED {
        let js = root().join(name).join("index.js");
        let out = Command::new("node")
            .arg("--check")
            .arg(&js)
            .output()
            .unwrap_or_else(|e| panic!("node could not be run ({e}): install Node.js 20"));
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn the_readme_has_one_row_per_fixture_with_its_tools() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let rows: Vec<Vec<String>> = readme
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| name") && !l.starts_with("|---"))
        .map(|l| {
            l.split(" | ")
                .map(|c| c.trim_matches(['|', ' ']).to_string())
                .collect()
        })
        .collect();
    let names: Vec<&str> = rows.iter().map(|r| r[0].as_str()).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(sorted, EXPECTED);
    for row in &rows {
        let listed: BTreeSet<String> = row[1]
            .split('`')
            .skip(1)
            .step_by(2)
            .map(String::from)
            .filter(|t| !t.contains(' '))
            .collect();
        let declared: BTreeSet<String> = tools_of(&row[0]).into_iter().collect();
        assert_eq!(listed, declared, "README tools of {}", row[0]);
        let kinds = [
            "ok",
            "schema",
            "unknown_tool",
            "timeout",
            "exited",
            "protocol",
            "too_large",
            "tool_error",
            "disabled",
        ];
        assert!(
            kinds.iter().any(|k| row[3].contains(k)),
            "{}: no expected outcome in {:?}",
            row[0],
            row[3]
        );
    }
}
