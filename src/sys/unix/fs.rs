//! Files: private directories and files (modes 0700/0600), owner checks,
//! atomic replace, directory locks, file identity and change stamps.
//!
//! Modes are POSIX permission bits (`0o700`, `0o644`, …). A Windows
//! implementation maps 0700/0600 to an owner-only ACL and ignores the rest.

use std::fs::{DirBuilder, File, Metadata, OpenOptions, Permissions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// A `DirBuilder` that creates directories with `mode` (before the umask).
pub fn dir_builder(mode: u32) -> DirBuilder {
    let mut b = DirBuilder::new();
    b.mode(mode);
    b
}

/// Sets the mode a file created by `opts` gets (before the umask).
pub fn create_mode(opts: &mut OpenOptions, mode: u32) -> &mut OpenOptions {
    opts.mode(mode)
}

/// Makes `opts` refuse to open a symlink at the final component, and keeps
/// the descriptor out of child processes.
pub fn no_follow(opts: &mut OpenOptions) -> &mut OpenOptions {
    opts.custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
}

/// [`no_follow`], and an open that never blocks (a FIFO swapped in for a
/// regular file opens at once instead of waiting for a writer).
pub fn no_follow_nonblocking(opts: &mut OpenOptions) -> &mut OpenOptions {
    opts.custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
}

/// The permission bits (and file type bits) of `meta`, as `st_mode`. The
/// path is for platforms whose metadata carries no mode (Windows reads the
/// DACL and the extension).
pub fn mode(_path: &Path, meta: &Metadata) -> u32 {
    meta.mode()
}

/// Sets the permission bits of `path` exactly (the umask does not apply).
pub fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    std::fs::set_permissions(path, Permissions::from_mode(mode))
}

/// Sets the permission bits of an open file exactly.
pub fn set_file_mode(file: &File, mode: u32) -> io::Result<()> {
    file.set_permissions(Permissions::from_mode(mode))
}

/// Who owns a file (a uid here; a SID on Windows). Printed as the number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OwnerId(u32);

impl std::fmt::Display for OwnerId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The owner of the file at `path` whose metadata is `meta` (the path is
/// for platforms whose metadata does not carry the owner).
pub fn owner(_path: &Path, meta: &Metadata) -> OwnerId {
    OwnerId(meta.uid())
}

/// The user this process runs as.
pub fn current_owner() -> OwnerId {
    OwnerId(super::process::current_uid())
}

/// The absolute path of `path` with every symlink resolved (`realpath`).
pub fn canonicalize(path: &Path) -> io::Result<std::path::PathBuf> {
    std::fs::canonicalize(path)
}

/// Replaces `to` with `from` in one step (a rename over it; a symlink at
/// `to` is replaced, never written through).
pub fn replace(from: &Path, to: &Path) -> io::Result<()> {
    std::fs::rename(from, to)
}

/// Flushes a directory's entries to disk (after a [`replace`] that must
/// survive a crash). Best effort.
pub fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

/// An exclusive lock on a directory, held until dropped. Blocks until no
/// other process of ours holds it.
pub struct DirLock {
    _file: File,
}

impl DirLock {
    pub fn exclusive(dir: &Path) -> io::Result<DirLock> {
        use std::os::fd::AsRawFd;
        let f = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
            .open(dir)?;
        loop {
            // SAFETY: flock on a descriptor we own; no memory is passed.
            let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
            if rc == 0 {
                return Ok(DirLock { _file: f });
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

/// The identity of a file (device + inode; volume + file index on Windows).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileId {
    dev: u64,
    ino: u64,
}

impl FileId {
    /// The identity of the file at `path` (unused here: `meta` has it).
    pub fn of(_path: &Path, meta: &Metadata) -> FileId {
        FileId {
            dev: meta.dev(),
            ino: meta.ino(),
        }
    }
}

pub use crate::sys::FileVersion;

/// The [`FileVersion`] of the file at `path`, `meta` being its metadata:
/// identity, size, modification and status-change times (ns).
pub(in crate::sys) fn file_version(path: &Path, meta: &Metadata) -> FileVersion {
    let ns = |s: i64, n: i64| s as i128 * 1_000_000_000 + n as i128;
    FileVersion {
        id: FileId::of(path, meta),
        size: meta.size(),
        modified_ns: ns(meta.mtime(), meta.mtime_nsec()),
        changed_ns: Some(ns(meta.ctime(), meta.ctime_nsec())),
    }
}

/// Whether `ft` is a local socket.
#[cfg(test)]
pub fn is_socket(ft: &std::fs::FileType) -> bool {
    std::os::unix::fs::FileTypeExt::is_socket(ft)
}

#[cfg(test)]
/// Creates a symlink `link` pointing at `original` (a file or a directory).
pub fn symlink(original: impl AsRef<Path>, link: impl AsRef<Path>) -> io::Result<()> {
    std::os::unix::fs::symlink(original, link)
}
