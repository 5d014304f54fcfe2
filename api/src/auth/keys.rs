//! API key material: `kai_<prefix>_<secret>`, where the prefix (12 hex
//! digits) is public and names the stored row, and the secret (256 random
//! bits, 64 hex digits) is shown once and stored only as its SHA-256.

use kairos_core::tenant::{ApiKey, Role};
use kairos_core::time::Millis;
use rand::RngCore;
use sha2::{Digest, Sha256};

/// Every key starts with this.
pub const KEY_PREFIX: &str = "kai_";
/// Length in hex digits of the public prefix.
const PREFIX_HEX: usize = 12;
/// Random bytes in the secret part.
const SECRET_BYTES: usize = 32;

/// A key just made: the full token to hand to the caller once, and the row to store.
#[derive(Debug, Clone)]
pub struct IssuedKey {
    /// `kai_<prefix>_<secret>`; never stored.
    pub token: String,
    /// What is stored.
    pub key: ApiKey,
}

fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    rand::rng().fill_bytes(&mut buf);
    hex::encode(buf)
}

/// Lowercase hex SHA-256 of a key's secret part.
pub fn hash_secret(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// A new random key for `tenant` with `role`.
pub fn issue(
    tenant: &str,
    role: Role,
    name: Option<String>,
    expires_at: Option<Millis>,
    now: Millis,
) -> IssuedKey {
    let prefix = random_hex(PREFIX_HEX / 2);
    let secret = random_hex(SECRET_BYTES);
    IssuedKey {
        token: format!("{KEY_PREFIX}{prefix}_{secret}"),
        key: ApiKey {
            prefix,
            tenant: tenant.to_string(),
            role,
            secret_hash: hash_secret(&secret),
            name,
            expires_at,
            revoked_at: None,
            created_at: now,
        },
    }
}

/// A random callback signing secret (256 bits, hex).
pub fn new_callback_secret() -> String {
    format!("whsec_{}", random_hex(SECRET_BYTES))
}

/// `(prefix, secret)` of a well-formed token, `None` otherwise.
pub fn parse(token: &str) -> Option<(&str, &str)> {
    let rest = token.strip_prefix(KEY_PREFIX)?;
    let (prefix, secret) = rest.split_once('_')?;
    let hex_of = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    (hex_of(prefix, PREFIX_HEX) && hex_of(secret, SECRET_BYTES * 2)).then_some((prefix, secret))
}

/// Whether `secret` hashes to `stored_hash`, comparing in constant time.
pub fn secret_matches(secret: &str, stored_hash: &str) -> bool {
    let ours = hash_secret(secret);
    let (a, b) = (ours.as_bytes(), stored_hash.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issued_keys_parse_and_verify() {
        let issued = issue("acme", Role::Write, None, None, 1);
        let (prefix, secret) = parse(&issued.token).expect("well formed");
        assert_eq!(prefix, issued.key.prefix);
        assert!(secret_matches(secret, &issued.key.secret_hash));
        assert!(!issued.key.secret_hash.contains(secret));
        let other = issue("acme", Role::Write, None, None, 1);
        assert_ne!(other.token, issued.token);
        assert!(!secret_matches(secret, &other.key.secret_hash));
    }

    #[test]
    fn malformed_tokens_are_refused() {
        for t in [
            "",
            "kai_",
            "kai_abc_def",
            "Bearer kai_x",
            "kai_0123456789ab_zz",
            "xyz_0123456789ab_0123",
        ] {
            assert_eq!(parse(t), None, "{t:?}");
        }
    }
}
