//! The four federated lists and the changes an upstream announces to them: pure protocol facts
//! (which method lists which kind, which notification makes which lists stale), shared by the
//! upstream sessions that see the notifications and the catalog and listen streams they reach.
//!
//! Takes a method and its params; gives a [`ListKind`] or a [`Change`]. Refuses nothing: a
//! notification that is no change is `None`.

use serde_json::{Map, Value};

use super::method::Method;

/// The four federated lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ListKind {
    /// `tools/list`, items under `tools`.
    Tools,
    /// `prompts/list`, items under `prompts`.
    Prompts,
    /// `resources/list`, items under `resources`.
    Resources,
    /// `resources/templates/list`, items under `resourceTemplates`.
    Templates,
}

impl ListKind {
    /// All kinds, in a fixed order.
    pub const ALL: [ListKind; 4] = [
        ListKind::Tools,
        ListKind::Prompts,
        ListKind::Resources,
        ListKind::Templates,
    ];

    /// The list method.
    pub fn method(self) -> Method {
        match self {
            ListKind::Tools => Method::ToolsList,
            ListKind::Prompts => Method::PromptsList,
            ListKind::Resources => Method::ResourcesList,
            ListKind::Templates => Method::ResourcesTemplatesList,
        }
    }

    /// The list method's name (for logs and messages).
    pub fn name(self) -> &'static str {
        self.method().known().unwrap_or("")
    }

    /// The result member holding the items.
    pub fn member(self) -> &'static str {
        match self {
            ListKind::Tools => "tools",
            ListKind::Prompts => "prompts",
            ListKind::Resources => "resources",
            ListKind::Templates => "resourceTemplates",
        }
    }

    /// The server capability that advertises the family.
    pub fn capability(self) -> &'static str {
        match self {
            ListKind::Tools => "tools",
            ListKind::Prompts => "prompts",
            ListKind::Resources | ListKind::Templates => "resources",
        }
    }

    /// The kind a list method names.
    pub fn from_method(m: &Method) -> Option<ListKind> {
        ListKind::ALL.into_iter().find(|k| k.method() == *m)
    }

    /// Index for per-kind arrays.
    pub fn index(self) -> usize {
        self as usize
    }

    /// Whether items are addressed by a rewritten name (tools, prompts) rather than a URI.
    pub fn named(self) -> bool {
        matches!(self, ListKind::Tools | ListKind::Prompts)
    }
}

/// A change a listener may care about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// `notifications/tools/list_changed`.
    Tools,
    /// `notifications/prompts/list_changed`.
    Prompts,
    /// `notifications/resources/list_changed`.
    Resources,
    /// `notifications/resources/updated` for a URI.
    Updated(String),
}

impl Change {
    /// The change an upstream's notification announces (`params` as raw JSON), if it is one.
    pub fn of(method: &Method, params: Option<&str>) -> Option<Change> {
        match method {
            Method::ToolsListChanged => Some(Change::Tools),
            Method::PromptsListChanged => Some(Change::Prompts),
            Method::ResourcesListChanged => Some(Change::Resources),
            Method::ResourcesUpdated => {
                let p: Value = serde_json::from_str(params?).ok()?;
                p.get("uri")
                    .and_then(Value::as_str)
                    .map(|u| Change::Updated(u.to_owned()))
            }
            _ => None,
        }
    }

    /// The tables it makes stale.
    pub fn kinds(&self) -> &'static [ListKind] {
        match self {
            Change::Tools => &[ListKind::Tools],
            Change::Prompts => &[ListKind::Prompts],
            Change::Resources => &[ListKind::Resources, ListKind::Templates],
            Change::Updated(_) => &[],
        }
    }

    /// The notification that tells a client, with its params (`_meta` left to the caller).
    pub fn notification(&self) -> (Method, Map<String, Value>) {
        match self {
            Change::Tools => (Method::ToolsListChanged, Map::new()),
            Change::Prompts => (Method::PromptsListChanged, Map::new()),
            Change::Resources => (Method::ResourcesListChanged, Map::new()),
            Change::Updated(u) => {
                let mut m = Map::new();
                m.insert("uri".into(), u.clone().into());
                (Method::ResourcesUpdated, m)
            }
        }
    }
}
