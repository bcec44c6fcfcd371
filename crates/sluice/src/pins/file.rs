//! The pins in a JSON file (`[pins] file`).
//!
//! Takes the file's path; gives every upstream's pins, re-read only when the file's modification
//! time or length changed since it was last read (so an accept made by `sluice pins accept`
//! reaches a running Sluice on its next list refresh), and writes them whole and atomically (a
//! temporary file in the same folder, then renamed over it). A write reads the file again first
//! and changes only the upstream it was given, so two writers lose nothing but a change to the
//! same upstream made in between. Refuses (an error naming the file, never its content) a file
//! that is not the pins' JSON, or one past [`MAX_BYTES`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::book::Entries;

/// The largest pins file read (64 MiB).
pub const MAX_BYTES: u64 = 64 << 20;

/// Every upstream's pins.
pub type Book = BTreeMap<String, Entries>;

/// The file's shape.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Doc {
    /// 1.
    version: u32,
    /// Pins by upstream, then by tool.
    upstreams: Book,
}

/// What identifies one version of the file.
type Stamp = Option<(SystemTime, u64)>;

/// The pins file and what was last read of it.
pub struct File {
    path: PathBuf,
    read: Mutex<(Stamp, Book)>,
}

fn stamp(path: &Path) -> Stamp {
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len()))
}

/// Reads the file at `path` (absent: no pins).
pub fn read(path: &Path) -> Result<Book, String> {
    let shown = path.display();
    let text = match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Book::new()),
        Err(e) => return Err(format!("pins file {shown}: {e}")),
        Ok(m) if m.len() > MAX_BYTES => {
            return Err(format!("pins file {shown}: over {MAX_BYTES} bytes"))
        }
        Ok(_) => std::fs::read_to_string(path).map_err(|e| format!("pins file {shown}: {e}"))?,
    };
    let doc: Doc = serde_json::from_str(&text).map_err(|e| {
        format!(
            "pins file {shown}: not Sluice's pins (line {}, column {}): fix or remove it",
            e.line(),
            e.column()
        )
    })?;
    Ok(doc.upstreams)
}

/// Writes `book` to `path` atomically.
pub fn write(path: &Path, book: &Book) -> Result<(), String> {
    let shown = path.display();
    let doc = serde_json::json!({"version": 1, "upstreams": book});
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".{}.tmp", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
    std::fs::write(&tmp, text).map_err(|e| format!("pins file {shown}: cannot write: {e}"))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("pins file {shown}: cannot replace: {e}")
    })
}

impl File {
    /// The file at `path`, read now (a file that cannot be read is refused at start).
    pub fn open(path: &Path) -> Result<File, String> {
        let book = read(path)?;
        Ok(File {
            path: path.to_owned(),
            read: Mutex::new((stamp(path), book)),
        })
    }

    /// The pins of `upstream` (the file read again if it changed).
    pub fn load(&self, upstream: &str) -> Result<Entries, String> {
        let mut g = self.read.lock().map_err(|_| "pins file lock poisoned")?;
        let now = stamp(&self.path);
        if now != g.0 || now.is_none() {
            *g = (now, read(&self.path)?);
        }
        Ok(g.1.get(upstream).cloned().unwrap_or_default())
    }

    /// Every upstream's pins, as the file holds them now.
    pub fn all(&self) -> Result<Book, String> {
        read(&self.path)
    }

    /// Replaces the entries `tools` of `upstream` with those of `entries` (a tool absent from
    /// `entries` is removed), on the file as it is now.
    pub fn store(&self, upstream: &str, entries: &Entries, tools: &[String]) -> Result<(), String> {
        let mut g = self.read.lock().map_err(|_| "pins file lock poisoned")?;
        let mut book = read(&self.path)?;
        let mine = book.entry(upstream.to_owned()).or_default();
        for t in tools {
            match entries.get(t) {
                Some(e) => mine.insert(t.clone(), e.clone()),
                None => mine.remove(t),
            };
        }
        write(&self.path, &book)?;
        *g = (stamp(&self.path), book);
        Ok(())
    }
}
