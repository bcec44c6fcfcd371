//! The label values of `/metrics`: closed sets, so no client or upstream can grow the
//! exposition.
//!
//! Takes an audit record, a JSON-RPC code or an HTTP status; gives its label (`other` for what
//! Sluice does not define). Refuses nothing.

use crate::audit::record::Record;
use crate::mcp::method::Method;

/// Label values come from closed sets, so no client or upstream can grow the exposition: a
/// method Sluice does not know is `other` (see [`Method::known`]), and so is a code or status
/// Sluice does not define.
/// JSON-RPC codes of the spec and Sluice's own (docs/governance.md, "Error codes"), each with its label.
pub(super) const CODES: &[(i64, &str)] = &[
    (-32700, "-32700"),
    (-32600, "-32600"),
    (-32601, "-32601"),
    (-32602, "-32602"),
    (-32603, "-32603"),
    (-32020, "-32020"),
    (-32021, "-32021"),
    (-32022, "-32022"),
    (-31001, "-31001"),
    (-31003, "-31003"),
    (-31010, "-31010"),
    (-31011, "-31011"),
    (-31012, "-31012"),
    (-31013, "-31013"),
    (-31014, "-31014"),
    (-31015, "-31015"),
    (-31016, "-31016"),
    (-31017, "-31017"),
    (-31018, "-31018"),
    (-31019, "-31019"),
    (-31020, "-31020"),
    (-31021, "-31021"),
    (-31030, "-31030"),
    (-31040, "-31040"),
    (-31041, "-31041"),
    (-31042, "-31042"),
    (-31050, "-31050"),
    (-31051, "-31051"),
    (-31052, "-31052"),
    (-31053, "-31053"),
];

/// HTTP statuses Sluice answers with, each with its label.
pub(super) const STATUSES: &[(u16, &str)] = &[
    (400, "400"),
    (401, "401"),
    (403, "403"),
    (404, "404"),
    (405, "405"),
    (406, "406"),
    (408, "408"),
    (413, "413"),
    (429, "429"),
    (431, "431"),
    (499, "499"),
    (500, "500"),
    (502, "502"),
    (503, "503"),
    (504, "504"),
];

pub(super) fn method_label(r: &Record) -> &'static str {
    match (r.op, r.method.as_deref()) {
        (Some(op), _) => op,
        (None, None) => "",
        (None, Some(m)) => Method::parse(m).known().unwrap_or("other"),
    }
}

/// The label of a code: its decimal text, from the closed set (no allocation per request).
pub(super) fn code_label(c: i64) -> &'static str {
    CODES
        .iter()
        .find(|(k, _)| *k == c)
        .map_or("other", |(_, t)| t)
}

pub(super) fn status_label(s: u16) -> &'static str {
    STATUSES
        .iter()
        .find(|(k, _)| *k == s)
        .map_or("other", |(_, t)| t)
}
