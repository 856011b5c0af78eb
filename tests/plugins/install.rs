//! Installing from folders and zips (hostile ones generated here byte by
//! byte), uninstalling, and the state file. Every refused install must
//! leave the whole sandbox — plugins dir and its surroundings — exactly as
//! it was, compared file by file (type, mode, bytes).

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use qc_test_support::TempDir;
use qwen_companion::plugins::install::{
    self, codes, config_values, install_from, install_with, list, list_json, reset_state,
    set_config_value, set_enabled, uninstall, InstallError, Limits,
};
use serde_json::{json, Value};

// ---------------------------------------------------------------- helpers --

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/plugins/fixtures")
}

/// A private scratch directory (removed on drop) holding `plugins/` and
/// whatever a test installs from.
struct Sandbox(TempDir);
impl Sandbox {
    fn new(tag: &str) -> Sandbox {
        Sandbox(TempDir::new(&format!("pi-{tag}")))
    }
    fn root(&self) -> &Path {
        self.0.path()
    }
    fn plugins(&self) -> PathBuf {
        self.root().join("plugins")
    }
    fn path(&self, rel: &str) -> PathBuf {
        self.root().join(rel)
    }
}

/// Every path under `root` with its type, mode and content.
fn snapshot(root: &Path) -> BTreeMap<String, String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        let mut entries: Vec<_> = fs::read_dir(dir).unwrap().map(|e| e.unwrap()).collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            let m = fs::symlink_metadata(&p).unwrap();
            let mode = m.mode();
            if m.file_type().is_symlink() {
                out.insert(rel, format!("link {:?}", fs::read_link(&p).unwrap()));
            } else if m.is_dir() {
                out.insert(rel, format!("dir {mode:o}"));
                walk(root, &p, out);
            } else if m.is_file() {
                out.insert(rel, format!("file {mode:o} {:?}", fs::read(&p).unwrap()));
            } else {
                out.insert(rel, format!("other {mode:o}"));
            }
        }
    }
    let mut out = BTreeMap::new();
    let m = fs::metadata(root).unwrap();
    out.insert(".".into(), format!("dir {:o}", m.mode()));
    walk(root, root, &mut out);
    out
}

fn copy_dir(src: &Path, dst: &Path) {
    fs::create_dir_all(dst).unwrap();
    for e in fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        let t = dst.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &t);
        } else {
            fs::copy(e.path(), t).unwrap();
        }
    }
}

/// A copy of fixture `name` whose manifest is edited by `edit`.
fn variant(sb: &Sandbox, name: &str, dst: &str, edit: impl FnOnce(&mut Value)) -> PathBuf {
    let d = sb.path(dst);
    copy_dir(&fixtures().join(name), &d);
    let mut m: Value = serde_json::from_slice(&fs::read(d.join("manifest.json")).unwrap()).unwrap();
    edit(&mut m);
    fs::write(
        d.join("manifest.json"),
        serde_json::to_vec_pretty(&m).unwrap(),
    )
    .unwrap();
    d
}

fn err(r: Result<install::InstallOutcome, InstallError>) -> InstallError {
    match r {
        Ok(o) => panic!("expected an error, installed {}", o.manifest.id),
        Err(e) => e,
    }
}

// ------------------------------------------------------- tiny zip writer --

fn crc32(data: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &b in data {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[derive(Clone)]
struct ZEntry {
    name: Vec<u8>,
    data: Vec<u8>,
    /// Unix mode stored in the external attributes (type bits included).
    mode: u32,
    crc: Option<u32>,
    /// Declared uncompressed size (both headers), when lying.
    declared: Option<u32>,
    flags: u16,
}

fn file(name: &str, data: &[u8]) -> ZEntry {
    ZEntry {
        name: name.as_bytes().to_vec(),
        data: data.to_vec(),
        mode: 0o100644,
        crc: None,
        declared: None,
        flags: 0,
    }
}

fn dir_entry(name: &str) -> ZEntry {
    ZEntry {
        mode: 0o040755,
        ..file(name, b"")
    }
}

/// Stored (uncompressed) entries, a central directory and its end record.
fn zip_bytes(entries: &[ZEntry]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for e in entries {
        let offset = out.len() as u32;
        let crc = e.crc.unwrap_or_else(|| crc32(&e.data));
        let csize = e.data.len() as u32;
        let usize_ = e.declared.unwrap_or(csize);
        let flags = e.flags | 0x0800;
        out.extend_from_slice(&0x0403_4b50u32.to_le_bytes());
        out.extend_from_slice(&20u16.to_le_bytes());
        out.extend_from_slice(&flags.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes()); // stored
        out.extend_from_slice(&0u16.to_le_bytes()); // time
        out.extend_from_slice(&0x21u16.to_le_bytes()); // 1980-01-01
        out.extend_from_slice(&crc.to_le_bytes());
        out.extend_from_slice(&csize.to_le_bytes());
        out.extend_from_slice(&usize_.to_le_bytes());
        out.extend_from_slice(&(e.name.len() as u16).to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(&e.name);
        out.extend_from_slice(&e.data);

        central.extend_from_slice(&0x0201_4b50u32.to_le_bytes());
        central.extend_from_slice(&((3u16 << 8) | 20).to_le_bytes()); // made on Unix
        central.extend_from_slice(&20u16.to_le_bytes());
        central.extend_from_slice(&flags.to_le_bytes());
        central.extend_from_slice(&0u16.to_le_bytes());
        central.extend_from_slice(&0u16.to_le_bytes());
        central.extend_from_slice(&0x21u16.to_le_bytes());
        central.extend_from_slice(&crc.to_le_bytes());
        central.extend_from_slice(&csize.to_le_bytes());
        central.extend_from_slice(&usize_.to_le_bytes());
        central.extend_from_slice(&(e.name.len() as u16).to_le_bytes());
        central.extend_from_slice(&0u16.to_le_bytes()); // extra
        central.extend_from_slice(&0u16.to_le_bytes()); // comment
        central.extend_from_slice(&0u16.to_le_bytes()); // disk
        central.extend_from_slice(&0u16.to_le_bytes()); // internal attributes
        central.extend_from_slice(&(e.mode << 16).to_le_bytes());
        central.extend_from_slice(&offset.to_le_bytes());
        central.extend_from_slice(&e.name);
    }
    let cd_offset = out.len() as u32;
    out.extend_from_slice(&central);
    out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    out.extend_from_slice(&(central.len() as u32).to_le_bytes());
    out.extend_from_slice(&cd_offset.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out
}

/// The entries of a fixture folder (files at the root, `prefix` before each name).
fn fixture_entries(name: &str, prefix: &str) -> Vec<ZEntry> {
    let mut v: Vec<ZEntry> = fs::read_dir(fixtures().join(name))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| {
            let n = format!("{prefix}{}", p.file_name().unwrap().to_string_lossy());
            file(&n, &fs::read(&p).unwrap())
        })
        .collect();
    v.sort_by(|a, b| a.name.cmp(&b.name));
    v
}

fn write_zip(sb: &Sandbox, name: &str, entries: &[ZEntry]) -> PathBuf {
    let p = sb.path(name);
    fs::write(&p, zip_bytes(entries)).unwrap();
    p
}

/// A sandbox with hello 1.0.0 installed, disabled, with data and a config file.
fn baseline(tag: &str) -> Sandbox {
    let sb = Sandbox::new(tag);
    install_from(&sb.plugins(), &fixtures().join("hello")).unwrap();
    set_enabled(&sb.plugins(), "com.example.hello", false).unwrap();
    fs::write(
        sb.plugins().join("data/com.example.hello/notes.txt"),
        b"keep me",
    )
    .unwrap();
    sb
}

fn small_limits() -> Limits {
    Limits {
        max_archive_bytes: 64 * 1024,
        max_entries: 20,
        max_file_bytes: 4096,
        max_total_bytes: 16 * 1024,
    }
}

/// Installs `src` into the baseline's plugins dir and checks the refusal:
/// the code, and the whole sandbox unchanged.
fn refused(sb: &Sandbox, src: &Path, limits: &Limits, code: &str) -> InstallError {
    let before = snapshot(sb.root());
    let e = err(install_with(&sb.plugins(), src, limits));
    assert_eq!(e.code, code, "{e}");
    assert!(!e.message.is_empty());
    let after = snapshot(sb.root());
    assert_eq!(before, after, "the sandbox changed for {code}: {e}");
    e
}

// ------------------------------------------------------------ the tests --

#[test]
fn install_a_folder_then_list_and_summaries() {
    let sb = Sandbox::new("folder");
    let o = install_from(&sb.plugins(), &fixtures().join("hello")).unwrap();
    assert!(!o.replaced);
    assert_eq!(o.previous_version, None);
    let root = sb.plugins().join("installed/com.example.hello");
    assert_eq!(o.manifest.root, fs::canonicalize(&root).unwrap());
    assert_eq!(
        fs::read(root.join("index.js")).unwrap(),
        fs::read(fixtures().join("hello/index.js")).unwrap()
    );
    let data = sb.plugins().join("data/com.example.hello");
    assert_eq!(fs::metadata(&data).unwrap().mode() & 0o777, 0o700);
    assert_eq!(fs::metadata(sb.plugins()).unwrap().mode() & 0o777, 0o700);
    assert!(!sb.plugins().join(".staging").exists());
    let s = o.summary_json();
    assert_eq!(s["id"], "com.example.hello");
    assert_eq!(s["version"], "1.0.0");
    assert_eq!(s["replaced"], false);
    assert_eq!(
        s["tools"],
        json!([{"name": "say_hello", "modelVisible": true}])
    );
    let l = list_json(&sb.plugins()).unwrap();
    assert_eq!(l[0]["enabled"], true, "new installs are enabled");
    assert_eq!(l[0]["name"], "Hello Plugin");
    assert_eq!(l.as_array().unwrap().len(), 1);
}

#[test]
fn warnings_come_back_with_the_outcome() {
    let sb = Sandbox::new("warn");
    let src = variant(&sb, "hello", "src", |m| {
        m["permissions"] = json!(["camera"]);
        m["activationEvents"] = json!(["onFullMoon"]);
    });
    let o = install_from(&sb.plugins(), &src).unwrap();
    let paths: Vec<&str> = o.warnings.iter().map(|w| w.path.as_str()).collect();
    assert_eq!(paths, ["/permissions/0", "/activationEvents/0"]);
    assert_eq!(o.summary_json()["warnings"][0]["path"], "/permissions/0");
    assert_eq!(list(&sb.plugins()).unwrap()[0].warnings.len(), 2);
}

#[test]
fn install_a_zip_of_the_full_fixture() {
    let sb = Sandbox::new("zip");
    let mut entries = vec![dir_entry("sub/")];
    entries.extend(fixture_entries("full", ""));
    entries.push(file("sub/extra.txt", b"nested"));
    let z = write_zip(&sb, "full.plugin", &entries); // no .zip extension: magic decides
    let o = install_from(&sb.plugins(), &z).unwrap();
    assert_eq!(o.manifest.id, "com.example.full");
    assert_eq!(o.manifest.tools.len(), 7);
    let root = sb.plugins().join("installed/com.example.full");
    assert_eq!(fs::read(root.join("sub/extra.txt")).unwrap(), b"nested");
    assert_eq!(
        fs::read(root.join("icon.png")).unwrap(),
        fs::read(fixtures().join("full/icon.png")).unwrap()
    );
    let items = list(&sb.plugins()).unwrap();
    assert_eq!(items.len(), 1);
    assert!(items[0].manifest.is_some());
}

#[test]
fn a_zip_made_by_python_installs_too() {
    let sb = Sandbox::new("py");
    let z = sb.path("todo.zip");
    let script = "import sys, zipfile, os\n\
        src, out = sys.argv[1], sys.argv[2]\n\
        with zipfile.ZipFile(out, 'w', zipfile.ZIP_DEFLATED) as z:\n\
        \x20   for n in sorted(os.listdir(src)):\n\
        \x20       z.write(os.path.join(src, n), n)\n";
    let st = std::process::Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(fixtures().join("todo-quadrant"))
        .arg(&z)
        .status()
        .unwrap();
    assert!(st.success());
    let o = install_from(&sb.plugins(), &z).unwrap();
    assert_eq!(o.manifest.id, "local.todo-quadrant");
    assert_eq!(
        fs::read(sb.plugins().join("installed/local.todo-quadrant/index.js")).unwrap(),
        fs::read(fixtures().join("todo-quadrant/index.js")).unwrap()
    );
}

#[test]
fn reinstall_replaces_the_old_version_and_keeps_data_and_state() {
    let sb = baseline("reinstall");
    let v2 = variant(&sb, "hello", "hello-v2", |m| m["version"] = json!("2.0.0"));
    fs::write(v2.join("new.js"), b"//").unwrap();
    let o = install_from(&sb.plugins(), &v2).unwrap();
    assert!(o.replaced);
    assert_eq!(o.previous_version, Some(semver::Version::new(1, 0, 0)));
    assert_eq!(o.summary_json()["previousVersion"], "1.0.0");
    let root = sb.plugins().join("installed/com.example.hello");
    assert!(root.join("new.js").exists());
    assert_eq!(
        fs::read(sb.plugins().join("data/com.example.hello/notes.txt")).unwrap(),
        b"keep me"
    );
    let l = list(&sb.plugins()).unwrap();
    assert_eq!(l[0].manifest.as_ref().unwrap().version.to_string(), "2.0.0");
    assert!(!l[0].enabled, "the disabled flag survives a re-install");
    let staging = sb.plugins().join(".staging");
    assert!(!staging.exists() || fs::read_dir(&staging).unwrap().next().is_none());
}

#[test]
fn leftovers_of_a_crashed_install_are_swept_by_the_next_success() {
    let sb = baseline("sweep");
    let stale = sb.plugins().join(".staging/0123456789ab");
    fs::create_dir_all(stale.join("sub")).unwrap();
    fs::write(stale.join("sub/f"), b"x").unwrap();
    // A failure leaves them (it changes nothing) ...
    let bad = sb.path("bad.zip");
    fs::write(&bad, b"not a zip").unwrap();
    refused(&sb, &bad, &Limits::default(), codes::NOT_A_ZIP);
    assert!(stale.exists());
    // ... a success removes them.
    install_from(&sb.plugins(), &fixtures().join("todo-quadrant")).unwrap();
    assert!(!sb.plugins().join(".staging").exists());
}

#[test]
fn a_failed_reinstall_keeps_the_old_version() {
    let sb = baseline("badre");
    let bad = variant(&sb, "hello", "hello-bad", |m| {
        m["version"] = json!("v2");
        m["tools"][0]["name"] = json!("say hello");
    });
    let e = refused(&sb, &bad, &Limits::default(), codes::INVALID_MANIFEST);
    let paths: Vec<&str> = e.problems.iter().map(|p| p.path.as_str()).collect();
    assert_eq!(paths, ["/version", "/tools/0/name"]);
    assert_eq!(e.to_json()["problems"][0]["path"], "/version");
    assert!(e.message.contains("and 1 more"), "{}", e.message);
}

#[test]
fn hostile_zips_are_refused_and_change_nothing() {
    let sb = baseline("hostile");
    let lim = small_limits();
    let good = fixture_entries("hello", "");
    let with = |extra: Vec<ZEntry>| {
        let mut v = good.clone();
        v.extend(extra);
        v
    };
    let cases: Vec<(&str, Vec<ZEntry>, &str)> = vec![
        (
            "slip",
            with(vec![file("../x", b"evil")]),
            codes::UNSAFE_ARCHIVE,
        ),
        (
            "slip-deep",
            with(vec![file("a/../../x", b"evil")]),
            codes::UNSAFE_ARCHIVE,
        ),
        (
            "absolute",
            with(vec![file("/tmp/x", b"evil")]),
            codes::UNSAFE_ARCHIVE,
        ),
        (
            "backslash",
            with(vec![file("a\\..\\..\\b", b"evil")]),
            codes::UNSAFE_ARCHIVE,
        ),
        (
            "drive",
            with(vec![file("C:/x", b"evil")]),
            codes::UNSAFE_ARCHIVE,
        ),
        (
            "symlink",
            with(vec![ZEntry {
                mode: 0o120777,
                ..file("link", b"/etc/passwd")
            }]),
            codes::UNSAFE_ARCHIVE,
        ),
        (
            "fifo",
            with(vec![ZEntry {
                mode: 0o010644,
                ..file("pipe", b"")
            }]),
            codes::UNSAFE_ARCHIVE,
        ),
        (
            "encrypted",
            with(vec![ZEntry {
                flags: 1,
                ..file("secret", b"xxxxxxxxxxxxxxxx")
            }]),
            codes::UNSAFE_ARCHIVE,
        ),
        (
            "non-utf8",
            with(vec![ZEntry {
                name: b"caf\xe9.txt".to_vec(),
                ..file("x", b"x")
            }]),
            codes::UNSAFE_ARCHIVE,
        ),
        (
            "duplicate",
            with(vec![file("same.txt", b"1"), file("same.txt", b"2")]),
            codes::UNSAFE_ARCHIVE,
        ),
        (
            "case",
            with(vec![file("Readme.md", b"1"), file("README.md", b"2")]),
            codes::UNSAFE_ARCHIVE,
        ),
        (
            "case-folder",
            with(vec![file("Lib/a.js", b"1"), file("lib/b.js", b"2")]),
            codes::UNSAFE_ARCHIVE,
        ),
        (
            "file-and-folder",
            with(vec![file("lib", b"1"), file("lib/b.js", b"2")]),
            codes::UNSAFE_ARCHIVE,
        ),
        (
            "honest-bomb-file",
            with(vec![file("zeros", &vec![0u8; 5000])]),
            codes::ARCHIVE_TOO_LARGE,
        ),
        (
            "honest-bomb-total",
            with(
                (0..6)
                    .map(|i| file(&format!("z{i}"), &[0u8; 3000]))
                    .collect(),
            ),
            codes::ARCHIVE_TOO_LARGE,
        ),
        (
            "too-many-entries",
            with((0..25).map(|i| file(&format!("f{i}"), b"")).collect()),
            codes::ARCHIVE_TOO_LARGE,
        ),
        (
            "lying-header",
            with(vec![ZEntry {
                declared: Some(10),
                ..file("liar", &[7u8; 3000])
            }]),
            codes::CORRUPT_ARCHIVE,
        ),
        (
            "bad-crc",
            with(vec![ZEntry {
                crc: Some(0xdead_beef),
                ..file("crc", b"hello world")
            }]),
            codes::CORRUPT_ARCHIVE,
        ),
        (
            "no-manifest",
            vec![file("index.js", b"//")],
            codes::MANIFEST_NOT_AT_ROOT,
        ),
        (
            "invalid-manifest",
            vec![
                file("manifest.json", b"{\"id\": \"x\"}"),
                file("index.js", b"//"),
            ],
            codes::INVALID_MANIFEST,
        ),
    ];
    for (name, entries, code) in cases {
        let z = write_zip(&sb, &format!("{name}.zip"), &entries);
        let e = refused(&sb, &z, &lim, code);
        eprintln!("{name}: {e}");
        fs::remove_file(&z).unwrap();
    }
}

#[test]
fn a_manifest_one_level_down_is_named() {
    let sb = baseline("nested");
    let z = write_zip(&sb, "nested.zip", &fixture_entries("hello", "my-plugin/"));
    let e = refused(&sb, &z, &Limits::default(), codes::MANIFEST_NOT_AT_ROOT);
    assert!(
        e.message.contains("my-plugin/manifest.json"),
        "{}",
        e.message
    );
}

#[test]
fn not_a_zip_and_archive_size_caps() {
    let sb = baseline("notzip");
    let p = sb.path("plugin.zip");
    fs::write(&p, b"this is plain text, not an archive").unwrap();
    refused(&sb, &p, &Limits::default(), codes::NOT_A_ZIP);
    fs::write(&p, b"").unwrap();
    refused(&sb, &p, &Limits::default(), codes::NOT_A_ZIP);
    // The zip signature, then garbage.
    fs::write(&p, b"PK\x03\x04garbage garbage garbage").unwrap();
    refused(&sb, &p, &Limits::default(), codes::CORRUPT_ARCHIVE);
    // Over the archive size cap: refused before it is parsed.
    let mut entries = fixture_entries("hello", "");
    entries.push(file("pad", &vec![1u8; 70 * 1024]));
    let z = write_zip(&sb, "big.zip", &entries);
    let lim = Limits {
        max_file_bytes: 1 << 20,
        max_total_bytes: 1 << 20,
        ..small_limits()
    };
    refused(&sb, &z, &lim, codes::ARCHIVE_TOO_LARGE);
    // Missing source, special source.
    refused(&sb, &sb.path("nope"), &Limits::default(), codes::NOT_FOUND);
    let fifo = sb.path("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    refused(&sb, &fifo, &Limits::default(), codes::UNSUPPORTED_SOURCE);
}

#[test]
fn hostile_folders_are_refused_and_change_nothing() {
    let sb = baseline("hfolder");
    let outside = sb.path("secret.txt");
    fs::write(&outside, b"secret").unwrap();

    let a = variant(&sb, "hello", "src-link-out", |_| {});
    std::os::unix::fs::symlink(&outside, a.join("leak.txt")).unwrap();
    let e = refused(&sb, &a, &Limits::default(), codes::UNSAFE_SOURCE);
    assert!(e.message.contains("leak.txt"));

    let b = variant(&sb, "hello", "src-loop", |_| {});
    fs::create_dir(b.join("d")).unwrap();
    std::os::unix::fs::symlink("..", b.join("d/up")).unwrap();
    refused(&sb, &b, &Limits::default(), codes::UNSAFE_SOURCE);

    let c = variant(&sb, "hello", "src-fifo", |_| {});
    let cpath = std::ffi::CString::new(c.join("pipe").to_str().unwrap()).unwrap();
    // SAFETY: mkfifo with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(cpath.as_ptr(), 0o600) }, 0);
    refused(&sb, &c, &Limits::default(), codes::UNSAFE_SOURCE);

    let d = variant(&sb, "hello", "src-big", |_| {});
    fs::write(d.join("big.bin"), vec![0u8; 5000]).unwrap();
    refused(&sb, &d, &small_limits(), codes::SOURCE_TOO_LARGE);

    let e2 = variant(&sb, "hello", "src-many", |_| {});
    for i in 0..25 {
        fs::write(e2.join(format!("f{i}")), b"").unwrap();
    }
    refused(&sb, &e2, &small_limits(), codes::SOURCE_TOO_LARGE);

    // The sandbox holds the plugins dir: copying it would copy its own output.
    refused(
        &sb,
        sb.root(),
        &Limits::default(),
        codes::UNSUPPORTED_SOURCE,
    );
    refused(
        &sb,
        &sb.plugins(),
        &Limits::default(),
        codes::UNSUPPORTED_SOURCE,
    );

    let f = variant(&sb, "hello", "src-main-out", |m| {
        m["main"] = json!("../secret.txt")
    });
    refused(&sb, &f, &Limits::default(), codes::INVALID_MANIFEST);
}

#[test]
fn a_symlink_inside_the_folder_is_copied_as_its_target() {
    let sb = Sandbox::new("linkin");
    let src = variant(&sb, "hello", "src", |m| m["main"] = json!("lib/entry.js"));
    fs::create_dir(src.join("lib")).unwrap();
    std::os::unix::fs::symlink("../index.js", src.join("lib/entry.js")).unwrap();
    let o = install_from(&sb.plugins(), &src).unwrap();
    let copied = sb
        .plugins()
        .join("installed/com.example.hello/lib/entry.js");
    let meta = fs::symlink_metadata(&copied).unwrap();
    assert!(meta.file_type().is_file(), "copied as a regular file");
    assert_eq!(o.manifest.main_path, fs::canonicalize(&copied).unwrap());
}

#[test]
fn a_failed_first_install_removes_the_dirs_it_created() {
    let sb = Sandbox::new("fresh");
    let before = snapshot(sb.root());
    let bad = sb.path("bad.zip");
    fs::write(&bad, zip_bytes(&[file("x/../../y", b"")])).unwrap();
    let before_with_zip = snapshot(sb.root());
    assert_ne!(before, before_with_zip);
    let e = err(install_from(&sb.plugins(), &bad));
    assert_eq!(e.code, codes::UNSAFE_ARCHIVE);
    assert_eq!(snapshot(sb.root()), before_with_zip);
    assert!(!sb.plugins().exists());
}

#[test]
fn uninstall_keeps_or_removes_data() {
    let sb = baseline("uninstall");
    let dir = sb.plugins();
    set_config_value(&dir, "com.example.hello", "x", json!(1)).unwrap_err();
    let o = uninstall(&dir, "com.example.hello", false).unwrap();
    assert!(!o.data_removed);
    assert!(!dir.join("installed/com.example.hello").exists());
    assert!(dir.join("data/com.example.hello/notes.txt").exists());
    assert!(list(&dir).unwrap().is_empty());
    let e = uninstall(&dir, "com.example.hello", false).unwrap_err();
    assert_eq!(e.code, codes::NOT_FOUND);
    // Re-install: the old state (disabled) comes back with the data.
    install_from(&dir, &fixtures().join("hello")).unwrap();
    assert!(!list(&dir).unwrap()[0].enabled);
    let o = uninstall(&dir, "com.example.hello", true).unwrap();
    assert!(o.data_removed);
    assert_eq!(
        o.summary_json(),
        json!({"id": "com.example.hello", "dataRemoved": true})
    );
    assert!(!dir.join("data/com.example.hello").exists());
    install_from(&dir, &fixtures().join("hello")).unwrap();
    assert!(list(&dir).unwrap()[0].enabled, "state was forgotten");
    for bad in ["../x", "a/b", "", ".."] {
        assert_eq!(
            uninstall(&dir, bad, true).unwrap_err().code,
            codes::INVALID_ID
        );
    }
    assert_eq!(
        uninstall(&dir, "com.example.none", true).unwrap_err().code,
        codes::NOT_FOUND
    );
}

#[test]
fn state_enabled_and_config_values() {
    let sb = Sandbox::new("state");
    let dir = sb.plugins();
    install_from(&dir, &fixtures().join("full")).unwrap();
    let id = "com.example.full";
    assert!(config_values(&dir, id).unwrap().is_empty());
    set_config_value(&dir, id, "verbose", json!(true)).unwrap();
    set_config_value(&dir, id, "limit", json!(5)).unwrap();
    set_config_value(&dir, id, "mode", json!("fast")).unwrap();
    let e = set_config_value(&dir, id, "verbose", json!("yes")).unwrap_err();
    assert_eq!(e.code, codes::INVALID_CONFIG);
    assert!(e.message.contains("boolean"), "{}", e.message);
    assert_eq!(
        set_config_value(&dir, id, "limit", json!("5"))
            .unwrap_err()
            .code,
        codes::INVALID_CONFIG
    );
    assert_eq!(
        set_config_value(&dir, id, "colour", json!(1))
            .unwrap_err()
            .code,
        codes::NOT_FOUND
    );
    assert_eq!(
        set_config_value(&dir, "com.example.none", "x", json!(1))
            .unwrap_err()
            .code,
        codes::NOT_FOUND
    );
    let v = config_values(&dir, id).unwrap();
    assert_eq!(
        Value::Object(v.clone()),
        json!({"verbose": true, "limit": 5, "mode": "fast"})
    );
    set_config_value(&dir, id, "limit", Value::Null).unwrap();
    let v = config_values(&dir, id).unwrap();
    assert!(!v.contains_key("limit"));
    let items = list(&dir).unwrap();
    let eff = items[0]
        .manifest
        .as_ref()
        .unwrap()
        .effective_config(&items[0].config)
        .unwrap();
    assert_eq!(eff["limit"], json!(20));
    assert_eq!(eff["verbose"], json!(true));

    set_enabled(&dir, id, false).unwrap();
    assert!(!list(&dir).unwrap()[0].enabled);
    set_enabled(&dir, id, true).unwrap();
    assert!(list(&dir).unwrap()[0].enabled);
    assert_eq!(
        set_enabled(&dir, "com.example.none", true)
            .unwrap_err()
            .code,
        codes::NOT_FOUND
    );
    let state = dir.join("state.json");
    assert_eq!(
        fs::metadata(&state).unwrap().permissions().mode() & 0o777,
        0o600
    );
}

#[test]
fn unknown_state_fields_are_kept() {
    let sb = baseline("keep");
    let dir = sb.plugins();
    let state = dir.join("state.json");
    let mut doc: Value = serde_json::from_slice(&fs::read(&state).unwrap()).unwrap();
    doc["futureField"] = json!({"a": 1});
    doc["plugins"]["com.example.hello"]["pinned"] = json!(true);
    fs::write(&state, doc.to_string()).unwrap();
    set_enabled(&dir, "com.example.hello", true).unwrap();
    let doc: Value = serde_json::from_slice(&fs::read(&state).unwrap()).unwrap();
    assert_eq!(doc["futureField"], json!({"a": 1}));
    assert_eq!(doc["plugins"]["com.example.hello"]["pinned"], json!(true));
    assert_eq!(doc["plugins"]["com.example.hello"]["enabled"], json!(true));
}

#[test]
fn a_corrupt_state_file_is_refused_never_overwritten_and_can_be_reset() {
    let sb = baseline("corrupt");
    let dir = sb.plugins();
    let state = dir.join("state.json");
    for bad in [
        &b"{not json"[..],
        b"[]",
        b"{\"plugins\": []}",
        b"{\"plugins\": {\"a.b\": {\"enabled\": \"no\"}}}",
    ] {
        fs::write(&state, bad).unwrap();
        let before = snapshot(sb.root());
        assert_eq!(list(&dir).unwrap_err().code, codes::CORRUPT_STATE);
        let e = set_enabled(&dir, "com.example.hello", true).unwrap_err();
        assert_eq!(e.code, codes::CORRUPT_STATE);
        assert!(e.message.contains("state.json"), "{}", e.message);
        assert_eq!(
            uninstall(&dir, "com.example.hello", true).unwrap_err().code,
            codes::CORRUPT_STATE
        );
        assert_eq!(snapshot(sb.root()), before, "nothing was touched");
    }
    let aside = reset_state(&dir).unwrap().unwrap();
    assert!(aside
        .file_name()
        .unwrap()
        .to_string_lossy()
        .starts_with("state.json.corrupt-"));
    assert_eq!(
        fs::read(&aside).unwrap(),
        b"{\"plugins\": {\"a.b\": {\"enabled\": \"no\"}}}"
    );
    assert!(list(&dir).unwrap()[0].enabled, "defaults after a reset");
    assert_eq!(reset_state(&dir).unwrap(), None);
}

#[test]
fn a_broken_installed_plugin_is_listed_with_its_problems() {
    let sb = baseline("broken");
    let dir = sb.plugins();
    let m = dir.join("installed/com.example.hello/manifest.json");
    fs::write(&m, b"{\"id\": \"com.example.hello\"}").unwrap();
    fs::create_dir(dir.join("installed/not-an-id")).unwrap();
    let items = list(&dir).unwrap();
    assert_eq!(items.len(), 2);
    let hello = items.iter().find(|p| p.id == "com.example.hello").unwrap();
    assert!(hello.manifest.is_none());
    assert!(hello
        .load_error
        .as_ref()
        .unwrap()
        .iter()
        .any(|p| p.path == "/name"));
    let j = hello.summary_json();
    assert_eq!(j["error"]["code"], "broken_plugin");
    assert_eq!(j["enabled"], false);
    assert_eq!(j["tools"], json!([]));
    let odd = items.iter().find(|p| p.id == "not-an-id").unwrap();
    assert!(odd.load_error.is_some());
    assert_eq!(
        set_config_value(&dir, "com.example.hello", "x", json!(1))
            .unwrap_err()
            .code,
        codes::BROKEN_PLUGIN
    );
    // A manifest whose id does not match its folder.
    let mut other: Value =
        serde_json::from_slice(&fs::read(fixtures().join("hello/manifest.json")).unwrap()).unwrap();
    other["id"] = json!("com.example.other");
    fs::write(&m, other.to_string()).unwrap();
    let items = list(&dir).unwrap();
    let hello = items.iter().find(|p| p.id == "com.example.hello").unwrap();
    assert_eq!(hello.load_error.as_ref().unwrap()[0].path, "/id");
}

#[test]
fn concurrent_installs_of_the_same_id_serialise() {
    let sb = Sandbox::new("race");
    let dir = sb.plugins();
    install_from(&dir, &fixtures().join("hello")).unwrap();
    let v: Vec<PathBuf> = (0..4)
        .map(|i| {
            variant(&sb, "hello", &format!("v{i}"), |m| {
                m["version"] = json!(format!("1.0.{}", i + 1))
            })
        })
        .collect();
    let handles: Vec<_> = v
        .into_iter()
        .map(|src| {
            let dir = dir.clone();
            std::thread::spawn(move || install_from(&dir, &src).map(|o| o.replaced))
        })
        .collect();
    for h in handles {
        assert!(h.join().unwrap().unwrap());
    }
    let items = list(&dir).unwrap();
    assert_eq!(items.len(), 1);
    assert!(items[0].manifest.is_some());
    let staging = dir.join(".staging");
    assert!(!staging.exists() || fs::read_dir(&staging).unwrap().next().is_none());
}
