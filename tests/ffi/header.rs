//! The committed C header must equal what cbindgen generates from src/ffi and
//! the status-code table src/error/codes.rs (only those: constants elsewhere
//! in the crate never leak into it).
//! Regenerate with `QC_UPDATE_HEADER=1 cargo test --test header`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

#[test]
fn header_is_up_to_date() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(root.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_src(root.join("src/error/codes.rs"))
        .with_src(root.join("src/ffi/mod.rs"))
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header")
        .write(&mut generated);
    let path = root.join("include/qwen_companion.h");
    if std::env::var_os("QC_UPDATE_HEADER").is_some() {
        std::fs::write(&path, &generated).expect("write header");
    }
    let committed = std::fs::read(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "include/qwen_companion.h is stale: run `QC_UPDATE_HEADER=1 cargo test --test header`"
    );
}

/// Strips `/* … */` and `// …` comments from C source.
fn strip_c_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("/*") {
            rest = r.find("*/").map(|i| &r[i + 2..]).unwrap_or("");
            out.push(' ');
        } else if let Some(r) = rest.strip_prefix("//") {
            rest = r.find('\n').map(|i| &r[i..]).unwrap_or("");
        } else {
            let c = rest.chars().next().unwrap();
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// The function names declared in a C header: every top-level declaration
/// `… NAME(…);` (no body), outside comments and preprocessor lines, where
/// the token before `(` is an identifier (so typedefs of function pointers,
/// `(*name)(…)`, are not counted).
fn header_functions(header: &str) -> BTreeSet<String> {
    let code: String = strip_c_comments(header)
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n");
    let mut names = BTreeSet::new();
    for decl in code.split(';') {
        let decl = decl.trim();
        if decl.starts_with("typedef") || decl.contains('{') || decl.contains('}') {
            // A typedef, or the `extern "C" {` wrapper that precedes the first one.
            if let Some(i) = decl.rfind('{') {
                let tail = decl[i + 1..].trim();
                if !tail.starts_with("typedef") {
                    if let Some(n) = declared_name(tail) {
                        names.insert(n);
                    }
                }
            }
            continue;
        }
        if let Some(n) = declared_name(decl) {
            names.insert(n);
        }
    }
    names
}

fn declared_name(decl: &str) -> Option<String> {
    let open = decl.find('(')?;
    let before = decl[..open].trim_end();
    let name: String = before
        .chars()
        .rev()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    (!name.is_empty() && before.len() > name.len()).then_some(name)
}

/// Every `#[no_mangle]` exported function in src/ffi: `(name, documented)`.
/// The attribute may be followed by other attributes; the signature
/// `pub [unsafe] extern "C" fn NAME(` must follow.
fn rust_exports(root: &std::path::Path) -> BTreeMap<String, bool> {
    let mut out = BTreeMap::new();
    let mut files: Vec<_> = std::fs::read_dir(root.join("src/ffi"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .collect();
    files.sort();
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let t = line.trim();
            if t != "#[no_mangle]" && t != "#[unsafe(no_mangle)]" {
                continue;
            }
            let sig = lines[i + 1..]
                .iter()
                .map(|l| l.trim())
                .find(|l| !l.starts_with("#["))
                .unwrap_or_else(|| panic!("{}: nothing after #[no_mangle]", path.display()));
            assert!(
                sig.starts_with("pub ") && sig.contains("extern \"C\" fn "),
                "{}: #[no_mangle] on something that is not a `pub extern \"C\" fn`: {sig}",
                path.display()
            );
            let name = sig
                .split("fn ")
                .nth(1)
                .and_then(|s| s.split('(').next())
                .unwrap()
                .trim()
                .to_string();
            // Doc comment: the nearest line above the attributes is `///`.
            let documented = lines[..i]
                .iter()
                .rev()
                .map(|l| l.trim())
                .find(|l| !l.starts_with("#["))
                .is_some_and(|l| l.starts_with("///"));
            assert!(
                out.insert(name.clone(), documented).is_none(),
                "{name} exported twice"
            );
        }
    }
    out
}

/// The set of functions exported from src/ffi equals the set declared in
/// the header, both ways (cbindgen silently skips, for example, functions
/// made by macros, and a hand edit could declare one that does not exist),
/// and every export carries a doc comment (ownership, threads and errors are
/// documented there, and cbindgen copies it into the header).
#[test]
fn exports_and_header_declarations_are_the_same_set() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let header = std::fs::read_to_string(root.join("include/qwen_companion.h")).unwrap();
    let exports = rust_exports(&root);
    let declared = header_functions(&header);
    let exported: BTreeSet<String> = exports.keys().cloned().collect();
    let missing: Vec<_> = exported.difference(&declared).collect();
    let extra: Vec<_> = declared.difference(&exported).collect();
    assert!(
        missing.is_empty(),
        "exported but not declared in the header: {missing:?}"
    );
    assert!(
        extra.is_empty(),
        "declared in the header but not exported: {extra:?}"
    );
    let undocumented: Vec<_> = exports
        .iter()
        .filter(|(_, d)| !**d)
        .map(|(n, _)| n)
        .collect();
    assert!(
        undocumented.is_empty(),
        "exports without a doc comment: {undocumented:?}"
    );
    // The parsers themselves find what they must (a parser finding nothing
    // would make the set comparison vacuous).
    assert!(exported.contains("qc_companion_new") && exported.contains("qc_string_free"));
    assert!(declared.contains("qc_participant_wait") && declared.contains("qc_version"));
    assert!(
        !declared.contains("qc_log_fn"),
        "function-pointer typedefs are not functions"
    );
}

#[test]
fn header_parser_sees_declarations_only() {
    let h = "/* qc_in_comment(void); */\n#define QC_X(a) (a)\ntypedef void (*qc_cb)(void *u);\n\
             #ifdef __cplusplus\nextern \"C\" {\n#endif\n\
             qc_status qc_a(const char *s, char **error);\n\
             const char *qc_b(void);\n// qc_c(void);\nvoid qc_d(char *s);\n\
             #ifdef __cplusplus\n}  // extern \"C\"\n#endif\n";
    let names: Vec<String> = header_functions(h).into_iter().collect();
    assert_eq!(names, ["qc_a", "qc_b", "qc_d"]);
}
