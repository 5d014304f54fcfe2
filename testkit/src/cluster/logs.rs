//! Copies of the children's stderr: each process's output goes to the
//! terminal as before and to a file a test can read back.

use std::io::{Read, Write};
use std::path::Path;

/// Copies a child's stderr to the terminal and to `path` until the child
/// closes it (exits or is killed).
pub(super) fn tee(mut from: impl Read + Send + 'static, path: &Path) {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap_or_else(|e| panic!("cannot open {}: {e}", path.display()));
    std::thread::spawn(move || {
        let mut buf = [0u8; 8192];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    let _ = file.write_all(&buf[..n]);
                    let _ = std::io::stderr().write_all(&buf[..n]);
                }
            }
        }
    });
}

/// `text` without ANSI escape sequences (`ESC [ … letter`).
pub(super) fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}
