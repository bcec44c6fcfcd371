use super::*;

fn parse(s: &str) -> Result<Envelope, FrameError> {
    Envelope::parse(Bytes::copy_from_slice(s.as_bytes()))
}

#[test]
fn a_request_keeps_member_bytes() {
    let e = parse(r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"a\"b","arguments":{"x": 1.50}}}"#).unwrap();
    assert_eq!(e.id_json(), "7");
    assert_eq!(e.param("arguments"), Some(r#"{"x": 1.50}"#));
    assert_eq!(e.param_str("name"), Some(Ok("a\"b".to_owned())));
    let out = e.rewrite_params(|k, _| (k == "name").then(|| Some("\"z\"".to_owned())));
    assert_eq!(&out[..], br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"z","arguments":{"x": 1.50}}}"#);
}

#[test]
fn framing_errors_are_classified() {
    assert!(matches!(parse("{nope"), Err(FrameError::NotJson(_))));
    assert!(
        parse(r#"{"jsonrpc":"2\u002e0","id":1,"method":"x"}"#).is_ok(),
        "the version is read decoded"
    );
    assert!(matches!(parse("[{}]"), Err(FrameError::NotRequest(_))));
    assert!(matches!(
        parse(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
        Err(FrameError::NotRequest(_))
    ));
    assert!(matches!(
        parse(r#"{"jsonrpc":"1.0","id":1,"method":"x"}"#),
        Err(FrameError::NotRequest(_))
    ));
    assert!(matches!(
        parse(r#"{"jsonrpc":"2.0","id":{},"method":"x"}"#),
        Err(FrameError::NotRequest(_))
    ));
    assert!(parse(r#"{"jsonrpc":"2.0","method":"notifications/x"}"#)
        .unwrap()
        .is_notification());
    assert!(
        matches!(parse(r#"{"jsonrpc":"2.0","id":1,"method":"x","params":[1]}"#), Err(FrameError::NotRequest(m)) if m.contains("object"))
    );
    let twice =
        parse(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","name":"b"}}"#);
    assert!(matches!(twice, Err(FrameError::NotRequest(m)) if m.contains("repeated")));
    let many: Vec<String> = (0..40).map(|i| format!("\"k{i}\":{i}")).collect();
    let late = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"x","params":{{{},"k3":0}}}}"#,
        many.join(",")
    );
    assert!(matches!(parse(&late), Err(FrameError::NotRequest(m)) if m.contains("repeated")));
    assert!(parse(&format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"x","params":{{{}}}}}"#,
        many.join(",")
    ))
    .is_ok());
    let escaped = parse(
        r#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"n\u0061me":"a","b":{"c" : [1, 2]}}}"#,
    )
    .unwrap();
    assert_eq!(escaped.param("name"), Some("\"a\""));
    assert_eq!(escaped.param("b"), Some(r#"{"c" : [1, 2]}"#));
}

#[test]
fn bodies_nested_past_the_limit_are_refused_before_reading() {
    let nest = |n: usize| format!("{}1{}", "[".repeat(n), "]".repeat(n));
    let body = |n: usize| {
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"arguments":{{"pad":{}}}}}}}"#,
            nest(n)
        )
    };
    // The envelope, params and arguments objects are three levels; `pad` adds n.
    assert!(parse(&body(DEFAULT_MAX_DEPTH - 3)).is_ok());
    assert!(matches!(
        parse(&body(DEFAULT_MAX_DEPTH - 2)),
        Err(FrameError::TooDeep(64))
    ));
    assert!(
        matches!(
            parse(&format!("{{\"x\":{}}}", nest(200))),
            Err(FrameError::TooDeep(_))
        ),
        "even before the request is read"
    );
    let quoted = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"x","params":{{"s":"{}\\\"{}"}}}}"#,
        "[".repeat(100),
        "{".repeat(100)
    );
    assert!(
        parse(&quoted).is_ok(),
        "brackets inside strings do not count"
    );
    assert!(!nests_deeper_than(b"\"unterminated [[[", 1));
}

#[test]
fn a_detached_envelope_owns_a_copy_of_its_body_not_the_read_buffer() {
    // A received body is a slice of a larger read buffer; the detached one holds only itself.
    let text = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"n","arguments":{"x":1}}}"#;
    let mut buf = bytes::BytesMut::with_capacity(8192);
    buf.extend_from_slice(text.as_bytes());
    buf.extend_from_slice(b"next request bytes");
    let body = buf.split_to(text.len()).freeze();
    let e = Envelope::parse(body).unwrap();
    let d = e.detached();
    assert_eq!(d.body(), e.body());
    assert_ne!(
        d.body().as_ptr(),
        e.body().as_ptr(),
        "a copy, not the read buffer"
    );
    assert_eq!(
        (d.id_json(), d.param("arguments"), d.members().count()),
        (e.id_json(), e.param("arguments"), e.members().count())
    );
    assert_eq!(d.method, e.method);
}
