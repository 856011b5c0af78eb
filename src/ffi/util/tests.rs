use super::*;

#[test]
fn constants_match_status_table() {
    let pairs: Vec<(qc_status, Status)> = vec![
        (QC_OK, Status::Ok),
        (QC_NULL_PARAMETER, Status::NullParameter),
        (QC_INVALID_UTF8, Status::InvalidUtf8),
        (QC_INVALID_JSON, Status::InvalidJson),
        (QC_INVALID_ARGUMENT, Status::InvalidArgument),
        (QC_INVALID_HANDLE, Status::InvalidHandle),
        (QC_NOT_RUNNING, Status::NotRunning),
        (QC_ALREADY_RUNNING, Status::AlreadyRunning),
        (QC_NOT_FOUND, Status::NotFound),
        (QC_IO, Status::Io),
        (QC_PANIC, Status::Panic),
        (QC_INTERNAL, Status::Internal),
        (QC_REFUSED, Status::Refused),
    ];
    assert_eq!(pairs.len(), Status::ALL.len());
    for (code, status) in pairs {
        assert_eq!(code, status as u32);
        let name = unsafe { CStr::from_ptr(qc_status_name(code)) };
        assert_eq!(name.to_str().unwrap(), status.name());
    }
    assert_eq!(
        unsafe { CStr::from_ptr(qc_status_name(999)) }
            .to_str()
            .unwrap(),
        "QC_UNKNOWN"
    );
}

#[test]
fn boundary_catches_panics() {
    let mut err: *mut c_char = std::ptr::null_mut();
    let code = boundary(&mut err, || panic!("boom"));
    assert_eq!(code, QC_PANIC);
    let msg = unsafe { CStr::from_ptr(err) }.to_str().unwrap().to_string();
    assert!(msg.contains("boom"));
    unsafe { qc_string_free(err) };
}
