//! Stage 4, routing: which upstream serves a name or a URI, and under which name.
//!
//! Takes the public name (or URI) from a request; gives the upstream and its own name. Refuses
//! names no upstream serves (the caller answers `-32602` without revealing other tools).

pub mod names;
pub mod table;
pub mod uri;
pub mod xheader;
