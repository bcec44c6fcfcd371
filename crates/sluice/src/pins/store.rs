//! Where pins are kept: a JSON file (`[pins] file`), Redis (`[cluster]`), or this process's
//! memory (neither; lost on restart).
//!
//! Takes an upstream's name, and for a write its entries and the tools whose entries changed;
//! gives the upstream's entries as stored now (the file re-read when it changed; Redis read
//! each time). Refuses nothing itself: an error names the store (the file, Redis), never a
//! definition, and the caller goes on with what it knew.

use std::sync::{Arc, Mutex};

use super::book::{Entries, Entry};
use super::file::{Book, File};

/// A pins store.
pub enum Store {
    /// This process's memory.
    Memory(Mutex<Book>),
    /// A JSON file.
    File(File),
    /// Redis, shared by the replicas.
    Redis(Arc<crate::cluster::Cluster>),
}

fn unreachable(e: crate::cluster::Unavailable) -> String {
    format!("pins: {e}")
}

impl Store {
    /// The store `cfg` and `cluster` say (a pins file that cannot be read is refused).
    pub fn of(
        cfg: Option<&crate::config::Pins>,
        cluster: Option<Arc<crate::cluster::Cluster>>,
    ) -> Result<Store, String> {
        if let Some(c) = cluster {
            return Ok(Store::Redis(c));
        }
        match cfg.and_then(|p| p.file.as_deref()) {
            Some(f) => Ok(Store::File(File::open(std::path::Path::new(f))?)),
            None => Ok(Store::Memory(Mutex::default())),
        }
    }

    /// The entries of `upstream`.
    pub async fn load(&self, upstream: &str) -> Result<Entries, String> {
        match self {
            Store::Memory(m) => Ok(m
                .lock()
                .map_err(|_| "pins lock poisoned")?
                .get(upstream)
                .cloned()
                .unwrap_or_default()),
            Store::File(f) => f.load(upstream),
            Store::Redis(c) => {
                let fields = c.shared.pins_get(upstream).await.map_err(unreachable)?;
                let mut out = Entries::new();
                for (tool, json) in fields.into_iter().take(super::book::MAX_PER_UPSTREAM) {
                    match serde_json::from_str::<Entry>(&json) {
                        Ok(e) => {
                            out.insert(tool, e);
                        }
                        Err(_) => {
                            tracing::warn!(upstream = %upstream, key = %crate::cluster::shared::pins_key(upstream), "a pin in Redis is not Sluice's: left out (the tool counts as not pinned)");
                        }
                    }
                }
                Ok(out)
            }
        }
    }

    /// Stores the entries of `tools` (those absent from `entries` are removed).
    pub async fn store(
        &self,
        upstream: &str,
        entries: &Entries,
        tools: &[String],
    ) -> Result<(), String> {
        if tools.is_empty() {
            return Ok(());
        }
        match self {
            Store::Memory(m) => {
                let mut g = m.lock().map_err(|_| "pins lock poisoned")?;
                let mine = g.entry(upstream.to_owned()).or_default();
                for t in tools {
                    match entries.get(t) {
                        Some(e) => mine.insert(t.clone(), e.clone()),
                        None => mine.remove(t),
                    };
                }
                Ok(())
            }
            Store::File(f) => f.store(upstream, entries, tools),
            Store::Redis(c) => {
                let (mut set, mut del) = (Vec::new(), Vec::new());
                for t in tools {
                    match entries.get(t) {
                        Some(e) => {
                            set.push((t.clone(), serde_json::to_string(e).unwrap_or_default()))
                        }
                        None => del.push(t.clone()),
                    }
                }
                c.shared
                    .pins_put(upstream, &set, &del)
                    .await
                    .map_err(unreachable)
            }
        }
    }

    /// The pins of every upstream in `upstreams` (those with none left out).
    pub async fn all(&self, upstreams: &[String]) -> Result<Book, String> {
        let mut out = Book::new();
        for u in upstreams {
            let entries = self.load(u).await?;
            if !entries.is_empty() {
                out.insert(u.clone(), entries);
            }
        }
        Ok(out)
    }
}
