//! A client's W3C `tracestate`, read as the Trace Context spec bounds it before anything keeps
//! or forwards it.
//!
//! Takes the `tracestate` values a request carried (its headers, each, or its `_meta` member);
//! gives the list Sluice propagates upstream: only members whose key and value fit the W3C
//! grammar (`key = simple-key / tenant-id "@" system-id`, `value = 0*255(chr) nblk-chr`), each
//! key once (the first), at most [`MAX_MEMBERS`], at most [`MAX_CHARS`] characters in all
//! (members over [`MAX_MEMBER_CHARS`] dropped first, then from the end, as the spec says a
//! vendor truncates). Refuses nothing: an invalid member is dropped alone, input longer than
//! [`MAX_INPUT`] is ignored whole (read in one pass, never split past it). What comes out is
//! never a span attribute and never exported (`export.rs` clears it): it only travels upstream.

/// The most list members kept (W3C: 32).
pub const MAX_MEMBERS: usize = 32;
/// The longest list kept, commas included (W3C: vendors propagate at least 512).
pub const MAX_CHARS: usize = 512;
/// Members longer than this go first when the list is too long (W3C: 128).
const MAX_MEMBER_CHARS: usize = 128;
/// The most input read (all values together); a longer `tracestate` is ignored whole.
pub const MAX_INPUT: usize = 8192;

/// The bounded, valid list of the `values` given (in order, as one list), or `None` when no
/// member survives.
pub fn sanitize<'a>(values: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let mut members: Vec<&str> = Vec::new();
    let mut read = 0usize;
    for v in values {
        read += v.len() + 1;
        if read > MAX_INPUT {
            return None;
        }
        for m in v.split(',').map(|m| m.trim_matches([' ', '\t'])) {
            let Some((key, value)) = m.split_once('=') else {
                continue;
            };
            if members.len() < MAX_MEMBERS
                && key_ok(key)
                && value_ok(value)
                && !members
                    .iter()
                    .any(|x| x.split_once('=').is_some_and(|(k, _)| k == key))
            {
                members.push(m);
            }
        }
    }
    fit(&mut members);
    (!members.is_empty()).then(|| members.join(","))
}

/// Drops members until the list fits [`MAX_CHARS`]: the long ones first, then from the end.
fn fit(members: &mut Vec<&str>) {
    let total = |m: &[&str]| m.iter().map(|x| x.len()).sum::<usize>() + m.len().saturating_sub(1);
    while total(members) > MAX_CHARS {
        match members.iter().rposition(|m| m.len() > MAX_MEMBER_CHARS) {
            Some(i) => members.remove(i),
            None => members.pop().unwrap_or_default(),
        };
    }
}

fn key_char(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'_' | b'-' | b'*' | b'/')
}

/// `simple-key = lcalpha 0*255(lcalpha / DIGIT / "_" / "-" / "*" / "/")`, or
/// `tenant-id "@" system-id` (`(lcalpha / DIGIT) 0*240(…)` and `lcalpha 0*13(…)`).
fn key_ok(key: &str) -> bool {
    let b = key.as_bytes();
    match key.split_once('@') {
        None => {
            !b.is_empty()
                && b.len() <= 256
                && b[0].is_ascii_lowercase()
                && b.iter().all(|&c| key_char(c))
        }
        Some((tenant, system)) => {
            let (t, s) = (tenant.as_bytes(), system.as_bytes());
            (1..=241).contains(&t.len())
                && (t[0].is_ascii_lowercase() || t[0].is_ascii_digit())
                && t.iter().all(|&c| key_char(c))
                && (1..=14).contains(&s.len())
                && s[0].is_ascii_lowercase()
                && s.iter().all(|&c| key_char(c))
        }
    }
}

/// `value = 0*255(chr) nblk-chr`: 1 to 256 printable ASCII characters (space inside only),
/// no `,` or `=`.
fn value_ok(value: &str) -> bool {
    let b = value.as_bytes();
    let nblk = |c: u8| (0x21..=0x7e).contains(&c) && c != b',' && c != b'=';
    (1..=256).contains(&b.len())
        && b.last().is_some_and(|&c| nblk(c))
        && b.iter().all(|&c| c == b' ' || nblk(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_members_are_kept_in_order_and_invalid_ones_dropped_alone() {
        assert_eq!(
            sanitize(["congo=t61rcWkgMzE, rojo=00f067aa0ba902b7"]).as_deref(),
            Some("congo=t61rcWkgMzE,rojo=00f067aa0ba902b7")
        );
        let hostile = "Bad=1,ok=1,nokey,=v,k=,k2=a=b,k3=a\u{7}b,k4=caf\u{e9},fine@vendor=x y,ok=dup,t@toolongsystemid1=v,9x=1";
        assert_eq!(sanitize([hostile]).as_deref(), Some("ok=1,fine@vendor=x y"));
        assert_eq!(
            sanitize(["a=1", "b=2"]).as_deref(),
            Some("a=1,b=2"),
            "two headers are one list"
        );
        assert_eq!(sanitize(["", " , "]), None);
    }

    #[test]
    fn the_list_is_bounded_in_members_and_characters() {
        let many: Vec<String> = (0..40).map(|i| format!("k{i}=v")).collect();
        let kept = sanitize([many.join(",").as_str()]).unwrap();
        assert_eq!(kept.split(',').count(), MAX_MEMBERS);
        let long = format!("big={}", "x".repeat(200));
        let mut list: Vec<String> = (0..30)
            .map(|i| format!("m{i:02}={}", "y".repeat(20)))
            .collect();
        list.insert(1, long);
        let kept = sanitize([list.join(",").as_str()]).unwrap();
        assert!(
            kept.len() <= MAX_CHARS && !kept.contains("big=") && kept.starts_with("m00="),
            "{kept}"
        );
        assert!(!kept.contains("m29="), "then from the end: {kept}");
        assert_eq!(
            sanitize([format!("a={}", "z".repeat(MAX_INPUT)).as_str()]),
            None,
            "past the input bound: ignored whole"
        );
    }
}
