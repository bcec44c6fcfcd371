//! Matching resource URIs against RFC 6570 level-1/2 templates (`{var}`, `{+var}`, `{#var}`).
//!
//! Takes a template and a URI; gives whether the URI is one of the template's. Refuses nothing.
//! Bounded: the template is split into parts once, then the set of URI positions reachable after
//! each part is computed by one sweep over the URI (no recursion, no backtracking), so a match
//! costs O(len(uri) × parts) steps and two bitmaps of len(uri) + 1 bytes, whatever the shape of
//! the template (several `{+var}` included).

/// One piece of a template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part<'a> {
    /// Text the URI must contain as is.
    Literal(&'a str),
    /// `{var}` (not `reserved`: no `/`, `?` or `#`) or `{+var}` / `{#var}` (`reserved`: anything).
    Var { reserved: bool },
}

/// Whether `uri` can be produced by `template`: literal parts match exactly, `{var}` matches a
/// non-empty run without `/`, `?` or `#`, and `{+var}` / `{#var}` any non-empty run; runs end on
/// character boundaries. A `{` with no `}` after it is literal text, as is everything after it.
pub fn matches(template: &str, uri: &str) -> bool {
    matches_counting(template, uri).0
}

/// [`matches`] with the number of steps it took over the URI (bytes compared or swept), at most
/// `8 × (len(uri) + 1) × (parts + 1)`; the fuzz target `uri_template` checks that bound.
#[doc(hidden)]
pub fn matches_counting(template: &str, uri: &str) -> (bool, u64) {
    let parts = split(template);
    let n = uri.len();
    // The literal text before the first and after the last variable is checked first, in
    // O(the shorter of it and the URI: a longer literal fails on its length alone): most
    // templates a URI is tried against fail there, before any sweep.
    if let (Some(Part::Literal(head)), true) = (parts.first(), parts.len() > 1) {
        if !uri.starts_with(head) {
            return (false, head.len().min(n) as u64 + 1);
        }
    }
    if let (Some(Part::Literal(tail)), true) = (parts.last(), parts.len() > 1) {
        if !uri.ends_with(tail) {
            return (false, tail.len().min(n) as u64 + 1);
        }
    }
    let mut steps = 0u64;
    let (mut reach, mut next) = (vec![false; n + 1], vec![false; n + 1]);
    reach[0] = true;
    let mut first = 0;
    for part in &parts {
        next.fill(false);
        steps += n as u64 + 1;
        let found = match *part {
            Part::Literal(lit) => after_literal(
                uri.as_bytes(),
                lit.as_bytes(),
                &reach,
                first,
                &mut next,
                &mut steps,
            ),
            Part::Var { reserved } => {
                after_var(uri, reserved, &reach, first, &mut next, &mut steps)
            }
        };
        std::mem::swap(&mut reach, &mut next);
        match found {
            Some(f) => first = f,
            None => return (false, steps),
        }
    }
    (reach[n], steps)
}

/// The template's parts in order, with no empty literal.
fn split(template: &str) -> Vec<Part<'_>> {
    let mut parts = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}').map(|c| open + c) else {
            break;
        };
        if open > 0 {
            parts.push(Part::Literal(&rest[..open]));
        }
        let var = &rest[open + 1..close];
        parts.push(Part::Var {
            reserved: var.starts_with('+') || var.starts_with('#'),
        });
        rest = &rest[close + 1..];
    }
    if !rest.is_empty() {
        parts.push(Part::Literal(rest));
    }
    parts
}

/// Marks in `next` every end of `lit` starting at a position set in `reach` (none before
/// `first`); gives the first one marked. Few reachable starts are compared directly; many are
/// found with one KMP pass, so either way the cost is a few steps per byte after `first`.
fn after_literal(
    uri: &[u8],
    lit: &[u8],
    reach: &[bool],
    first: usize,
    next: &mut [bool],
    steps: &mut u64,
) -> Option<usize> {
    if first + lit.len() > uri.len() {
        return None;
    }
    let starts = &reach[first..=uri.len() - lit.len()];
    let candidates = starts.iter().filter(|&&r| r).count();
    *steps += starts.len() as u64;
    let mut found = None;
    let mut mark = |end: usize| {
        next[end] = true;
        found.get_or_insert(end);
    };
    if candidates.saturating_mul(lit.len()) <= uri.len() - first {
        for (i, _) in starts.iter().enumerate().filter(|(_, &r)| r) {
            let at = first + i;
            *steps += lit.len() as u64;
            if &uri[at..at + lit.len()] == lit {
                mark(at + lit.len());
            }
        }
    } else {
        occurrences(&uri[first..], lit, steps, |at| {
            if reach[first + at] {
                mark(first + at + lit.len());
            }
        });
    }
    found
}

/// Calls `hit` with every start of `needle` in `hay`, overlapping ones included (KMP: linear in
/// both lengths; `memchr::memmem` reports only non-overlapping matches).
fn occurrences(hay: &[u8], needle: &[u8], steps: &mut u64, mut hit: impl FnMut(usize)) {
    let mut fail = vec![0usize; needle.len()];
    let mut k = 0;
    for i in 1..needle.len() {
        while k > 0 && needle[i] != needle[k] {
            *steps += 1;
            k = fail[k - 1];
        }
        *steps += 1;
        if needle[i] == needle[k] {
            k += 1;
        }
        fail[i] = k;
    }
    k = 0;
    for (i, &b) in hay.iter().enumerate() {
        while k > 0 && b != needle[k] {
            *steps += 1;
            k = fail[k - 1];
        }
        *steps += 1;
        if b == needle[k] {
            k += 1;
        }
        if k == needle.len() {
            hit(i + 1 - k);
            k = fail[k - 1];
        }
    }
}

/// Marks in `next` every character boundary that ends a non-empty run starting at a position set
/// in `reach` (none before `first`; a run without `/`, `?`, `#` unless `reserved`); gives the
/// first one marked. One sweep: a start stays open until a stop byte (ASCII, so never inside a
/// multibyte character) closes it.
fn after_var(
    uri: &str,
    reserved: bool,
    reach: &[bool],
    first: usize,
    next: &mut [bool],
    steps: &mut u64,
) -> Option<usize> {
    let bytes = uri.as_bytes();
    let mut open = false;
    let mut found = None;
    for i in first..bytes.len() {
        *steps += 1;
        open |= reach[i];
        if !reserved && matches!(bytes[i], b'/' | b'?' | b'#') {
            open = false;
        }
        if open && uri.is_char_boundary(i + 1) {
            next[i + 1] = true;
            found.get_or_insert(i + 1);
        }
    }
    found
}

#[cfg(test)]
mod tests;
