//! One way to show a connection URL in logs and errors without its secret
//! (its password, and query parameters named as [`crate::sensitive`] names
//! secrets).

/// `url` with any password replaced by `***`, fit for logs and errors.
///
/// A URL that does not parse has its whole user-info part masked, since where
/// a password would end cannot be known; a query parameter that looks like a
/// credential (`password`, `token`, `secret`, …) is masked too. The result
/// never contains the password of the input, whatever its shape.
/// (`sslkey`, `access_token` and `apiKey` are masked, as in params.)
pub fn redact_url(url: &str) -> String {
    if let Ok(mut parsed) = url::Url::parse(url)
        && parsed.has_host()
    {
        if parsed.password().is_some() && parsed.set_password(Some("***")).is_err() {
            return mask_userinfo(url);
        }
        let secret_params = parsed.query_pairs().any(|(k, _)| is_secret_param(&k));
        if secret_params {
            let pairs: Vec<(String, String)> = parsed
                .query_pairs()
                .map(|(k, v)| {
                    let v = if is_secret_param(&k) {
                        "***".into()
                    } else {
                        v.into_owned()
                    };
                    (k.into_owned(), v)
                })
                .collect();
            parsed.query_pairs_mut().clear().extend_pairs(pairs);
        }
        return parsed.to_string();
    }
    mask_userinfo(url)
}

/// Masks everything between `scheme://` and the last `@`.
fn mask_userinfo(url: &str) -> String {
    let start = url.find("://").map_or(0, |i| i + 3);
    match url.rfind('@') {
        Some(at) if at >= start => format!("{}***{}", &url[..start], &url[at..]),
        _ => url.split('?').next().unwrap_or_default().to_string(),
    }
}

/// A query parameter is secret by the same rule as params' keys
/// ([`crate::sensitive::SensitiveKeys`]'s defaults).
fn is_secret_param(key: &str) -> bool {
    crate::sensitive::SensitiveKeys::default().matches(key)
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn passwords_are_masked() {
        assert_eq!(
            redact_url("amqp://guest:secret@h:5672/v"),
            "amqp://guest:***@h:5672/v"
        );
        assert_eq!(
            redact_url("redis://:s3cret@10.0.0.1:6379/3"),
            "redis://:***@10.0.0.1:6379/3"
        );
        assert_eq!(
            redact_url("redis://127.0.0.1:6379/2"),
            "redis://127.0.0.1:6379/2"
        );
        assert_eq!(redact_url("sqlite://kairos.db"), "sqlite://kairos.db");
    }

    #[test]
    fn unparseable_urls_leak_nothing() {
        for (url, secret) in [
            ("redis://u:s3c@ret@[bad/1", "s3c"),
            ("amqp://u:pw@[bad", "pw"),
            ("user:s3cret@h", "s3cret"),
            ("mysql://root:hunter2@/db?x", "hunter2"),
        ] {
            let shown = redact_url(url);
            assert!(!shown.contains(secret), "{url} → {shown}");
        }
    }

    #[test]
    fn credential_query_parameters_are_masked() {
        let shown = redact_url("postgres://h/db?sslmode=require&password=hunter2");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("sslmode=require"), "{shown}");
        for param in ["apiKey", "access_token", "PassWord", "clientsecret"] {
            let shown = redact_url(&format!("https://h/x?{param}=hunter2&q=1"));
            assert!(!shown.contains("hunter2"), "{shown}");
            assert!(shown.contains("q=1"), "{shown}");
        }
    }
}
