//! The prefix codec: the only place that joins and splits `<upstream><separator><name>`.
//!
//! Takes an upstream name and its own tool or prompt name; gives the public name, and back.
//! Refuses (returns `None`) a public name with no known prefix when prefixing is on, and
//! public names longer than [`MAX_NAME`].

/// Longest public tool or prompt name Sluice will publish.
pub const MAX_NAME: usize = 128;

/// How names are published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    prefixed: bool,
    separator: String,
}

impl Names {
    /// A codec; `prefixed` false publishes names unchanged.
    pub fn new(prefixed: bool, separator: &str) -> Self {
        Names {
            prefixed,
            separator: separator.to_owned(),
        }
    }

    /// Whether names carry a prefix.
    pub fn prefixed(&self) -> bool {
        self.prefixed
    }

    /// The public name of `name` served by `upstream`, `None` when it would be too long.
    pub fn publish(&self, upstream: &str, name: &str) -> Option<String> {
        let public = if self.prefixed {
            format!("{upstream}{}{name}", self.separator)
        } else {
            name.to_owned()
        };
        (public.len() <= MAX_NAME || !self.prefixed).then_some(public)
    }

    /// Splits a public name into (upstream, upstream's own name). Without prefixing the
    /// upstream is unknown (`None`) and the name is returned unchanged.
    pub fn split<'a>(&self, public: &'a str) -> (Option<&'a str>, &'a str) {
        if !self.prefixed {
            return (None, public);
        }
        match public.split_once(self.separator.as_str()) {
            Some((u, n)) if !u.is_empty() && !n.is_empty() => (Some(u), n),
            _ => (None, public),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixed_names_round_trip_and_split_at_the_first_separator() {
        let n = Names::new(true, "__");
        let p = n.publish("py", "do__it").unwrap();
        assert_eq!(p, "py__do__it");
        assert_eq!(n.split(&p), (Some("py"), "do__it"));
        assert_eq!(n.split("nothing"), (None, "nothing"));
    }

    #[test]
    fn a_prefixed_name_over_128_characters_is_not_published() {
        let n = Names::new(true, "__");
        assert!(n.publish("u", &"x".repeat(126)).is_none());
        assert!(n.publish("u", &"x".repeat(125)).is_some());
    }
}
