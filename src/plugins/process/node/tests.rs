use std::cell::Cell;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use super::{is_bare_name, path_with_node_dir, resolve, search, Places};
use crate::shared::testutil::TempDir;

fn exe(dir: &Path, name: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    // With the platform's executable suffix (`node.exe` on Windows), as the
    // search looks for it.
    let p = dir.join(format!("{name}{}", crate::sys::platform::EXE_SUFFIX));
    std::fs::write(&p, "#!/bin/sh\n").unwrap();
    crate::sys::fs::set_mode(&p, 0o755).unwrap();
    p
}

fn join(dirs: &[&Path]) -> OsString {
    std::env::join_paths(dirs).unwrap()
}

#[test]
fn bare_names_and_paths() {
    assert!(is_bare_name(OsStr::new("node")));
    assert!(is_bare_name(OsStr::new("nodejs")));
    assert!(!is_bare_name(OsStr::new("./node")));
    assert!(!is_bare_name(OsStr::new("/usr/bin/node")));
    assert!(!is_bare_name(OsStr::new("bin/node")));
    // A setting with a path in it is spawned as it is, found or not.
    assert_eq!(
        resolve(OsStr::new("/nowhere/qc-test/node")),
        Ok(PathBuf::from("/nowhere/qc-test/node"))
    );
}

#[test]
fn search_order_path_then_login_shell_then_install_dirs() {
    let t = TempDir::new("node-search");
    let (a, b, c, d) = (
        t.path().join("a"),
        t.path().join("b"),
        t.path().join("c"),
        t.path().join("d"),
    );
    std::fs::create_dir_all(&a).unwrap();
    let in_b = exe(&b, "node");
    let in_c = exe(&c, "node");
    let in_d = exe(&d, "node");
    let shell_runs = Cell::new(0);
    let listed = Cell::new(0);
    let shell_path = join(&[&a, &c]);

    // On our PATH: neither the shell nor the folders are asked.
    let found = search(
        OsStr::new("node"),
        Places {
            path: Some(join(&[&a, &b])),
            login_path: &mut || {
                shell_runs.set(shell_runs.get() + 1);
                Ok(shell_path.clone())
            },
            install_dirs: &|| {
                listed.set(listed.get() + 1);
                vec![d.clone()]
            },
        },
    );
    assert_eq!(found, Ok(in_b));
    assert_eq!((shell_runs.get(), listed.get()), (0, 0));

    // Launchd's short PATH: the login shell's PATH finds it.
    let found = search(
        OsStr::new("node"),
        Places {
            path: Some("/qc-none/usr/bin:/qc-none/bin".into()),
            login_path: &mut || {
                shell_runs.set(shell_runs.get() + 1);
                Ok(shell_path.clone())
            },
            install_dirs: &|| {
                listed.set(listed.get() + 1);
                vec![d.clone()]
            },
        },
    );
    assert_eq!(found, Ok(in_c));
    assert_eq!((shell_runs.get(), listed.get()), (1, 0));

    // No shell answer: the install folders, in order.
    let found = search(
        OsStr::new("node"),
        Places {
            path: None,
            login_path: &mut || Err("no login shell is known ($SHELL is unset)".into()),
            install_dirs: &|| vec![a.clone(), d.clone(), b.clone()],
        },
    );
    assert_eq!(found, Ok(in_d));
}

#[test]
fn not_found_names_everything_searched() {
    let t = TempDir::new("node-missing");
    let dir = t.path().join("bin");
    // A file that is not executable is not a node.
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("node"), "").unwrap();
    crate::sys::fs::set_mode(&dir.join("node"), 0o644).unwrap();
    let e =
        search(
            OsStr::new("node"),
            Places {
                path: Some(join(&[&dir])),
                login_path: &mut || {
                    Err("the login shell /bin/zsh did not answer within 5000 ms".into())
                },
                install_dirs: &|| vec![PathBuf::from("/qc-none/opt/homebrew/bin"), dir.clone()],
            },
        )
        .unwrap_err();
    for part in [
        "node was not found",
        dir.to_str().unwrap(),
        "did not answer within 5000 ms",
        "/qc-none/opt/homebrew/bin",
    ] {
        assert!(e.contains(part), "{part:?} not in {e}");
    }
    // The search serves `qwen` too: the advice about the plugin host's
    // `node` setting is added by `resolve` only.
    assert!(!e.contains("setting"), "{e}");
    // A relative PATH entry is never searched (it would depend on the cwd).
    let e = search(
        OsStr::new("node"),
        Places {
            path: Some("bin".into()),
            login_path: &mut || Ok("".into()),
            install_dirs: &Vec::new,
        },
    );
    assert!(e.is_err());
}

#[test]
fn plugin_path_starts_with_the_node_folder() {
    // `PATH`'s delimiter: `:`, or `;` on Windows.
    let d = crate::sys::platform::PATH_STYLE.delimiter();
    let node = Path::new("/opt/homebrew/bin/node");
    assert_eq!(
        path_with_node_dir(node, Some(OsStr::new(&format!("/usr/bin{d}/bin")))),
        Some(OsString::from(format!(
            "/opt/homebrew/bin{d}/usr/bin{d}/bin"
        )))
    );
    assert_eq!(
        path_with_node_dir(
            node,
            Some(OsStr::new(&format!("/usr/bin{d}/opt/homebrew/bin")))
        ),
        None,
        "already there"
    );
    assert_eq!(
        path_with_node_dir(node, None),
        Some(OsString::from("/opt/homebrew/bin"))
    );
}
