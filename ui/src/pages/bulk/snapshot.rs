//! What a bulk confirmation showed, carried in its form to the confirming
//! POST: each ticked job's id and the status it had then (or that it was
//! not found), signed with the session's key together with the action. The
//! confirmed action acts on exactly these jobs and only on those it was
//! shown to apply to, whose status has not changed since; a form edited in
//! the browser, or taken from another session, is refused as a whole.

use crate::session::Ctx;
use kairos_core::job::{Job, JobStatus};

/// Label of a snapshot's signature, apart from every other thing signed.
const LABEL: &str = "bulk-snapshot";

/// The ticked jobs as the confirmation showed them, in its order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Snapshot(pub(super) Vec<(String, Option<JobStatus>)>);

impl Snapshot {
    /// The snapshot of jobs as looked up for the confirmation.
    pub(super) fn of(ticked: &[(String, Option<Job>)]) -> Snapshot {
        Snapshot(
            ticked
                .iter()
                .map(|(id, job)| (id.clone(), job.as_ref().map(|j| j.status)))
                .collect(),
        )
    }

    /// The form's text of it (JSON: `[["id","paused"],["gone",null]]`).
    fn text(&self) -> String {
        let rows: Vec<(&str, Option<&str>)> = self
            .0
            .iter()
            .map(|(id, s)| (id.as_str(), s.map(JobStatus::as_str)))
            .collect();
        serde_json::to_string(&rows).unwrap_or_default()
    }

    /// The text and signature the confirmation form carries for `action`.
    pub(super) fn seal(&self, ctx: &Ctx, action: &str) -> (String, String) {
        let text = self.text();
        let sig = ctx.sign(LABEL, &signed(action, &text));
        (text, sig)
    }

    /// The snapshot a confirming form carries, if this session signed it
    /// for `action`; `None` for anything else.
    pub(super) fn open(ctx: &Ctx, action: &str, text: &str, sig: &str) -> Option<Snapshot> {
        if !ctx.verify(LABEL, &signed(action, text), sig) {
            return None;
        }
        let rows: Vec<(String, Option<String>)> = serde_json::from_str(text).ok()?;
        let mut out = Vec::with_capacity(rows.len());
        for (id, status) in rows {
            let status = match status {
                Some(s) => Some(JobStatus::parse(&s)?),
                None => None,
            };
            out.push((id, status));
        }
        Some(Snapshot(out))
    }
}

/// What is signed: the action and the snapshot's text, apart.
fn signed(action: &str, text: &str) -> Vec<u8> {
    [action.as_bytes(), b"\0", text.as_bytes()].concat()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kairos_core::tenant::Role;

    fn shown() -> Snapshot {
        Snapshot(vec![
            ("a".into(), Some(JobStatus::Paused)),
            ("b".into(), Some(JobStatus::Scheduled)),
            ("gone".into(), None),
        ])
    }

    #[test]
    fn a_sealed_snapshot_opens_for_its_session_and_action_only() {
        let ctx = Ctx::for_test(Role::Write);
        let (text, sig) = shown().seal(&ctx, "resume");
        assert_eq!(Snapshot::open(&ctx, "resume", &text, &sig), Some(shown()));
        assert_eq!(
            Snapshot::open(&ctx, "pause", &text, &sig),
            None,
            "another action"
        );
        let other = Ctx::for_test(Role::Write);
        assert_eq!(
            Snapshot::open(&other, "resume", &text, &sig),
            None,
            "another session"
        );
        let edited = text.replace("scheduled", "paused");
        assert_ne!(edited, text);
        assert_eq!(
            Snapshot::open(&ctx, "resume", &edited, &sig),
            None,
            "edited"
        );
        assert_eq!(Snapshot::open(&ctx, "resume", &text, ""), None, "unsigned");
    }
}
