//! Processes: ids, liveness, termination, and spawning a plugin's Node
//! child with its IPC channel inside a Job Object of its own.
//!
//! ## The spawned child
//! Node (libuv) attaches its channel to the C-runtime fd named by
//! `NODE_CHANNEL_FD`, which must be an overlapped duplex named pipe. We
//! create a pipe with a unique `\\.\pipe\` name (our end overlapped, the
//! child's end opened with `CreateFileW` and inheritable) and hand the
//! child's end over in the C runtime's fd table (`STARTUPINFO.lpReserved2`:
//! an `int` count, one flag byte per fd, then one HANDLE per fd) as fd
//! [`CHANNEL_FD`], next to stdin (the NUL device) and stdout/stderr (named
//! pipes read by us). `PROC_THREAD_ATTRIBUTE_HANDLE_LIST` limits inheritance
//! to exactly those four handles. The child starts suspended, joins a Job
//! Object with `JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE`, then resumes: every
//! descendant it starts is in the job too, and all of them die when the job
//! handle closes (when the host process dies, whatever thread spawned).
//! The program must be an executable (`node.exe`); `.cmd`/`.bat` files need
//! `cmd.exe` and are not run.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::windows::ffi::OsStrExt;
use std::os::windows::io::{AsRawHandle, OwnedHandle};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use windows_sys::Win32::Foundation::{
    ERROR_ACCESS_DENIED, ERROR_PIPE_BUSY, GENERIC_READ, GENERIC_WRITE, HANDLE, WAIT_OBJECT_0,
    WAIT_TIMEOUT,
};
use windows_sys::Win32::Security::SECURITY_ATTRIBUTES;
use windows_sys::Win32::Storage::FileSystem::{
    CreateFileW, FILE_FLAG_FIRST_PIPE_INSTANCE, FILE_FLAG_OVERLAPPED, FILE_READ_ATTRIBUTES,
    FILE_SHARE_READ, FILE_SHARE_WRITE, FILE_WRITE_ATTRIBUTES, OPEN_EXISTING, PIPE_ACCESS_DUPLEX,
    PIPE_ACCESS_INBOUND,
};
use windows_sys::Win32::System::JobObjects::{
    AssignProcessToJobObject, CreateJobObjectW, IsProcessInJob, JobObjectBasicProcessIdList,
    JobObjectExtendedLimitInformation, QueryInformationJobObject, SetInformationJobObject,
    TerminateJobObject, JOBOBJECT_EXTENDED_LIMIT_INFORMATION, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
};
use windows_sys::Win32::System::Pipes::{
    CreateNamedPipeW, PIPE_READMODE_BYTE, PIPE_REJECT_REMOTE_CLIENTS, PIPE_TYPE_BYTE, PIPE_WAIT,
};
use windows_sys::Win32::System::Threading::{
    CreateProcessW, DeleteProcThreadAttributeList, GetExitCodeProcess, GetProcessTimes,
    InitializeProcThreadAttributeList, OpenProcess, ResumeThread, TerminateProcess,
    UpdateProcThreadAttribute, WaitForSingleObject, CREATE_NO_WINDOW, CREATE_SUSPENDED,
    CREATE_UNICODE_ENVIRONMENT, EXTENDED_STARTUPINFO_PRESENT, INFINITE,
    LPPROC_THREAD_ATTRIBUTE_LIST, PROCESS_INFORMATION, PROCESS_QUERY_INFORMATION,
    PROCESS_QUERY_LIMITED_INFORMATION, PROCESS_SYNCHRONIZE, PROCESS_TERMINATE,
    PROC_THREAD_ATTRIBUTE_HANDLE_LIST, STARTF_USESTDHANDLES, STARTUPINFOEXW,
};

use super::security::OwnerOnlyAttributes;
use super::util::{check, owned, wide};
use crate::sys::{ExitInfo, Signal};

/// The C-runtime fd Node finds its channel at (`NODE_CHANNEL_FD`).
pub const CHANNEL_FD: i32 = 3;

/// The exit code a process ended by [`signal`] or a group signal gets (as
/// Node's `subprocess.kill()` on Windows).
const TERMINATED_EXIT_CODE: u32 = 1;

/// This process's id.
pub fn current_pid() -> u32 {
    std::process::id()
}

/// The id of this process's parent (from a process snapshot).
#[cfg(test)]
pub fn parent_pid() -> u32 {
    use windows_sys::Win32::System::Diagnostics::ToolHelp::{
        CreateToolhelp32Snapshot, Process32FirstW, Process32NextW, PROCESSENTRY32W,
        TH32CS_SNAPPROCESS,
    };
    let me = current_pid();
    // SAFETY: a process snapshot walked with a properly sized entry.
    unsafe {
        let Ok(snap) = owned(CreateToolhelp32Snapshot(TH32CS_SNAPPROCESS, 0)) else {
            return 0;
        };
        let mut e: PROCESSENTRY32W = std::mem::zeroed();
        e.dwSize = std::mem::size_of::<PROCESSENTRY32W>() as u32;
        let mut ok = Process32FirstW(snap.as_raw_handle(), &mut e);
        while ok != 0 {
            if e.th32ProcessID == me {
                return e.th32ParentProcessID;
            }
            ok = Process32NextW(snap.as_raw_handle(), &mut e);
        }
    }
    0
}

fn open_process(pid: u32, access: u32) -> io::Result<OwnedHandle> {
    // SAFETY: OpenProcess has no memory preconditions.
    owned(unsafe { OpenProcess(access, 0, pid) })
}

/// Whether a process `pid` exists, ours or another user's (one that has
/// exited but whose handle someone still holds counts, like a zombie).
pub fn exists(pid: u32) -> bool {
    if pid == 0 {
        return false;
    }
    match open_process(pid, PROCESS_QUERY_LIMITED_INFORMATION) {
        Ok(_) => true,
        Err(e) => e.raw_os_error() == Some(ERROR_ACCESS_DENIED as i32),
    }
}

/// Whether `pid` exists and has not exited. A process we may not open
/// counts as alive.
pub fn is_alive(pid: u32) -> bool {
    if pid == 0 {
        return false;
    }
    match open_process(pid, PROCESS_SYNCHRONIZE) {
        // SAFETY: a zero-timeout wait on a live handle.
        Ok(h) => (unsafe { WaitForSingleObject(h.as_raw_handle(), 0) }) == WAIT_TIMEOUT,
        Err(e) => e.raw_os_error() == Some(ERROR_ACCESS_DENIED as i32),
    }
}

/// `"win:<creation time>"` for `pid` (100 ns since 1601, from
/// `GetProcessTimes`), which tells a process from a later one that reuses
/// its pid; `None` when the process cannot be opened.
pub fn start_token(pid: u32) -> Option<String> {
    let h = open_process(pid, PROCESS_QUERY_LIMITED_INFORMATION).ok()?;
    // SAFETY: four FILETIME out-parameters on the stack.
    unsafe {
        let (mut c, mut e, mut k, mut u) = (
            std::mem::zeroed(),
            std::mem::zeroed(),
            std::mem::zeroed(),
            std::mem::zeroed(),
        );
        if GetProcessTimes(h.as_raw_handle(), &mut c, &mut e, &mut k, &mut u) == 0 {
            return None;
        }
        let t = ((c.dwHighDateTime as u64) << 32) | c.dwLowDateTime as u64;
        Some(format!("win:{t}"))
    }
}

/// The boot id: Windows has none that a process can read cheaply.
pub fn boot_id() -> Option<String> {
    None
}

/// Windows has no pid namespaces.
pub fn pid_namespace() -> Option<u64> {
    None
}

/// Ends one process (`Terminate` and `Kill` both `TerminateProcess`).
/// `Stop` does nothing: Windows has no documented way to suspend a whole
/// process, and a process cannot escape its Job Object by starting children
/// (they join the job), so there is no race to freeze.
pub fn signal(pid: u32, sig: Signal) {
    if pid <= 4 || sig == Signal::Stop {
        return;
    }
    if let Ok(h) = open_process(pid, PROCESS_TERMINATE) {
        // SAFETY: a handle opened for termination.
        unsafe { TerminateProcess(h.as_raw_handle(), TERMINATED_EXIT_CODE) };
    }
}

/// The name of a C-runtime signal number (`SIGTERM`, …), or `"signal"`.
/// Windows reports no signal in [`ExitInfo`].
pub fn signal_name(sig: i32) -> &'static str {
    match sig {
        2 => "SIGINT",
        4 => "SIGILL",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        15 => "SIGTERM",
        21 => "SIGBREAK",
        22 => "SIGABRT",
        _ => "signal",
    }
}

/// How a child killed by [`Signal::Kill`] reads (the exit code the job's
/// termination sets).
#[cfg(test)]
pub const KILLED: ExitInfo = ExitInfo {
    code: Some(TERMINATED_EXIT_CODE as i32),
    signal: None,
};

/// A Job Object and the environment entries its first process got.
struct JobEntry {
    env: Vec<OsString>,
    job: Weak<OwnedHandle>,
}

/// Every plugin job alive (pruned at each spawn and scan; bounded by the
/// children alive).
static JOBS: Mutex<Vec<JobEntry>> = Mutex::new(Vec::new());

fn env_entry_matches(entry: &OsStr, wanted: &str) -> bool {
    let entry = entry.to_string_lossy();
    match (entry.split_once('='), wanted.split_once('=')) {
        (Some((ek, ev)), Some((wk, wv))) => ek.eq_ignore_ascii_case(wk) && ev == wv,
        _ => false,
    }
}

/// Pids of the processes (not this one) still in a plugin Job Object whose
/// child was started with the environment entry `var_eq_value`
/// (`NAME=value`). Windows offers no cheap scan of other processes'
/// environments, but every descendant of a plugin is in its job whatever it
/// does (a job cannot be left), so this finds what a plugin left behind
/// while its [`Process`] is alive (once that is dropped, the job closes and
/// kills them all).
pub fn find_by_env(var_eq_value: &str) -> Vec<u32> {
    let me = current_pid();
    let jobs: Vec<Arc<OwnedHandle>> = {
        let mut g = JOBS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        g.retain(|e| e.job.strong_count() > 0);
        g.iter()
            .filter(|e| e.env.iter().any(|x| env_entry_matches(x, var_eq_value)))
            .filter_map(|e| e.job.upgrade())
            .collect()
    };
    let mut out = Vec::new();
    for job in jobs {
        out.extend(
            job_pids(job.as_raw_handle())
                .into_iter()
                .filter(|&p| p != me),
        );
    }
    out
}

/// The pids in a job (at most 4096).
fn job_pids(job: HANDLE) -> Vec<u32> {
    const MAX: usize = 4096;
    // JOBOBJECT_BASIC_PROCESS_ID_LIST: two u32 counts, then usize ids.
    let mut buf = vec![0usize; 1 + MAX];
    let mut ret = 0u32;
    // SAFETY: the buffer is as large as we say; the counts and ids it gets
    // stay within it.
    let ok = unsafe {
        QueryInformationJobObject(
            job,
            JobObjectBasicProcessIdList,
            buf.as_mut_ptr() as *mut _,
            (buf.len() * std::mem::size_of::<usize>()) as u32,
            &mut ret,
        )
    };
    if ok == 0 {
        return Vec::new();
    }
    let listed = (buf[0] as u64 >> 32) as usize;
    buf[1..1 + listed.min(MAX)]
        .iter()
        .map(|&p| p as u32)
        .collect()
}

pub use crate::sys::ChannelCommand;

/// Our end of a child's IPC channel (an overlapped named-pipe HANDLE).
/// Turn it into a stream with [`crate::sys::ipc::channel_stream`].
#[derive(Debug)]
pub struct ChannelEnd(pub(in crate::sys) OwnedHandle);

/// The read end of a child's stdout or stderr (an overlapped named pipe).
#[derive(Debug)]
pub struct PipeReader(OwnedHandle);

/// An async reader of a [`PipeReader`] (tokio `AsyncRead`).
pub type AsyncPipeReader = tokio::net::windows::named_pipe::NamedPipeServer;

impl PipeReader {
    /// Registers the pipe with the current tokio runtime.
    pub fn into_async(self) -> io::Result<AsyncPipeReader> {
        use std::os::windows::io::IntoRawHandle;
        // SAFETY: an overlapped pipe handle we own, handed to tokio.
        unsafe { AsyncPipeReader::from_raw_handle(self.0.into_raw_handle()) }
    }
}

/// A spawned child and its Job Object.
#[derive(Debug)]
pub struct Process {
    pid: u32,
    handle: OwnedHandle,
    job: Arc<OwnedHandle>,
}

impl Process {
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Blocks until the child exits (our own process handle only).
    pub fn wait(&self) -> ExitInfo {
        let mut code = 0u32;
        // SAFETY: waits on and queries our own process handle.
        let ok = unsafe {
            WaitForSingleObject(self.handle.as_raw_handle(), INFINITE) == WAIT_OBJECT_0
                && GetExitCodeProcess(self.handle.as_raw_handle(), &mut code) != 0
        };
        ExitInfo {
            code: ok.then_some(code as i32),
            signal: None,
        }
    }

    /// Ends every process of the child's job (`Terminate`, `Kill`);
    /// `Stop` does nothing (see [`signal`]).
    pub fn signal_group(&self, sig: Signal) {
        if sig != Signal::Stop {
            // SAFETY: our own job handle.
            unsafe { TerminateJobObject(self.job.as_raw_handle(), TERMINATED_EXIT_CODE) };
        }
    }

    /// Whether process `pid` is in this child's job.
    pub fn group_contains(&self, pid: u32) -> bool {
        // Windows accepts either query right for IsProcessInJob; Wine
        // (8.0) demands the full one, so that is asked for first.
        let Ok(h) = open_process(pid, PROCESS_QUERY_INFORMATION)
            .or_else(|_| open_process(pid, PROCESS_QUERY_LIMITED_INFORMATION))
        else {
            return false;
        };
        let mut inside = 0;
        // SAFETY: two live handles and a BOOL out-parameter.
        let ok =
            unsafe { IsProcessInJob(h.as_raw_handle(), self.job.as_raw_handle(), &mut inside) };
        ok != 0 && inside != 0
    }
}

pub use crate::sys::ChannelChild;

/// A unique pipe name of ours.
fn unique_pipe_name() -> Vec<u16> {
    static N: AtomicU64 = AtomicU64::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let name = format!(
        r"\\.\pipe\qwen-companion-{}-{}-{:x}",
        current_pid(),
        N.fetch_add(1, Ordering::Relaxed),
        t
    );
    name.encode_utf16().chain(Some(0)).collect()
}

/// A connected channel pipe: (our end, the child's end), for tests.
#[cfg(test)]
pub(super) fn channel_pipe(inherit: bool) -> io::Result<(OwnedHandle, OwnedHandle)> {
    pipe_pair(true, inherit)
}

/// A connected named pipe: (our overlapped server end, the child's end,
/// inheritable when `inherit`). `duplex`: the channel (both ways, the
/// child's end overlapped as libuv requires for IPC); else an output pipe
/// the child writes to (its end synchronous, as for any stdio pipe).
fn pipe_pair(duplex: bool, inherit: bool) -> io::Result<(OwnedHandle, OwnedHandle)> {
    let sa = OwnerOnlyAttributes::new(false)?;
    let mut tries = 0;
    let (name, server) = loop {
        let name = unique_pipe_name();
        let access = if duplex {
            PIPE_ACCESS_DUPLEX
        } else {
            PIPE_ACCESS_INBOUND
        };
        // SAFETY: a NUL-terminated name and attributes alive for the call.
        let h = unsafe {
            CreateNamedPipeW(
                name.as_ptr(),
                access | FILE_FLAG_OVERLAPPED | FILE_FLAG_FIRST_PIPE_INSTANCE,
                PIPE_TYPE_BYTE | PIPE_READMODE_BYTE | PIPE_WAIT | PIPE_REJECT_REMOTE_CLIENTS,
                1,
                64 * 1024,
                64 * 1024,
                0,
                sa.as_ptr(),
            )
        };
        match owned(h) {
            Ok(s) => break (name, s),
            Err(e)
                if tries < 8
                    && matches!(
                        e.raw_os_error().map(|c| c as u32),
                        Some(ERROR_ACCESS_DENIED) | Some(ERROR_PIPE_BUSY)
                    ) =>
            {
                tries += 1;
            }
            Err(e) => return Err(e),
        }
    };
    let child_sa = SECURITY_ATTRIBUTES {
        nLength: std::mem::size_of::<SECURITY_ATTRIBUTES>() as u32,
        lpSecurityDescriptor: std::ptr::null_mut(),
        bInheritHandle: inherit as i32,
    };
    let (access, flags) = if duplex {
        (GENERIC_READ | GENERIC_WRITE, FILE_FLAG_OVERLAPPED)
    } else {
        (GENERIC_WRITE | FILE_READ_ATTRIBUTES, 0)
    };
    // SAFETY: opens the pipe just created; attributes alive for the call.
    let client = owned(unsafe {
        CreateFileW(
            name.as_ptr(),
            access,
            0,
            &child_sa,
            OPEN_EXISTING,
            flags,
            std::ptr::null_mut(),
        )
    })?;
    Ok((server, client))
}

/// The NUL device for the child's stdin, inheritable.
fn null_input() -> io::Result<OwnedHandle> {
    let sa = SECURITY_ATTRIBUTES {
        nLength: std::mem::size_of::<SECURITY_ATTRIBUTES>() as u32,
        lpSecurityDescriptor: std::ptr::null_mut(),
        bInheritHandle: 1,
    };
    let name = wide(OsStr::new("NUL"))?;
    // SAFETY: a NUL-terminated device name; attributes alive for the call.
    owned(unsafe {
        CreateFileW(
            name.as_ptr(),
            GENERIC_READ | FILE_WRITE_ATTRIBUTES,
            FILE_SHARE_READ | FILE_SHARE_WRITE,
            &sa,
            OPEN_EXISTING,
            0,
            std::ptr::null_mut(),
        )
    })
}

/// Appends `arg` to a command line, quoted as the C runtime's argv parser
/// reads it back.
fn push_quoted(cmd: &mut Vec<u16>, arg: &OsStr) {
    let units: Vec<u16> = arg.encode_wide().collect();
    let needs = units.is_empty()
        || units
            .iter()
            .any(|&c| c == b' ' as u16 || c == b'\t' as u16 || c == b'"' as u16);
    if !cmd.is_empty() {
        cmd.push(b' ' as u16);
    }
    if !needs {
        cmd.extend_from_slice(&units);
        return;
    }
    cmd.push(b'"' as u16);
    let mut backslashes = 0;
    for &c in &units {
        if c == b'\\' as u16 {
            backslashes += 1;
        } else {
            if c == b'"' as u16 {
                cmd.extend(std::iter::repeat_n(b'\\' as u16, backslashes + 1));
            }
            backslashes = 0;
        }
        cmd.push(c);
    }
    cmd.extend(std::iter::repeat_n(b'\\' as u16, backslashes));
    cmd.push(b'"' as u16);
}

/// The command line for `program` and `args` (NUL-terminated).
pub(super) fn command_line(program: &OsStr, args: &[OsString]) -> io::Result<Vec<u16>> {
    let mut cmd = Vec::new();
    for a in std::iter::once(program).chain(args.iter().map(|a| a.as_os_str())) {
        if a.encode_wide().any(|c| c == 0) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "an argument contains a NUL character",
            ));
        }
        push_quoted(&mut cmd, a);
    }
    cmd.push(0);
    Ok(cmd)
}

/// A `CREATE_UNICODE_ENVIRONMENT` block, sorted by name ignoring case as
/// Windows expects; a later entry of the same name wins.
pub(super) fn env_block(env: &[(OsString, OsString)]) -> io::Result<Vec<u16>> {
    let mut map: Vec<(String, &OsString, &OsString)> = Vec::new();
    for (k, v) in env {
        let key = k.to_string_lossy().to_uppercase();
        if k.is_empty() || key.contains('=') {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("invalid environment variable name {k:?}"),
            ));
        }
        map.retain(|(x, _, _)| *x != key);
        map.push((key, k, v));
    }
    map.sort_by(|a, b| a.0.cmp(&b.0));
    let mut block = Vec::new();
    for (_, k, v) in map {
        let entry: Vec<u16> = k
            .encode_wide()
            .chain(Some(b'=' as u16))
            .chain(v.encode_wide())
            .collect();
        if entry.contains(&0) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "an environment entry contains a NUL character",
            ));
        }
        block.extend(entry);
        block.push(0);
    }
    if block.is_empty() {
        block.push(0);
    }
    block.push(0);
    Ok(block)
}

/// C-runtime fd flags (`FOPEN`, `FPIPE`, `FDEV`).
const FOPEN: u8 = 0x01;
const FPIPE: u8 = 0x08;
const FDEV: u8 = 0x40;

/// The C runtime's inherited fd table for fds 0..n: an `int` count, the
/// flag bytes, then the HANDLEs (unaligned).
pub(super) fn crt_fd_block(fds: &[(u8, HANDLE)]) -> Vec<u8> {
    let mut b = Vec::with_capacity(4 + fds.len() * (1 + std::mem::size_of::<usize>()));
    b.extend_from_slice(&(fds.len() as i32).to_le_bytes());
    b.extend(fds.iter().map(|(f, _)| *f));
    for (_, h) in fds {
        b.extend_from_slice(&(*h as usize).to_le_bytes());
    }
    b
}

/// A process-thread attribute list holding a handle list.
struct AttributeList {
    buf: Vec<usize>,
    _handles: Box<[HANDLE]>,
}

impl AttributeList {
    fn with_handles(handles: Vec<HANDLE>) -> io::Result<AttributeList> {
        let handles = handles.into_boxed_slice();
        let mut size = 0usize;
        // SAFETY: a size query with a null list.
        unsafe { InitializeProcThreadAttributeList(std::ptr::null_mut(), 1, 0, &mut size) };
        let mut buf = vec![0usize; size.div_ceil(std::mem::size_of::<usize>())];
        let list = buf.as_mut_ptr() as LPPROC_THREAD_ATTRIBUTE_LIST;
        // SAFETY: `buf` has the size asked for; the handle array lives in
        // the returned value as long as the list.
        unsafe {
            check(InitializeProcThreadAttributeList(list, 1, 0, &mut size))?;
            let r = check(UpdateProcThreadAttribute(
                list,
                0,
                PROC_THREAD_ATTRIBUTE_HANDLE_LIST as usize,
                handles.as_ptr() as *const _,
                std::mem::size_of_val(&*handles),
                std::ptr::null_mut(),
                std::ptr::null(),
            ));
            if let Err(e) = r {
                DeleteProcThreadAttributeList(list);
                return Err(e);
            }
        }
        Ok(AttributeList {
            buf,
            _handles: handles,
        })
    }

    fn as_ptr(&mut self) -> LPPROC_THREAD_ATTRIBUTE_LIST {
        self.buf.as_mut_ptr() as LPPROC_THREAD_ATTRIBUTE_LIST
    }
}

impl Drop for AttributeList {
    fn drop(&mut self) {
        // SAFETY: initialised in `with_handles`, deleted once.
        unsafe { DeleteProcThreadAttributeList(self.as_ptr()) };
    }
}

/// A Job Object that kills its processes when its last handle closes.
fn kill_on_close_job() -> io::Result<OwnedHandle> {
    // SAFETY: an unnamed job with default security.
    let job = owned(unsafe { CreateJobObjectW(std::ptr::null(), std::ptr::null()) })?;
    // SAFETY: a zeroed limit structure with one flag set, of the size passed.
    unsafe {
        let mut info: JOBOBJECT_EXTENDED_LIMIT_INFORMATION = std::mem::zeroed();
        info.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
        check(SetInformationJobObject(
            job.as_raw_handle(),
            JobObjectExtendedLimitInformation,
            &info as *const _ as *const _,
            std::mem::size_of::<JOBOBJECT_EXTENDED_LIMIT_INFORMATION>() as u32,
        ))?;
    }
    Ok(job)
}

/// Starts `cmd` with Node's IPC channel (`NODE_CHANNEL_FD`, `json` mode),
/// stdin from NUL, stdout and stderr piped, in a Job Object of its own
/// (see the module docs), inheriting no handle but those four. Any thread
/// may call it: the job, not the spawning thread, ties the child's life to
/// the host's.
pub fn spawn_with_channel(cmd: ChannelCommand) -> io::Result<ChannelChild> {
    let (parent_end, child_end) = pipe_pair(true, true)?;
    let (out_r, out_w) = pipe_pair(false, true)?;
    let (err_r, err_w) = pipe_pair(false, true)?;
    let nul = null_input()?;

    let mut env = cmd.env.clone();
    env.push(("NODE_CHANNEL_FD".into(), CHANNEL_FD.to_string().into()));
    env.push(("NODE_CHANNEL_SERIALIZATION_MODE".into(), "json".into()));
    let env_entries: Vec<OsString> = env
        .iter()
        .map(|(k, v)| {
            let mut e = k.clone();
            e.push("=");
            e.push(v);
            e
        })
        .collect();
    let block = env_block(&env)?;
    let mut line = command_line(&cmd.program, &cmd.args)?;
    let cwd = wide(cmd.cwd.as_os_str())?;

    let raw = |h: &OwnedHandle| h.as_raw_handle();
    let fds = crt_fd_block(&[
        (FOPEN | FDEV, raw(&nul)),
        (FOPEN | FPIPE, raw(&out_w)),
        (FOPEN | FPIPE, raw(&err_w)),
        (FOPEN | FPIPE, raw(&child_end)),
    ]);
    let mut attrs =
        AttributeList::with_handles(vec![raw(&nul), raw(&out_w), raw(&err_w), raw(&child_end)])?;
    let job = kill_on_close_job()?;

    // SAFETY: every pointer below refers to a live local (command line,
    // environment block, directory, fd table, attribute list) for the
    // duration of the call; the handles in PROCESS_INFORMATION are taken
    // over at once.
    let pi = unsafe {
        let mut si: STARTUPINFOEXW = std::mem::zeroed();
        si.StartupInfo.cb = std::mem::size_of::<STARTUPINFOEXW>() as u32;
        si.StartupInfo.dwFlags = STARTF_USESTDHANDLES;
        si.StartupInfo.hStdInput = raw(&nul);
        si.StartupInfo.hStdOutput = raw(&out_w);
        si.StartupInfo.hStdError = raw(&err_w);
        si.StartupInfo.cbReserved2 = fds.len() as u16;
        si.StartupInfo.lpReserved2 = fds.as_ptr() as *mut u8;
        si.lpAttributeList = attrs.as_ptr();
        let mut pi: PROCESS_INFORMATION = std::mem::zeroed();
        check(CreateProcessW(
            std::ptr::null(),
            line.as_mut_ptr(),
            std::ptr::null(),
            std::ptr::null(),
            1,
            CREATE_UNICODE_ENVIRONMENT
                | CREATE_NO_WINDOW
                | CREATE_SUSPENDED
                | EXTENDED_STARTUPINFO_PRESENT,
            block.as_ptr() as *const _,
            cwd.as_ptr(),
            &si.StartupInfo,
            &mut pi,
        ))?;
        pi
    };
    let process = owned(pi.hProcess)?;
    let thread = owned(pi.hThread)?;
    // SAFETY: our job and the suspended child's process and thread handles.
    let started = unsafe {
        check(AssignProcessToJobObject(
            job.as_raw_handle(),
            process.as_raw_handle(),
        ))
        .and_then(|()| {
            if ResumeThread(thread.as_raw_handle()) == u32::MAX {
                Err(io::Error::last_os_error())
            } else {
                Ok(())
            }
        })
    };
    if let Err(e) = started {
        // SAFETY: ends the child we just created (still suspended).
        unsafe { TerminateProcess(process.as_raw_handle(), TERMINATED_EXIT_CODE) };
        return Err(e);
    }
    drop((thread, child_end, out_w, err_w, nul, attrs));
    let job = Arc::new(job);
    {
        let mut g = JOBS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        g.retain(|e| e.job.strong_count() > 0);
        g.push(JobEntry {
            env: env_entries,
            job: Arc::downgrade(&job),
        });
    }
    Ok(ChannelChild {
        process: Process {
            pid: pi.dwProcessId,
            handle: process,
            job,
        },
        channel: ChannelEnd(parent_end),
        stdout: PipeReader(out_r),
        stderr: PipeReader(err_r),
    })
}
