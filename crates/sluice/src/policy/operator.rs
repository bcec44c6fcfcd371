//! `approver = "operator"` on an `approve` rule: the tool call is held for an operator
//! (`approvals/`) instead of asking its user.
//!
//! Takes a parsed rule; gives [`ByOperator`] (who may decide, which argument values they see)
//! for a rule an operator decides. Refuses at load `approver` on a rule that does not approve,
//! an unknown approver, `approver = "group:NAME"` (operator groups do not exist yet: name the
//! operators in `approvers`), `approvers`/`show_arguments` without `approver = "operator"`, an
//! operator rule whose `method` is not `tools/call`, and more than [`MAX_NAMES`] names.

/// An `approve` rule decided by an operator, not by the user.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ByOperator {
    /// The operator names that may decide (any when empty).
    pub approvers: Vec<String>,
    /// The argument names whose values are shown to operators.
    pub show_arguments: Vec<String>,
}

/// The most names in `approvers` or `show_arguments`.
pub const MAX_NAMES: usize = 64;

pub(super) fn by_operator(r: &Keys<'_>) -> Option<ByOperator> {
    (r.approve && r.approver == Some("operator")).then(|| ByOperator {
        approvers: r.approvers.to_vec(),
        show_arguments: r.show_arguments.to_vec(),
    })
}

/// What a rule says about its approver.
pub(super) struct Keys<'a> {
    /// Whether its effect is `approve`.
    pub(super) approve: bool,
    /// `approver`.
    pub(super) approver: Option<&'a str>,
    /// `approvers`.
    pub(super) approvers: &'a [String],
    /// `show_arguments`.
    pub(super) show_arguments: &'a [String],
    /// `match.method`.
    pub(super) methods: &'a [String],
}

/// `approver`, `approvers` and `show_arguments`: only on an `approve` rule, only the values
/// Sluice knows, bounded.
pub(super) fn check(r: &Keys<'_>) -> Result<(), String> {
    let operator = match r.approver {
        None | Some("user") => false,
        Some("operator") => true,
        Some(g) if g.starts_with("group:") => {
            return Err(format!("approver = {g:?}: operator groups do not exist yet; use approver = \"operator\" with approvers = [\"NAME\", …]"))
        }
        Some(other) => {
            return Err(format!(
                "approver = {other:?} is not known (\"user\" or \"operator\")"
            ))
        }
    };
    if r.approver.is_some() && !r.approve {
        return Err("approver is for an approve rule".into());
    }
    if !operator && (!r.approvers.is_empty() || !r.show_arguments.is_empty()) {
        return Err("approvers and show_arguments need approver = \"operator\"".into());
    }
    if operator
        && !r.methods.is_empty()
        && !r
            .methods
            .iter()
            .all(|m| m == crate::mcp::method::Method::ToolsCall.as_str())
    {
        return Err("an operator approves tool calls only; an upstream's ask waits on its client, not on an operator".into());
    }
    for list in [r.approvers, r.show_arguments] {
        if list.len() > MAX_NAMES || list.iter().any(|n| n.is_empty() || n.len() > 128) {
            return Err(format!(
                "approvers and show_arguments hold at most {MAX_NAMES} non-empty names of at most 128 bytes"
            ));
        }
    }
    Ok(())
}
