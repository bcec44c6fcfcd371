//! Matching resource URIs against RFC 6570 level-1/2 templates (`{var}`, `{+var}`).
//!
//! Takes a template and a URI; gives whether the URI is one of the template's. Refuses nothing.

/// Whether `uri` can be produced by `template`: literal parts match exactly, `{var}` matches a
/// non-empty run without `/`, `?` or `#`, and `{+var}` any non-empty run.
pub fn matches(template: &str, uri: &str) -> bool {
    match template.find('{') {
        None => template == uri,
        Some(open) => {
            let Some(close) = template[open..].find('}').map(|c| open + c) else {
                return template == uri;
            };
            let (lit, var, rest) = (&template[..open], &template[open + 1..close], &template[close + 1..]);
            let Some(tail) = uri.strip_prefix(lit) else {
                return false;
            };
            let reserved = var.starts_with('+') || var.starts_with('#');
            (1..=tail.len()).filter(|&i| tail.is_char_boundary(i)).any(|i| {
                let (value, after) = tail.split_at(i);
                (reserved || !value.contains(['/', '?', '#'])) && matches(rest, after)
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn templates_match_their_uris_only() {
        assert!(matches("test://template/{id}/data", "test://template/42/data"));
        assert!(!matches("test://template/{id}/data", "test://template/4/2/data"));
        assert!(!matches("test://template/{id}/data", "test://template//data"));
        assert!(matches("file:///{+path}", "file:///a/b.txt"));
        assert!(matches("test://static-text", "test://static-text"));
    }
}
