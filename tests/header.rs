//! The committed C header must equal what cbindgen generates from src/ffi.
//! Regenerate with `QC_UPDATE_HEADER=1 cargo test --test header`.

use std::path::PathBuf;

#[test]
fn header_is_up_to_date() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(root.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(&root)
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

/// Every exported function is in the header (cbindgen skips macro-made ones)
/// and carries a doc comment (ownership, threads, errors are documented there).
#[test]
fn every_export_is_declared_and_documented() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let header = std::fs::read_to_string(root.join("include/qwen_companion.h")).unwrap();
    let mut count = 0;
    for entry in std::fs::read_dir(root.join("src/ffi")).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if line.trim() != "#[no_mangle]" {
                continue;
            }
            count += 1;
            let sig = lines[i + 1];
            let name = sig
                .split("fn ")
                .nth(1)
                .and_then(|s| s.split('(').next())
                .unwrap_or_else(|| panic!("{}: no fn after #[no_mangle]", path.display()));
            assert!(
                header.contains(&format!(" {name}(")) || header.contains(&format!("*{name}(")),
                "{name} is exported but not declared in the header"
            );
            assert!(
                i > 0 && lines[i - 1].trim_start().starts_with("///"),
                "{name} has no doc comment"
            );
        }
    }
    assert!(count >= 28, "found only {count} exports");
}
