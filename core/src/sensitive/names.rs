//! Which key names are sensitive: the one rule every surface uses, for
//! params, JSON outputs, the `http` handler's headers across a redirect and
//! the query parameters of connection URLs.
//!
//! A key is split into words: at anything that is not a letter or a digit,
//! where a lower-case letter or a digit meets an upper-case one, and where
//! letters meet digits, then lower-cased (`X-Api-Key`, `x_api_key` and
//! `xApiKey` are all `x api key`; `password2` is `password 2`). A name is a
//! pattern per word: `key` matches the word `key` only, `*key` any word
//! ending in `key` (`apikey`), `auth*` any word starting with `auth`
//! (`authorization`), `*secret*` any word holding `secret` (`clientsecret`).
//! A name of several words (`api_key`) matches those words next to each
//! other, in order. Run-together words (`apikey`, `accesstoken`) are why
//! patterns have wildcards; the few ordinary words a wildcard would catch
//! ([`NOT_SENSITIVE`]: `author`, `monkey`, `tokens`…) never match a
//! wildcard.

/// Default of `KAIROS_API_SENSITIVE_PARAMS`: passwords, secrets, tokens,
/// keys, authentication, credentials, private keys, cookies and sessions.
pub const DEFAULT_SENSITIVE_KEYS: [&str; 17] = [
    "*pass",
    "*password*",
    "*passwd*",
    "*passphrase*",
    "*passcode*",
    "*pwd*",
    "*secret*",
    "*token*",
    "*key",
    "*keys",
    "auth*",
    "*auth",
    "*credential*",
    "private*",
    "*cookie*",
    "*session*",
    "*jwt*",
];

/// Words a wildcard pattern never matches: ordinary words that merely
/// start or end like a sensitive part (`author`, `monkey`, `bypass`), and
/// `tokens`, which language-model APIs use for counts (`max_tokens`,
/// `total_tokens`). A pattern without wildcard still matches them
/// (`author` in the setting masks `author`).
pub const NOT_SENSITIVE: [&str; 30] = [
    "author",
    "authors",
    "authored",
    "authoring",
    "authority",
    "authorities",
    "authoritative",
    "bypass",
    "compass",
    "encompass",
    "overpass",
    "underpass",
    "surpass",
    "trespass",
    "secretary",
    "secretaries",
    "tokens",
    "tokenize",
    "tokenized",
    "tokenizer",
    "monkey",
    "monkeys",
    "donkey",
    "donkeys",
    "turkey",
    "turkeys",
    "hockey",
    "jockey",
    "jockeys",
    "whiskey",
];

/// The words of a key (see the module's documentation).
pub(crate) fn words(key: &str) -> Vec<String> {
    #[derive(PartialEq, Clone, Copy)]
    enum Kind {
        None,
        Lower,
        Upper,
        Digit,
    }
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut prev = Kind::None;
    for c in key.chars() {
        let kind = if !c.is_alphanumeric() {
            Kind::None
        } else if c.is_numeric() {
            Kind::Digit
        } else if c.is_uppercase() {
            Kind::Upper
        } else {
            Kind::Lower
        };
        let boundary = matches!(
            (prev, kind),
            (_, Kind::None)
                | (Kind::Lower, Kind::Upper)
                | (Kind::Digit, Kind::Upper | Kind::Lower)
                | (Kind::Upper | Kind::Lower, Kind::Digit)
        );
        if boundary && !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
        if kind != Kind::None {
            cur.extend(c.to_lowercase());
        }
        prev = kind;
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// One word of a name: its text and whether anything may come before
/// (`*key`) or after (`auth*`) it within the word.
#[derive(Debug, Clone, PartialEq, Eq)]
struct WordPattern {
    text: String,
    any_before: bool,
    any_after: bool,
}

impl WordPattern {
    fn matches(&self, word: &str) -> bool {
        if !self.any_before && !self.any_after {
            return word == self.text;
        }
        if NOT_SENSITIVE.contains(&word) {
            return false;
        }
        match (self.any_before, self.any_after) {
            (true, true) => word.contains(&self.text),
            (true, false) => word.ends_with(&self.text),
            _ => word.starts_with(&self.text),
        }
    }
}

/// The configured names of sensitive keys. A key matches a name when the
/// name's word patterns match words of the key next to each other, in
/// order: `*token*` matches `token`, `accessToken`, `X-Auth-Token` and
/// `accesstoken`, not `max_tokens`; `api_key` matches `X-Api-Key` and
/// `apiKey`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SensitiveKeys {
    names: Vec<Vec<WordPattern>>,
}

impl Default for SensitiveKeys {
    fn default() -> Self {
        Self::new(DEFAULT_SENSITIVE_KEYS)
    }
}

impl SensitiveKeys {
    /// The names given (blank ones are ignored). A name is lower-cased and
    /// split into words at anything but letters, digits and `*`.
    pub fn new<I, S>(names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Self {
            names: names
                .into_iter()
                .map(|n| parse_name(n.as_ref()))
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
        self.names.iter().any(|name| {
            key.windows(name.len())
                .any(|w| w.iter().zip(name).all(|(word, p)| p.matches(word)))
        })
    }
}

fn parse_name(name: &str) -> Vec<WordPattern> {
    name.to_lowercase()
        .split(|c: char| !(c.is_alphanumeric() || c == '*'))
        .filter_map(|part| {
            let any_before = part.starts_with('*');
            let any_after = part.len() > 1 && part.ends_with('*');
            let text = part.trim_matches('*');
            (!text.is_empty()).then(|| WordPattern {
                text: text.to_string(),
                any_before,
                any_after,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_split_into_words() {
        assert_eq!(words("X-Api-Key"), ["x", "api", "key"]);
        assert_eq!(words("xApiKey"), ["x", "api", "key"]);
        assert_eq!(words("password2"), ["password", "2"]);
        assert_eq!(words("APIKey"), ["apikey"]);
        assert_eq!(words("oauth2_token"), ["oauth", "2", "token"]);
        assert_eq!(words("__"), Vec::<String>::new());
    }

    #[test]
    fn the_default_names_match_run_together_and_split_spellings() {
        let keys = SensitiveKeys::default();
        for k in [
            "Authorization",
            "proxy-authorization",
            "password",
            "PassWord",
            "password2",
            "passwd",
            "pwd",
            "db_pass",
            "dbPassword",
            "passphrase",
            "client_secret",
            "clientsecret",
            "secrets",
            "X-Auth-Token",
            "accessToken",
            "accesstoken",
            "ACCESS_TOKEN",
            "api_key",
            "apikey",
            "APIKey",
            "X-Api-Key",
            "apiKeys",
            "key",
            "privateKey",
            "private_key",
            "privkey",
            "Cookie",
            "Set-Cookie",
            "cookies",
            "sessionId",
            "session",
            "oauth",
            "basicAuth",
            "auth",
            "credentials",
            "awsCredential",
            "id_jwt",
        ] {
            assert!(keys.matches(k), "{k} is sensitive");
        }
        for k in [
            "max_tokens",
            "total_tokens",
            "tokenizer",
            "secretary",
            "author",
            "authority",
            "monkey",
            "keyboard",
            "keyword",
            "bypass",
            "compass",
            "passenger",
            "passed",
            "api",
            "url",
            "greeting",
            "message",
        ] {
            assert!(!keys.matches(k), "{k} is not sensitive");
        }
    }

    #[test]
    fn configured_names_are_word_patterns() {
        assert!(!SensitiveKeys::new(Vec::<String>::new()).matches("password"));
        let pin = SensitiveKeys::new(["PIN", " "]);
        assert!(pin.matches("card_pin"));
        assert!(!pin.matches("pinned"));
        let api_key = SensitiveKeys::new(["api_key"]);
        assert!(api_key.matches("X-Api-Key"));
        assert!(!api_key.matches("key"));
        // An exact name matches even a word wildcards leave alone.
        assert!(SensitiveKeys::new(["author"]).matches("author"));
        assert!(SensitiveKeys::new(["pin*"]).matches("pinCode"));
    }
}
