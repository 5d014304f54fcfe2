//! The Dockerfile's dependency-cache layer, proven without a Docker engine:
//! it must copy the manifest of every workspace member (a missing one fails
//! the workspace load, and the layer with it), write a placeholder source for
//! each, refresh each one's real sources afterwards, and never hide a failure.
//! The layer is then replayed in a scratch directory, and cargo must load
//! the workspace there.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn dockerfile() -> String {
    std::fs::read_to_string(root().join("Dockerfile")).expect("read Dockerfile")
}

/// `members` of the root Cargo.toml's `[workspace]`.
fn members() -> BTreeSet<String> {
    let text = std::fs::read_to_string(root().join("Cargo.toml")).expect("read Cargo.toml");
    let doc: toml::Table = text.parse().expect("Cargo.toml is TOML");
    doc["workspace"]["members"]
        .as_array()
        .expect("workspace members")
        .iter()
        .map(|m| m.as_str().expect("a member is a path").to_string())
        .collect()
}

/// Dockerfile lines joined across `\` continuations.
fn instructions(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for line in text.lines() {
        let line = line.trim();
        if cur.is_empty() && (line.is_empty() || line.starts_with('#')) {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(head) => {
                cur.push_str(head);
                cur.push(' ');
            }
            None => {
                cur.push_str(line);
                out.push(std::mem::take(&mut cur));
            }
        }
    }
    out
}

/// Members whose manifest the build stage copies before `COPY . .`.
fn copied_manifests(text: &str) -> BTreeSet<String> {
    instructions(text)
        .iter()
        .take_while(|i| i.as_str() != "COPY . .")
        .filter_map(|i| i.strip_prefix("COPY "))
        .filter_map(|args| args.split_whitespace().next())
        .filter_map(|src| src.strip_suffix("/Cargo.toml"))
        .map(str::to_string)
        .collect()
}

/// The words of the shell `for d in …; do` loop writing placeholder sources.
fn placeholder_dirs(text: &str) -> BTreeSet<String> {
    let all = instructions(text);
    let run = all
        .iter()
        .find(|i| i.starts_with("RUN for d in "))
        .expect("a RUN writing placeholder sources");
    let list = &run["RUN for d in ".len()..];
    let end = list.find("; do").expect("the loop's `; do`");
    list[..end].split_whitespace().map(str::to_string).collect()
}

/// The directories whose real sources are touched after `COPY . .`.
fn touched_dirs(text: &str) -> BTreeSet<String> {
    let all = instructions(text);
    let run = all
        .iter()
        .find(|i| i.starts_with("RUN find "))
        .expect("a RUN touching the real sources");
    let list = &run["RUN find ".len()..];
    let end = list.find(" -name").expect("find's -name");
    list[..end].split_whitespace().map(str::to_string).collect()
}

#[test]
fn the_cache_layer_copies_every_workspace_manifest() {
    let text = dockerfile();
    let members = members();
    assert_eq!(
        copied_manifests(&text),
        members,
        "the Dockerfile's manifest COPY lines must match Cargo.toml's workspace members"
    );
    assert_eq!(
        placeholder_dirs(&text),
        members,
        "the Dockerfile's placeholder loop must cover every workspace member"
    );
    let touched = touched_dirs(&text);
    for m in &members {
        let top = m.split('/').next().unwrap_or(m);
        assert!(
            touched.contains(top),
            "the Dockerfile does not refresh the real sources of {m} after `COPY . .`"
        );
    }
}

#[test]
fn no_build_step_hides_a_failure() {
    let text = dockerfile();
    for i in instructions(&text) {
        assert!(
            !i.contains("|| true") && !i.contains("||true"),
            "a Dockerfile step ignores its failure: {i}"
        );
    }
}

/// Copies `rel` from the repository into `dir`, creating parents.
fn copy_in(dir: &Path, rel: &str) {
    let to = dir.join(rel);
    std::fs::create_dir_all(to.parent().expect("a parent")).expect("mkdir");
    std::fs::copy(root().join(rel), &to).unwrap_or_else(|e| panic!("copy {rel}: {e}"));
}

#[test]
fn cargo_loads_the_workspace_the_cache_layer_builds() {
    let text = dockerfile();
    let scratch = std::env::temp_dir().join(format!("kairos-dockerfile-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).expect("mkdir scratch");
    copy_in(&scratch, "Cargo.toml");
    copy_in(&scratch, "Cargo.lock");
    for m in copied_manifests(&text) {
        copy_in(&scratch, &format!("{m}/Cargo.toml"));
    }
    for d in placeholder_dirs(&text) {
        let src = scratch.join(&d).join("src");
        std::fs::create_dir_all(&src).expect("mkdir src");
        std::fs::write(src.join("lib.rs"), "").expect("placeholder");
    }
    for (dir, file) in [("src", "main.rs"), ("benches", "latency.rs")] {
        std::fs::create_dir_all(scratch.join(dir)).expect("mkdir");
        std::fs::write(scratch.join(dir).join(file), "fn main() {}\n").expect("placeholder");
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--no-deps",
            "--offline",
            "--format-version",
            "1",
        ])
        .current_dir(&scratch)
        .output()
        .expect("run cargo metadata");
    let _ = std::fs::remove_dir_all(&scratch);
    assert!(
        out.status.success(),
        "cargo cannot load the workspace of the Dockerfile's cache layer:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
