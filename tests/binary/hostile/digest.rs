//! Class 3: the body's shape and the request digest. A body nested deeper than
//! `limits.max_json_depth` (64) anywhere is refused with -32600 before any stage reads it, even
//! for a method no one serves; 64 levels are served. A state issued for one request is refused
//! (`-32602`, `data.reason = "request_changed"`) for a request whose arguments denote another
//! value: big integers that round to the same double, `1` and `1.0`, a member changed 60
//! levels down. The same arguments reordered and re-spaced are the same request. Before the
//! fixes Sluice parsed with serde_json's own recursion limit (128) and digested arguments after
//! a round trip through doubles.
//!
//! Depth counts every array and object open at the deepest point, the body's own object being 1.

use serde_json::json;

use crate::support::gateway::Gateway;
use crate::support::modern::{self as hostile, result, tool_args as tool, Spec};
use crate::support::process::Sluice;
use crate::support::text::{self as client, approve, call, http, retry};
use crate::support::unique;

/// `n` nested arrays around `inner`: `[[…inner…]]`.
fn nest(n: usize, inner: &str) -> String {
    format!("{}{inner}{}", "[".repeat(n), "]".repeat(n))
}

/// An upstream `deep` whose tools `echo` and `deploy` complete at once.
async fn plain_upstream() -> hostile::Mock {
    Spec::raw("deep")
        .tools_json(json!([tool("echo", &[]), tool("deploy", &[])]))
        .fallback(|s| {
            (s.method == "tools/call").then(|| {
                result(
                    &s.id,
                    r#"{"resultType":"complete","content":[{"type":"text","text":"ran"}]}"#,
                )
            })
        })
        .start()
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_nested_deeper_than_64_is_refused_with_32600_wherever_the_nesting_is() {
    let up = plain_upstream().await;
    let sluice = Sluice::start(&Gateway::hostile().upstream("deep", &up.url()).text()).await;
    let h = http();
    let meta = client::meta(&json!({}));
    let canary = unique("deep");
    let leaf = json!(canary).to_string();
    // body (1) > params (2) > arguments (3) > 62 arrays = 65.
    let in_arguments = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"echo","arguments":{{"deep":{}}},"_meta":{meta}}}}}"#,
        nest(62, &leaf)
    );
    // body (1) > params (2) > _meta (3) > 62 arrays = 65.
    let meta_deep = meta[..meta.len() - 1].to_owned()
        + &format!(r#","com.example/deep":{}}}"#, nest(62, &leaf));
    let in_meta = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"echo","arguments":{{}},"_meta":{meta_deep}}}}}"#
    );
    // body (1) > params (2) > 63 arrays = 65.
    let in_unknown = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"echo","arguments":{{}},"zzz":{},"_meta":{meta}}}}}"#,
        nest(63, &leaf)
    );
    let unknown_method = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"x/unknown","params":{{"deep":{},"_meta":{meta}}}}}"#,
        nest(63, &leaf)
    );
    let mut wrong = Vec::new();
    for (what, method, name, body) in [
        (
            "65 levels in arguments",
            "tools/call",
            Some("echo"),
            in_arguments,
        ),
        ("65 levels in _meta", "tools/call", Some("echo"), in_meta),
        (
            "65 levels in an unknown member",
            "tools/call",
            Some("echo"),
            in_unknown,
        ),
        (
            "65 levels under an unknown method",
            "x/unknown",
            None,
            unknown_method,
        ),
    ] {
        let a = client::post(&h, &sluice.url(), method, name, body, None, &[]).await;
        if (a.status, a.code()) != (400, Some(-32600))
            || !a.message().contains("64")
            || a.msg["id"] != 1
        {
            wrong.push(format!(
                "{what}: want 400 -32600 with the id and a message naming 64; got HTTP {}: {}",
                a.status,
                client::cut(&a.text)
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert_eq!(
        up.calls("echo"),
        0,
        "no over-deep body reached the upstream"
    );
    // Exactly 64: body (1) > params (2) > arguments (3) > 61 arrays.
    let at_limit = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"echo","arguments":{{"deep":{}}},"_meta":{meta}}}}}"#,
        nest(61, &leaf)
    );
    let a = client::post(
        &h,
        &sluice.url(),
        "tools/call",
        Some("echo"),
        at_limit,
        None,
        &[],
    )
    .await;
    assert_eq!(
        a.status,
        200,
        "64 levels are served: {}",
        client::cut(&a.text)
    );
    assert_eq!(up.calls("echo"), 1);
    sluice.assert_no_leak(&[&canary]);
}

/// A state for `original` retried with `changed`: the answer.
async fn approve_then_retry(sluice: &Sluice, original: &str, changed: &str) -> client::Answer {
    let h = http();
    let first = call(&h, &sluice.url(), 1, "deploy", original, "", None).await;
    assert!(
        first.is_input_required(),
        "an approval round for {original}: {}",
        client::cut(&first.text)
    );
    assert!(
        first.input_requests().contains_key("sluice_approval"),
        "{}",
        client::cut(&first.text)
    );
    call(
        &h,
        &sluice.url(),
        2,
        "deploy",
        changed,
        &retry(&approve(), &first.state()),
        None,
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_is_refused_for_arguments_that_denote_another_value() {
    let up = plain_upstream().await;
    let rule = "[[rule]]\nname = \"approve-deploy\"\nmatch = { method = [\"tools/call\"], tool = [\"deploy\"] }\neffect = \"approve\"\n";
    let sluice = Sluice::start(
        &Gateway::hostile()
            .policy(rule)
            .upstream("deep", &up.url())
            .text(),
    )
    .await;
    let canary = unique("target");
    let mut wrong = Vec::new();
    let deep = |v: &str| format!(r#"{{"d":{}}}"#, nest(58, &format!(r#"{{"k":"{v}"}}"#)));
    for (what, original, changed) in [
        (
            "a string",
            r#"{"target":"staging"}"#.to_owned(),
            format!(r#"{{"target":"production {canary}"}}"#),
        ),
        (
            "integers past 2^64 one double apart",
            r#"{"n":18446744073709551616}"#.to_owned(),
            r#"{"n":18446744073709552616}"#.to_owned(),
        ),
        (
            "1 and 1.0",
            r#"{"n":1}"#.to_owned(),
            r#"{"n":1.0}"#.to_owned(),
        ),
        ("a member 60 levels down", deep("a"), deep("b")),
    ] {
        let a = approve_then_retry(&sluice, &original, &changed).await;
        if (
            a.status,
            a.code(),
            a.msg["error"]["data"]["reason"].as_str(),
        ) != (400, Some(-32602), Some("request_changed"))
        {
            wrong.push(format!(
                "{what}: want 400 -32602 request_changed; got HTTP {}: {}",
                a.status, a.text
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert_eq!(
        up.calls("deploy"),
        0,
        "no changed request reached the upstream"
    );
    // Reordered and re-spaced: the same request.
    let a = approve_then_retry(
        &sluice,
        r#"{"target":"staging","n":1}"#,
        "{ \"n\" : 1 ,\n \"target\" :\t\"staging\" }",
    )
    .await;
    assert_eq!(
        a.status, 200,
        "the same arguments reordered and re-spaced are accepted: {}",
        a.text
    );
    assert_eq!(a.msg["result"]["content"][0]["text"], "ran");
    assert_eq!(up.calls("deploy"), 1);
    sluice.assert_no_leak(&[&canary]);
}
