use super::*;
use crate::sys::platform::WINDOWS_LAUNCH;

fn file(dir: &Path, name: &str, mode: u32) -> String {
    let p = dir.join(name);
    std::fs::write(&p, b"x").unwrap();
    crate::sys::fs::set_mode(&p, mode).unwrap();
    p.to_string_lossy().into_owned()
}

// Unix only: it needs files with and without execute bits, which Windows
// file systems do not have (the Windows rule is tested below everywhere).
#[cfg(unix)]
#[test]
fn posix_bridges_need_an_execute_bit() {
    let d = tempfile::tempdir().unwrap();
    let exe = file(d.path(), "qc-mcp-bridge", 0o755);
    let plain = file(d.path(), "qc-mcp-bridge.exe", 0o644);
    let rule = LaunchRule::ExecuteBits;
    assert!(bridge_path_in(Some(&exe), PathStyle::Posix, rule).is_ok());
    let e = bridge_path_in(Some(&plain), PathStyle::Posix, rule).unwrap_err();
    assert!(
        e.message.contains("not an executable file"),
        "{}",
        e.message
    );
    let e = bridge_path_in(Some("C:\\qc\\qc-mcp-bridge.exe"), PathStyle::Posix, rule).unwrap_err();
    assert!(e.message.contains("not an absolute path"), "{}", e.message);
    let e = bridge_path_in(None, PathStyle::Posix, rule).unwrap_err();
    assert!(e.message.contains("required"), "{}", e.message);
}

#[test]
fn windows_bridges_are_recognised_by_extension_not_mode_bits() {
    let d = tempfile::tempdir().unwrap();
    let w = PathStyle::Windows;
    let exe = file(d.path(), "qc-mcp-bridge.EXE", 0o644);
    let cmd = file(d.path(), "qc bridge.cmd", 0o600);
    let script = file(d.path(), "qc-mcp-bridge", 0o755);
    assert!(bridge_path_in(Some(&exe), w, WINDOWS_LAUNCH).is_ok());
    assert!(bridge_path_in(Some(&cmd), w, WINDOWS_LAUNCH).is_ok());
    let e = bridge_path_in(Some(&script), w, WINDOWS_LAUNCH).unwrap_err();
    assert!(
        e.message.contains(".exe, .com, .cmd or .bat"),
        "{}",
        e.message
    );
    let dir = d.path().to_string_lossy().into_owned();
    assert!(bridge_path_in(Some(&dir), w, WINDOWS_LAUNCH).is_err());
    // A drive path is absolute for Windows (here it does not exist).
    let e = bridge_path_in(
        Some("C:\\Program Files\\qc\\qc-mcp-bridge.exe"),
        w,
        WINDOWS_LAUNCH,
    )
    .unwrap_err();
    assert_eq!(e.status, Status::NotFound, "{}", e.message);
    let e = bridge_path_in(Some("qc\\qc-mcp-bridge.exe"), w, WINDOWS_LAUNCH).unwrap_err();
    assert!(e.message.contains("not an absolute path"), "{}", e.message);
}
