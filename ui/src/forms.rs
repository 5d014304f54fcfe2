//! Form bodies as name/value pairs: the dashboard's forms repeat names
//! (`ids` of bulk actions), which typed form decoding does not take. A
//! body holding a NUL anywhere is refused, as the API refuses it (no
//! database can look up or store such text the same way).

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// Largest form body accepted (a bulk action on 500 ids fits many times).
const MAX_FORM: usize = 256 * 1024;

/// A decoded `application/x-www-form-urlencoded` body.
#[derive(Debug, Clone, Default)]
pub(crate) struct Fields(pub(crate) Vec<(String, String)>);

impl Fields {
    /// The first value of `name`, trimmed; `""` when absent.
    pub(crate) fn get(&self, name: &str) -> &str {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map_or("", |(_, v)| v.trim())
    }

    /// The value of `name`, `None` when absent or blank.
    pub(crate) fn opt(&self, name: &str) -> Option<&str> {
        Some(self.get(name)).filter(|v| !v.is_empty())
    }

    /// Every value of `name`, in order.
    pub(crate) fn all(&self, name: &str) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

impl<S: Send + Sync> FromRequest<S> for Fields {
    type Rejection = Response;

    async fn from_request(req: Request, state: &S) -> Result<Self, Response> {
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(|_| crate::view::bad_request("The form could not be read."))?;
        if bytes.len() > MAX_FORM {
            return Err((StatusCode::PAYLOAD_TOO_LARGE, "form too large").into_response());
        }
        let fields: Vec<(String, String)> = url::form_urlencoded::parse(&bytes)
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        if fields
            .iter()
            .any(|(k, v)| k.contains('\0') || v.contains('\0'))
        {
            return Err(crate::view::bad_request(
                "The form holds a NUL character, which cannot be stored. Remove it and try again.",
            ));
        }
        Ok(Fields(fields))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_names_and_blanks() {
        let f = Fields(
            url::form_urlencoded::parse(b"ids=a&ids=b&x=+1+&y=")
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        );
        assert_eq!(f.all("ids"), ["a", "b"]);
        assert_eq!(f.get("x"), "1");
        assert_eq!(f.opt("y"), None);
        assert_eq!(f.get("missing"), "");
    }
}
