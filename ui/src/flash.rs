//! What a page says after a change it was redirected from: a **notice**
//! (green, "Paused.") or an **error** (red, the API's refusal).
//!
//! The URL carries them across the redirect, and anyone can write a URL, so
//! neither is ever shown as it came: a notice is a key naming one of a fixed
//! set of texts ([`Notice`]; an unknown key shows nothing), and an error's
//! text is shown only with a signature this session made
//! ([`crate::session::Ctx::sign`]), so a link from elsewhere cannot make the
//! dashboard say anything in its own voice.

use crate::session::Ctx;
use maud::{Markup, html};

/// Label of an error's signature, apart from every other thing signed.
const ERROR_LABEL: &str = "flash-error";

/// The notices a page may show after a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Notice {
    Created,
    Saved,
    Triggered,
    Paused,
    Resumed,
    Cancelled,
    Redelivered,
    KeyRevoked,
    RanAgain,
    RanAgainAsNew,
}

impl Notice {
    const ALL: [Notice; 10] = [
        Notice::Created,
        Notice::Saved,
        Notice::Triggered,
        Notice::Paused,
        Notice::Resumed,
        Notice::Cancelled,
        Notice::Redelivered,
        Notice::KeyRevoked,
        Notice::RanAgain,
        Notice::RanAgainAsNew,
    ];

    /// Its key in the URL.
    pub(crate) fn key(self) -> &'static str {
        match self {
            Notice::Created => "created",
            Notice::Saved => "saved",
            Notice::Triggered => "triggered",
            Notice::Paused => "paused",
            Notice::Resumed => "resumed",
            Notice::Cancelled => "cancelled",
            Notice::Redelivered => "redelivered",
            Notice::KeyRevoked => "key-revoked",
            Notice::RanAgain => "ran-again",
            Notice::RanAgainAsNew => "ran-again-as-new",
        }
    }

    /// What the page says.
    pub(crate) fn text(self) -> &'static str {
        match self {
            Notice::Created => "Created.",
            Notice::Saved => "Saved.",
            Notice::Triggered => "Triggered: an execution was queued now.",
            Notice::Paused => "Paused.",
            Notice::Resumed => "Resumed.",
            Notice::Cancelled => "Cancelled.",
            Notice::Redelivered => "Callback queued for redelivery.",
            Notice::KeyRevoked => "Key revoked.",
            Notice::RanAgain => "Job triggered again: this is the new execution.",
            Notice::RanAgainAsNew => "Job run again as a new one-shot job: this is the new job.",
        }
    }

    /// The notice a URL's key names; `None` for any other text.
    pub(crate) fn parse(key: &str) -> Option<Notice> {
        Notice::ALL.into_iter().find(|n| n.key() == key)
    }

    /// The query pair that carries it.
    pub(crate) fn pair(self) -> (&'static str, &'static str) {
        ("notice", self.key())
    }
}

/// The query pairs that carry `message` as this session's error: the text
/// and its signature.
pub(crate) fn error_pairs(ctx: &Ctx, message: &str) -> [(&'static str, String); 2] {
    [
        ("error", message.to_string()),
        ("sig", ctx.sign(ERROR_LABEL, message.as_bytes())),
    ]
}

/// The notice and error a page's URL carries, as the page shows them:
/// a notice only if its key is known, an error only if this session signed
/// it (anything else is dropped without a word).
pub(crate) fn shown(ctx: &Ctx, notice: &str, error: &str, sig: &str) -> Markup {
    let notice = Notice::parse(notice);
    let error = Some(error).filter(|e| !e.is_empty() && ctx.verify(ERROR_LABEL, e.as_bytes(), sig));
    html! {
        @if let Some(n) = notice { p.notice role="status" { (n.text()) } }
        @if let Some(e) = error { p.error-box role="alert" { (e) } }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_shows_only_with_this_sessions_signature() {
        let ctx = Ctx::for_test(kairos_core::tenant::Role::Read);
        let [(_, text), (_, sig)] = error_pairs(&ctx, "job is not paused");
        let shown_with = |ctx: &Ctx, text: &str, sig: &str| shown(ctx, "", text, sig).into_string();
        assert!(shown_with(&ctx, &text, &sig).contains("job is not paused"));
        assert_eq!(shown_with(&ctx, "Call 555-0100", &sig), "", "another text");
        let other = Ctx::for_test(kairos_core::tenant::Role::Read);
        assert_eq!(shown_with(&other, &text, &sig), "", "another session");
        assert_eq!(shown_with(&ctx, &text, "zz"), "", "not hex");
    }

    #[test]
    fn every_notice_reads_back_from_its_key_and_nothing_else_does() {
        for n in Notice::ALL {
            assert_eq!(Notice::parse(n.key()), Some(n));
        }
        for other in [
            "",
            "Created.",
            "CREATED",
            "Your account is locked, call 555-0100",
        ] {
            assert_eq!(Notice::parse(other), None, "{other}");
        }
    }
}
