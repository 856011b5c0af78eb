use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{login_shell_path, node_install_dirs, parse_env_path, PATH_BEGIN, PATH_END};
use crate::shared::testutil::TempDir;

fn write_script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    crate::sys::fs::set_mode(&p, 0o755).unwrap();
    p
}

/// `login_shell_path`, retried while the fresh script is busy (another
/// test thread's fork may briefly hold it open for writing).
fn ask(shell: &Path, timeout: Duration) -> Result<OsString, String> {
    for _ in 0..50 {
        match login_shell_path(Some(shell), timeout) {
            Err(e) if e.contains("busy") => std::thread::sleep(Duration::from_millis(20)),
            r => return r,
        }
    }
    panic!("{} stayed busy", shell.display());
}

#[test]
fn login_shell_path_reads_path_between_markers() {
    let dir = TempDir::new("shell");
    let dump = dir.path().join("env.txt");
    let args = dir.path().join("args.txt");
    let body = format!(
        "echo \"$@\" > '{args}'\nenv > '{dump}'\necho 'motd noise'\necho PATH=/not/this\n\
         echo {PATH_BEGIN}\necho HOME=/h\necho PATH=/opt/fake/bin:/usr/bin\necho {PATH_END}",
        args = args.display(),
        dump = dump.display(),
    );
    let shell = write_script(dir.path(), "zsh", &body);
    let path = ask(&shell, Duration::from_secs(20)).unwrap();
    assert_eq!(path, OsString::from("/opt/fake/bin:/usr/bin"));
    let args = std::fs::read_to_string(&args).unwrap();
    assert!(args.starts_with("-i -l -c "), "{args}");
    // Only the basic variables reach the shell (sh adds PWD, SHLVL, `_`).
    let dump = std::fs::read_to_string(&dump).unwrap();
    let mut saw_marker = false;
    for line in dump.lines().filter(|l| l.contains('=')) {
        let key = &line[..line.find('=').unwrap()];
        saw_marker |= line == "QWEN_COMPANION_RESOLVING_ENVIRONMENT=1";
        assert!(
            matches!(
                key,
                "HOME"
                    | "USER"
                    | "LOGNAME"
                    | "SHELL"
                    | "PATH"
                    | "LANG"
                    | "TMPDIR"
                    | "PWD"
                    | "OLDPWD"
                    | "SHLVL"
                    | "_"
                    | "QWEN_COMPANION_RESOLVING_ENVIRONMENT"
            ) || key.starts_with("LC_"),
            "{key} reached the shell"
        );
    }
    assert!(saw_marker);
    // csh and tcsh take no -l with -c.
    let csh = write_script(
        dir.path(),
        "tcsh",
        &format!("echo \"$@\" > '{}'", dir.path().join("c.txt").display()),
    );
    assert!(
        ask(&csh, Duration::from_secs(20)).is_err(),
        "no markers, no PATH"
    );
    let c = std::fs::read_to_string(dir.path().join("c.txt")).unwrap();
    assert!(c.starts_with("-i -c "), "{c}");
}

#[test]
fn login_shell_failures_say_why() {
    let dir = TempDir::new("shell-bad");
    let silent = write_script(dir.path(), "bash", "exit 3");
    let e = ask(&silent, Duration::from_secs(20)).unwrap_err();
    assert!(e.contains("printed no PATH") && e.contains("bash"), "{e}");
    // A shell that hangs (with a child holding the pipe) is killed with
    // its session once the timeout is over.
    let hang = write_script(dir.path(), "fish", "sleep 30 & sleep 30");
    let t = Instant::now();
    let e = ask(&hang, Duration::from_millis(300)).unwrap_err();
    assert!(e.contains("did not answer within 300 ms"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    let e = ask(&dir.path().join("missing-sh"), Duration::from_secs(1)).unwrap_err();
    assert!(e.contains("cannot run the login shell"), "{e}");
}

#[test]
fn env_output_parsing() {
    let out = format!("x\n{PATH_BEGIN}\nA=1\nPATH=/a:/b\nB=2\n{PATH_END}\nPATH=/late\n");
    assert_eq!(parse_env_path(out.as_bytes()), Some("/a:/b".into()));
    let out = format!("{PATH_BEGIN}\nPATH=\n{PATH_END}\n");
    assert_eq!(
        parse_env_path(out.as_bytes()),
        None,
        "an empty PATH is none"
    );
    let out = format!("{PATH_BEGIN}\nPATH=/a\n");
    assert_eq!(
        parse_env_path(out.as_bytes()),
        None,
        "cut off before the end marker"
    );
    assert_eq!(parse_env_path(b"PATH=/a\n"), None);
}

#[test]
fn install_dirs_nvm_newest_first_and_overrides() {
    let home = TempDir::new("home");
    let h = home.path();
    for v in ["v9.11.2", "v20.9.0", "v18.20.1", "v20.10.0", "system"] {
        std::fs::create_dir_all(h.join(".nvm/versions/node").join(v).join("bin")).unwrap();
    }
    let none = |_: &str| None;
    let dirs = node_install_dirs(Some(h), &none);
    let pos = |p: PathBuf| {
        dirs.iter()
            .position(|d| *d == p)
            .unwrap_or_else(|| panic!("{} missing", p.display()))
    };
    let nvm = |v: &str| h.join(".nvm/versions/node").join(v).join("bin");
    assert!(pos(PathBuf::from("/opt/homebrew/bin")) < pos(PathBuf::from("/usr/local/bin")));
    assert!(pos(PathBuf::from("/usr/local/bin")) < pos(nvm("v20.10.0")));
    let order: Vec<usize> = ["v20.10.0", "v20.9.0", "v18.20.1", "v9.11.2", "system"]
        .iter()
        .map(|v| pos(nvm(v)))
        .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}");
    for rel in [
        ".volta/bin",
        ".asdf/shims",
        ".local/share/mise/shims",
        ".local/share/fnm/aliases/default/bin",
        "Library/Application Support/fnm/aliases/default/bin",
    ] {
        assert!(pos(h.join(rel)) > pos(nvm("system")), "{rel}");
    }
    assert_eq!(dirs.last(), Some(&h.join(".local/bin")));
    // Variables win over the defaults (an empty one is unset).
    let other = TempDir::new("nvm");
    std::fs::create_dir_all(other.path().join("versions/node/v22.1.0/bin")).unwrap();
    let o = other.path().to_path_buf();
    let vars = move |k: &str| match k {
        "NVM_DIR" => Some(o.clone().into_os_string()),
        "VOLTA_HOME" => Some("/v".into()),
        "FNM_DIR" => Some("/f".into()),
        "N_PREFIX" => Some("/n".into()),
        "ASDF_DATA_DIR" => Some("".into()),
        _ => None,
    };
    let dirs = node_install_dirs(Some(h), &vars);
    assert!(dirs.contains(&other.path().join("versions/node/v22.1.0/bin")));
    assert!(!dirs.contains(&nvm("v20.10.0")));
    assert!(dirs.contains(&PathBuf::from("/v/bin")));
    assert!(dirs.contains(&PathBuf::from("/f/aliases/default/bin")));
    assert!(dirs.contains(&PathBuf::from("/n/bin")));
    assert!(dirs.contains(&h.join(".asdf/shims")));
    // No home: only the fixed folders.
    let dirs = node_install_dirs(None, &none);
    assert!(dirs.iter().all(|d| !d.starts_with(h)));
    assert!(dirs.contains(&PathBuf::from("/opt/homebrew/bin")));
}
