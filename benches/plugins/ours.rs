//! Ours: the plugin host through the crate's own C ABI (the same symbols a C host links, not a
//! hand-made copy): `qc_plugin_host_new/install/call/free`.

use std::ffi::{c_char, CStr, CString};
use std::path::Path;
use std::ptr;

use qwen_companion::ffi::{
    qc_plugin_host, qc_plugin_host_call, qc_plugin_host_free, qc_plugin_host_install,
    qc_plugin_host_new, qc_string_free, qc_version,
};
use serde_json::{json, Value};

use crate::common::node_bin;

/// Takes an owned library string (NULL = empty).
fn take(s: *mut c_char) -> String {
    if s.is_null() {
        return String::new();
    }
    let out = unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned();
    unsafe { qc_string_free(s) };
    out
}

fn check(what: &str, status: u32, err: *mut c_char, err_json: *mut c_char) -> Result<(), String> {
    let msg = take(err);
    let detail = take(err_json);
    if status == 0 {
        return Ok(());
    }
    Err(format!("{what} -> status {status}: {msg} {detail}"))
}

fn cstr(s: &str) -> CString {
    CString::new(s).expect("no NUL")
}

/// A `qc_plugin_host` handle; freed on drop (which ends its plugins).
pub struct Host {
    h: *mut qc_plugin_host,
}

impl Host {
    pub fn new(plugins_dir: &Path) -> Result<Host, String> {
        let config = json!({
            "pluginsDir": plugins_dir,
            "node": node_bin(),
        });
        let config = cstr(&config.to_string());
        let mut h = ptr::null_mut();
        let mut err = ptr::null_mut();
        let st = unsafe { qc_plugin_host_new(config.as_ptr(), &mut h, &mut err) };
        check("qc_plugin_host_new", st, err, ptr::null_mut())?;
        Ok(Host { h })
    }

    /// Installs the plugin folder `src`; returns its id.
    pub fn install(&self, src: &Path) -> Result<String, String> {
        let src = cstr(&src.to_string_lossy());
        let (mut out, mut ej, mut err) = (ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
        let st =
            unsafe { qc_plugin_host_install(self.h, src.as_ptr(), &mut out, &mut ej, &mut err) };
        check("qc_plugin_host_install", st, err, ej)?;
        let v: Value = serde_json::from_str(&take(out)).map_err(|e| e.to_string())?;
        v["id"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| format!("install summary without id: {v}"))
    }

    /// One blocking `echo` call (`qc_plugin_host_call`); checks the answer.
    pub fn echo(&self, id: &str, text: &str) -> Result<(), String> {
        let id_c = cstr(id);
        let tool = cstr("echo");
        let params = cstr(&json!({ "text": text }).to_string());
        let (mut out, mut ej, mut err) = (ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
        let st = unsafe {
            qc_plugin_host_call(
                self.h,
                id_c.as_ptr(),
                tool.as_ptr(),
                params.as_ptr(),
                ptr::null(),
                &mut out,
                &mut ej,
                &mut err,
            )
        };
        check("qc_plugin_host_call", st, err, ej)?;
        let v: Value = serde_json::from_str(&take(out)).map_err(|e| e.to_string())?;
        if v["content"][0]["text"].as_str() != Some(text) {
            return Err(format!("call {id}: unexpected answer {v}"));
        }
        Ok(())
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        unsafe { qc_plugin_host_free(self.h) };
    }
}

pub fn version() -> String {
    unsafe { CStr::from_ptr(qc_version()) }
        .to_string_lossy()
        .into_owned()
}
