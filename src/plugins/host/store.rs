//! Where installed plugins come from: the [`PluginStore`] trait and its
//! default, [`DirStore`], the plugins directory as
//! [`crate::plugins::install`] keeps it (`installed/<id>/`, `state.json`).

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::error::{Error, Result, Status};
use crate::plugins::install::{self, codes, InstallError};
use crate::plugins::manifest::Manifest;

/// One installed plugin as the store knows it.
#[derive(Clone)]
pub struct StoredPlugin {
    pub manifest: Arc<Manifest>,
    pub enabled: bool,
    /// The user's configuration values (`configuration[].id` → value).
    pub config: Map<String, Value>,
}

/// Where installed plugins, their enabled flags and configuration values
/// come from (the plugins directory's `installed/` and `state.json`).
pub trait PluginStore: Send + Sync {
    /// Every installed plugin (invalid ones left out).
    fn list(&self) -> Result<Vec<StoredPlugin>>;
    fn set_enabled(&self, id: &str, enabled: bool) -> Result<()>;
    fn set_config_value(&self, id: &str, key: &str, value: Value) -> Result<()>;
}

/// The plugins directory as the install module keeps it.
pub struct DirStore {
    dir: PathBuf,
}

impl DirStore {
    pub fn new(dir: PathBuf) -> DirStore {
        DirStore { dir }
    }
}

fn to_error(e: InstallError) -> Error {
    let status = match e.code {
        codes::NOT_FOUND => Status::NotFound,
        codes::INVALID_CONFIG | codes::INVALID_ID => Status::InvalidArgument,
        codes::BROKEN_PLUGIN | codes::CORRUPT_STATE => Status::Refused,
        _ => Status::Io,
    };
    Error::new(status, e.to_string())
}

impl PluginStore for DirStore {
    /// Plugins whose manifest no longer validates are left out (they cannot
    /// run; the install API lists them with their problems).
    fn list(&self) -> Result<Vec<StoredPlugin>> {
        Ok(install::list(&self.dir)
            .map_err(to_error)?
            .into_iter()
            .filter_map(|p| {
                Some(StoredPlugin {
                    manifest: Arc::new(p.manifest?),
                    enabled: p.enabled,
                    config: p.config,
                })
            })
            .collect())
    }
    fn set_enabled(&self, id: &str, enabled: bool) -> Result<()> {
        install::set_enabled(&self.dir, id, enabled).map_err(to_error)
    }
    fn set_config_value(&self, id: &str, key: &str, value: Value) -> Result<()> {
        install::set_config_value(&self.dir, id, key, value).map_err(to_error)
    }
}
