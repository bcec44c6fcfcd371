//! The web console's pages (placeholder until the console lands).
//!
//! Takes a path under `/console`; gives nothing yet. Refuses every path (404).

use super::Answer;

/// The console page or asset at `path`, if any.
pub fn serve(_path: &str) -> Option<Answer> {
    None
}
