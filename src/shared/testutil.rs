//! Helpers for the library's unit tests.

use std::path::Path;

/// A private temporary directory (from `tempfile`), removed on drop. Short
/// paths (`$TMPDIR/qcs-<tag>-XXXXXX`), so sockets fit.
pub struct TempDir(tempfile::TempDir);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        TempDir(
            tempfile::Builder::new()
                .prefix(&format!("qcs-{tag}-"))
                .tempdir()
                .unwrap(),
        )
    }
    pub fn path(&self) -> &Path {
        self.0.path()
    }
}
