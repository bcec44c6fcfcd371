//! A stdio upstream's `user` and `group`: who its processes run as, resolved in the user
//! database when the config loads.
//!
//! Takes each key as written: a name (`"nobody"`) or a numeric id (`65534` or `"65534"`).
//! Gives a [`RunUser`] (its uid, and from the user database its primary group, name and home:
//! the process gets `HOME` and `USER` from them) and a [`RunGroup`]. Refuses an empty name, a
//! number outside 0 to 2^32 - 2, a name the user database does not hold, and a numeric `user`
//! with no entry there and no `group` (its group would be unknown), naming the key. Whether
//! Sluice can switch to them is checked where it runs (`upstream::stdio::boundary`), not here.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// `user` or `group` as written.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(untagged)]
pub(crate) enum RawId {
    /// A TOML integer.
    Number(i64),
    /// A name, or a string of digits (an id).
    Text(String),
}

impl RawId {
    /// As written, for messages and `sluice check`.
    fn written(&self) -> String {
        match self {
            RawId::Number(n) => n.to_string(),
            RawId::Text(s) => s.clone(),
        }
    }

    /// The id it names by number, if it is one; an error for a number that is no id
    /// (`u32::MAX` is the kernel's "unchanged").
    fn number(&self, key: &str) -> Result<Option<u32>, String> {
        let n = match self {
            RawId::Number(n) => *n,
            RawId::Text(s) if s.trim().is_empty() => {
                return Err(format!("{key} is empty: give a name or a numeric id"))
            }
            RawId::Text(s) if s.bytes().all(|b| b.is_ascii_digit()) => {
                s.parse::<i64>().unwrap_or(-1)
            }
            RawId::Text(_) => return Ok(None),
        };
        match u32::try_from(n) {
            Ok(id) if id != u32::MAX => Ok(Some(id)),
            _ => Err(format!(
                "{key} = {n}: give a name or a numeric id from 0 to {}",
                u32::MAX - 1
            )),
        }
    }
}

/// The user a stdio server's processes run as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunUser {
    /// As written (a name or a number).
    pub written: String,
    /// Its uid.
    pub uid: u32,
    /// Its primary group, from the user database (used when `group` is absent).
    pub gid: Option<u32>,
    /// Its name and home directory in the user database: the process's `USER` and `HOME`.
    pub account: Option<(String, PathBuf)>,
}

/// The group a stdio server's processes run as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunGroup {
    /// As written (a name or a number).
    pub written: String,
    /// Its gid.
    pub gid: u32,
}

impl Serialize for RunUser {
    /// As written.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.written)
    }
}

impl Serialize for RunGroup {
    /// As written.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.written)
    }
}

/// `user` resolved: a name through the user database, a number as itself (with its entry when
/// there is one). `group_given`: a numeric user with no entry needs it.
pub(crate) fn resolve_user(raw: &RawId, group_given: bool) -> Result<RunUser, String> {
    use nix::unistd::{Uid, User};
    let written = raw.written();
    let entry = match raw.number("user")? {
        Some(uid) => {
            let entry = User::from_uid(Uid::from_raw(uid))
                .map_err(|e| format!("user = {written}: the user database failed: {e}"))?;
            if entry.is_none() && !group_given {
                return Err(format!(
                    "user = {written} has no entry in the user database, so its group is unknown: give group too, or a user that exists"
                ));
            }
            return Ok(RunUser {
                written,
                uid,
                gid: entry.as_ref().map(|u| u.gid.as_raw()),
                account: entry.map(|u| (u.name, u.dir)),
            });
        }
        None => User::from_name(&written)
            .map_err(|e| format!("user = {written:?}: the user database failed: {e}"))?,
    };
    let u = entry.ok_or_else(|| format!("user = {written:?} is not in the user database: create it, or give a numeric uid and group"))?;
    Ok(RunUser {
        written,
        uid: u.uid.as_raw(),
        gid: Some(u.gid.as_raw()),
        account: Some((u.name, u.dir)),
    })
}

/// `group` resolved: a name through the group database, a number as itself.
pub(crate) fn resolve_group(raw: &RawId) -> Result<RunGroup, String> {
    use nix::unistd::Group;
    let written = raw.written();
    if let Some(gid) = raw.number("group")? {
        return Ok(RunGroup { written, gid });
    }
    let g = Group::from_name(&written)
        .map_err(|e| format!("group = {written:?}: the group database failed: {e}"))?;
    let g = g.ok_or_else(|| {
        format!(
            "group = {written:?} is not in the group database: create it, or give a numeric gid"
        )
    })?;
    Ok(RunGroup {
        written,
        gid: g.gid.as_raw(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_or_a_number_resolves_and_a_bad_one_is_refused_naming_the_key() {
        let root = resolve_user(&RawId::Text("root".into()), false).expect("root exists");
        assert_eq!((root.uid, root.gid), (0, Some(0)));
        assert_eq!(root.account.as_ref().map(|a| a.0.as_str()), Some("root"));
        let by_number = resolve_user(&RawId::Number(0), false).expect("uid 0 exists");
        assert_eq!((by_number.uid, by_number.written.as_str()), (0, "0"));
        assert_eq!(
            resolve_user(&RawId::Text("0".into()), false)
                .expect("digits are an id")
                .uid,
            0
        );
        let unknown = resolve_user(&RawId::Text("no-such-user-sluice".into()), false).unwrap_err();
        assert!(unknown.contains("is not in the user database"), "{unknown}");
        // A uid with no entry: only with a group.
        let orphan = resolve_user(&RawId::Number(4_000_000_000), false).unwrap_err();
        assert!(orphan.contains("give group too"), "{orphan}");
        assert_eq!(
            resolve_user(&RawId::Number(4_000_000_000), true)
                .expect("with a group")
                .gid,
            None
        );
        for bad in [
            RawId::Number(-1),
            RawId::Number(i64::from(u32::MAX)),
            RawId::Text(" ".into()),
        ] {
            let e = resolve_user(&bad, true).unwrap_err();
            assert!(e.starts_with("user"), "{e}");
        }
        assert_eq!(
            resolve_group(&RawId::Number(65534)).expect("a gid").gid,
            65534
        );
        assert_eq!(
            resolve_group(&RawId::Text("root".into()))
                .expect("root's group")
                .gid,
            0
        );
        assert!(resolve_group(&RawId::Text("no-such-group-sluice".into()))
            .unwrap_err()
            .contains("group database"));
    }

    #[test]
    fn user_and_group_are_read_printed_as_written_refused_on_a_url_and_taken_by_the_flag() {
        use crate::config::{Config, Overrides};
        let load = |text: &str| Config::from_toml(text, "sluice.toml", &Overrides::default());
        let c =
            load("[[upstream]]\nname = \"f\"\ncommand = [\"x\"]\nuser = \"root\"\ngroup = 65534\n")
                .expect("loads");
        let s = c.upstreams[0].stdio.as_ref().expect("stdio");
        assert_eq!(
            (s.uid(), s.gid()),
            (Some(0), Some(65534)),
            "group wins over the user's primary group"
        );
        let printed = c.redacted();
        assert!(
            printed.contains("user = \"root\"") && printed.contains("group = \"65534\""),
            "{printed}"
        );
        assert_eq!(
            load(&printed)
                .expect("the printed config loads again")
                .redacted(),
            printed
        );
        let only_user =
            load("[[upstream]]\nname = \"f\"\ncommand = [\"x\"]\nuser = 0\n").expect("loads");
        assert_eq!(
            only_user.upstreams[0]
                .stdio
                .as_ref()
                .map(|s| (s.uid(), s.gid())),
            Some((Some(0), Some(0)))
        );
        let e =
            load("[[upstream]]\nname = \"f\"\ncommand = [\"x\"]\nuser = \"no-such-user-sluice\"\n")
                .unwrap_err()
                .0;
        assert!(e.starts_with("sluice.toml:2: upstream \"f\": user = \"no-such-user-sluice\" is not in the user database"), "{e}");
        let e =
            load("[[upstream]]\nname = \"f\"\nurl = \"http://127.0.0.1:1/\"\nuser = \"root\"\n")
                .unwrap_err()
                .0;
        assert!(e.contains("user and group are for a stdio upstream"), "{e}");
        let flag = Overrides {
            upstreams: vec!["fs=stdio@root:node 'my server.js'".into()],
            ..Default::default()
        };
        let c = Config::from_toml("", "flags", &flag).expect("the flag loads");
        let s = c.upstreams[0].stdio.as_ref().expect("stdio");
        assert_eq!(
            (s.command.as_slice(), s.uid()),
            (
                ["node".to_owned(), "my server.js".to_owned()].as_slice(),
                Some(0)
            )
        );
        let flag = Overrides {
            upstreams: vec!["fs=stdio:node a".into()],
            ..Default::default()
        };
        assert_eq!(
            Config::from_toml("", "flags", &flag)
                .expect("loads")
                .upstreams[0]
                .stdio
                .as_ref()
                .and_then(|s| s.uid()),
            None
        );
    }
}
