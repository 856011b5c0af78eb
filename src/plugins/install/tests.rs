//! Unit tests of the pieces the integration tests cannot reach directly.

use super::archive::entry_components;
use super::*;
use crate::shared::testutil::TempDir;

#[test]
fn entry_names() {
    assert_eq!(entry_components(b"a/b.txt").unwrap(), ["a", "b.txt"]);
    assert_eq!(entry_components(b"./a//b/").unwrap(), ["a", "b"]);
    for bad in [
        &b""[..],
        b"/a",
        b"../a",
        b"a/../../b",
        b"a\\b",
        b"C:/a",
        b"c:a",
        b"a\0b",
        b"caf\xe9",
        b"./",
    ] {
        assert!(
            entry_components(bad).is_err(),
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
}

#[test]
fn the_byte_counter_stops_at_the_per_file_and_total_limits() {
    let d = TempDir::new("budget");
    let limits = Limits {
        max_archive_bytes: 1 << 20,
        max_entries: 10,
        max_file_bytes: 100,
        max_total_bytes: 150,
    };
    let mut b = Budget::new(&limits, codes::ARCHIVE_TOO_LARGE);
    // An endless reader: only the counter can stop it.
    let mut zeros = std::io::repeat(0);
    let e = b
        .copy(
            &mut zeros,
            &d.path().join("a"),
            0o644,
            "a",
            codes::CORRUPT_ARCHIVE,
        )
        .unwrap_err();
    assert_eq!(e.code, codes::ARCHIVE_TOO_LARGE);
    assert!(e.message.contains("per file"), "{}", e.message);

    let mut b = Budget::new(&limits, codes::SOURCE_TOO_LARGE);
    b.copy(
        &mut &[1u8; 90][..],
        &d.path().join("b"),
        0o644,
        "b",
        codes::IO,
    )
    .unwrap();
    assert_eq!(std::fs::read(d.path().join("b")).unwrap(), [1u8; 90]);
    let e = b
        .copy(
            &mut &[1u8; 90][..],
            &d.path().join("c"),
            0o644,
            "c",
            codes::IO,
        )
        .unwrap_err();
    assert_eq!(e.code, codes::SOURCE_TOO_LARGE);
    assert!(e.message.contains("in all"), "{}", e.message);
    for _ in 0..10 {
        b.entry("x").unwrap();
    }
    assert_eq!(b.entry("x").unwrap_err().code, codes::SOURCE_TOO_LARGE);
}

#[test]
fn a_read_error_gets_the_callers_code() {
    struct Failing;
    impl Read for Failing {
        fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
            Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "Invalid checksum",
            ))
        }
    }
    let d = TempDir::new("budget-err");
    let limits = Limits::default();
    let mut b = Budget::new(&limits, codes::ARCHIVE_TOO_LARGE);
    let e = b
        .copy(
            &mut Failing,
            &d.path().join("f"),
            0o644,
            "f",
            codes::CORRUPT_ARCHIVE,
        )
        .unwrap_err();
    assert_eq!(e.code, codes::CORRUPT_ARCHIVE);
}

#[test]
fn exec_bits_are_kept_as_0755() {
    assert_eq!(file_mode(Some(0o100755)), 0o755);
    assert_eq!(file_mode(Some(0o100600)), 0o644);
    assert_eq!(file_mode(None), 0o644);
}

#[test]
fn zip_magic() {
    let d = TempDir::new("magic");
    let p = d.path().join("f");
    for (bytes, want) in [
        (&b"PK\x03\x04rest"[..], true),
        (b"PK\x05\x06", true),
        (b"PK", false),
        (b"", false),
        (b"%PDF-1.7", false),
    ] {
        std::fs::write(&p, bytes).unwrap();
        let mut f = File::open(&p).unwrap();
        assert_eq!(archive::is_zip(&mut f).unwrap(), want, "{bytes:?}");
        // Rewound for the zip reader.
        let mut all = Vec::new();
        f.read_to_end(&mut all).unwrap();
        assert_eq!(all, bytes);
    }
}

#[test]
fn install_error_json() {
    let e = InstallError::new(codes::NOT_A_ZIP, "nope");
    assert_eq!(
        e.to_json(),
        serde_json::json!({"code": "not_a_zip", "message": "nope"})
    );
    assert_eq!(e.to_string(), "nope (not_a_zip)");
}
