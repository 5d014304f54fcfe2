//! The `Kairos-Signature` header: `t=<unix seconds>,v1=<lowercase hex
//! HMAC-SHA256(secret, "<t>.<raw body>")>`, made by the relay and checked by
//! receivers.
//!
//! Binding the timestamp into the MAC lets a receiver reject replays older
//! than its tolerance without trusting an unsigned header.

use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

fn mac(secret: &[u8], t: i64, body: &[u8]) -> HmacSha256 {
    // HMAC hashes over-long keys and pads short ones: every length is accepted.
    let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC takes keys of any length");
    mac.update(t.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac
}

/// The header value for `body` signed at unix time `t` (seconds).
pub fn sign(secret: &[u8], t: i64, body: &[u8]) -> String {
    let digest = mac(secret, t, body).finalize().into_bytes();
    format!("t={t},v1={}", hex::encode(digest))
}

/// The header value signed with each of `secrets` (one `v1=` per secret, in
/// order): during a secret rotation the new secret first, then the old one,
/// so receivers holding either verify.
pub fn sign_all(secrets: &[&[u8]], t: i64, body: &[u8]) -> String {
    let mut header = format!("t={t}");
    for secret in secrets {
        let digest = mac(secret, t, body).finalize().into_bytes();
        header.push_str(",v1=");
        header.push_str(&hex::encode(digest));
    }
    header
}

/// Whether `header` is a valid signature of `body` made within
/// `tolerance_secs` of `now` (unix seconds). Any `v1` entry may match, so a
/// sender can list several during a secret rotation. The digest comparison is
/// constant-time.
pub fn verify(secret: &[u8], header: &str, body: &[u8], now: i64, tolerance_secs: i64) -> bool {
    let mut t = None;
    let mut candidates = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", v)) => t = v.parse::<i64>().ok(),
            Some(("v1", v)) => candidates.push(v),
            _ => {}
        }
    }
    let Some(t) = t else { return false };
    if now.abs_diff(t) > tolerance_secs.unsigned_abs() {
        return false;
    }
    let expected = mac(secret, t, body);
    candidates
        .into_iter()
        .any(|v| hex::decode(v).is_ok_and(|bytes| expected.clone().verify_slice(&bytes).is_ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"whsec_test";
    const BODY: &[u8] = br#"{"jobId":"j","status":"succeeded"}"#;

    #[test]
    fn signature_has_the_documented_shape() {
        let h = sign(SECRET, 1_767_225_600, BODY);
        let (t, v1) = h.split_once(",v1=").unwrap();
        assert_eq!(t, "t=1767225600");
        assert_eq!(v1.len(), 64);
        assert!(
            v1.chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
        );
    }

    #[test]
    fn known_vector() {
        // printf '1.{}' | openssl dgst -sha256 -hmac key
        assert_eq!(
            sign(b"key", 1, b"{}"),
            "t=1,v1=1ba6b8171186efc613e8bcc0cbdab2748f24984d7c5a84faa2637afa0e40d224"
        );
    }

    #[test]
    fn round_trip_verifies() {
        let now = 1_767_225_600;
        let h = sign(SECRET, now, BODY);
        assert!(verify(SECRET, &h, BODY, now, 300));
        assert!(verify(SECRET, &h, BODY, now + 299, 300));
        assert!(verify(SECRET, &format!("v1=00, {h}"), BODY, now, 300));
    }

    #[test]
    fn a_rotation_signs_with_both_secrets() {
        let now = 1_767_225_600;
        let h = sign_all(&[b"new", b"old"], now, BODY);
        assert_eq!(h.matches(",v1=").count(), 2);
        assert!(h.starts_with(&sign(b"new", now, BODY)));
        assert!(verify(b"new", &h, BODY, now, 300));
        assert!(
            verify(b"old", &h, BODY, now, 300),
            "a receiver with the old secret"
        );
        assert!(!verify(b"other", &h, BODY, now, 300));
    }

    #[test]
    fn tampering_is_detected() {
        let now = 1_767_225_600;
        let h = sign(SECRET, now, BODY);
        assert!(!verify(
            SECRET,
            &h,
            br#"{"jobId":"j","status":"failed"}"#,
            now,
            300
        ));
        assert!(!verify(b"other-secret", &h, BODY, now, 300));
        let shifted = h.replace(&format!("t={now}"), &format!("t={}", now + 1));
        assert!(!verify(SECRET, &shifted, BODY, now, 300));
        assert!(!verify(SECRET, &h, BODY, now + 301, 300), "too old");
        assert!(!verify(SECRET, "v1=abc", BODY, now, 300), "no timestamp");
        assert!(!verify(SECRET, "garbage", BODY, now, 300));
    }
}
