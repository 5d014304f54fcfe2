//! Text every database stores alike. PostgreSQL's `text` and `jsonb` refuse
//! the NUL character (U+0000), which MySQL and SQLite keep; so that a request
//! means the same on every database, the API refuses NUL anywhere a caller
//! can put text (body strings and object keys at any depth, query and path
//! parameters) with a 422 naming the field, before anything is stored. JSON
//! cannot carry the other text PostgreSQL refuses (invalid UTF-8, lone
//! surrogates): the parser already answers it with 400 `invalid_json`.

use crate::error::ApiError;
use serde_json::Value;

/// The JSON escape of NUL: the only way a JSON document can hold one.
const NUL_ESCAPE: &[u8] = b"\\u0000";

fn refusal(field: &str, what: &str) -> ApiError {
    ApiError::invalid(
        field,
        format!(
            "{what} contains the NUL character (\\u0000), which not every database can \
             store; remove it"
        ),
    )
}

/// Refuses a NUL in `value`, the text of `field`.
pub(crate) fn text(field: &str, value: &str) -> Result<(), ApiError> {
    if value.contains('\0') {
        Err(refusal(field, field))
    } else {
        Ok(())
    }
}

/// Refuses a NUL anywhere in the JSON document `bytes` (already parsed once
/// and known well-formed). The bytes are only scanned for the escape; a
/// document holding one is parsed again to name the field, so the common
/// case costs one pass over the body.
pub(crate) fn json_document(bytes: &[u8]) -> Result<(), ApiError> {
    if !bytes.windows(NUL_ESCAPE.len()).any(|w| w == NUL_ESCAPE) {
        return Ok(());
    }
    // The escape may itself be escaped (`\\u0000` is a backslash and text).
    let Ok(value) = serde_json::from_slice::<Value>(bytes) else {
        return Ok(());
    };
    match nul_in(&value, "") {
        Some((field, what)) => Err(refusal(&field, &what)),
        None => Ok(()),
    }
}

/// Where in `value` (at `path`) a NUL is, as `(field, what holds it)`.
fn nul_in(value: &Value, path: &str) -> Option<(String, String)> {
    let field = |p: &str| {
        if p.is_empty() {
            "body".to_string()
        } else {
            p.to_string()
        }
    };
    match value {
        Value::String(s) if s.contains('\0') => Some((field(path), field(path))),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, v)| nul_in(v, &format!("{path}[{i}]"))),
        Value::Object(map) => map.iter().find_map(|(k, v)| {
            if k.contains('\0') {
                let shown = k.replace('\0', "\\u0000");
                Some((field(path), format!("the key {shown:?} of {}", field(path))))
            } else if path.is_empty() {
                nul_in(v, k)
            } else {
                nul_in(v, &format!("{path}.{k}"))
            }
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of(doc: &str) -> Option<String> {
        json_document(doc.as_bytes())
            .err()
            .map(|e| e.field().unwrap_or_default().to_string())
    }

    #[test]
    fn nul_is_found_wherever_it_hides() {
        assert_eq!(
            field_of(r#"{"jobName":"a\u0000b"}"#).as_deref(),
            Some("jobName")
        );
        assert_eq!(
            field_of(r#"{"params":{"a":[1,{"b":"\u0000"}]}}"#).as_deref(),
            Some("params.a[1].b")
        );
        assert_eq!(
            field_of(r#"{"params":{"k\u0000":1}}"#).as_deref(),
            Some("params")
        );
        assert_eq!(field_of(r#"{"\u0000":1}"#).as_deref(), Some("body"));
        let e = json_document(br#"{"params":{"k\u0000":1}}"#).unwrap_err();
        assert!(
            e.to_string().contains(r#"the key "k\\u0000" of params"#),
            "{e}"
        );
    }

    #[test]
    fn text_without_nul_passes() {
        assert_eq!(field_of(r#"{"jobName":"plain","p":"\\u0000"}"#), None);
        assert_eq!(field_of(r#"{"jobName":"\u0001 é \ud83d\ude00"}"#), None);
        assert!(text("id", "abc").is_ok());
        assert_eq!(text("id", "a\0").unwrap_err().field(), Some("id"));
    }
}
