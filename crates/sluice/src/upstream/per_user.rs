//! An upstream each user reaches as themselves (`[upstream.auth] mode = "oauth"`): the
//! configured upstream is a placeholder that offers one tool, `sluice_sign_in`; each principal
//! who signed in gets an upstream of their own, built from the same config, whose every request
//! carries their token, with its own tables, health and sessions.
//!
//! Takes the configured upstream and a principal; gives that principal's upstream
//! ([`PerUser::instance`], built on first use after their consent, `None` while they hold no
//! token). Bounded: [`oauth::user::MAX_USERS`] principals per upstream (the upstream of one
//! whose token is gone is dropped first). Refuses nothing: a principal without a token is
//! routed to the placeholder, where the policy stage asks their consent.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::value::RawValue;

use super::oauth::user::{Users, MAX_USERS};
use super::Upstream;
use crate::route::table::{Item, ListTable, ToolHints};

/// The placeholder's one tool.
pub const SIGN_IN: &str = "sluice_sign_in";

/// The principals of one `oauth` upstream and their upstreams.
pub struct PerUser {
    /// Their tokens and consents in progress.
    pub users: Arc<Users>,
    /// Each principal's upstream, with the sign-in it was built for.
    instances: Mutex<HashMap<String, (u64, Arc<Upstream>)>>,
}

impl PerUser {
    /// The per-user state of an upstream whose users are `users`.
    pub fn new(users: Users) -> Self {
        PerUser {
            users: Arc::new(users),
            instances: Mutex::new(HashMap::new()),
        }
    }

    /// `principal`'s own upstream, built from `template`'s config (`fresh`: whether it was
    /// built now and must be probed); `None` while they hold no token.
    pub async fn instance(
        &self,
        template: &Upstream,
        principal: &str,
    ) -> Option<(Arc<Upstream>, bool)> {
        // A token another replica obtained (`[cluster]`) is read from the vault here.
        if !self.users.load(principal).await || !self.users.has(principal) {
            // Signed out: their upstream (tables, sessions) goes with their token.
            if let Ok(mut all) = self.instances.lock() {
                all.remove(principal);
            }
            return None;
        }
        let serial = self.users.signed_in(principal)?;
        let mut all = self.instances.lock().ok()?;
        // Built for this sign-in: used as it is. Built for an earlier one: made anew (its
        // tables and health were those of a token the upstream refused).
        if let Some((_, u)) = all.get(principal).filter(|(s, _)| *s == serial) {
            return Some((u.clone(), false));
        }
        if all.len() >= MAX_USERS {
            all.retain(|p, _| self.users.has(p));
        }
        let mut up =
            Upstream::new(&template.config, 0, Default::default(), Default::default()).ok()?;
        up.per_user = None;
        up.signed_in = Some((self.users.clone(), principal.to_owned()));
        let up = Arc::new(up);
        all.insert(principal.to_owned(), (serial, up.clone()));
        Some((up, true))
    }

    /// The placeholder's tools table: one tool that starts a sign-in.
    pub fn sign_in_table(name: &str, public: &str) -> Option<ListTable> {
        let desc = format!(
            "Sign in to {name} through Sluice: you are asked to authorize Sluice to reach it as you; then its own tools are listed in place of this one."
        );
        let raw = serde_json::json!({
            "name": public,
            "description": desc,
            "inputSchema": {"type": "object", "properties": {}},
            "annotations": {"readOnlyHint": true},
        });
        let raw: Box<RawValue> = serde_json::value::to_raw_value(&raw).ok()?;
        let item = Item {
            key: SIGN_IN.to_owned(),
            public: public.to_owned(),
            raw,
            headers: Vec::new(),
            hints: ToolHints {
                destructive: false,
                read_only: true,
            },
        };
        Some(ListTable::new(
            vec![item],
            0,
            false,
            std::time::Instant::now(),
        ))
    }
}
