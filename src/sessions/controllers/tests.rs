use super::*;
use crate::sessions::names::sha256_hex;
use serde_json::json;

fn resolve(path: &Path, presented: &str) -> Option<Controller> {
    Grants::new(path.to_path_buf()).resolve(presented)
}

fn valid_ids(path: &Path) -> HashSet<String> {
    Grants::new(path.to_path_buf()).valid_ids()
}

fn registry(entries: &[(&str, &str, &str)]) -> Value {
    let list: Vec<Value> = entries
            .iter()
            .map(|(id, label, token)| json!({"id": id, "label": label, "tokenHash": sha256_hex(token.as_bytes()), "createdAt": 1}))
            .collect();
    json!({"schemaVersion": 1, "controllers": list})
}

/// Replaces the file the way Qwen does: a temp file renamed over it.
fn replace(dir: &Path, v: &Value) -> std::path::PathBuf {
    let p = dir.join("peer-controllers.json");
    let tmp = dir.join("peer-controllers.json.tmp");
    std::fs::write(&tmp, v.to_string()).unwrap();
    std::fs::rename(&tmp, &p).unwrap();
    p
}

#[test]
fn parsed_once_until_changed() {
    let dir = crate::shared::testutil::TempDir::new("ctlcache");
    let a = format!("qpc_{}", "ab".repeat(32));
    let b = format!("qpc_{}", "cd".repeat(32));
    let p = replace(dir.path(), &registry(&[("c_0000000a", "A", &a)]));
    let grants = Grants::new(p.clone());
    for _ in 0..1000 {
        assert_eq!(grants.resolve(&a).map(|c| c.id), Some("c_0000000a".into()));
        assert_eq!(grants.resolve(&b), None);
    }
    assert_eq!(
        grants.parses(),
        1,
        "2000 lookups of an unchanged file parse it once"
    );
    assert_eq!(
        grants.valid_ids(),
        HashSet::from(["c_0000000a".to_string()])
    );
    assert_eq!(grants.parses(), 1);

    // `controllers add`: the new grant works for the next lookup.
    replace(
        dir.path(),
        &registry(&[("c_0000000a", "A", &a), ("c_0000000b", "B", &b)]),
    );
    assert_eq!(grants.resolve(&b).map(|c| c.label), Some("B".into()));
    assert_eq!(grants.parses(), 2);
    // `controllers remove`: revoked at once.
    replace(dir.path(), &registry(&[("c_0000000b", "B", &b)]));
    assert_eq!(grants.resolve(&a), None);
    assert!(grants.resolve(&b).is_some());
    assert_eq!(grants.parses(), 3);
    // An in-place edit (same inode, another size) is seen too.
    std::fs::write(&p, registry(&[("c_0000000a", "AA", &a)]).to_string()).unwrap();
    assert_eq!(grants.resolve(&a).map(|c| c.label), Some("AA".into()));
    assert_eq!(grants.resolve(&b), None);
    // A deleted file means no controllers.
    std::fs::remove_file(&p).unwrap();
    assert_eq!(grants.resolve(&a), None);
    assert!(grants.valid_ids().is_empty());
    // Written again: read again.
    replace(dir.path(), &registry(&[("c_0000000a", "A", &a)]));
    assert!(grants.resolve(&a).is_some());
    // A symlink in its place is ignored, even to a good file.
    let good = dir.path().join("good.json");
    std::fs::write(&good, registry(&[("c_0000000a", "A", &a)]).to_string()).unwrap();
    std::fs::remove_file(&p).unwrap();
    crate::sys::fs::symlink(&good, &p).unwrap();
    assert_eq!(grants.resolve(&a), None);
}

fn write(dir: &Path, v: &Value) -> std::path::PathBuf {
    let p = dir.join("peer-controllers.json");
    std::fs::write(&p, v.to_string()).unwrap();
    p
}

#[test]
fn grants_table() {
    let dir = crate::shared::testutil::TempDir::new("ctl");
    let tok = format!("qpc_{}", "ab".repeat(32));
    let other = format!("qpc_{}", "cd".repeat(32));
    let entry = |id: &str, label: &str, token: &str| json!({"id": id, "label": label, "tokenHash": sha256_hex(token.as_bytes()), "createdAt": 1});
    let p = write(
        dir.path(),
        &json!({"schemaVersion": 1, "controllers": [
            entry("c_0000000a", " CI\nbot ", &tok),
            entry("bad", "x", &other),
            {"id": "c_0000000b", "label": "", "tokenHash": sha256_hex(other.as_bytes()), "createdAt": 1},
            {"id": "c_0000000c", "label": "y", "tokenHash": "AB".repeat(32), "createdAt": 1},
            {"id": "c_0000000d", "label": "z", "tokenHash": sha256_hex(other.as_bytes())},
            entry("c_0000000e", &"l".repeat(41), &other),
        ]}),
    );
    assert_eq!(
        resolve(&p, &tok),
        Some(Controller {
            id: "c_0000000a".into(),
            label: "CI bot".into()
        })
    );
    assert_eq!(resolve(&p, &other), None, "every other entry is malformed");
    assert_eq!(resolve(&p, &tok.to_uppercase()), None);
    assert_eq!(resolve(&p, &tok[4..]), None, "prefix required");
    assert_eq!(valid_ids(&p), HashSet::from(["c_0000000a".to_string()]));

    // A wrong schemaVersion disables every grant.
    let p = write(
        dir.path(),
        &json!({"schemaVersion": 2, "controllers": [entry("c_0000000a", "x", &tok)]}),
    );
    assert_eq!(resolve(&p, &tok), None);
    // A symlink to a good file is ignored.
    let good = dir.path().join("good.json");
    std::fs::write(
        &good,
        json!({"schemaVersion": 1, "controllers": [entry("c_0000000a", "x", &tok)]}).to_string(),
    )
    .unwrap();
    assert!(resolve(&good, &tok).is_some());
    let link = dir.path().join("link.json");
    crate::sys::fs::symlink(&good, &link).unwrap();
    assert_eq!(resolve(&link, &tok), None);
    // Too large.
    let big = dir.path().join("big.json");
    let mut v = json!({"schemaVersion": 1, "controllers": [entry("c_0000000a", "x", &tok)]});
    v["pad"] = json!("p".repeat(70_000));
    std::fs::write(&big, v.to_string()).unwrap();
    assert_eq!(resolve(&big, &tok), None);
    // Missing file.
    assert_eq!(resolve(&dir.path().join("none.json"), &tok), None);
    // Over-long presented token.
    assert!(!is_presentable(&format!("qpc_{}", "a".repeat(253))));
    assert!(is_presentable(&format!("qpc_{}", "a".repeat(252))));
}
