use super::*;

#[test]
fn version_numbers_are_read_like_the_cli_prints_them() {
    assert_eq!(numbers("v22.3.0"), vec![22, 3, 0]);
    assert_eq!(numbers("0.24.4"), vec![0, 24, 4]);
    assert_eq!(numbers("0.24.4-nightly.1"), vec![0, 24, 4]);
    assert_eq!(numbers("garbage"), Vec::<u64>::new());
}

#[test]
fn options_refuse_unknown_keys_and_bad_json() {
    assert!(Options::from_json(None).is_ok());
    assert!(Options::from_json(Some(r#"{"qwen":"/x/qwen","path":"/bin"}"#)).is_ok());
    for bad in [r#"{"qwn":"x"}"#, "[", r#"{"qwen":3}"#] {
        let e = Options::from_json(Some(bad)).err().expect(bad);
        assert_eq!(e.status, crate::error::Status::InvalidJson, "{bad}");
    }
}

#[cfg(unix)]
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

#[cfg(unix)]
#[test]
fn qwen_and_node_are_checked_against_the_tested_versions() {
    let dir = crate::shared::testutil::TempDir::new("health");
    let d = dir.path();
    let node = script(d, "node", "echo v22.5.1");
    let old_node = script(d, "node18", "echo v18.2.0");
    let qwen = script(d, "qwen", &format!("echo {TESTED_QWEN}"));
    let newer = script(d, "qwen-next", "echo 0.25.0");
    let broken = script(d, "qwen-broken", "echo boom >&2; exit 3");
    let path = Some(d.as_os_str().to_os_string());

    let c = node_check(node.to_str().unwrap(), MIN_NODE_MAJOR, Clis::QWEN);
    assert_eq!(
        (c["status"].as_str(), c["version"].as_str()),
        (Some("ok"), Some("22.5.1")),
        "{c}"
    );
    let c = node_check(old_node.to_str().unwrap(), MIN_NODE_MAJOR, Clis::QWEN);
    assert_eq!(c["status"], "error", "{c}");
    assert!(c["summary"].as_str().unwrap().contains("too old"), "{c}");
    // Gemini CLI runs on Node 20: a v20 is fine for it alone, not for both.
    let node20 = script(d, "node20", "echo v20.11.0");
    let c = node_check(
        node20.to_str().unwrap(),
        MIN_NODE_MAJOR_GEMINI,
        Clis::GEMINI,
    );
    assert_eq!(c["status"], "ok", "{c}");
    let c = node_check(node20.to_str().unwrap(), MIN_NODE_MAJOR, Clis::BOTH);
    assert_eq!(c["status"], "error", "{c}");
    assert!(
        c["summary"]
            .as_str()
            .unwrap()
            .contains("Gemini CLI 0.61.0 need"),
        "{c}"
    );

    let c = cli_check(&QWEN, "qwen", path.clone(), Some(&node));
    assert_eq!(c["status"], "ok", "{c}");
    assert_eq!(c["version"], TESTED_QWEN);
    assert_eq!(c["path"], qwen.display().to_string());
    let c = cli_check(&QWEN, newer.to_str().unwrap(), path.clone(), Some(&node));
    assert_eq!(c["status"], "warn", "{c}");
    assert!(
        c["summary"].as_str().unwrap().contains("tested with"),
        "{c}"
    );
    let c = cli_check(&QWEN, broken.to_str().unwrap(), path.clone(), Some(&node));
    assert_eq!(c["status"], "error", "{c}");
    assert!(c["detail"].as_str().unwrap().contains("boom"), "{c}");

    let gemini = script(d, "gemini", &format!("echo {TESTED_GEMINI}"));
    let c = cli_check(&GEMINI, "gemini", path.clone(), Some(&node));
    assert_eq!(
        (c["status"].as_str(), c["id"].as_str()),
        (Some("ok"), Some("gemini")),
        "{c}"
    );
    assert_eq!(c["path"], gemini.display().to_string());
    let c = cli_check(&GEMINI, "/nonexistent/gemini", path, Some(&node));
    assert_eq!(c["status"], "error", "{c}");
}

#[cfg(unix)]
#[test]
fn a_version_that_never_comes_is_given_up() {
    let dir = crate::shared::testutil::TempDir::new("health");
    let slow = script(dir.path(), "slow", "exec sleep 30");
    let started = Instant::now();
    let e = version_of(&slow, None).unwrap_err();
    assert!(e.contains("did not answer"), "{e}");
    assert!(started.elapsed() < VERSION_TIMEOUT + Duration::from_secs(5));
}

#[test]
fn parts_not_in_use_are_off() {
    let r = report(
        &Options {
            qwen: Some("/nonexistent/qwen".into()),
            gemini: None,
            cli: None,
            node: Some("/nonexistent/node".into()),
            path: Some(String::new()),
        },
        7,
        &Parts {
            companion: None,
            plugins: None,
            participant: None,
        },
    );
    assert_eq!(r["library"]["abi"], 7);
    let ids: Vec<&str> = r["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            "library",
            "qwen",
            "gemini",
            "node",
            "lock_file",
            "clis",
            "plugin_mcp",
            "participant"
        ]
    );
    let status = |id: &str| {
        r["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == id)
            .unwrap()["status"]
            .clone()
    };
    assert_eq!(status("qwen"), "error");
    assert_eq!(status("node"), "error");
    // Without a companion the CLI checked is Qwen Code.
    assert_eq!(r["cli"], "qwen");
    for id in ["gemini", "lock_file", "clis", "plugin_mcp", "participant"] {
        assert_eq!(status(id), "off", "{id}");
    }
}

#[test]
fn the_cli_option_picks_the_programs_checked() {
    let e = Options::from_json(Some(r#"{"cli":"codex"}"#))
        .err()
        .unwrap();
    assert_eq!(e.status, crate::error::Status::InvalidArgument);
    let options = Options::from_json(Some(
        r#"{"cli":"gemini","gemini":"qc-no-such-gemini","node":"/nonexistent/node","path":""}"#,
    ))
    .unwrap();
    let r = report(
        &options,
        7,
        &Parts {
            companion: None,
            plugins: None,
            participant: None,
        },
    );
    let check = |id: &str| {
        r["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == id)
            .unwrap()
            .clone()
    };
    assert_eq!(r["cli"], "gemini");
    assert_eq!(check("qwen")["status"], "off");
    let g = check("gemini");
    assert_eq!(g["status"], "error", "{g}");
    assert!(
        g["summary"]
            .as_str()
            .unwrap()
            .contains("@google/gemini-cli@0.61.0"),
        "{g}"
    );
    assert_eq!(r["tested"]["node"], ">= 20");
}
