use super::*;

#[test]
fn chunked_sse_is_decoded_across_chunk_boundaries() {
    let raw =
        b"7\r\ndata: {\r\n8\r\n\"a\":1}\n\n\r\n1b\r\n: keep-alive\n\ndata: [1,2]\n\n\r\n0\r\n\r\n";
    let mut body = BufReader::new(Chunked {
        inner: BufReader::new(&raw[..]),
        left: 0,
        done: false,
    });
    let mut got = Vec::new();
    sse_events(&mut body, |d| got.push(d.to_string()));
    assert_eq!(got, vec![r#"{"a":1}"#.to_string(), "[1,2]".to_string()]);
}
