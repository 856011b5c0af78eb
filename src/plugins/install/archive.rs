//! Safe extraction of a plugin `.zip`.
//!
//! The archive's file size is capped before the central directory is parsed.
//! A first pass over the raw entries (nothing inflated) checks every name
//! and type: the raw name bytes must be UTF-8 (the crate would silently
//! decode others as CP437), and must not be absolute, hold a backslash, a
//! drive letter, a NUL or a `..` component (checked on the raw name, since
//! `enclosed_name` silently strips a leading `/`); symlinks, FIFOs, devices
//! (`unix_mode & S_IFMT`) and encrypted entries are refused, as are
//! duplicate names (which collapse in the crate's index), names equal but
//! for case, and a file where another entry needs a folder. `manifest.json`
//! must be at the root: one found a level down is named in the error. The
//! second pass inflates each file through our own read loop that counts the
//! bytes against the per-file and total limits (declared sizes are never
//! trusted); the crate reports a CRC mismatch and a file larger than its
//! header claims at the final read, and the caller removes everything
//! extracted so far.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use super::{codes, file_mode, Budget, InstallError, Limits};
use crate::plugins::manifest::MANIFEST_FILE;

const S_IFMT: u32 = 0o170000;
const S_IFREG: u32 = 0o100000;
const S_IFDIR: u32 = 0o040000;
const S_IFLNK: u32 = 0o120000;

/// Whether `f` starts with a zip signature (local file header, or the end
/// record of an empty archive). The file is rewound.
pub fn is_zip(f: &mut File) -> io::Result<bool> {
    let mut magic = [0u8; 4];
    let mut n = 0;
    while n < 4 {
        match f.read(&mut magic[n..])? {
            0 => break,
            k => n += k,
        }
    }
    f.seek(SeekFrom::Start(0))?;
    Ok(n == 4 && (magic == *b"PK\x03\x04" || magic == *b"PK\x05\x06"))
}

fn unsafe_archive(message: String) -> InstallError {
    InstallError::new(codes::UNSAFE_ARCHIVE, message)
}

fn corrupt(message: String) -> InstallError {
    InstallError::new(codes::CORRUPT_ARCHIVE, message)
}

/// The components of a safe entry name, or why it is not safe. A trailing
/// `/` (a directory entry) and `.` components are dropped.
pub fn entry_components(raw: &[u8]) -> Result<Vec<String>, String> {
    let name = std::str::from_utf8(raw).map_err(|_| {
        format!(
            "the entry name {:?} is not UTF-8",
            String::from_utf8_lossy(raw)
        )
    })?;
    if name.is_empty() {
        return Err("an entry has an empty name".into());
    }
    if name.contains('\0') {
        return Err(format!("the entry name {name:?} contains a NUL byte"));
    }
    if name.contains('\\') {
        return Err(format!(
            "the entry name {name:?} contains a backslash (Windows paths are refused)"
        ));
    }
    if name.starts_with('/') {
        return Err(format!("the entry name {name:?} is an absolute path"));
    }
    let b = name.as_bytes();
    if b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':' {
        return Err(format!(
            "the entry name {name:?} starts with a drive letter"
        ));
    }
    let mut out = Vec::new();
    for part in name.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                return Err(format!(
                    "the entry name {name:?} climbs out of the archive with '..'"
                ))
            }
            p => out.push(p.to_string()),
        }
    }
    if out.is_empty() {
        return Err(format!("the entry name {name:?} names no file"));
    }
    Ok(out)
}

struct Entry {
    index: usize,
    parts: Vec<String>,
    is_dir: bool,
    mode: Option<u32>,
}

/// Extracts the zip `file` into the existing, empty folder `dst`.
pub fn extract(file: File, dst: &Path, limits: &Limits) -> Result<(), InstallError> {
    let size = file
        .metadata()
        .map_err(|e| InstallError::io("stat the archive", e))?
        .len();
    if size > limits.max_archive_bytes {
        return Err(InstallError::new(
            codes::ARCHIVE_TOO_LARGE,
            format!(
                "the archive is {size} bytes; the limit is {}",
                limits.max_archive_bytes
            ),
        ));
    }
    let mut zip = zip::ZipArchive::new(BufReader::new(file))
        .map_err(|e| corrupt(format!("not a readable zip archive: {e}")))?;
    if zip.has_duplicate_names() {
        return Err(unsafe_archive(
            "the archive holds two entries with the same name".into(),
        ));
    }
    if zip.len() > limits.max_entries {
        return Err(InstallError::new(
            codes::ARCHIVE_TOO_LARGE,
            format!(
                "the archive has {} entries; the limit is {}",
                zip.len(),
                limits.max_entries
            ),
        ));
    }

    // Pass 1: names and types, nothing inflated.
    let mut entries = Vec::with_capacity(zip.len());
    for index in 0..zip.len() {
        let f = zip
            .by_index_raw(index)
            .map_err(|e| corrupt(format!("entry {index} cannot be read: {e}")))?;
        let parts = entry_components(f.name_raw()).map_err(unsafe_archive)?;
        let shown = parts.join("/");
        if f.enclosed_name().is_none() {
            return Err(unsafe_archive(format!(
                "the entry name {shown:?} does not stay inside the archive"
            )));
        }
        if f.encrypted() {
            return Err(unsafe_archive(format!(
                "{shown:?} is encrypted; encrypted archives are refused"
            )));
        }
        let mode = f.unix_mode();
        let kind = mode.map(|m| m & S_IFMT).unwrap_or(0);
        if f.is_symlink() || kind == S_IFLNK {
            return Err(unsafe_archive(format!(
                "{shown:?} is a symbolic link; links are refused"
            )));
        }
        if kind != 0 && kind != S_IFREG && kind != S_IFDIR {
            return Err(unsafe_archive(format!(
                "{shown:?} is a special file (mode {:o}); only files and folders are allowed",
                mode.unwrap_or(0)
            )));
        }
        let is_dir = f.is_dir() || kind == S_IFDIR;
        if !is_dir && f.size() > limits.max_file_bytes {
            return Err(InstallError::new(
                codes::ARCHIVE_TOO_LARGE,
                format!(
                    "{shown:?} is {} bytes; the limit per file is {}",
                    f.size(),
                    limits.max_file_bytes
                ),
            ));
        }
        entries.push(Entry {
            index,
            parts,
            is_dir,
            mode,
        });
    }
    check_layout(&entries)?;

    // Pass 2: inflate, counting.
    let mut budget = Budget::new(limits, codes::ARCHIVE_TOO_LARGE);
    for e in &entries {
        let rel = e.parts.join("/");
        budget.entry(&rel)?;
        let mut target = dst.to_path_buf();
        for p in &e.parts[..e.parts.len() - 1] {
            target.push(p);
        }
        crate::sys::fs::dir_builder(0o755)
            .recursive(true)
            .create(&target)
            .map_err(|err| InstallError::io(&format!("create {}", target.display()), err))?;
        target.push(&e.parts[e.parts.len() - 1]);
        if e.is_dir {
            crate::sys::fs::dir_builder(0o755)
                .recursive(true)
                .create(&target)
                .map_err(|err| InstallError::io(&format!("create {}", target.display()), err))?;
            continue;
        }
        let mut f = zip
            .by_index(e.index)
            .map_err(|err| corrupt(format!("{rel:?} cannot be read: {err}")))?;
        budget.copy(
            &mut f,
            &target,
            file_mode(e.mode),
            &rel,
            codes::CORRUPT_ARCHIVE,
        )?;
    }
    Ok(())
}

/// Duplicate or case-colliding paths, a file used as a folder, and where
/// `manifest.json` is.
fn check_layout(entries: &[Entry]) -> Result<(), InstallError> {
    // Lower-cased path → (path as written, is a folder).
    let mut seen: HashMap<String, (String, bool)> = HashMap::new();
    let mut claim = |path: String, is_dir: bool| -> Result<(), InstallError> {
        let lower = path.to_lowercase();
        match seen.get(&lower) {
            Some((other, _)) if *other != path => Err(unsafe_archive(format!(
                "{path:?} and {other:?} differ only in case"
            ))),
            Some((_, other_dir)) if *other_dir != is_dir => Err(unsafe_archive(format!(
                "{path:?} is both a file and a folder in the archive"
            ))),
            Some((_, _)) if !is_dir => Err(unsafe_archive(format!(
                "{path:?} appears twice in the archive"
            ))),
            _ => {
                seen.insert(lower, (path, is_dir));
                Ok(())
            }
        }
    };
    for e in entries {
        for i in 1..e.parts.len() {
            claim(e.parts[..i].join("/"), true)?;
        }
        claim(e.parts.join("/"), e.is_dir)?;
    }
    let at_root = entries
        .iter()
        .any(|e| !e.is_dir && e.parts.len() == 1 && e.parts[0] == MANIFEST_FILE);
    if at_root {
        return Ok(());
    }
    let nested: Vec<String> = entries
        .iter()
        .filter(|e| !e.is_dir && e.parts.len() == 2 && e.parts[1] == MANIFEST_FILE)
        .map(|e| e.parts.join("/"))
        .collect();
    Err(InstallError::new(
        codes::MANIFEST_NOT_AT_ROOT,
        match nested.first() {
            Some(found) => format!(
                "{MANIFEST_FILE} must be at the root of the archive, but it is at {found:?}: zip the folder's contents, not the folder"
            ),
            None => format!("the archive has no {MANIFEST_FILE} at its root"),
        },
    ))
}
