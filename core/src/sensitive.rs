//! Sensitive values in a job's params: which ones are hidden from people who
//! only look (the dashboard, read keys), how they are masked, and how a masked
//! value sent back in an edit keeps the stored one.
//!
//! A value is sensitive when its key matches one of the configured names
//! ([`SensitiveKeys`], `KAIROS_API_SENSITIVE_PARAMS`), at any depth, or when
//! its path is one of the job's own `sensitiveParams` ([`parse_path`]). A
//! sensitive value is shown as [`MASK`] whatever its type; workers always get
//! the real params (nothing here touches what is stored or dispatched).
//!
//! Outputs, errors and log lines are not params, but a handler may echo a
//! param back (an HTTP server answering with the request's headers, an error
//! naming a URL). [`Redactor`] replaces exact occurrences of a job's
//! sensitive values in such text: best effort, since a handler could always
//! transform a value beyond recognition.

use serde_json::Value;

/// What a sensitive value is shown as.
pub const MASK: &str = "••••••";

/// Default of `KAIROS_API_SENSITIVE_PARAMS`.
pub const DEFAULT_SENSITIVE_KEYS: [&str; 6] = [
    "authorization",
    "password",
    "secret",
    "token",
    "api_key",
    "cookie",
];

/// Most paths a job may mark sensitive.
pub const MAX_PATHS: usize = 64;
/// Longest path.
pub const MAX_PATH_CHARS: usize = 255;
/// Shorter values are not redacted from outputs and logs: replacing every
/// `1` or `ab` in a text would hide more than it protects.
const MIN_REDACTED_CHARS: usize = 4;
/// A part of a value (`Bearer <token>`: the token) is redacted on its own
/// from this length on.
const MIN_REDACTED_PART_CHARS: usize = 8;

/// The words of a key: split at anything not a letter or digit and where a
/// lower-case letter or digit meets an upper-case one, lower-cased
/// (`X-Api-Key`, `x_api_key` and `xApiKey` are all `x api key`).
fn words(key: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for c in key.chars() {
        if !c.is_alphanumeric() {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            prev_lower = false;
            continue;
        }
        if c.is_uppercase() && prev_lower && !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
        prev_lower = c.is_lowercase() || c.is_ascii_digit();
        cur.extend(c.to_lowercase());
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// The configured names of sensitive keys. A key matches a name when the
/// name's words appear, in order and next to each other, among the key's
/// words: `token` matches `token`, `accessToken` and `X-Auth-Token` but not
/// `tokens` or `max_tokens`; `api_key` matches `X-Api-Key` and `apiKey`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SensitiveKeys {
    names: Vec<Vec<String>>,
}

impl Default for SensitiveKeys {
    fn default() -> Self {
        Self::new(DEFAULT_SENSITIVE_KEYS)
    }
}

impl SensitiveKeys {
    /// The names given (blank ones are ignored).
    pub fn new<I, S>(names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Self {
            names: names
                .into_iter()
                .map(|n| words(n.as_ref()))
                .filter(|w| !w.is_empty())
                .collect(),
        }
    }

    /// Whether the value under `key` is sensitive.
    pub fn matches(&self, key: &str) -> bool {
        if self.names.is_empty() {
            return false;
        }
        let key = words(key);
        self.names
            .iter()
            .any(|name| key.windows(name.len()).any(|w| w == name.as_slice()))
    }
}

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

    /// `params` with every sensitive value replaced by [`MASK`].
    pub fn mask(&self, params: &Value) -> Value {
        let mut out = params.clone();
        let mut paths = Vec::new();
        self.visit(params, &mut |at, _| paths.push(at.to_vec()));
        for p in paths {
            if let Some(slot) = at_path_mut(&mut out, &p) {
                *slot = Value::String(MASK.to_string());
            }
        }
        out
    }

    /// Puts back the `stored` value wherever `sent` holds [`MASK`] at a
    /// sensitive place that `stored` has: an edit made on masked params
    /// keeps the secrets it did not change.
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
    }

    /// The redactor of this job's sensitive values in `params`.
    pub fn redactor(&self, params: &Value) -> Redactor {
        let mut secrets = Vec::new();
        self.visit(params, &mut |_, v| collect_secrets(v, &mut secrets));
        Redactor::new(secrets, self.keys.clone())
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

/// Every text a sensitive value could appear as in an output or a log.
fn collect_secrets(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => {
            out.push(s.clone());
            // `Bearer <token>`: a handler may echo the token alone.
            let parts: Vec<&str> = s.split_whitespace().collect();
            if parts.len() > 1 {
                out.extend(
                    parts
                        .into_iter()
                        .filter(|p| p.chars().count() >= MIN_REDACTED_PART_CHARS)
                        .map(str::to_string),
                );
            }
        }
        Value::Number(n) => out.push(n.to_string()),
        Value::Array(items) => items.iter().for_each(|i| collect_secrets(i, out)),
        Value::Object(map) => map.values().for_each(|i| collect_secrets(i, out)),
        Value::Bool(_) | Value::Null => {}
    }
}

/// Hides a job's sensitive values in text shown with the job: outputs,
/// errors, log lines. Exact occurrences are replaced by [`MASK`] (values
/// shorter than 4 characters are left, they would hide everything), and in
/// JSON outputs the values of keys matching the configured names are masked
/// too.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// Longest first, so a value is never half replaced by a shorter one
    /// inside it.
    secrets: Vec<String>,
    keys: SensitiveKeys,
}

impl Redactor {
    /// A redactor of `secrets` that also masks `keys` in JSON.
    pub fn new(mut secrets: Vec<String>, keys: SensitiveKeys) -> Self {
        secrets.retain(|s| s.chars().count() >= MIN_REDACTED_CHARS && s != MASK);
        secrets.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        secrets.dedup();
        Self { secrets, keys }
    }

    /// `text` with every sensitive value replaced.
    pub fn text(&self, text: &str) -> String {
        let mut out = text.to_string();
        for s in &self.secrets {
            if out.contains(s.as_str()) {
                out = out.replace(s.as_str(), MASK);
            }
        }
        out
    }

    /// An optional text, redacted.
    pub fn opt_text(&self, text: Option<String>) -> Option<String> {
        text.map(|t| self.text(&t))
    }

    /// A JSON value (an output) with sensitive keys masked and sensitive
    /// values replaced in every string.
    pub fn json(&self, v: &Value) -> Value {
        match v {
            Value::String(s) => Value::String(self.text(s)),
            Value::Number(n) if self.secrets.iter().any(|s| *s == n.to_string()) => {
                Value::String(MASK.to_string())
            }
            Value::Array(items) => Value::Array(items.iter().map(|i| self.json(i)).collect()),
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, child)| {
                        let shown = if self.keys.matches(k) {
                            Value::String(MASK.to_string())
                        } else {
                            self.json(child)
                        };
                        (self.text(k), shown)
                    })
                    .collect(),
            ),
            other => other.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_names_match_word_by_word() {
        let keys = SensitiveKeys::default();
        for k in [
            "Authorization",
            "proxy-authorization",
            "password",
            "db_password",
            "dbPassword",
            "client_secret",
            "X-Auth-Token",
            "accessToken",
            "ACCESS_TOKEN",
            "api_key",
            "X-Api-Key",
            "apiKey",
            "Cookie",
            "Set-Cookie",
        ] {
            assert!(keys.matches(k), "{k} is sensitive");
        }
        for k in [
            "max_tokens",
            "tokens",
            "secretary",
            "key",
            "api",
            "url",
            "greeting",
            "cookies",
        ] {
            assert!(!keys.matches(k), "{k} is not sensitive");
        }
        assert!(!SensitiveKeys::new(Vec::<String>::new()).matches("password"));
        assert!(SensitiveKeys::new(["PIN", " "]).matches("card_pin"));
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
