use super::*;

#[test]
fn hex_and_uuid_shapes() {
    assert_eq!(hex(&[0, 0x0f, 0xa5, 0xff]), "000fa5ff");
    assert_eq!(random_hex(6).unwrap().len(), 12);
    let u = uuid_v4().unwrap();
    assert_eq!(u.len(), 36);
    assert_eq!(&u[14..15], "4");
    assert!(matches!(&u[19..20], "8" | "9" | "a" | "b"));
    assert_ne!(uuid_v4().unwrap(), u);
}

#[test]
fn id_sequences_never_repeat() {
    let (a, b) = (IdSequence::new().unwrap(), IdSequence::new().unwrap());
    let mut seen = std::collections::HashSet::new();
    for _ in 0..1000 {
        assert!(seen.insert(a.next_id()));
        assert!(seen.insert(b.next_id()));
    }
    let id = a.next_id();
    let (prefix, n) = id.split_once('-').unwrap();
    assert_eq!(prefix.len(), 16);
    assert_eq!(n, "1001");
}
