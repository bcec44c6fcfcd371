//! The console's assets and headers: what the listener gives for each path, and that the
//! page stays inside its own Content-Security-Policy (no inline script, style or handler).

use http_body_util::BodyExt;

use super::{serve, CSP};

async fn body(path: &str) -> (http::HeaderMap, String) {
    let answer = serve(path).unwrap_or_else(|| panic!("{path} is served"));
    assert_eq!(answer.status(), http::StatusCode::OK, "{path}");
    let headers = answer.headers().clone();
    let bytes = answer.into_body().collect().await.unwrap().to_bytes();
    (headers, String::from_utf8_lossy(&bytes).into_owned())
}

#[tokio::test]
async fn each_asset_comes_with_its_type_and_the_strict_headers() {
    for (path, kind) in [
        ("/console", "text/html; charset=utf-8"),
        ("/console/", "text/html; charset=utf-8"),
        ("/console/console.js", "text/javascript; charset=utf-8"),
        ("/console/console.css", "text/css; charset=utf-8"),
        ("/console/icon.svg", "image/svg+xml"),
    ] {
        let (h, text) = body(path).await;
        assert!(!text.is_empty(), "{path}");
        let get = |n: &str| h.get(n).and_then(|v| v.to_str().ok()).unwrap_or_default();
        assert_eq!(get("content-type"), kind, "{path}");
        assert_eq!(get("cache-control"), "no-store", "{path}");
        assert_eq!(get("content-security-policy"), CSP, "{path}");
        assert_eq!(get("x-content-type-options"), "nosniff", "{path}");
        assert_eq!(get("referrer-policy"), "no-referrer", "{path}");
        assert_eq!(get("x-frame-options"), "DENY", "{path}");
    }
    assert!(CSP.starts_with("default-src 'none'; script-src 'self'; style-src 'self';"));
    assert!(CSP.ends_with("form-action 'self'; frame-ancestors 'none'"));
}

#[test]
fn any_other_path_is_refused() {
    for path in [
        "/console/nope.js",
        "/console/../mod.rs",
        "/console/console.js/",
        "/console/tests.rs",
        "/consolex",
        "/console//console.js",
        "/",
    ] {
        assert!(serve(path).is_none(), "{path} was served");
    }
}

#[tokio::test]
async fn the_page_has_no_inline_script_style_or_handler_and_loads_only_its_own_files() {
    let (_, html) = body("/console").await;
    let lower = html.to_ascii_lowercase();
    assert_eq!(lower.matches("<script").count(), 1, "one script element");
    assert!(lower.contains(r#"<script src="/console/console.js" defer></script>"#));
    assert!(!lower.contains("<style"), "no style element");
    assert!(!lower.contains(" style="), "no style attribute");
    let handler = lower
        .split_whitespace()
        .find(|w| w.starts_with("on") && w.contains('='));
    assert_eq!(handler, None, "no inline event handler attribute");
    assert!(!lower.contains("javascript:"));
    for src in lower.split(['"', '\'']).filter(|s| s.contains("//")) {
        panic!("the page names another origin: {src}");
    }
    // Its landmarks and the sign-in field's label.
    for needle in [
        "<main",
        "<nav",
        "<header",
        r#"<label for="key">admin key</label>"#,
        r#"type="password""#,
        r#"aria-live="polite""#,
        r#"role="alert""#,
    ] {
        assert!(lower.contains(needle), "the page has no {needle}");
    }
}

#[tokio::test]
async fn the_script_writes_text_never_markup_and_keeps_the_csrf_token_in_memory() {
    let (_, js) = body("/console/console.js").await;
    for banned in [
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
        "new Function",
        "localStorage",
        "sessionStorage",
        "document.cookie",
    ] {
        assert!(!js.contains(banned), "console.js uses {banned}");
    }
    assert!(js.contains(r#"headers["X-CSRF-Token"] = csrf"#));
    assert!(js.contains(r#"new EventSource(API + "/events""#));
}
