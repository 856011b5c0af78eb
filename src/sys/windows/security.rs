//! Security identifiers and owner-only DACLs: what the POSIX modes 0700 and
//! 0600 and the file owner become on Windows.
//!
//! "Owner-only" is a *protected* DACL (nothing inherited from the parent)
//! with one entry: full control for the user this process runs as. A
//! directory's entry is inherited by what is created inside it, so a file
//! or folder made in a private directory is private from its first moment.

use std::ffi::OsString;
use std::io;
use std::os::windows::ffi::OsStringExt;
use std::os::windows::io::AsRawHandle;
use std::path::Path;
use std::sync::OnceLock;

use windows_sys::Win32::Foundation::{LocalFree, GENERIC_ALL, HANDLE};
use windows_sys::Win32::Security::Authorization::{
    ConvertSidToStringSidW, GetNamedSecurityInfoW, SetEntriesInAclW, SetNamedSecurityInfoW,
    SetSecurityInfo, EXPLICIT_ACCESS_W, SET_ACCESS, SE_FILE_OBJECT, TRUSTEE_IS_SID,
    TRUSTEE_IS_USER, TRUSTEE_W,
};
use windows_sys::Win32::Security::{
    AclSizeInformation, EqualSid, GetAce, GetAclInformation, GetLengthSid,
    GetSecurityDescriptorControl, GetTokenInformation, InitializeSecurityDescriptor, IsValidSid,
    SetFileSecurityW, SetKernelObjectSecurity, SetSecurityDescriptorControl,
    SetSecurityDescriptorDacl, TokenUser, ACCESS_ALLOWED_ACE, ACE_HEADER, ACL,
    ACL_SIZE_INFORMATION, DACL_SECURITY_INFORMATION, NO_INHERITANCE, OWNER_SECURITY_INFORMATION,
    PROTECTED_DACL_SECURITY_INFORMATION, PSECURITY_DESCRIPTOR, SECURITY_ATTRIBUTES,
    SECURITY_DESCRIPTOR, SE_DACL_PROTECTED, SUB_CONTAINERS_AND_OBJECTS_INHERIT, TOKEN_QUERY,
    TOKEN_USER, UNPROTECTED_DACL_SECURITY_INFORMATION,
};
use windows_sys::Win32::System::Threading::{GetCurrentProcess, OpenProcessToken};

use super::util::{owned, wide};

const ACCESS_ALLOWED_ACE_TYPE: u8 = 0;
const SECURITY_DESCRIPTOR_REVISION: u32 = 1;
/// The LocalSystem account's SID (the OS itself).
const LOCAL_SYSTEM: &str = "S-1-5-18";

/// A security identifier (the bytes of a SID).
#[derive(Clone, PartialEq, Eq)]
pub struct Sid(Vec<u8>);

impl Sid {
    fn ptr(&self) -> *mut core::ffi::c_void {
        self.0.as_ptr() as *mut core::ffi::c_void
    }

    /// Copies the SID at `p` (a valid SID pointer).
    ///
    /// # Safety
    /// `p` must point to a valid SID for the duration of the call.
    unsafe fn copy_from(p: *mut core::ffi::c_void) -> io::Result<Sid> {
        if p.is_null() || IsValidSid(p) == 0 {
            return Err(io::Error::other("the security descriptor has no valid SID"));
        }
        let len = GetLengthSid(p) as usize;
        Ok(Sid(std::slice::from_raw_parts(p as *const u8, len).to_vec()))
    }

    /// The `S-1-5-…` string form.
    pub fn to_string_form(&self) -> String {
        let mut s: *mut u16 = std::ptr::null_mut();
        // SAFETY: converts our valid SID; the returned LocalAlloc'd string
        // is read up to its NUL and freed once.
        unsafe {
            if ConvertSidToStringSidW(self.ptr(), &mut s) == 0 || s.is_null() {
                return "S-?".into();
            }
            let mut n = 0;
            while *s.add(n) != 0 {
                n += 1;
            }
            let out = OsString::from_wide(std::slice::from_raw_parts(s, n));
            LocalFree(s as _);
            out.to_string_lossy().into_owned()
        }
    }
}

impl std::fmt::Debug for Sid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_string_form())
    }
}

/// The SID of the user this process runs as (read once).
pub fn current_user() -> io::Result<Sid> {
    static USER: OnceLock<Sid> = OnceLock::new();
    if let Some(s) = USER.get() {
        return Ok(s.clone());
    }
    let mut token = std::ptr::null_mut();
    // SAFETY: opens our own process token for reading into a local.
    super::util::check(unsafe { OpenProcessToken(GetCurrentProcess(), TOKEN_QUERY, &mut token) })?;
    let token = owned(token)?;
    let mut len = 0u32;
    // SAFETY: a size query with a null buffer.
    unsafe {
        GetTokenInformation(
            token.as_raw_handle(),
            TokenUser,
            std::ptr::null_mut(),
            0,
            &mut len,
        )
    };
    if len == 0 {
        return Err(io::Error::last_os_error());
    }
    // u64 storage keeps TOKEN_USER's pointer field aligned.
    let mut buf = vec![0u64; (len as usize).div_ceil(8)];
    // SAFETY: `buf` holds at least `len` bytes; the SID it points to lies
    // inside `buf` and is copied before `buf` is dropped.
    let sid = unsafe {
        super::util::check(GetTokenInformation(
            token.as_raw_handle(),
            TokenUser,
            buf.as_mut_ptr() as *mut _,
            len,
            &mut len,
        ))?;
        let user = &*(buf.as_ptr() as *const TOKEN_USER);
        Sid::copy_from(user.User.Sid)?
    };
    Ok(USER.get_or_init(|| sid).clone())
}

/// A `LocalAlloc`'d pointer freed on drop.
struct Local(*mut core::ffi::c_void);

impl Drop for Local {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: allocated by the Windows call that filled it, freed once.
            unsafe { LocalFree(self.0 as _) };
        }
    }
}

/// A new ACL granting `sid` full control, inherited by children when
/// `inherit` (a directory).
fn owner_only_acl(sid: &Sid, inherit: bool) -> io::Result<Local> {
    let ea = EXPLICIT_ACCESS_W {
        grfAccessPermissions: GENERIC_ALL,
        grfAccessMode: SET_ACCESS,
        grfInheritance: if inherit {
            SUB_CONTAINERS_AND_OBJECTS_INHERIT
        } else {
            NO_INHERITANCE
        },
        Trustee: TRUSTEE_W {
            TrusteeForm: TRUSTEE_IS_SID,
            TrusteeType: TRUSTEE_IS_USER,
            ptstrName: sid.ptr() as *mut u16,
            ..Default::default()
        },
    };
    let mut acl: *mut ACL = std::ptr::null_mut();
    // SAFETY: one explicit entry pointing at our live SID; the new ACL is
    // LocalAlloc'd and owned by the returned guard.
    let rc = unsafe { SetEntriesInAclW(1, &ea, std::ptr::null(), &mut acl) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc as i32));
    }
    Ok(Local(acl as *mut _))
}

const DACL_PROTECTED: u32 = DACL_SECURITY_INFORMATION | PROTECTED_DACL_SECURITY_INFORMATION;

/// A security descriptor holding an owner-only DACL marked protected (the
/// `SE_DACL_PROTECTED` control bit), kept alive with its ACL.
struct OwnerOnlyDescriptor {
    _acl: Local,
    sd: Box<SECURITY_DESCRIPTOR>,
}

impl OwnerOnlyDescriptor {
    fn new(is_dir: bool) -> io::Result<OwnerOnlyDescriptor> {
        let sid = current_user()?;
        let acl = owner_only_acl(&sid, is_dir)?;
        let mut sd: Box<SECURITY_DESCRIPTOR> = Box::default();
        let psd = &mut *sd as *mut SECURITY_DESCRIPTOR as PSECURITY_DESCRIPTOR;
        // SAFETY: initialises our boxed descriptor, points its DACL at the
        // ACL kept alive next to it and sets the protected bit.
        unsafe {
            super::util::check(InitializeSecurityDescriptor(
                psd,
                SECURITY_DESCRIPTOR_REVISION,
            ))?;
            super::util::check(SetSecurityDescriptorDacl(psd, 1, acl.0 as *const ACL, 0))?;
            super::util::check(SetSecurityDescriptorControl(
                psd,
                SE_DACL_PROTECTED,
                SE_DACL_PROTECTED,
            ))?;
        }
        Ok(OwnerOnlyDescriptor { _acl: acl, sd })
    }

    fn as_ptr(&self) -> PSECURITY_DESCRIPTOR {
        &*self.sd as *const SECURITY_DESCRIPTOR as PSECURITY_DESCRIPTOR
    }
}

// The owner-only DACL is written as a whole descriptor (SetFileSecurityW,
// SetKernelObjectSecurity: exactly this DACL, nothing merged), not through
// SetNamedSecurityInfoW/SetSecurityInfo: Wine's versions of those merge the
// parent's inheritable entries in even when told the DACL is protected, so
// "Everyone: read" came back. Windows treats both ways the same.

/// Gives the file or directory at `path` an owner-only protected DACL.
pub fn set_owner_only(path: &Path, is_dir: bool) -> io::Result<()> {
    let sd = OwnerOnlyDescriptor::new(is_dir)?;
    let name = wide(path.as_os_str())?;
    // SAFETY: a NUL-terminated path and a valid descriptor; only the DACL
    // is set.
    super::util::check(unsafe { SetFileSecurityW(name.as_ptr(), DACL_PROTECTED, sd.as_ptr()) })
}

/// Gives the object behind `handle` (opened with `WRITE_DAC`) an owner-only
/// protected DACL.
pub fn set_owner_only_handle(handle: HANDLE, is_dir: bool) -> io::Result<()> {
    let sd = OwnerOnlyDescriptor::new(is_dir)?;
    // SAFETY: a live handle and a valid descriptor; only the DACL is set.
    super::util::check(unsafe { SetKernelObjectSecurity(handle, DACL_PROTECTED, sd.as_ptr()) })
}

/// The owner SID of `path` and whether its DACL is owner-only (protected,
/// every allow entry for the current user).
pub fn describe(path: &Path) -> io::Result<(Sid, bool)> {
    let name = wide(path.as_os_str())?;
    let mut owner: *mut core::ffi::c_void = std::ptr::null_mut();
    let mut dacl: *mut ACL = std::ptr::null_mut();
    let mut sd: PSECURITY_DESCRIPTOR = std::ptr::null_mut();
    // SAFETY: the out pointers point into `sd`, which the guard frees after
    // every use below.
    let rc = unsafe {
        GetNamedSecurityInfoW(
            name.as_ptr(),
            SE_FILE_OBJECT,
            OWNER_SECURITY_INFORMATION | DACL_SECURITY_INFORMATION,
            &mut owner,
            std::ptr::null_mut(),
            &mut dacl,
            std::ptr::null_mut(),
            &mut sd,
        )
    };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc as i32));
    }
    let _sd = Local(sd);
    // SAFETY: `owner` points into `sd`, alive here.
    let owner = unsafe { Sid::copy_from(owner)? };
    let me = current_user()?;
    // Wine keeps no DACL for a file: it maps the DACL written onto the Unix
    // mode bits and reads back one generated from them, never marked
    // protected and always granting LocalSystem full control. Under Wine
    // (only) an unprotected DACL and LocalSystem entries are accepted.
    let wine = super::util::is_wine();
    // SAFETY: `sd` and `dacl` are alive (guard above); GetAce indexes within
    // the count the ACL reports.
    let private = unsafe {
        let mut control = 0u16;
        let mut rev = 0u32;
        GetSecurityDescriptorControl(sd, &mut control, &mut rev);
        if dacl.is_null() || (control & SE_DACL_PROTECTED == 0 && !wine) {
            false
        } else {
            let mut info = ACL_SIZE_INFORMATION::default();
            GetAclInformation(
                dacl,
                &mut info as *mut _ as *mut _,
                std::mem::size_of::<ACL_SIZE_INFORMATION>() as u32,
                AclSizeInformation,
            ) != 0
                && (0..info.AceCount).all(|i| {
                    let mut ace: *mut core::ffi::c_void = std::ptr::null_mut();
                    if GetAce(dacl, i, &mut ace) == 0 {
                        return false;
                    }
                    let header = &*(ace as *const ACE_HEADER);
                    if header.AceType != ACCESS_ALLOWED_ACE_TYPE {
                        // Deny entries only take rights away.
                        return header.AceType == 1;
                    }
                    let allowed = ace as *const ACCESS_ALLOWED_ACE;
                    let sid = std::ptr::addr_of!((*allowed).SidStart) as *mut core::ffi::c_void;
                    EqualSid(sid, me.ptr()) != 0
                        || (wine
                            && Sid::copy_from(sid)
                                .is_ok_and(|s| s.to_string_form() == LOCAL_SYSTEM))
                })
        }
    };
    Ok((owner, private))
}

/// Security attributes with the owner-only protected DACL of
/// [`OwnerOnlyDescriptor`] (for named pipes), kept alive as long as the
/// value.
pub struct OwnerOnlyAttributes {
    desc: OwnerOnlyDescriptor,
    sa: SECURITY_ATTRIBUTES,
}

impl OwnerOnlyAttributes {
    pub fn new(inheritable: bool) -> io::Result<OwnerOnlyAttributes> {
        let desc = OwnerOnlyDescriptor::new(false)?;
        let sa = SECURITY_ATTRIBUTES {
            nLength: std::mem::size_of::<SECURITY_ATTRIBUTES>() as u32,
            // The descriptor is boxed: moving `desc` keeps this pointer valid.
            lpSecurityDescriptor: desc.as_ptr(),
            bInheritHandle: inheritable as i32,
        };
        Ok(OwnerOnlyAttributes { desc, sa })
    }

    pub fn as_ptr(&self) -> *const SECURITY_ATTRIBUTES {
        debug_assert!(std::ptr::eq(
            self.sa.lpSecurityDescriptor,
            self.desc.as_ptr()
        ));
        &self.sa
    }
}

const DACL_UNPROTECTED: u32 = DACL_SECURITY_INFORMATION | UNPROTECTED_DACL_SECURITY_INFORMATION;

/// An empty ACL (no explicit entry).
fn empty_acl() -> io::Result<Local> {
    let mut acl: *mut ACL = std::ptr::null_mut();
    // SAFETY: no entries; the new (empty) ACL is owned by the guard.
    let rc = unsafe { SetEntriesInAclW(0, std::ptr::null(), std::ptr::null(), &mut acl) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc as i32));
    }
    Ok(Local(acl as *mut _))
}

/// Drops the explicit entries of `path` and lets it inherit its parent's
/// (what a non-private mode means here).
pub fn set_inherited(path: &Path) -> io::Result<()> {
    let acl = empty_acl()?;
    let name = wide(path.as_os_str())?;
    // SAFETY: a NUL-terminated path and a valid (empty) ACL.
    let rc = unsafe {
        SetNamedSecurityInfoW(
            name.as_ptr(),
            SE_FILE_OBJECT,
            DACL_UNPROTECTED,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            acl.0 as *const ACL,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc as i32));
    }
    Ok(())
}

/// [`set_inherited`] for an open handle (opened with `WRITE_DAC`).
pub fn set_inherited_handle(handle: HANDLE) -> io::Result<()> {
    let acl = empty_acl()?;
    // SAFETY: a live handle and a valid (empty) ACL.
    let rc = unsafe {
        SetSecurityInfo(
            handle,
            SE_FILE_OBJECT,
            DACL_UNPROTECTED,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            acl.0 as *const ACL,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc as i32));
    }
    Ok(())
}
