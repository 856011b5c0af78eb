use super::*;

#[test]
fn no_font_at_all_is_a_clear_error() {
    let e = FontSet::from_db(fontdb::Database::new())
        .err()
        .expect("no fonts");
    assert_eq!(e.status, Status::Io);
    assert!(e.message.starts_with("no usable font"), "{}", e.message);
    assert!(e.message.contains("fonts-nanum"), "{}", e.message);
}

#[test]
fn a_latin_only_font_set_reports_the_korean_it_cannot_draw() {
    let mut db = fontdb::Database::new();
    db.load_font_file("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
        .expect("fonts-dejavu-core is installed");
    let set = FontSet::from_db(db).unwrap();
    // Only one face, and every style falls back to it.
    for chain in &set.chains {
        assert_eq!(chain, &vec![0]);
    }
    let (pdf, pages, missing) =
        crate::plugins::pdf::render_with(&set, Some("제목"), "Hello 안녕 *x*").unwrap();
    assert!(pdf.starts_with(b"%PDF-"));
    assert_eq!(pages, 1);
    assert_eq!(missing, vec!['녕', '목', '안', '제']);
    // The negative look-ups are kept.
    let extra = set.extra.lock().unwrap();
    assert_eq!(extra.get(&'안'), Some(&None));
}
