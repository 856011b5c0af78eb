//! The crate's build script (`build` in Cargo.toml): link settings that
//! differ by OS and cannot be said in Cargo.toml.
//!
//! macOS: the cdylib's install name is `@rpath/libqwen_companion.dylib`.
//! Without it the linker records the path the file was built at (e.g.
//! `…/target/release/deps/libqwen_companion.dylib`), and a program linked
//! against a prebuilt copy would look for it there. Loading by path
//! (`dlopen`, JNA, ctypes, LuaJIT) does not read the install name.

fn main() {
    println!("cargo:rerun-if-changed=src/sys/build.rs");
    if std::env::var("CARGO_CFG_TARGET_VENDOR").as_deref() == Ok("apple") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-install_name,@rpath/libqwen_companion.dylib");
    }
}
