//! Which CLIs the companion serves and how each one finds it.
//!
//! One MCP server (one port, one token) serves Qwen Code, Gemini CLI or
//! both. The protocol on that server is the same for both CLIs (the tools
//! `openDiff`/`closeDiff`, the `ide/*` notifications, the `closeDiff` answer
//! `{"content": …}`, 10 open files and 16 384 UTF-16 units of selected text).
//! What differs is how each CLI discovers the server, and that is all this
//! module holds:
//!
//! | | Qwen Code | Gemini CLI |
//! |---|---|---|
//! | file | `~/.qwen/ide/<port>.lock` | `<os.tmpdir()>/gemini/ide/gemini-ide-server-<pid>-<port>.json` |
//! | fields | `port`, `workspacePath`, `authToken`, `ppid`, `ideName`, `ideInfo` | `port`, `workspacePath`, `authToken`, `ideInfo` |
//! | `workspacePath` | roots joined by the delimiter, or a JSON array when a root holds it | joined only: a root holding the delimiter is left out |
//! | terminal | `QWEN_CODE_IDE_SERVER_PORT`, `QWEN_CODE_IDE_WORKSPACE_PATH` | `GEMINI_CLI_IDE_SERVER_PORT`, `GEMINI_CLI_IDE_WORKSPACE_PATH`, `GEMINI_CLI_IDE_PID` |
//!
//! Gemini's `<pid>` is the process hosting the library (the editor): the
//! CLI looks for its IDE's pid first, and `GEMINI_CLI_IDE_PID` in the
//! editor's terminals tells it which one that is. Both files are written
//! mode 0600 in a private (0700) directory through [`lockfile`].

use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use super::lockfile;
use crate::error::{Error, Result};
use crate::shared::paths::PathStyle;

/// A CLI the companion can serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cli {
    /// Qwen Code (`qwen`).
    Qwen,
    /// Gemini CLI (`gemini`).
    Gemini,
}

impl Cli {
    /// The name used in JSON (`"qwen"`, `"gemini"`).
    pub fn key(self) -> &'static str {
        match self {
            Cli::Qwen => "qwen",
            Cli::Gemini => "gemini",
        }
    }
}

/// The CLIs served: the companion option `cli` (`"qwen"`, `"gemini"` or
/// `"both"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clis {
    pub qwen: bool,
    pub gemini: bool,
}

impl Default for Clis {
    fn default() -> Self {
        Clis::QWEN
    }
}

impl Clis {
    pub const QWEN: Clis = Clis {
        qwen: true,
        gemini: false,
    };
    pub const GEMINI: Clis = Clis {
        qwen: false,
        gemini: true,
    };
    pub const BOTH: Clis = Clis {
        qwen: true,
        gemini: true,
    };

    /// Parses the option's value.
    pub fn parse(value: &str) -> Result<Clis> {
        match value {
            "qwen" => Ok(Clis::QWEN),
            "gemini" => Ok(Clis::GEMINI),
            "both" => Ok(Clis::BOTH),
            other => Err(Error::invalid_argument(format!(
                "cli must be \"qwen\", \"gemini\" or \"both\", not {other:?}"
            ))),
        }
    }

    /// The option's value.
    pub fn name(self) -> &'static str {
        match (self.qwen, self.gemini) {
            (true, true) => "both",
            (false, true) => "gemini",
            _ => "qwen",
        }
    }

    /// The CLIs served, Qwen Code first.
    pub fn iter(self) -> impl Iterator<Item = Cli> {
        [(self.qwen, Cli::Qwen), (self.gemini, Cli::Gemini)]
            .into_iter()
            .filter_map(|(on, cli)| on.then_some(cli))
    }

    pub fn serves(self, cli: Cli) -> bool {
        match cli {
            Cli::Qwen => self.qwen,
            Cli::Gemini => self.gemini,
        }
    }
}

/// What every discovery file and terminal variable is made from.
#[derive(Debug, Clone)]
pub struct Endpoint<'a> {
    pub port: u16,
    pub token: &'a str,
    pub roots: &'a [String],
    /// The pid that names the editor: Qwen's `ppid`, Gemini's `<pid>`.
    pub pid: u32,
    pub ide_name: &'a str,
    pub ide_display_name: &'a str,
    pub ide_id: &'a str,
    pub style: PathStyle,
}

impl Endpoint<'_> {
    /// `workspacePath` as `cli` reads it. Gemini splits on the delimiter
    /// only, so a root that holds it cannot be written for Gemini and is
    /// left out (the caller logs [`Endpoint::unreachable_roots`]).
    pub fn workspace_path(&self, cli: Cli) -> String {
        match cli {
            Cli::Qwen => lockfile::workspace_path_value(self.roots, self.style),
            Cli::Gemini => self
                .gemini_roots()
                .0
                .join(&self.style.delimiter().to_string()),
        }
    }

    /// Roots `cli` cannot be told about (see [`Endpoint::workspace_path`]).
    pub fn unreachable_roots(&self, cli: Cli) -> Vec<&str> {
        match cli {
            Cli::Qwen => Vec::new(),
            Cli::Gemini => self.gemini_roots().1,
        }
    }

    /// The roots Gemini CLI can read, and those holding the delimiter.
    fn gemini_roots(&self) -> (Vec<&str>, Vec<&str>) {
        let delim = self.style.delimiter();
        self.roots
            .iter()
            .map(String::as_str)
            .partition(|r| !r.contains(delim))
    }

    /// The discovery file's contents for `cli`.
    pub fn contents(&self, cli: Cli) -> Value {
        let ide_info = json!({"name": self.ide_id, "displayName": self.ide_display_name});
        match cli {
            Cli::Qwen => json!({
                "port": self.port,
                "workspacePath": self.workspace_path(cli),
                "authToken": self.token,
                "ppid": self.pid,
                "ideName": self.ide_name,
                "ideInfo": ide_info,
            }),
            Cli::Gemini => json!({
                "port": self.port,
                "workspacePath": self.workspace_path(cli),
                "authToken": self.token,
                "ideInfo": ide_info,
            }),
        }
    }

    /// The variables the editor sets in its terminals for every CLI in
    /// `clis` (the token is never among them: it is only in the files).
    pub fn terminal_env(&self, clis: Clis) -> Value {
        let mut env = Map::new();
        for cli in clis.iter() {
            let (port, workspace) = match cli {
                Cli::Qwen => ("QWEN_CODE_IDE_SERVER_PORT", "QWEN_CODE_IDE_WORKSPACE_PATH"),
                Cli::Gemini => (
                    "GEMINI_CLI_IDE_SERVER_PORT",
                    "GEMINI_CLI_IDE_WORKSPACE_PATH",
                ),
            };
            env.insert(port.into(), self.port.to_string().into());
            env.insert(workspace.into(), self.workspace_path(cli).into());
            if cli == Cli::Gemini {
                env.insert("GEMINI_CLI_IDE_PID".into(), self.pid.to_string().into());
            }
        }
        Value::Object(env)
    }
}

/// Where each CLI's discovery file goes.
#[derive(Debug, Clone)]
pub struct Dirs {
    pub qwen: PathBuf,
    pub gemini: PathBuf,
}

impl Dirs {
    /// Resolves both directories (an override wins; see
    /// [`lockfile::lock_dir`] and [`lockfile::gemini_dir`]).
    pub fn resolve(qwen: Option<&Path>, gemini: Option<&Path>) -> Result<Dirs> {
        Ok(Dirs {
            qwen: lockfile::lock_dir(qwen)?,
            gemini: lockfile::gemini_dir(gemini),
        })
    }
}

/// The discovery files a running companion wrote, one per CLI served.
#[derive(Debug, Default)]
pub struct Written {
    files: Vec<(Cli, PathBuf)>,
}

impl Written {
    /// Writes the file of every CLI in `clis`. All or nothing: on a failure
    /// the files already written are removed again.
    pub fn write_all(clis: Clis, dirs: &Dirs, ep: &Endpoint<'_>) -> Result<Written> {
        let mut written = Written::default();
        for cli in clis.iter() {
            match write_one(cli, dirs, ep) {
                Ok(path) => written.files.push((cli, path)),
                Err(e) => {
                    let _ = written.remove_all();
                    return Err(e);
                }
            }
        }
        Ok(written)
    }

    /// Rewrites every file in place (the workspace roots changed).
    pub fn rewrite(&self, dirs: &Dirs, ep: &Endpoint<'_>) -> Result<()> {
        let mut first_error = None;
        for (cli, _) in &self.files {
            if let Err(e) = write_one(*cli, dirs, ep) {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Removes every file; the first error is returned after trying all.
    pub fn remove_all(&self) -> Result<()> {
        let mut first_error = None;
        for (_, path) in &self.files {
            if let Err(e) = lockfile::remove_lock(path) {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// The file written for `cli`.
    pub fn path(&self, cli: Cli) -> Option<&Path> {
        self.files
            .iter()
            .find(|(c, _)| *c == cli)
            .map(|(_, p)| p.as_path())
    }

    /// The first file written (Qwen's when it is served).
    pub fn first(&self) -> Option<&Path> {
        self.files.first().map(|(_, p)| p.as_path())
    }

    /// `{"qwen": path | null, "gemini": path | null}`.
    pub fn to_json(&self) -> Value {
        let path = |cli| {
            self.path(cli)
                .map_or(Value::Null, |p| p.to_string_lossy().into_owned().into())
        };
        json!({"qwen": path(Cli::Qwen), "gemini": path(Cli::Gemini)})
    }
}

fn write_one(cli: Cli, dirs: &Dirs, ep: &Endpoint<'_>) -> Result<PathBuf> {
    let contents = ep.contents(cli);
    match cli {
        Cli::Qwen => lockfile::write_lock(&dirs.qwen, ep.port, &contents),
        Cli::Gemini => lockfile::write_gemini(&dirs.gemini, ep.pid, ep.port, &contents),
    }
}

#[cfg(test)]
mod tests;
