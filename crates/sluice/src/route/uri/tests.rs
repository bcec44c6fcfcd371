use proptest::prelude::*;

use super::{matches, matches_counting, split};

/// The matcher this module replaced (recursive, exponential on several `{+var}`): the reference
/// the linear one must agree with, on short inputs only.
fn reference(template: &str, uri: &str) -> bool {
    match template.find('{') {
        None => template == uri,
        Some(open) => {
            let Some(close) = template[open..].find('}').map(|c| open + c) else {
                return template == uri;
            };
            let (lit, var, rest) = (
                &template[..open],
                &template[open + 1..close],
                &template[close + 1..],
            );
            let Some(tail) = uri.strip_prefix(lit) else {
                return false;
            };
            let reserved = var.starts_with('+') || var.starts_with('#');
            (1..=tail.len())
                .filter(|&i| tail.is_char_boundary(i))
                .any(|i| {
                    let (value, after) = tail.split_at(i);
                    (reserved || !value.contains(['/', '?', '#'])) && reference(rest, after)
                })
        }
    }
}

fn bound(template: &str, uri: &str) -> u64 {
    8 * (uri.len() as u64 + 1) * (split(template).len() as u64 + 1)
}

#[test]
fn templates_match_their_uris_only() {
    assert!(matches(
        "test://template/{id}/data",
        "test://template/42/data"
    ));
    assert!(!matches(
        "test://template/{id}/data",
        "test://template/4/2/data"
    ));
    assert!(!matches(
        "test://template/{id}/data",
        "test://template//data"
    ));
    assert!(matches("file:///{+path}", "file:///a/b.txt"));
    assert!(matches("test://static-text", "test://static-text"));
}

#[test]
fn several_reserved_and_adjacent_variables_match_like_the_reference() {
    let cases = [
        ("{+a}{+b}{+c}x", "abcx", true),
        ("{+a}{+b}{+c}x", "abx", false),
        ("{a}{b}", "ab", true),
        ("{a}{b}", "a", false),
        ("{a}{b}", "a/b", false),
        ("x{+a}y{+b}z", "x/1y/y2/z", true),
        ("x{+a}y{+b}z", "xyz", false),
        ("{#frag}", "#a/b", true),
        ("a{", "a{", true),
        ("a{b", "axb", false),
        ("{x}-{y", "1-{y", true),
        ("{}", "v", true),
        ("", "", true),
        ("", "x", false),
        ("{a}", "", false),
        ("p/{id}/q", "p/éé/q", true),
        ("p/{id}é", "p/aé", true),
        ("{a}b{c}", "abbbc", true),
        ("aa{+x}aa", "aaaaa", true),
        ("aa{+x}aa", "aaaa", false),
    ];
    for (t, u, want) in cases {
        assert_eq!(reference(t, u), want, "reference on {t:?} / {u:?}");
        assert_eq!(matches(t, u), want, "{t:?} / {u:?}");
    }
}

#[test]
fn a_mebibyte_uri_takes_linear_steps_against_many_reserved_variables() {
    let long = "a".repeat(1 << 20);
    let with_x = format!("x{long}y{long}z");
    for (t, u, want) in [
        ("{+a}{+b}{+c}x", long.as_str(), false),
        ("{+a}{+b}{+c}x", &format!("{long}x"), true),
        ("x{+a}y{+b}z", &with_x, true),
        ("x{+a}y{+b}z", &format!("x{long}"), false),
        ("{a}{b}{c}{d}aaaa", long.as_str(), true),
        (
            &format!("{{+a}}{}b", "a".repeat(4096)),
            long.as_str(),
            false,
        ),
    ] {
        let (got, steps) = matches_counting(t, u);
        assert_eq!(got, want, "{t:.20}");
        assert!(
            steps <= bound(t, u),
            "{t:.20}: {steps} steps over a {}-byte uri",
            u.len()
        );
    }
}

proptest! {
    #[test]
    fn the_linear_matcher_agrees_with_the_reference(
        t in "[ab/{}+#?é]{0,10}",
        u in "[ab/?#é]{0,10}",
    ) {
        let (got, steps) = matches_counting(&t, &u);
        prop_assert_eq!(got, reference(&t, &u));
        prop_assert!(steps <= bound(&t, &u));
    }
}
