//! Sensitive values: the one masking every surface applies (jobs' and
//! workflow nodes' params, outputs, errors, events, log lines, callback
//! errors, exports, the dashboard) for those who only look (the dashboard,
//! read keys), and how a masked value sent back in an edit keeps the stored
//! one.
//!
//! A value is sensitive when its key matches one of the configured names
//! ([`SensitiveKeys`], `KAIROS_API_SENSITIVE_PARAMS`; the matching rule is
//! in `names`), at any depth, or when its path is one of the job's own
//! `sensitiveParams` ([`parse_path`]). A sensitive value is shown as
//! [`MASK`] whatever its type; workers always get the real params (nothing
//! here touches what is stored or dispatched).
//!
//! A sensitive value may be copied elsewhere: into another param, or by a
//! handler into an output, an error or a log line (an HTTP server answering
//! with the request's headers, an error naming a URL). [`Redactor`]
//! replaces exact occurrences of a job's sensitive values in such text,
//! JSON-escaped and percent-encoded ones included: best effort, since a
//! handler could always transform a value beyond recognition.

mod names;
mod redactor;

pub use names::{DEFAULT_SENSITIVE_KEYS, NOT_SENSITIVE, SensitiveKeys};
pub use redactor::Redactor;

use redactor::collect_secrets;
use serde_json::Value;

/// What a sensitive value is shown as.
pub const MASK: &str = "••••••";

/// Most paths a job may mark sensitive.
pub const MAX_PATHS: usize = 64;
/// Longest path.
pub const MAX_PATH_CHARS: usize = 255;

/// A job's `sensitiveParams` entry as segments: dot-separated keys, where a
/// number also names an array element and `*` any key or element
/// (`headers.X-Custom`, `accounts.*.pin`). Keys holding a dot cannot be
/// named; the configured key names still cover them.
pub fn parse_path(raw: &str) -> Result<Vec<String>, String> {
    let n = raw.chars().count();
    if n == 0 || n > MAX_PATH_CHARS {
        return Err(format!(
            "a sensitive path must be 1–{MAX_PATH_CHARS} characters, got {n}"
        ));
    }
    if raw.chars().any(char::is_control) {
        return Err(format!("sensitive path {raw:?} holds a control character"));
    }
    let segments: Vec<String> = raw.split('.').map(str::to_string).collect();
    if segments.iter().any(String::is_empty) {
        return Err(format!(
            "sensitive path {raw:?} has an empty segment (write keys separated by single dots, e.g. headers.X-Token)"
        ));
    }
    Ok(segments)
}

/// Checks a job's `sensitiveParams` list; the message says what is wrong.
pub fn check_paths(paths: &[String]) -> Result<(), String> {
    if paths.len() > MAX_PATHS {
        return Err(format!(
            "at most {MAX_PATHS} sensitive paths, got {}",
            paths.len()
        ));
    }
    for p in paths {
        parse_path(p)?;
    }
    Ok(())
}

/// What decides whether a value of one job's params is sensitive.
#[derive(Debug, Clone)]
pub struct Rules<'a> {
    keys: &'a SensitiveKeys,
    paths: Vec<Vec<String>>,
}

impl<'a> Rules<'a> {
    /// The configured `keys` and the job's own `paths` (malformed paths,
    /// which validation refuses anyway, are ignored).
    pub fn new(keys: &'a SensitiveKeys, paths: &[String]) -> Self {
        Self {
            keys,
            paths: paths.iter().filter_map(|p| parse_path(p).ok()).collect(),
        }
    }

    fn path_matches(&self, at: &[String]) -> bool {
        self.paths.iter().any(|p| {
            p.len() == at.len()
                && p.iter()
                    .zip(at)
                    .all(|(want, got)| want == "*" || want == got)
        })
    }

    /// Whether the value at `at` (whose last segment is its key, when it is
    /// an object member) is sensitive.
    fn sensitive(&self, at: &[String], is_member: bool) -> bool {
        (is_member && at.last().is_some_and(|k| self.keys.matches(k))) || self.path_matches(at)
    }

    /// Calls `f` with every sensitive value of `params` (not descending
    /// into them) and its path.
    fn visit<'v>(&self, params: &'v Value, f: &mut impl FnMut(&[String], &'v Value)) {
        fn walk<'v>(
            rules: &Rules<'_>,
            v: &'v Value,
            at: &mut Vec<String>,
            f: &mut impl FnMut(&[String], &'v Value),
        ) {
            match v {
                Value::Object(map) => {
                    for (k, child) in map {
                        at.push(k.clone());
                        if rules.sensitive(at, true) {
                            f(at, child);
                        } else {
                            walk(rules, child, at, f);
                        }
                        at.pop();
                    }
                }
                Value::Array(items) => {
                    for (i, child) in items.iter().enumerate() {
                        at.push(i.to_string());
                        if rules.sensitive(at, false) {
                            f(at, child);
                        } else {
                            walk(rules, child, at, f);
                        }
                        at.pop();
                    }
                }
                _ => {}
            }
        }
        walk(self, params, &mut Vec::new(), f);
    }

    /// `params` with every sensitive value replaced by [`MASK`], and every
    /// copy of one in another string (a password pasted into `message`)
    /// redacted as outputs are.
    pub fn mask(&self, params: &Value) -> Value {
        self.mask_with(params, &self.redactor(params))
    }

    /// [`Rules::mask`] with copies looked for by `copies` (a redactor of
    /// several params that are shown together, such as a workflow's nodes,
    /// so that one node's secret pasted into another is hidden too).
    pub fn mask_with(&self, params: &Value, copies: &Redactor) -> Value {
        let mut out = params.clone();
        let mut paths = Vec::new();
        self.visit(params, &mut |at, _| paths.push(at.to_vec()));
        for p in paths {
            if let Some(slot) = at_path_mut(&mut out, &p) {
                *slot = Value::String(MASK.to_string());
            }
        }
        copies.strings(&mut out);
        out
    }

    /// Puts back the `stored` value wherever `sent` holds what [`Rules::mask`]
    /// showed of it: [`MASK`] at a sensitive place that `stored` has, or
    /// elsewhere a string that is the stored one with its copies of
    /// sensitive values redacted. An edit made on masked params keeps the
    /// secrets it did not change.
    pub fn restore(&self, sent: &mut Value, stored: &Value) {
        let mut masked = Vec::new();
        self.visit(sent, &mut |at, v| {
            if v.as_str() == Some(MASK) {
                masked.push(at.to_vec());
            }
        });
        for p in masked {
            if let (Some(old), Some(slot)) = (at_path(stored, &p), at_path_mut(sent, &p)) {
                *slot = old.clone();
            }
        }
        let redactor = self.redactor(stored);
        let mut redacted = Vec::new();
        strings_holding_mask(sent, &mut Vec::new(), &mut redacted);
        for p in redacted {
            let Some(Value::String(old)) = at_path(stored, &p) else {
                continue;
            };
            if let Some(slot) = at_path_mut(sent, &p)
                && slot.as_str() == Some(redactor.text(old).as_str())
            {
                *slot = Value::String(old.clone());
            }
        }
    }

    /// The redactor of this job's sensitive values in `params`.
    /// Besides the sensitive values, the credentials inside URLs of any
    /// param (a password, a query parameter with a sensitive name:
    /// `https://h/x?access_token=…`), so that they are hidden in the URL
    /// itself and wherever it is copied (an error naming the URL).
    pub fn redactor(&self, params: &Value) -> Redactor {
        let mut secrets = Vec::new();
        self.visit(params, &mut |_, v| collect_secrets(v, &mut secrets));
        url_secrets(self.keys, params, &mut secrets);
        Redactor::new(secrets, self.keys.clone())
    }
}

/// The password and sensitive query values of every URL among the strings
/// of `v`.
fn url_secrets(keys: &SensitiveKeys, v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) if s.contains("://") => {
            let Ok(url) = url::Url::parse(s.trim()) else {
                return;
            };
            if let Some(p) = url.password() {
                out.push(p.to_string());
                if let Ok(decoded) = percent_decode(p) {
                    out.push(decoded);
                }
            }
            for (k, v) in url.query_pairs() {
                if keys.matches(&k) {
                    out.push(v.into_owned());
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|i| url_secrets(keys, i, out)),
        Value::Object(map) => map.values().for_each(|i| url_secrets(keys, i, out)),
        _ => {}
    }
}

fn percent_decode(s: &str) -> Result<String, std::string::FromUtf8Error> {
    let bytes: Vec<u8> = url::form_urlencoded::parse(format!("x={s}").as_bytes())
        .next()
        .map(|(_, v)| v.into_owned().into_bytes())
        .unwrap_or_default();
    String::from_utf8(bytes)
}

/// The paths of the strings of `v` that hold [`MASK`] among other text.
fn strings_holding_mask(v: &Value, at: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match v {
        Value::String(s) if s != MASK && s.contains(MASK) => out.push(at.clone()),
        Value::Object(map) => {
            for (k, child) in map {
                at.push(k.clone());
                strings_holding_mask(child, at, out);
                at.pop();
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                at.push(i.to_string());
                strings_holding_mask(child, at, out);
                at.pop();
            }
        }
        _ => {}
    }
}

fn at_path<'v>(v: &'v Value, path: &[String]) -> Option<&'v Value> {
    path.iter().try_fold(v, |v, seg| match v {
        Value::Object(m) => m.get(seg),
        Value::Array(a) => seg.parse::<usize>().ok().and_then(|i| a.get(i)),
        _ => None,
    })
}

fn at_path_mut<'v>(v: &'v mut Value, path: &[String]) -> Option<&'v mut Value> {
    path.iter().try_fold(v, |v, seg| match v {
        Value::Object(m) => m.get_mut(seg),
        Value::Array(a) => seg.parse::<usize>().ok().and_then(|i| a.get_mut(i)),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_value_copied_into_another_param_is_masked_there_and_kept_on_edit() {
        let keys = SensitiveKeys::default();
        let rules = Rules::new(&keys, &[]);
        let stored =
            json!({"password": "hunter2-pass", "message": "login with hunter2-pass now", "n": 1});
        let shown = rules.mask(&stored);
        assert_eq!(
            shown,
            json!({"password": MASK, "message": format!("login with {MASK} now"), "n": 1})
        );
        // The masked params sent back keep both the password and the text
        // that held it; a changed text replaces it.
        let mut sent = shown.clone();
        rules.restore(&mut sent, &stored);
        assert_eq!(sent, stored);
        let mut sent = shown;
        sent["message"] = json!(format!("now {MASK}"));
        rules.restore(&mut sent, &stored);
        assert_eq!(sent["message"], json!(format!("now {MASK}")));
    }

    #[test]
    fn credentials_inside_urls_are_hidden_in_the_url_and_its_copies() {
        let keys = SensitiveKeys::default();
        let rules = Rules::new(&keys, &[]);
        let stored = json!({
            "url": "https://user:pa55-word@api.example/x?q=1&access_token=tok-12345678",
            "note": "called https://api.example/x?access_token=tok-12345678",
        });
        let shown = rules.mask(&stored);
        assert_eq!(
            shown,
            json!({
                "url": format!("https://user:{MASK}@api.example/x?q=1&access_token={MASK}"),
                "note": format!("called https://api.example/x?access_token={MASK}"),
            })
        );
        let r = rules.redactor(&stored);
        assert_eq!(
            r.text("request to https://api.example/x?access_token=tok-12345678 failed"),
            format!("request to https://api.example/x?access_token={MASK} failed")
        );
        // Sent back as shown, the stored URL is kept.
        let mut sent = shown;
        rules.restore(&mut sent, &stored);
        assert_eq!(sent, stored);
    }

    #[test]
    fn masking_covers_every_depth_and_the_jobs_own_paths() {
        let keys = SensitiveKeys::default();
        let params = json!({
            "url": "https://api.example/x?q=1",
            "headers": {"Authorization": "Bearer abcdefgh12345678", "Accept": "json", "X-Custom": "c-value"},
            "db": {"user": "u", "password": {"nested": 1}},
            "accounts": [{"pin": "1234"}, {"pin": "5678"}],
            "list": ["a", "b"],
        });
        let paths = vec![
            "headers.X-Custom".to_string(),
            "accounts.*.pin".to_string(),
            "list.1".to_string(),
        ];
        let masked = Rules::new(&keys, &paths).mask(&params);
        assert_eq!(
            masked,
            json!({
                "url": "https://api.example/x?q=1",
                "headers": {"Authorization": MASK, "Accept": "json", "X-Custom": MASK},
                "db": {"user": "u", "password": MASK},
                "accounts": [{"pin": MASK}, {"pin": MASK}],
                "list": ["a", MASK],
            })
        );
        // Nothing sensitive: unchanged, scalars included.
        assert_eq!(Rules::new(&keys, &[]).mask(&json!(5)), json!(5));
        assert_eq!(
            Rules::new(&keys, &["*".into()]).mask(&json!({"a": 1})),
            json!({"a": MASK})
        );
    }

    #[test]
    fn a_masked_value_sent_back_keeps_the_stored_one() {
        let keys = SensitiveKeys::default();
        let rules = Rules::new(&keys, &["extra".to_string()]);
        let stored = json!({"token": "real-token", "extra": [1, 2], "n": 1});
        let mut sent = rules.mask(&stored);
        sent["n"] = json!(2);
        rules.restore(&mut sent, &stored);
        assert_eq!(
            sent,
            json!({"token": "real-token", "extra": [1, 2], "n": 2})
        );
        // A new value replaces the stored one; a mask where nothing was
        // stored stays what it is.
        let mut sent = json!({"token": "new-token", "password": MASK});
        rules.restore(&mut sent, &stored);
        assert_eq!(sent, json!({"token": "new-token", "password": MASK}));
        // The mask under a key that is not sensitive is a plain value.
        let mut sent = json!({"n": MASK});
        rules.restore(&mut sent, &stored);
        assert_eq!(sent, json!({"n": MASK}));
    }

    #[test]
    fn paths_are_checked() {
        assert_eq!(parse_path("a.b.*").unwrap(), ["a", "b", "*"]);
        for bad in ["", "a..b", ".a", "a.", "a\nb"] {
            assert!(parse_path(bad).is_err(), "{bad:?}");
        }
        assert!(parse_path(&"x".repeat(MAX_PATH_CHARS + 1)).is_err());
        assert!(check_paths(&vec!["a".to_string(); MAX_PATHS]).is_ok());
        assert!(check_paths(&vec!["a".to_string(); MAX_PATHS + 1]).is_err());
    }

    #[test]
    fn echoed_values_are_redacted_from_outputs_and_logs() {
        let keys = SensitiveKeys::default();
        let params = json!({
            "headers": {"Authorization": "Bearer abcdefgh12345678"},
            "password": "hunter2-pass",
            "token": "ab",
            "secret": 987654,
        });
        let r = Rules::new(&keys, &[]).redactor(&params);
        assert_eq!(
            r.text("GET failed: header Bearer abcdefgh12345678 refused"),
            format!("GET failed: header {MASK} refused")
        );
        assert_eq!(
            r.text("token abcdefgh12345678 alone"),
            format!("token {MASK} alone")
        );
        assert_eq!(r.text("login hunter2-pass"), format!("login {MASK}"));
        assert_eq!(r.text("ab stays"), "ab stays", "too short to redact");
        let out = r.json(&json!({
            "status": 200,
            "body": {"echo": "hunter2-pass", "session_token": "t-1", "n": 987654, "list": ["x hunter2-pass"]},
        }));
        assert_eq!(
            out,
            json!({
                "status": 200,
                "body": {"echo": MASK, "session_token": MASK, "n": MASK, "list": [format!("x {MASK}")]},
            })
        );
        assert_eq!(Redactor::default().text("anything"), "anything");
    }
}
