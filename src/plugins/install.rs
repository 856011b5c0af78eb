//! Installing plugins from a folder or a `.zip`, uninstalling them, and the
//! plugins directory's state file ([`state`]).
//!
//! ## Install, atomically
//! 1. The source is copied (folder) or extracted (zip, see [`archive`]) into
//!    `<dir>/.staging/<random>/`, under the size and count [`Limits`].
//! 2. Its manifest is validated there ([`manifest::load_dir`]).
//! 3. `<dir>/data/<id>/` is created (0700) if missing — it is kept across
//!    re-installs and uninstalls unless removal is asked for.
//! 4. An installed version of the same id is renamed away into `.staging/`,
//!    the new folder is renamed to `<dir>/installed/<id>/`, and the old one
//!    is deleted. If the second rename fails the old one is put back.
//!
//! After a success, what crashed installs left in `.staging/` is removed.
//! A failed install leaves the plugins directory as it was: the staging
//! folder is removed, as are `.staging/`, `installed/`, `data/<id>/` and the
//! directory itself when this install created them and they are empty. No
//! file outside `<dir>` is written.
//!
//! Every operation that changes the directory holds an exclusive `flock` on
//! the plugins directory itself (no lock file is created), so two processes
//! or threads never interleave an install, an uninstall or a state update.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::manifest::{self, Manifest, Problem};
use crate::shared::fs::ensure_private_dir;

pub mod archive;
pub mod state;

pub use state::{
    config_values, get, list, list_json, reset_state, set_config_value, set_enabled,
    InstalledPlugin, STATE_FILE,
};

/// `<dir>/installed`: one folder per plugin id.
pub const INSTALLED_DIR: &str = "installed";
/// `<dir>/data`: `PLUGIN_DATA_DIR` of each plugin.
pub const DATA_DIR: &str = "data";
/// `<dir>/.staging`: installs in progress.
pub const STAGING_DIR: &str = ".staging";

/// Size and count limits of an install (zip or folder). Sizes are counted
/// while reading, never trusted from headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Size of the `.zip` file itself (checked before it is opened as a zip).
    pub max_archive_bytes: u64,
    /// Entries of the archive, or files and directories of the folder.
    pub max_entries: usize,
    /// Bytes of one file once inflated.
    pub max_file_bytes: u64,
    /// Bytes of all files once inflated.
    pub max_total_bytes: u64,
}

impl Default for Limits {
    /// 512 MiB archive, 10 000 entries, 256 MiB per file, 512 MiB in all.
    fn default() -> Limits {
        Limits {
            max_archive_bytes: 512 << 20,
            max_entries: 10_000,
            max_file_bytes: 256 << 20,
            max_total_bytes: 512 << 20,
        }
    }
}

/// Why an install, uninstall or state operation failed. `code` is stable
/// (see [`codes`]); `message` is for people; `problems` lists the
/// manifest's errors when `code` is `invalid_manifest`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstallError {
    pub code: &'static str,
    pub message: String,
    pub problems: Vec<Problem>,
}

/// The stable error codes of [`InstallError`].
pub mod codes {
    /// The manifest does not validate (`problems` says why).
    pub const INVALID_MANIFEST: &str = "invalid_manifest";
    /// The source is a file that is not a zip archive.
    pub const NOT_A_ZIP: &str = "not_a_zip";
    /// The source is neither a folder nor a regular file, or a folder that
    /// contains the plugins directory.
    pub const UNSUPPORTED_SOURCE: &str = "unsupported_source";
    /// A zip entry is unsafe: traversal, absolute or backslash name, drive
    /// letter, non-UTF-8 name, symlink or special file, encryption,
    /// duplicate or case-colliding names, a file where a folder is needed.
    pub const UNSAFE_ARCHIVE: &str = "unsafe_archive";
    /// The zip is over a limit: its size, entry count, a file's or the total inflated size.
    pub const ARCHIVE_TOO_LARGE: &str = "archive_too_large";
    /// The zip cannot be read: bad structure, a CRC mismatch, a size its header lies about.
    pub const CORRUPT_ARCHIVE: &str = "corrupt_archive";
    /// `manifest.json` is not at the archive's root (or missing).
    pub const MANIFEST_NOT_AT_ROOT: &str = "manifest_not_at_root";
    /// The source folder holds a symlink leading outside it, or a special file.
    pub const UNSAFE_SOURCE: &str = "unsafe_source";
    /// The source folder is over a limit (entries, a file's or the total size).
    pub const SOURCE_TOO_LARGE: &str = "source_too_large";
    /// The source, the plugin or the configuration key does not exist.
    pub const NOT_FOUND: &str = "not_found";
    /// A plugin id that cannot be one (it would not be a safe directory name).
    pub const INVALID_ID: &str = "invalid_id";
    /// A configuration value of the wrong type for its entry.
    pub const INVALID_CONFIG: &str = "invalid_config";
    /// `state.json` cannot be parsed; it is left untouched (see `reset_state`).
    pub const CORRUPT_STATE: &str = "corrupt_state";
    /// The plugin is installed but its manifest no longer validates.
    pub const BROKEN_PLUGIN: &str = "broken_plugin";
    /// An operating-system I/O operation failed.
    pub const IO: &str = "io";
}

impl InstallError {
    pub fn new(code: &'static str, message: impl Into<String>) -> InstallError {
        InstallError {
            code,
            message: message.into(),
            problems: Vec::new(),
        }
    }
    pub(crate) fn io(what: &str, e: io::Error) -> InstallError {
        InstallError::new(codes::IO, format!("{what}: {e}"))
    }
    fn invalid_manifest(problems: Vec<Problem>) -> InstallError {
        let first = problems
            .first()
            .map(|p| {
                if p.path.is_empty() {
                    p.message.clone()
                } else {
                    format!("{}: {}", p.path, p.message)
                }
            })
            .unwrap_or_default();
        let more = match problems.len() {
            0 | 1 => String::new(),
            n => format!(" (and {} more)", n - 1),
        };
        InstallError {
            code: codes::INVALID_MANIFEST,
            message: format!("invalid manifest: {first}{more}"),
            problems,
        }
    }
    /// `{"code", "message", "problems"?}` (problems only when there are some).
    pub fn to_json(&self) -> Value {
        let mut v = json!({"code": self.code, "message": self.message});
        if !self.problems.is_empty() {
            v["problems"] = json!(self.problems);
        }
        v
    }
}

impl std::fmt::Display for InstallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl std::error::Error for InstallError {}

impl From<crate::Error> for InstallError {
    fn from(e: crate::Error) -> InstallError {
        InstallError::new(codes::IO, e.to_string())
    }
}

/// What [`install_from`] did.
#[derive(Debug, Clone)]
pub struct InstallOutcome {
    /// The installed manifest (its `root` is `<dir>/installed/<id>`).
    pub manifest: Manifest,
    /// The manifest's warnings (unknown permissions, …).
    pub warnings: Vec<Problem>,
    /// Whether an installed version of the same id was replaced.
    pub replaced: bool,
    /// The replaced version, when its manifest could still be read.
    pub previous_version: Option<semver::Version>,
}

impl InstallOutcome {
    /// [`Manifest::summary_json`] plus `replaced`, `previousVersion` and `warnings`.
    pub fn summary_json(&self) -> Value {
        let mut v = self.manifest.summary_json();
        v["replaced"] = json!(self.replaced);
        v["previousVersion"] = json!(self.previous_version.as_ref().map(|v| v.to_string()));
        v["warnings"] = json!(self.warnings);
        v
    }
}

/// What [`uninstall`] removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UninstallOutcome {
    pub id: String,
    pub data_removed: bool,
}

impl UninstallOutcome {
    /// `{"id", "dataRemoved"}`.
    pub fn summary_json(&self) -> Value {
        json!({"id": self.id, "dataRemoved": self.data_removed})
    }
}

/// The default plugins directory, `<qwen_home>/companion/plugins`.
pub fn default_dir() -> Result<PathBuf, InstallError> {
    Ok(crate::shared::fs::qwen_home()?
        .join("companion")
        .join("plugins"))
}

/// Installs the plugin at `src` — a folder, or a zip file (recognised by its
/// magic bytes, whatever its name) — into the plugins directory `dir`, with
/// the default [`Limits`].
pub fn install_from(dir: &Path, src: &Path) -> Result<InstallOutcome, InstallError> {
    install_with(dir, src, &Limits::default())
}

/// [`install_from`] with explicit limits.
pub fn install_with(
    dir: &Path,
    src: &Path,
    limits: &Limits,
) -> Result<InstallOutcome, InstallError> {
    let src_meta = fs::metadata(src).map_err(|e| {
        if e.kind() == io::ErrorKind::NotFound {
            InstallError::new(
                codes::NOT_FOUND,
                format!("{} does not exist", src.display()),
            )
        } else {
            InstallError::io(&format!("stat {}", src.display()), e)
        }
    })?;
    enum Kind {
        Folder,
        Zip(File),
    }
    let kind = if src_meta.is_dir() {
        Kind::Folder
    } else if src_meta.is_file() {
        let mut f =
            File::open(src).map_err(|e| InstallError::io(&format!("open {}", src.display()), e))?;
        if !archive::is_zip(&mut f)
            .map_err(|e| InstallError::io(&format!("read {}", src.display()), e))?
        {
            return Err(InstallError::new(
                codes::NOT_A_ZIP,
                format!(
                    "{} is neither a folder nor a zip archive (no zip signature)",
                    src.display()
                ),
            ));
        }
        Kind::Zip(f)
    } else {
        return Err(InstallError::new(
            codes::UNSUPPORTED_SOURCE,
            format!("{} is neither a folder nor a regular file", src.display()),
        ));
    };

    let mut created = Created::default();
    let result = (|| {
        created.dir = create_dir_if_missing(dir, 0o700)?;
        check_plugins_dir(dir)?;
        let _lock = DirLock::exclusive(dir)?;
        let staging_root = dir.join(STAGING_DIR);
        created.staging_root = create_dir_if_missing(&staging_root, 0o700)?;
        let staging = staging_root.join(crate::shared::rand::random_hex(6)?);
        crate::sys::fs::dir_builder(0o700)
            .create(&staging)
            .map_err(|e| InstallError::io(&format!("create {}", staging.display()), e))?;
        created.staging = Some(staging.clone());
        if matches!(kind, Kind::Folder) {
            // Copying a folder that holds the staging folder would copy
            // its own output.
            let src_real = crate::sys::fs::canonicalize(src)
                .map_err(|e| InstallError::io(&format!("resolve {}", src.display()), e))?;
            let staging_real = crate::sys::fs::canonicalize(&staging)
                .map_err(|e| InstallError::io(&format!("resolve {}", staging.display()), e))?;
            if staging_real.starts_with(&src_real) {
                return Err(InstallError::new(
                    codes::UNSUPPORTED_SOURCE,
                    format!(
                        "{} contains the plugins directory {}; install from a plugin folder",
                        src.display(),
                        dir.display()
                    ),
                ));
            }
        }
        match kind {
            Kind::Folder => copy_folder(src, &staging, limits)?,
            Kind::Zip(f) => archive::extract(f, &staging, limits)?,
        }
        let (m, _) = manifest::load_dir(&staging).map_err(InstallError::invalid_manifest)?;
        finish(dir, &staging, m, &mut created)
    })();
    if result.is_err() {
        created.undo();
    }
    result
}

/// What a failing install must take back (only what it created).
#[derive(Default)]
struct Created {
    dir: Option<PathBuf>,
    staging_root: Option<PathBuf>,
    staging: Option<PathBuf>,
    installed_root: Option<PathBuf>,
    data_root: Option<PathBuf>,
    data: Option<PathBuf>,
}

impl Created {
    fn undo(&mut self) {
        if let Some(s) = self.staging.take() {
            let _ = fs::remove_dir_all(&s);
        }
        // Empty directories only: another install may be using them.
        for d in [
            self.data.take(),
            self.data_root.take(),
            self.installed_root.take(),
            self.staging_root.take(),
            self.dir.take(),
        ]
        .into_iter()
        .flatten()
        {
            let _ = fs::remove_dir(&d);
        }
    }
}

/// The plugins directory must be a real directory (not a symlink) of ours.
/// Its mode is made 0700 only once an install succeeds.
pub(crate) fn check_plugins_dir(dir: &Path) -> Result<(), InstallError> {
    crate::shared::fs::check_owned_dir(dir)
        .map(|_| ())
        .map_err(|e| InstallError::new(codes::IO, format!("the plugins directory: {}", e.message)))
}

/// Creates `dir` (and missing parents, 0700) and tells whether it did.
fn create_dir_if_missing(dir: &Path, mode: u32) -> Result<Option<PathBuf>, InstallError> {
    if fs::symlink_metadata(dir).is_ok() {
        return Ok(None);
    }
    crate::sys::fs::dir_builder(mode)
        .recursive(true)
        .create(dir)
        .map_err(|e| InstallError::io(&format!("create {}", dir.display()), e))?;
    Ok(Some(dir.to_path_buf()))
}

fn finish(
    dir: &Path,
    staging: &Path,
    staged: Manifest,
    created: &mut Created,
) -> Result<InstallOutcome, InstallError> {
    let id = staged.id.clone();
    ensure_private_dir(dir)?;
    let installed_root = dir.join(INSTALLED_DIR);
    created.installed_root = create_dir_if_missing(&installed_root, 0o700)?;
    let data_root = dir.join(DATA_DIR);
    created.data_root = create_dir_if_missing(&data_root, 0o700)?;
    let data = data_root.join(&id);
    if fs::symlink_metadata(&data).is_err() {
        created.data = Some(data.clone());
    }
    ensure_private_dir(&data)?;

    let target = installed_root.join(&id);
    let mut old: Option<(PathBuf, Option<semver::Version>)> = None;
    if fs::symlink_metadata(&target).is_ok() {
        let version = manifest::load_dir(&target).ok().map(|(m, _)| m.version);
        let aside = staging.with_file_name(format!(
            "{}-replaced",
            staging.file_name().unwrap_or_default().to_string_lossy()
        ));
        fs::rename(&target, &aside)
            .map_err(|e| InstallError::io(&format!("move the installed {id} aside"), e))?;
        old = Some((aside, version));
    }
    let restore = |old: &Option<(PathBuf, Option<semver::Version>)>| {
        if let Some((aside, _)) = old {
            let _ = fs::rename(aside, &target);
        }
    };
    if let Err(e) = fs::rename(staging, &target) {
        restore(&old);
        return Err(InstallError::io(
            &format!("rename into {}", target.display()),
            e,
        ));
    }
    created.staging = None;
    let reloaded = match manifest::load_dir(&target) {
        Ok(r) => r,
        Err(problems) => {
            // Cannot happen unless the folder changed under us: take it back.
            let _ = fs::rename(&target, staging);
            created.staging = Some(staging.to_path_buf());
            restore(&old);
            return Err(InstallError::invalid_manifest(problems));
        }
    };
    let (replaced, previous_version) = match old {
        Some((aside, version)) => {
            let _ = fs::remove_dir_all(&aside);
            (true, version)
        }
        None => (false, None),
    };
    sweep_staging(dir);
    Ok(InstallOutcome {
        manifest: reloaded.0,
        warnings: reloaded.1,
        replaced,
        previous_version,
    })
}

/// Removes what crashed installs left in `.staging/`, then `.staging/`
/// itself. Only called with the directory lock held, after a success: every
/// install and uninstall holds the lock while it uses `.staging/`, so
/// whatever is there now belongs to no one.
fn sweep_staging(dir: &Path) {
    let staging = dir.join(STAGING_DIR);
    if let Ok(entries) = fs::read_dir(&staging) {
        for e in entries.flatten() {
            let p = e.path();
            match e.file_type() {
                Ok(t) if t.is_dir() => {
                    let _ = fs::remove_dir_all(&p);
                }
                _ => {
                    let _ = fs::remove_file(&p);
                }
            }
        }
    }
    let _ = fs::remove_dir(&staging);
}

/// Removes the plugin `id` (`installed/<id>`), and `data/<id>` plus its
/// state entry (enabled flag, configuration) when `remove_data`; otherwise
/// data and state are kept for a later re-install.
pub fn uninstall(
    dir: &Path,
    id: &str,
    remove_data: bool,
) -> Result<UninstallOutcome, InstallError> {
    check_id(id)?;
    let target = dir.join(INSTALLED_DIR).join(id);
    let not_found = || {
        InstallError::new(
            codes::NOT_FOUND,
            format!("no plugin {id:?} is installed in {}", dir.display()),
        )
    };
    fs::symlink_metadata(&target).map_err(|_| not_found())?;
    check_plugins_dir(dir)?;
    let _lock = DirLock::exclusive(dir)?;
    let meta = fs::symlink_metadata(&target).map_err(|_| not_found())?;
    if remove_data {
        // First, so a corrupt state file stops the uninstall before anything is removed.
        state::forget_locked(dir, id)?;
    }
    if meta.file_type().is_dir() {
        let staging_root = dir.join(STAGING_DIR);
        create_dir_if_missing(&staging_root, 0o700)?;
        let aside = staging_root.join(format!("{}-removed", crate::shared::rand::random_hex(6)?));
        fs::rename(&target, &aside)
            .map_err(|e| InstallError::io(&format!("remove {}", target.display()), e))?;
        fs::remove_dir_all(&aside)
            .map_err(|e| InstallError::io(&format!("remove {}", aside.display()), e))?;
        let _ = fs::remove_dir(&staging_root);
    } else {
        fs::remove_file(&target)
            .map_err(|e| InstallError::io(&format!("remove {}", target.display()), e))?;
    }
    let mut data_removed = false;
    if remove_data {
        let data = dir.join(DATA_DIR).join(id);
        match fs::symlink_metadata(&data) {
            Ok(m) if m.file_type().is_dir() => {
                fs::remove_dir_all(&data)
                    .map_err(|e| InstallError::io(&format!("remove {}", data.display()), e))?;
                data_removed = true;
            }
            Ok(_) => {
                fs::remove_file(&data)
                    .map_err(|e| InstallError::io(&format!("remove {}", data.display()), e))?;
                data_removed = true;
            }
            Err(_) => {}
        }
    }
    Ok(UninstallOutcome {
        id: id.to_string(),
        data_removed,
    })
}

/// An id must be one a manifest could have: it becomes a path component.
pub(crate) fn check_id(id: &str) -> Result<(), InstallError> {
    match manifest::id_error(id) {
        None => Ok(()),
        Some(m) => Err(InstallError::new(
            codes::INVALID_ID,
            format!("{id:?} is not a plugin id: {m}"),
        )),
    }
}

/// An exclusive `flock` on the plugins directory, released on drop.
pub(crate) struct DirLock {
    _lock: crate::sys::fs::DirLock,
}

impl DirLock {
    pub(crate) fn exclusive(dir: &Path) -> Result<DirLock, InstallError> {
        crate::sys::fs::DirLock::exclusive(dir)
            .map(|l| DirLock { _lock: l })
            .map_err(|e| InstallError::io(&format!("lock {}", dir.display()), e))
    }
}

/// Running totals of an install against its [`Limits`].
pub(crate) struct Budget<'l> {
    pub(crate) limits: &'l Limits,
    pub(crate) entries: usize,
    pub(crate) total: u64,
    /// The error code for "over a limit".
    pub(crate) too_large: &'static str,
}

impl<'l> Budget<'l> {
    pub(crate) fn new(limits: &'l Limits, too_large: &'static str) -> Budget<'l> {
        Budget {
            limits,
            entries: 0,
            total: 0,
            too_large,
        }
    }
    pub(crate) fn entry(&mut self, name: &str) -> Result<(), InstallError> {
        self.entries += 1;
        if self.entries > self.limits.max_entries {
            return Err(InstallError::new(
                self.too_large,
                format!(
                    "more than {} entries (at {name:?})",
                    self.limits.max_entries
                ),
            ));
        }
        Ok(())
    }
    /// Copies `r` into the new file `dst`, counting bytes against the
    /// per-file and total limits. `read_code` is the code of a read error.
    pub(crate) fn copy(
        &mut self,
        r: &mut dyn Read,
        dst: &Path,
        mode: u32,
        name: &str,
        read_code: &'static str,
    ) -> Result<(), InstallError> {
        let mut o = OpenOptions::new();
        o.write(true).create_new(true);
        let mut out = crate::sys::fs::no_follow(crate::sys::fs::create_mode(&mut o, mode))
            .open(dst)
            .map_err(|e| InstallError::io(&format!("create {}", dst.display()), e))?;
        let mut buf = vec![0u8; 64 * 1024];
        let mut file_bytes = 0u64;
        loop {
            let n = match r.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(InstallError::new(
                        read_code,
                        format!("cannot read {name:?}: {e}"),
                    ))
                }
            };
            file_bytes += n as u64;
            self.total += n as u64;
            if file_bytes > self.limits.max_file_bytes {
                return Err(InstallError::new(
                    self.too_large,
                    format!(
                        "{name:?} is larger than the limit of {} bytes per file",
                        self.limits.max_file_bytes
                    ),
                ));
            }
            if self.total > self.limits.max_total_bytes {
                return Err(InstallError::new(
                    self.too_large,
                    format!(
                        "the files are larger than the limit of {} bytes in all (at {name:?})",
                        self.limits.max_total_bytes
                    ),
                ));
            }
            out.write_all(&buf[..n])
                .map_err(|e| InstallError::io(&format!("write {}", dst.display()), e))?;
        }
        crate::sys::fs::set_file_mode(&out, mode)
            .map_err(|e| InstallError::io(&format!("chmod {}", dst.display()), e))?;
        Ok(())
    }
}

/// File mode for an installed file: 0755 when the source had an execute
/// bit, else 0644.
pub(crate) fn file_mode(src_mode: Option<u32>) -> u32 {
    match src_mode {
        Some(m) if m & 0o111 != 0 => 0o755,
        _ => 0o644,
    }
}

/// Copies the folder `src` into `dst` (which exists): regular files and
/// directories; a symlink whose target stays inside `src` is copied as what
/// it points to (a cycle is refused); one leading outside, and any special
/// file, is refused.
fn copy_folder(src: &Path, dst: &Path, limits: &Limits) -> Result<(), InstallError> {
    let root = crate::sys::fs::canonicalize(src)
        .map_err(|e| InstallError::io(&format!("resolve {}", src.display()), e))?;
    let mut budget = Budget::new(limits, codes::SOURCE_TOO_LARGE);
    let mut ancestors = vec![root.clone()];
    copy_dir(&root, &root, dst, "", &mut budget, &mut ancestors)
}

fn copy_dir(
    root: &Path,
    dir: &Path,
    dst: &Path,
    rel: &str,
    budget: &mut Budget<'_>,
    ancestors: &mut Vec<PathBuf>,
) -> Result<(), InstallError> {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .map_err(|e| InstallError::io(&format!("read {}", dir.display()), e))?
        .collect::<Result<_, _>>()
        .map_err(|e| InstallError::io(&format!("read {}", dir.display()), e))?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name();
        let name_str = name.to_string_lossy().into_owned();
        let rel = if rel.is_empty() {
            name_str.clone()
        } else {
            format!("{rel}/{name_str}")
        };
        budget.entry(&rel)?;
        let path = entry.path();
        let mut meta = fs::symlink_metadata(&path)
            .map_err(|e| InstallError::io(&format!("stat {}", path.display()), e))?;
        let mut real = path.clone();
        if meta.file_type().is_symlink() {
            real = crate::sys::fs::canonicalize(&path).map_err(|_| {
                InstallError::new(
                    codes::UNSAFE_SOURCE,
                    format!("{rel:?} is a symlink whose target does not exist"),
                )
            })?;
            if !real.starts_with(root) {
                return Err(InstallError::new(
                    codes::UNSAFE_SOURCE,
                    format!(
                        "{rel:?} is a symlink to {} outside the plugin folder",
                        real.display()
                    ),
                ));
            }
            meta = fs::metadata(&real)
                .map_err(|e| InstallError::io(&format!("stat {}", real.display()), e))?;
        }
        let target = dst.join(&name);
        if meta.is_dir() {
            if ancestors.iter().any(|a| a == &real) {
                return Err(InstallError::new(
                    codes::UNSAFE_SOURCE,
                    format!("{rel:?} is a symlink that loops back to one of its parents"),
                ));
            }
            crate::sys::fs::dir_builder(0o755)
                .create(&target)
                .map_err(|e| InstallError::io(&format!("create {}", target.display()), e))?;
            ancestors.push(crate::sys::fs::canonicalize(&real).unwrap_or(real.clone()));
            let r = copy_dir(root, &real, &target, &rel, budget, ancestors);
            ancestors.pop();
            r?;
        } else if meta.is_file() {
            let mut o = OpenOptions::new();
            o.read(true);
            let mut f = crate::sys::fs::no_follow_nonblocking(&mut o)
                .open(&real)
                .map_err(|e| InstallError::io(&format!("open {}", real.display()), e))?;
            // The file may have been swapped since the stat: check the open one.
            let fm = f
                .metadata()
                .map_err(|e| InstallError::io(&format!("stat {}", real.display()), e))?;
            if !fm.is_file() {
                return Err(InstallError::new(
                    codes::UNSAFE_SOURCE,
                    format!("{rel:?} is not a regular file"),
                ));
            }
            budget.copy(
                &mut f,
                &target,
                file_mode(Some(crate::sys::fs::mode(&real, &meta))),
                &rel,
                codes::IO,
            )?;
        } else {
            return Err(InstallError::new(
                codes::UNSAFE_SOURCE,
                format!("{rel:?} is a special file (FIFO, socket or device); only files and folders can be installed"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
