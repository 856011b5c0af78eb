use super::*;

#[test]
fn env_is_an_allowlist() {
    let extra = vec![
        ("PLUGIN_ID".into(), "x".into()),
        ("PATH".into(), "/p".into()),
    ];
    let env = plugin_env(&extra);
    // Names compare as the platform does (case-insensitively on Windows,
    // where the host's spelling, e.g. `ComSpec`, is kept).
    let rules = crate::sys::platform::PLUGIN_ENV;
    let same = |a: &str, b: &str| {
        if rules.case_insensitive {
            a.eq_ignore_ascii_case(b)
        } else {
            a == b
        }
    };
    for (k, _) in &env {
        let k = k.to_str().unwrap();
        assert!(
            ALLOWED_ENV.iter().any(|n| same(n, k))
                || (rules.locale_prefix && k.starts_with("LC_"))
                || k == "PLUGIN_ID",
            "{k} leaked"
        );
    }
    let path = |k: &OsString| same(k.to_str().unwrap(), "PATH");
    assert_eq!(
        env.iter().filter(|(k, _)| path(k)).count(),
        1,
        "PATH overridden once"
    );
    assert!(env.iter().any(|(k, v)| path(k) && v == "/p"));
}

fn vars(list: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
    list.iter().map(|(k, v)| (k.into(), v.into())).collect()
}

#[test]
fn windows_env_matches_names_case_insensitively_and_keeps_the_host_spelling() {
    use crate::sys::platform::WINDOWS_ENV;
    let host = vars(&[
        ("PATH", "C:\\Windows"),
        ("SYSTEMROOT", "C:\\Windows"),
        ("windir", "C:\\Windows"),
        ("UserProfile", "C:\\Users\\ann"),
        ("ProgramFiles(x86)", "C:\\PF86"),
        ("AWS_SECRET_ACCESS_KEY", "s"),
        ("LC_ALL", "C"),
        ("HOME", "/h"),
    ]);
    let extra = vars(&[("Path", "D:\\node"), ("PLUGIN_ID", "x")]);
    let env = env_with(host, &extra, WINDOWS_ENV);
    assert_eq!(
        env,
        vars(&[
            ("SYSTEMROOT", "C:\\Windows"),
            ("windir", "C:\\Windows"),
            ("UserProfile", "C:\\Users\\ann"),
            ("ProgramFiles(x86)", "C:\\PF86"),
            ("Path", "D:\\node"),
            ("PLUGIN_ID", "x"),
        ])
    );
}

#[test]
fn posix_env_is_case_sensitive_with_locales() {
    use crate::sys::platform::POSIX_ENV;
    let host = vars(&[
        ("PATH", "/bin"),
        ("Path", "/x"),
        ("HOME", "/h"),
        ("LC_ALL", "C"),
        ("LC_", "bad"),
        ("SystemRoot", "C:"),
    ]);
    let extra = vars(&[("path", "/p")]);
    let env = env_with(host, &extra, POSIX_ENV);
    assert_eq!(
        env,
        vars(&[
            ("PATH", "/bin"),
            ("HOME", "/h"),
            ("LC_ALL", "C"),
            ("path", "/p")
        ])
    );
}

#[test]
fn tail_keeps_the_last_bytes() {
    let t = Tail::default();
    t.push(&vec![b'a'; TAIL_BYTES]);
    t.push(b"end");
    let s = t.text();
    assert_eq!(s.len(), TAIL_BYTES);
    assert!(s.ends_with("aend"));
    t.push(&vec![b'z'; TAIL_BYTES * 2]);
    assert_eq!(t.text(), "z".repeat(TAIL_BYTES));
}

#[test]
fn exit_info_text() {
    assert_eq!(
        ExitInfo {
            code: Some(3),
            signal: None
        }
        .to_string(),
        "exit code 3"
    );
    assert_eq!(
        ExitInfo {
            code: None,
            signal: Some(9)
        }
        .to_string(),
        "killed by signal 9 (SIGKILL)"
    );
}

#[cfg(target_os = "linux")]
mod linux_tests {
    //! Tests of the plugin child's setup that read Linux's `/proc`.

    use std::os::fd::AsRawFd;
    use std::path::PathBuf;
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    fn alive(pid: i32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| {
                let st = s.rsplit(')').next().unwrap_or("").trim_start();
                !st.starts_with('Z') && !st.starts_with('X')
            })
            .unwrap_or(false)
    }

    fn wait_dead(pid: i32) -> bool {
        for _ in 0..300 {
            if !alive(pid) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }

    #[test]
    fn child_setup_and_pdeathsig_follow_the_spawn_thread() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let spawner = Arc::new(Spawner::new().unwrap());
        // A file the IDE opened without O_CLOEXEC must not reach the child.
        let leaked = std::fs::File::open("/dev/null").unwrap();
        // SAFETY: clearing FD_CLOEXEC on our own fd.
        unsafe { libc::fcntl(leaked.as_raw_fd(), libc::F_SETFD, 0) };
        let (s2, h) = (spawner.clone(), rt.handle().clone());
        // Requested from a thread that ends right away (like a retiring
        // blocking-pool thread): the child must not die with it.
        let child = std::thread::spawn(move || {
            s2.spawn(
                SpawnSpec {
                    program: "sleep".into(),
                    args: vec!["30".into()],
                    cwd: "/".into(),
                    env: vec![("PLUGIN_ID".into(), "a.b".into())],
                    electron: false,
                },
                &h,
            )
            .unwrap()
        })
        .join()
        .unwrap();
        let pid = child.pid();
        std::thread::sleep(Duration::from_millis(200));
        assert!(alive(pid), "the child died with the requesting thread");
        // SAFETY: getpgid reads the child's group.
        assert_eq!(unsafe { libc::getpgid(pid) }, pid, "own process group");
        let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
        let vars: Vec<&[u8]> = env.split(|&b| b == 0).collect();
        assert!(vars.contains(&&b"NODE_CHANNEL_FD=3"[..]));
        assert!(vars.contains(&&b"NODE_CHANNEL_SERIALIZATION_MODE=json"[..]));
        assert!(vars.contains(&&b"PLUGIN_ID=a.b"[..]));
        let fds: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        let mut fds: Vec<i32> = fds.iter().map(|f| f.parse().unwrap()).collect();
        fds.sort_unstable();
        assert_eq!(fds, vec![0, 1, 2, 3], "only stdio and the channel");
        let fd3 = std::fs::read_link(format!("/proc/{pid}/fd/3")).unwrap();
        assert!(fd3.to_string_lossy().starts_with("socket:"), "{fd3:?}");
        assert_eq!(
            std::fs::read_link(format!("/proc/{pid}/fd/0")).unwrap(),
            PathBuf::from("/dev/null")
        );
        assert_eq!(find_tagged(child.tag()), vec![pid]);
        drop(leaked);
        // The spawn thread ends: the kernel kills its children.
        spawner.shutdown();
        assert!(wait_dead(pid), "PR_SET_PDEATHSIG did not fire");
        let exit = rt
            .block_on(child.wait_exit(Duration::from_secs(3)))
            .unwrap();
        assert_eq!(exit.signal, Some(libc::SIGKILL));
    }
}
