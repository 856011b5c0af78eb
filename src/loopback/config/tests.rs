use super::*;
use crate::error::Status;

#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Outer {
    #[serde(default)]
    own: Option<u32>,
    #[serde(flatten)]
    server: ServerConfig,
}

impl EmbedsServerConfig for Outer {
    fn server_config(&self) -> &ServerConfig {
        &self.server
    }
}

#[test]
fn shared_keys_and_own_keys_are_read_and_unknown_ones_refused() {
    let o: Outer = parse(
            Some(r#"{"own":1,"keepAliveMs":20,"maxBodyBytes":4096,"http":{"maxConnections":3},"maxSessions":2}"#),
            "test",
        )
        .unwrap();
    assert_eq!(o.own, Some(1));
    let s = o.server.settings(1 << 20).unwrap();
    assert_eq!(s.keep_alive, Duration::from_millis(20));
    assert_eq!(s.max_body_bytes, 4096);
    assert_eq!(s.limits.max_connections, 3);
    assert_eq!(s.lifecycle.max_sessions, 2);

    let e = parse::<Outer>(Some(r#"{"own":1,"bogus":true}"#), "test").unwrap_err();
    assert_eq!(e.status, Status::InvalidJson);
    assert!(e.message.contains("bogus"), "{e}");
    let mut o = Outer::default();
    o.server.unknown.insert("bogus".into(), IgnoredAny);
    assert_eq!(
        o.server.settings(1024).unwrap_err().status,
        Status::InvalidJson
    );

    let e = parse::<Outer>(Some(r#"{"keepAliveMs":"x"}"#), "test").unwrap_err();
    assert_eq!(e.status, Status::InvalidJson);
    let o: Outer = parse(Some(r#"{"keepAliveMs":5}"#), "test").unwrap();
    assert_eq!(
        o.server.settings(1024).unwrap_err().status,
        Status::InvalidArgument
    );
    let o: Outer = parse(Some(r#"{"maxSessions":5}"#), "test").unwrap();
    assert_eq!(
        o.server.settings_without_sessions(1024).unwrap_err().status,
        Status::InvalidJson
    );
    let o: Outer = parse(None, "test").unwrap();
    let s = o.server.settings(1 << 20).unwrap();
    assert_eq!(s.max_body_bytes, 1 << 20);
    assert_eq!(s.keep_alive, Duration::from_secs(15));
}
