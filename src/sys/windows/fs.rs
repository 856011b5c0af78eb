//! Files: private directories and files, owner checks, atomic replace,
//! directory locks, file identity and change stamps.
//!
//! POSIX modes map onto ACLs: a mode with no group or other bits (`0o700`,
//! `0o600`) gives an owner-only protected DACL (the current user, full
//! control, nothing inherited from the parent; a directory's entry is
//! inherited by what is created in it). Any other mode gives the object
//! back the DACL its parent hands down. [`mode`] synthesises the `st_mode`
//! bits callers test from the attributes, the DACL and the extension.

use std::fs::{File, Metadata, OpenOptions};
use std::io;
use std::os::windows::fs::{MetadataExt, OpenOptionsExt};
use std::os::windows::io::{AsRawHandle, OwnedHandle};
use std::path::{Path, PathBuf};
use std::time::Duration;

use windows_sys::Win32::Foundation::{
    ERROR_ACCESS_DENIED, ERROR_INVALID_FUNCTION, ERROR_INVALID_PARAMETER, ERROR_NOT_SUPPORTED,
    ERROR_SHARING_VIOLATION,
};
use windows_sys::Win32::Storage::FileSystem::{
    FileRenameInfoEx, GetFileInformationByHandle, LockFileEx, MoveFileExW, ReOpenFile,
    SetFileInformationByHandle, BY_HANDLE_FILE_INFORMATION, DELETE, FILE_ATTRIBUTE_READONLY,
    FILE_FLAG_BACKUP_SEMANTICS, FILE_FLAG_OPEN_REPARSE_POINT, FILE_READ_ATTRIBUTES,
    FILE_RENAME_INFO, FILE_SHARE_DELETE, FILE_SHARE_READ, FILE_SHARE_WRITE,
    LOCKFILE_EXCLUSIVE_LOCK, MOVEFILE_REPLACE_EXISTING, MOVEFILE_WRITE_THROUGH, READ_CONTROL,
    SYNCHRONIZE, WRITE_DAC,
};
use windows_sys::Win32::System::IO::OVERLAPPED;

use super::security::{self, Sid};
use super::util::{owned, wide};

const S_IFDIR: u32 = 0o040_000;
const S_IFREG: u32 = 0o100_000;
const S_IFLNK: u32 = 0o120_000;

/// Whether `mode` asks for owner-only access (no group or other bits).
fn is_private(mode: u32) -> bool {
    mode & 0o077 == 0
}

/// Whether `path` names a named pipe (`\\.\pipe\…`, `\\?\pipe\…`), whose
/// security is set when it is created.
fn is_pipe_path(path: &Path) -> bool {
    let s = path
        .to_string_lossy()
        .replace('/', "\\")
        .to_ascii_lowercase();
    s.starts_with(r"\\.\pipe\") || s.starts_with(r"\\?\pipe\")
}

/// Creates directories; those it creates with a private mode (`0o700`) get
/// an owner-only DACL. The same calls as `std::fs::DirBuilder`.
#[derive(Debug)]
pub struct DirBuilder {
    recursive: bool,
    private: bool,
}

/// A builder that creates directories with `mode`.
pub fn dir_builder(mode: u32) -> DirBuilder {
    DirBuilder {
        recursive: false,
        private: is_private(mode),
    }
}

impl DirBuilder {
    /// Creates missing parents too (an existing directory is then no error).
    pub fn recursive(&mut self, recursive: bool) -> &mut Self {
        self.recursive = recursive;
        self
    }

    /// Creates `path`. Each directory this call creates gets the mode; an
    /// existing one is left as it is.
    pub fn create(&self, path: &Path) -> io::Result<()> {
        let mut created: Vec<PathBuf> = Vec::new();
        if self.recursive {
            let mut missing = Vec::new();
            let mut p = Some(path);
            while let Some(d) = p {
                if d.as_os_str().is_empty() || std::fs::symlink_metadata(d).is_ok() {
                    break;
                }
                missing.push(d.to_path_buf());
                p = d.parent();
            }
            for d in missing.into_iter().rev() {
                match std::fs::create_dir(&d) {
                    Ok(()) => created.push(d),
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists && d.is_dir() => {}
                    Err(e) => return Err(e),
                }
            }
            if !path.is_dir() {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{} exists and is not a directory", path.display()),
                ));
            }
        } else {
            std::fs::create_dir(path)?;
            created.push(path.to_path_buf());
        }
        if self.private {
            for d in &created {
                security::set_owner_only(d, true)?;
            }
        }
        Ok(())
    }
}

/// Sets the mode a file created by `opts` gets. Windows cannot attach a
/// DACL through `OpenOptions`: a file created inside a private directory
/// inherits its owner-only entry, and callers apply the exact mode with
/// [`set_file_mode`] right after creating the file.
pub fn create_mode(opts: &mut OpenOptions, _mode: u32) -> &mut OpenOptions {
    opts
}

/// Makes `opts` open a reparse point (symlink, junction) itself instead of
/// its target (`FILE_FLAG_OPEN_REPARSE_POINT`): the handle then describes
/// the link, which callers refuse as not a regular file, and a create-new
/// open fails on an existing link. Handles are never inherited by children.
pub fn no_follow(opts: &mut OpenOptions) -> &mut OpenOptions {
    opts.custom_flags(FILE_FLAG_OPEN_REPARSE_POINT)
}

/// [`no_follow`]. Opening a file never waits for a writer on Windows.
pub fn no_follow_nonblocking(opts: &mut OpenOptions) -> &mut OpenOptions {
    no_follow(opts)
}

/// Whether the name of `path` ends in an executable extension (`.exe`,
/// `.cmd`, `.bat`, `.com` or one listed in `PATHEXT`).
fn is_executable_name(path: &Path) -> bool {
    let Some(ext) = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
    else {
        return false;
    };
    let listed = std::env::var("PATHEXT")
        .unwrap_or_default()
        .to_ascii_lowercase();
    ["exe", "cmd", "bat", "com"].contains(&ext.as_str())
        || listed
            .split(';')
            .any(|e| !e.is_empty() && e.trim_start_matches('.') == ext)
}

/// `st_mode` bits for the file at `path` whose metadata is `meta`: the type
/// (`S_IFDIR`, `S_IFREG`, `S_IFLNK`); read bits for everyone, write bits
/// unless read-only, execute bits for a directory or an executable
/// extension; the group and other bits cleared when the DACL is owner-only.
pub fn mode(path: &Path, meta: &Metadata) -> u32 {
    let ft = meta.file_type();
    let kind = if ft.is_symlink() {
        S_IFLNK
    } else if ft.is_dir() {
        S_IFDIR
    } else {
        S_IFREG
    };
    let mut perm = if meta.file_attributes() & FILE_ATTRIBUTE_READONLY != 0 {
        0o444
    } else {
        0o666
    };
    if ft.is_dir() || is_executable_name(path) {
        perm |= 0o111;
    }
    if !ft.is_symlink() && security::describe(path).is_ok_and(|(_, private)| private) {
        perm &= 0o700;
    }
    kind | perm
}

/// Sets the access of `path`: owner-only for a private mode, else what the
/// parent hands down. A named pipe keeps the security it was created with.
pub fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    if is_pipe_path(path) {
        return Ok(());
    }
    let is_dir = std::fs::metadata(path)?.is_dir();
    if is_private(mode) {
        security::set_owner_only(path, is_dir)
    } else {
        security::set_inherited(path)
    }
}

/// [`set_mode`] for an open file.
pub fn set_file_mode(file: &File, mode: u32) -> io::Result<()> {
    let is_dir = file.metadata()?.is_dir();
    // SAFETY: reopens our live handle for WRITE_DAC only (sharing every
    // data access, so it never conflicts with the original open).
    let h = unsafe {
        ReOpenFile(
            file.as_raw_handle(),
            WRITE_DAC | READ_CONTROL,
            FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
            if is_dir {
                FILE_FLAG_BACKUP_SEMANTICS
            } else {
                0
            },
        )
    };
    let h: OwnedHandle = owned(h)?;
    if is_private(mode) {
        security::set_owner_only_handle(h.as_raw_handle(), is_dir)
    } else {
        security::set_inherited_handle(h.as_raw_handle())
    }
}

/// Who owns a file: a SID, printed in its `S-1-5-…` form. An owner that
/// could not be read equals nobody.
#[derive(Debug, Clone)]
pub struct OwnerId(Option<Sid>);

impl PartialEq for OwnerId {
    fn eq(&self, other: &OwnerId) -> bool {
        matches!((&self.0, &other.0), (Some(a), Some(b)) if a == b)
    }
}

impl std::fmt::Display for OwnerId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Some(s) => f.write_str(&s.to_string_form()),
            None => f.write_str("(unknown owner)"),
        }
    }
}

/// The owner of the file at `path` (read from its security descriptor).
pub fn owner(path: &Path, _meta: &Metadata) -> OwnerId {
    OwnerId(security::describe(path).ok().map(|(o, _)| o))
}

/// The user this process runs as.
pub fn current_owner() -> OwnerId {
    OwnerId(security::current_user().ok())
}

/// Total time [`replace`] keeps retrying a rename that antivirus, indexers
/// or a reader briefly block.
const REPLACE_RETRY_FOR: Duration = Duration::from_millis(1500);

/// `FILE_RENAME_INFO` flags (winbase.h; not in windows-sys).
const FILE_RENAME_FLAG_REPLACE_IF_EXISTS: u32 = 0x1;
const FILE_RENAME_FLAG_POSIX_SEMANTICS: u32 = 0x2;

/// Renames `from` over `to` with POSIX semantics (`FileRenameInfoEx`,
/// Windows 10 1607 and later on NTFS): `to` is replaced even while a reader
/// has it open with `FILE_SHARE_DELETE` (Rust's `File::open`, Node's libuv),
/// and the reader keeps reading the old contents. `Ok(false)` when the
/// system or the file system does not offer it (older Windows, FAT, Wine 8).
/// A link at `from` or `to` is renamed or replaced itself.
fn rename_posix(from: &Path, to: &[u16]) -> io::Result<bool> {
    let src = OpenOptions::new()
        .access_mode(DELETE | SYNCHRONIZE)
        .share_mode(FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE)
        .custom_flags(FILE_FLAG_OPEN_REPARSE_POINT | FILE_FLAG_BACKUP_SEMANTICS)
        .open(from)?;
    let name = &to[..to.len() - 1]; // without the NUL
    let name_bytes = std::mem::size_of_val(name);
    let size = std::mem::size_of::<FILE_RENAME_INFO>() + name_bytes;
    // u64 words: aligned for FILE_RENAME_INFO (a pointer-sized field).
    let mut buf = vec![0u64; size.div_ceil(8)];
    let info = buf.as_mut_ptr().cast::<FILE_RENAME_INFO>();
    // SAFETY: `buf` is zeroed, aligned and holds the header plus the name;
    // the name is copied into the trailing `FileName` array, which the
    // buffer extends; the handle is open with DELETE access.
    let ok = unsafe {
        (*info).Anonymous.Flags =
            FILE_RENAME_FLAG_REPLACE_IF_EXISTS | FILE_RENAME_FLAG_POSIX_SEMANTICS;
        (*info).FileNameLength = name_bytes as u32;
        std::ptr::copy_nonoverlapping(
            name.as_ptr(),
            std::ptr::addr_of_mut!((*info).FileName).cast::<u16>(),
            name.len(),
        );
        SetFileInformationByHandle(
            src.as_raw_handle(),
            FileRenameInfoEx,
            info.cast(),
            size as u32,
        )
    };
    if ok != 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error().map(|c| c as u32) {
        Some(ERROR_INVALID_PARAMETER)
        | Some(ERROR_NOT_SUPPORTED)
        | Some(ERROR_INVALID_FUNCTION) => Ok(false),
        _ => Err(e),
    }
}

/// Replaces `to` with `from` in one step: a POSIX-semantics rename
/// ([`rename_posix`]: readers that share delete never block it), else
/// `MoveFileExW` with `MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH`,
/// which fails while anyone has `to` open. A link at `to` is replaced, never
/// written through. `ERROR_ACCESS_DENIED` and `ERROR_SHARING_VIOLATION`
/// (EPERM / EACCES: another process has the file open without sharing
/// delete, or the old rename met a reader) are retried with a growing pause
/// for about 1.5 s, as Qwen Code retries its own renames.
pub fn replace(from: &Path, to: &Path) -> io::Result<()> {
    let f = wide(from.as_os_str())?;
    let t = wide(to.as_os_str())?;
    let start = std::time::Instant::now();
    let mut pause = Duration::from_millis(5);
    loop {
        let e = match rename_posix(from, &t) {
            Ok(true) => return Ok(()),
            Err(e) => e,
            Ok(false) => {
                // SAFETY: two NUL-terminated paths.
                let ok = unsafe {
                    MoveFileExW(
                        f.as_ptr(),
                        t.as_ptr(),
                        MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH,
                    )
                };
                if ok != 0 {
                    return Ok(());
                }
                io::Error::last_os_error()
            }
        };
        let transient = matches!(
            e.raw_os_error().map(|c| c as u32),
            Some(ERROR_ACCESS_DENIED) | Some(ERROR_SHARING_VIOLATION)
        );
        if !transient || start.elapsed() + pause > REPLACE_RETRY_FOR {
            return Err(e);
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(200));
    }
}

/// Flushes a directory's entries to disk. NTFS journals its metadata (a
/// rename included) and [`replace`]'s fallback asks for
/// `MOVEFILE_WRITE_THROUGH`: nothing to do.
pub fn sync_dir(_dir: &Path) {}

/// The name of the lock file [`DirLock`] creates inside the directory.
pub const DIR_LOCK_FILE: &str = ".lock";

/// An exclusive lock on a directory, held until dropped: `LockFileEx` on
/// the file [`DIR_LOCK_FILE`] inside it (Windows cannot lock a directory
/// handle). Blocks until no other process of ours holds it.
pub struct DirLock {
    _file: File,
}

impl DirLock {
    pub fn exclusive(dir: &Path) -> io::Result<DirLock> {
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(dir.join(DIR_LOCK_FILE))?;
        // SAFETY: zeroed OVERLAPPED (offset 0) for a synchronous handle;
        // LockFileEx returns once the whole range is locked.
        let ok = unsafe {
            let mut ov: OVERLAPPED = std::mem::zeroed();
            LockFileEx(
                f.as_raw_handle(),
                LOCKFILE_EXCLUSIVE_LOCK,
                0,
                u32::MAX,
                u32::MAX,
                &mut ov,
            )
        };
        super::util::check(ok)?;
        Ok(DirLock { _file: f })
    }
}

/// The identity of a file: the volume serial number and the file index
/// (`GetFileInformationByHandle`; stable Rust does not expose them from
/// `Metadata`), which hard links share and a replacing rename changes.
/// When the file cannot be opened (gone, or no access) the identity is its
/// creation time under an impossible volume number, so it still differs
/// from any other file's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileId {
    volume: u64,
    index: u64,
}

impl FileId {
    /// The identity of the file at `path`, `meta` being its metadata (a
    /// symlink itself when `meta` is a symlink's).
    pub fn of(path: &Path, meta: &Metadata) -> FileId {
        let mut flags = FILE_FLAG_BACKUP_SEMANTICS;
        if meta.file_type().is_symlink() {
            flags |= FILE_FLAG_OPEN_REPARSE_POINT;
        }
        let opened = OpenOptions::new()
            .access_mode(FILE_READ_ATTRIBUTES)
            .share_mode(FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE)
            .custom_flags(flags)
            .open(path);
        let info = opened.ok().and_then(|f| {
            // SAFETY: a live handle and a zeroed out-structure of the right
            // type, filled by the call.
            unsafe {
                let mut info: BY_HANDLE_FILE_INFORMATION = std::mem::zeroed();
                (GetFileInformationByHandle(f.as_raw_handle(), &mut info) != 0).then_some(info)
            }
        });
        match info {
            Some(i) => FileId {
                volume: i.dwVolumeSerialNumber as u64,
                index: (i.nFileIndexHigh as u64) << 32 | i.nFileIndexLow as u64,
            },
            None => FileId {
                volume: u64::MAX,
                index: meta.creation_time(),
            },
        }
    }
}

pub use crate::sys::FileVersion;

/// 100 ns intervals between 1601-01-01 and 1970-01-01.
const EPOCH_DIFF_100NS: i128 = 116_444_736_000_000_000;

/// The [`FileVersion`] of the file at `path`, `meta` being its metadata:
/// identity, size and last-write time (Windows has no status-change time in
/// `Metadata`).
pub(in crate::sys) fn file_version(path: &Path, meta: &Metadata) -> FileVersion {
    FileVersion {
        id: FileId::of(path, meta),
        size: meta.file_size(),
        modified_ns: (meta.last_write_time() as i128 - EPOCH_DIFF_100NS) * 100,
        changed_ns: None,
    }
}

/// Whether `ft` is a local socket (Windows named pipes are not files).
#[cfg(test)]
pub fn is_socket(_ft: &std::fs::FileType) -> bool {
    false
}

#[cfg(test)]
/// Creates a symlink `link` pointing at `original` (a file or a directory;
/// needs Developer Mode or the symlink privilege).
pub fn symlink(original: impl AsRef<Path>, link: impl AsRef<Path>) -> io::Result<()> {
    let (original, link) = (original.as_ref(), link.as_ref());
    let target = if original.is_relative() {
        link.parent().unwrap_or(Path::new("")).join(original)
    } else {
        original.to_path_buf()
    };
    if target.is_dir() {
        std::os::windows::fs::symlink_dir(original, link)
    } else {
        std::os::windows::fs::symlink_file(original, link)
    }
}

/// The absolute path of `path` with every link resolved, in its plain form.
/// std's `canonicalize` answers with a verbatim path (`\\?\C:\…`,
/// `\\?\UNC\server\share\…`), which not every program takes: Node cannot
/// start an entry script whose folder it gets that way, and a process's
/// current directory should not be one. It is turned back into `C:\…` or
/// `\\server\share\…` whenever that names the same file; otherwise (a
/// component Windows would rewrite, or a path too long for the plain form)
/// it stays verbatim.
pub fn canonicalize(path: &Path) -> io::Result<PathBuf> {
    let real = std::fs::canonicalize(path)?;
    Ok(plain_form(&real).unwrap_or(real))
}

/// `\\?\C:\a` → `C:\a`, `\\?\UNC\s\x` → `\\s\x`, when the plain form
/// means the same: a drive letter or a server, no component Win32 path
/// parsing would change (a reserved device name such as `NUL` or `COM1`,
/// with or without an extension; a trailing dot or space; `.` or `..`), and
/// shorter than `MAX_PATH`. `None` for any other path.
pub(super) fn plain_form(path: &Path) -> Option<PathBuf> {
    const MAX_PATH: usize = 260;
    const DEVICES: [&str; 4] = ["CON", "PRN", "AUX", "NUL"];
    let s = path.to_str()?;
    let (plain, parts) = if let Some(rest) = s.strip_prefix(r"\\?\UNC\") {
        (format!(r"\\{rest}"), rest)
    } else if let Some(rest) = s.strip_prefix(r"\\?\") {
        let b = rest.as_bytes();
        if b.len() < 3 || !b[0].is_ascii_alphabetic() || b[1] != b':' || b[2] != b'\\' {
            return None;
        }
        (rest.to_string(), &rest[3..])
    } else {
        return None;
    };
    if plain.len() >= MAX_PATH {
        return None;
    }
    let rewritten = |c: &str| {
        let stem = c.split('.').next().unwrap_or("").trim_end_matches(' ');
        let numbered = |p: &str| {
            stem.len() == 4
                && stem[..3].eq_ignore_ascii_case(p)
                && stem.as_bytes()[3].is_ascii_digit()
                && stem.as_bytes()[3] != b'0'
        };
        c == "."
            || c == ".."
            || c.ends_with('.')
            || c.ends_with(' ')
            || DEVICES.iter().any(|d| d.eq_ignore_ascii_case(stem))
            || numbered("COM")
            || numbered("LPT")
    };
    if parts.split('\\').filter(|c| !c.is_empty()).any(rewritten) {
        return None;
    }
    Some(PathBuf::from(plain))
}
