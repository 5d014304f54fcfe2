//! Hiding a job's sensitive values wherever they were copied or echoed:
//! other params (a password pasted into `message`), outputs, errors, log
//! lines and callback errors.

use super::{MASK, SensitiveKeys};
use serde_json::Value;

/// Shorter values are not redacted from outputs and logs: replacing every
/// `1` or `ab` in a text would hide more than it protects.
const MIN_REDACTED_CHARS: usize = 4;
/// A part of a value (`Bearer <token>`: the token) is redacted on its own
/// from this length on.
const MIN_REDACTED_PART_CHARS: usize = 8;
/// How many times a value is JSON-escaped when looked for: once for a
/// value echoed inside a JSON text, twice for JSON inside a JSON string.
const ESCAPE_DEPTH: usize = 2;

/// Every text a sensitive value could appear as in an output or a log.
pub(super) fn collect_secrets(v: &Value, out: &mut Vec<String>) {
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

/// `s` as it reads inside a JSON string (without the quotes).
fn json_escaped(s: &str) -> String {
    let quoted = Value::String(s.to_string()).to_string();
    quoted[1..quoted.len() - 1].to_string()
}

/// `s` percent-encoded as in a query string or a form.
fn percent_encoded(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// Hides a job's sensitive values in text shown with the job: outputs,
/// errors, log lines. Exact occurrences are replaced by [`MASK`] (values
/// shorter than 4 characters are left, they would hide everything), as
/// they are, JSON-escaped (a value holding `"` or `\` echoed in a JSON
/// text) and percent-encoded; in JSON outputs the values of keys matching
/// the configured names are masked too.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// Longest first, so a value is never half replaced by a shorter one
    /// inside it.
    secrets: Vec<String>,
    keys: SensitiveKeys,
}

impl Redactor {
    /// A redactor of `secrets` that also masks `keys` in JSON.
    pub fn new(secrets: Vec<String>, keys: SensitiveKeys) -> Self {
        let mut all = Vec::with_capacity(secrets.len() * 2);
        for s in secrets {
            if s.chars().count() < MIN_REDACTED_CHARS || s == MASK {
                continue;
            }
            let mut escaped = s.clone();
            for _ in 0..ESCAPE_DEPTH {
                escaped = json_escaped(&escaped);
                all.push(escaped.clone());
            }
            all.push(percent_encoded(&s));
            all.push(s);
        }
        all.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        all.dedup();
        Self { secrets: all, keys }
    }

    /// Whether there is no value to look for.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
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

    /// Every string of `v` (not its keys) with sensitive values replaced,
    /// leaving keys and numbers: for params, whose sensitive places are
    /// masked by [`super::Rules::mask`] already.
    pub(super) fn strings(&self, v: &mut Value) {
        match v {
            Value::String(s) => {
                if s != MASK {
                    let shown = self.text(s);
                    if shown != *s {
                        *s = shown;
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|i| self.strings(i)),
            Value::Object(map) => map.values_mut().for_each(|i| self.strings(i)),
            Value::Number(_) | Value::Bool(_) | Value::Null => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn escaped_and_encoded_copies_are_redacted() {
        let secret = r#"pa"ss\wo rd"#;
        let r = Redactor::new(vec![secret.to_string()], SensitiveKeys::default());
        let echoed = json!({"sent": {"password": secret}}).to_string();
        assert!(echoed.contains(r#"pa\"ss\\wo rd"#), "{echoed}");
        let shown = r.text(&format!("the server answered {echoed}"));
        assert!(!shown.contains("ss\\\\wo"), "{shown}");
        assert!(shown.contains(MASK), "{shown}");
        // JSON inside a JSON string: escaped twice.
        let twice = json!({"body": echoed}).to_string();
        assert!(!r.text(&twice).contains("wo rd"), "{}", r.text(&twice));
        // In a query string.
        let shown = r.text("GET /login?p=pa%22ss%5Cwo+rd");
        assert!(!shown.contains("wo+rd"), "{shown}");
    }
}
