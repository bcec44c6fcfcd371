//! JSON objects read member by member in one pass, borrowed: the raw text of each member's value
//! kept as written, keys decoded.
//!
//! Takes JSON text; gives a [`RawObject`] (each key, and its value as raw JSON) with no hashing
//! and no tree built. Refuses (as a serde error) text that is not an object.

use serde::Deserialize;
use serde_json::value::RawValue;

/// A JSON object's members as written, in order: each key (borrowed unless it has escapes)
/// and its raw value. Read in one pass with no hashing; repeated keys are all kept.
#[derive(Debug, Default)]
pub struct RawObject<'a>(pub Vec<(std::borrow::Cow<'a, str>, &'a RawValue)>);

impl<'a> RawObject<'a> {
    /// The raw value of the last member named `key` (the one JSON parsers that keep the last
    /// of repeated keys would read).
    pub fn get(&self, key: &str) -> Option<&'a str> {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.get())
    }

    /// Whether a key appears more than once (linear: pairwise for a few members, hashed above).
    pub fn has_repeats(&self) -> bool {
        if self.0.len() <= 16 {
            return self
                .0
                .iter()
                .enumerate()
                .any(|(i, (k, _))| self.0[..i].iter().any(|(seen, _)| seen == k));
        }
        let mut seen = std::collections::HashSet::with_capacity(self.0.len());
        !self.0.iter().all(|(k, _)| seen.insert(k.as_ref()))
    }

    /// Each key once, at its first position with its last value (what a map-based reader sees).
    pub fn dedup_last(mut self) -> Self {
        if !self.has_repeats() {
            return self;
        }
        let mut at: std::collections::HashMap<std::borrow::Cow<'a, str>, usize> =
            std::collections::HashMap::new();
        let mut out: Vec<(std::borrow::Cow<'a, str>, &'a RawValue)> =
            Vec::with_capacity(self.0.len());
        for (k, v) in self.0.drain(..) {
            match at.get(&k) {
                Some(&i) => out[i].1 = v,
                None => {
                    at.insert(k.clone(), out.len());
                    out.push((k, v));
                }
            }
        }
        RawObject(out)
    }
}

struct Key<'a>(std::borrow::Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: serde::de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Borrowed(v)))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Owned(v.to_owned())))
            }
        }
        d.deserialize_str(V)
    }
}

struct ObjectVisitor;

impl<'de> serde::de::Visitor<'de> for ObjectVisitor {
    type Value = RawObject<'de>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<RawObject<'de>, A::Error> {
        let mut out = Vec::with_capacity(m.size_hint().unwrap_or(4).min(16));
        while let Some(Key(k)) = m.next_key::<Key<'de>>()? {
            let v: &'de RawValue = m.next_value()?;
            out.push((k, v));
        }
        Ok(RawObject(out))
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for RawObject<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(ObjectVisitor)
    }
}

/// A request's `params`: an object read member by member in the one pass over the body, or
/// any other JSON value, which the caller refuses.
pub(super) enum Params<'a> {
    /// An object's members.
    Object(RawObject<'a>),
    /// Anything else.
    Other,
}

impl<'de: 'a, 'a> Deserialize<'de> for Params<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Params<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                m: A,
            ) -> Result<Params<'de>, A::Error> {
                ObjectVisitor.visit_map(m).map(Params::Object)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut s: A,
            ) -> Result<Params<'de>, A::Error> {
                while s.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(Params::Other)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Params<'de>, E> {
                Ok(Params::Other)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Params<'de>, E> {
                Ok(Params::Other)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Params<'de>, E> {
                Ok(Params::Other)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Params<'de>, E> {
                Ok(Params::Other)
            }
            fn visit_str<E>(self, _: &str) -> Result<Params<'de>, E> {
                Ok(Params::Other)
            }
            fn visit_unit<E>(self) -> Result<Params<'de>, E> {
                Ok(Params::Other)
            }
        }
        d.deserialize_any(V)
    }
}
