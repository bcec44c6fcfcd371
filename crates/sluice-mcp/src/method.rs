//! JSON-RPC method names, decoded once into a [`Method`]: the only place in Sluice that spells
//! them.
//!
//! Takes a method string (already decoded from its JSON token, escapes resolved); gives the
//! method, with what the protocol says of it (which params member names it, whether it may
//! answer `input_required`, which server capability serves it). Refuses nothing: a method
//! Sluice does not know is [`Method::Other`], kept as written.

/// Every method Sluice speaks of, on either side and in either era.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Method {
    /// `server/discover`.
    ServerDiscover,
    /// `subscriptions/listen`.
    SubscriptionsListen,
    /// `tools/list`.
    ToolsList,
    /// `tools/call`.
    ToolsCall,
    /// `prompts/list`.
    PromptsList,
    /// `prompts/get`.
    PromptsGet,
    /// `resources/list`.
    ResourcesList,
    /// `resources/read`.
    ResourcesRead,
    /// `resources/templates/list`.
    ResourcesTemplatesList,
    /// `completion/complete`.
    CompletionComplete,
    /// `initialize` (2025-11-25).
    Initialize,
    /// `ping` (2025-11-25).
    Ping,
    /// `logging/setLevel` (2025-11-25).
    LoggingSetLevel,
    /// `resources/subscribe` (2025-11-25).
    ResourcesSubscribe,
    /// `resources/unsubscribe` (2025-11-25).
    ResourcesUnsubscribe,
    /// `sampling/createMessage` (an ask of the client).
    SamplingCreateMessage,
    /// `elicitation/create` (an ask of the client).
    ElicitationCreate,
    /// `roots/list` (an ask of the client).
    RootsList,
    /// `notifications/initialized`.
    Initialized,
    /// `notifications/cancelled`.
    Cancelled,
    /// `notifications/progress`.
    Progress,
    /// `notifications/message`.
    LogMessage,
    /// `notifications/tools/list_changed`.
    ToolsListChanged,
    /// `notifications/prompts/list_changed`.
    PromptsListChanged,
    /// `notifications/resources/list_changed`.
    ResourcesListChanged,
    /// `notifications/resources/updated`.
    ResourcesUpdated,
    /// `notifications/subscriptions/acknowledged`.
    SubscriptionsAcknowledged,
    /// Anything else, as written.
    Other(String),
}

/// The one mapping between methods and their names.
const NAMES: &[(Method, &str)] = &[
    (Method::ServerDiscover, "server/discover"),
    (Method::SubscriptionsListen, "subscriptions/listen"),
    (Method::ToolsList, "tools/list"),
    (Method::ToolsCall, "tools/call"),
    (Method::PromptsList, "prompts/list"),
    (Method::PromptsGet, "prompts/get"),
    (Method::ResourcesList, "resources/list"),
    (Method::ResourcesRead, "resources/read"),
    (Method::ResourcesTemplatesList, "resources/templates/list"),
    (Method::CompletionComplete, "completion/complete"),
    (Method::Initialize, "initialize"),
    (Method::Ping, "ping"),
    (Method::LoggingSetLevel, "logging/setLevel"),
    (Method::ResourcesSubscribe, "resources/subscribe"),
    (Method::ResourcesUnsubscribe, "resources/unsubscribe"),
    (Method::SamplingCreateMessage, "sampling/createMessage"),
    (Method::ElicitationCreate, "elicitation/create"),
    (Method::RootsList, "roots/list"),
    (Method::Initialized, "notifications/initialized"),
    (Method::Cancelled, "notifications/cancelled"),
    (Method::Progress, "notifications/progress"),
    (Method::LogMessage, "notifications/message"),
    (Method::ToolsListChanged, "notifications/tools/list_changed"),
    (
        Method::PromptsListChanged,
        "notifications/prompts/list_changed",
    ),
    (
        Method::ResourcesListChanged,
        "notifications/resources/list_changed",
    ),
    (Method::ResourcesUpdated, "notifications/resources/updated"),
    (
        Method::SubscriptionsAcknowledged,
        "notifications/subscriptions/acknowledged",
    ),
];

impl Method {
    /// The method a (decoded) name names.
    pub fn parse(name: &str) -> Method {
        NAMES
            .iter()
            .find(|(_, n)| *n == name)
            .map_or_else(|| Method::Other(name.to_owned()), |(m, _)| m.clone())
    }

    /// Its name on the wire.
    pub fn as_str(&self) -> &str {
        match self {
            Method::Other(s) => s,
            m => NAMES.iter().find(|(k, _)| k == m).map_or("", |(_, n)| n),
        }
    }

    /// Its name when Sluice knows it (a closed set: metrics labels, audit), else `None`.
    pub fn known(&self) -> Option<&'static str> {
        NAMES.iter().find(|(k, _)| k == self).map(|(_, n)| *n)
    }

    /// The `params` member naming what it acts on (mirrored in `Mcp-Name`): `name` for
    /// `tools/call` and `prompts/get`, `uri` for `resources/read`.
    pub fn name_member(&self) -> Option<&'static str> {
        match self {
            Method::ToolsCall | Method::PromptsGet => Some("name"),
            Method::ResourcesRead => Some("uri"),
            _ => None,
        }
    }

    /// Whether it may be answered `input_required` (2026-07-28: only these three).
    pub fn may_ask(&self) -> bool {
        matches!(
            self,
            Method::ToolsCall | Method::PromptsGet | Method::ResourcesRead
        )
    }

    /// Whether it is an ask a server makes of the client (what an input request may carry).
    pub fn is_ask(&self) -> bool {
        matches!(
            self,
            Method::SamplingCreateMessage | Method::ElicitationCreate | Method::RootsList
        )
    }

    /// The server capability that serves it on the modern front door (`Some(None)`: served
    /// whatever the upstreams advertise; `None`: not served there at all).
    pub fn capability(&self) -> Option<Option<&'static str>> {
        match self {
            Method::ServerDiscover | Method::SubscriptionsListen => Some(None),
            Method::ToolsList | Method::ToolsCall => Some(Some("tools")),
            Method::PromptsList | Method::PromptsGet => Some(Some("prompts")),
            Method::ResourcesList | Method::ResourcesRead | Method::ResourcesTemplatesList => {
                Some(Some("resources"))
            }
            Method::CompletionComplete => Some(Some("completions")),
            _ => None,
        }
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for Method {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = <std::borrow::Cow<'de, str> as serde::Deserialize>::deserialize(d)?;
        Ok(Method::parse(&name))
    }
}

impl PartialEq<&str> for Method {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_maps_both_ways_and_others_are_kept_as_written() {
        for (m, n) in NAMES {
            assert_eq!(Method::parse(n), *m);
            assert_eq!(m.as_str(), *n);
            assert_eq!(m.known(), Some(*n));
        }
        let other = Method::parse("x/made-up");
        assert_eq!((other.as_str(), other.known()), ("x/made-up", None));
        assert_eq!(
            Method::parse("Tools/Call"),
            Method::Other("Tools/Call".into()),
            "names are case-sensitive"
        );
    }
}
