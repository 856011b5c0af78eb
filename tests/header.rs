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
