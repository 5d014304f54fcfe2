//! The Kubernetes manifests' wiring (`deploy/kubernetes`), which a schema
//! check cannot see: every container runs a real subcommand and is given
//! only `KAIROS_*` settings that subcommand reads (its own `--help`) and the
//! README documents; probes reach the port and paths the process serves;
//! workers get longer than their drain to stop; the schema changes only in
//! the migrate Job (no pod migrates on start); every Deployment spreads its
//! pods; every container names the placeholder image kustomization.yaml
//! replaces; the HPA scales the worker
//! Deployment on gauges the worker exports; each PDB and Service selects a
//! Deployment's pods.
//!
//! `deploy/kubernetes/validate.sh` (run by `.ci/run`) checks the schemas.

#[path = "kubernetes/checks.rs"]
mod checks;

use checks::{Facts, PROCESSES, problems, strings};
use serde::Deserialize;
use serde_yaml::Value;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every document of every file kustomization.yaml lists, with its file.
fn manifests() -> Vec<(String, Value)> {
    let dir = root().join("deploy/kubernetes");
    let read = |name: &str| {
        std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("read {name}: {e}"))
    };
    let kustomization: Value = serde_yaml::from_str(&read("kustomization.yaml")).unwrap();
    let mut docs = Vec::new();
    for file in strings(&kustomization["resources"]) {
        for de in serde_yaml::Deserializer::from_str(&read(&file)) {
            let doc = Value::deserialize(de).unwrap_or_else(|e| panic!("{file}: {e}"));
            if !doc.is_null() {
                docs.push((file.clone(), doc));
            }
        }
    }
    assert!(
        docs.len() > 10,
        "the manifests hold only {} documents",
        docs.len()
    );
    docs
}

/// Every `<prefix>NAME` in `text`, NAME being upper case, digits and `_`.
fn names(text: &str, prefix: &str) -> BTreeSet<String> {
    text.match_indices(prefix)
        .map(|(i, _)| {
            let rest = &text[i + prefix.len()..];
            let end = rest
                .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
                .unwrap_or(rest.len());
            format!("{prefix}{}", &rest[..end])
        })
        .collect()
}

fn help(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_kairos"))
        .args(args)
        .arg("--help")
        .output()
        .expect("run kairos --help");
    assert!(out.status.success(), "kairos {args:?} --help failed");
    String::from_utf8(out.stdout).unwrap()
}

fn facts() -> Facts {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let documented: BTreeSet<String> = readme
        .lines()
        .filter(|l| l.starts_with("| `KAIROS_"))
        .flat_map(|l| names(l.split('|').nth(1).unwrap_or(""), "KAIROS_"))
        .collect();
    // The top-level help names what every process reads (logging, traces).
    let everywhere = names(&help(&[]), "KAIROS_");
    assert!(everywhere.contains("KAIROS_LOG_FORMAT"), "{everywhere:?}");
    let reads = PROCESSES
        .iter()
        .map(|p| (*p, &names(&help(&[p]), "KAIROS_") | &everywhere))
        .collect();
    let metrics = std::fs::read_to_string(root().join("worker/src/metrics.rs")).unwrap();
    let worker_gauges = metrics
        .match_indices("gauge!(\"")
        .map(|(i, m)| {
            metrics[i + m.len()..]
                .split('"')
                .next()
                .unwrap()
                .to_string()
        })
        .collect();
    Facts {
        documented,
        reads,
        worker_gauges,
    }
}

#[test]
fn the_manifests_are_wired_to_what_kairos_reads_and_serves() {
    let problems = problems(&manifests(), &facts());
    assert!(
        problems.is_empty(),
        "deploy/kubernetes:\n{}",
        problems.join("\n")
    );
}

/// Each break of the wiring is reported, so the test above can fail.
#[test]
fn broken_wiring_is_reported() {
    let facts = facts();
    let find = |docs: &mut Vec<(String, Value)>, kind: &str, name: &str| -> usize {
        docs.iter()
            .position(|(_, d)| {
                d["kind"].as_str() == Some(kind) && d["metadata"]["name"].as_str() == Some(name)
            })
            .unwrap_or_else(|| panic!("no {kind} {name}"))
    };
    // (resource, path to change, new value, the problem expected)
    let cases = [
        (
            "Deployment/kairos-worker",
            "spec template spec terminationGracePeriodSeconds",
            "30",
            "terminationGracePeriodSeconds",
        ),
        (
            "Deployment/kairos-dispatcher",
            "spec template spec containers 0 readinessProbe httpGet port",
            "8080",
            "readinessProbe must get /readyz on port 9090",
        ),
        (
            "Deployment/kairos-api",
            "spec template spec containers 0 env 0 name",
            "KAIROS_LEASE_TTL_MS",
            "`kairos api` does not read KAIROS_LEASE_TTL_MS",
        ),
        (
            "Deployment/kairos-api",
            "spec template spec containers 0 args 0",
            "server",
            "are not one of",
        ),
        (
            "Deployment/kairos-api",
            "spec template spec initContainers",
            "[{name: migrate, image: 'registry.invalid/kairos:SET-ME', args: [migrate]}]",
            "migrations run as the Job only",
        ),
        (
            "Deployment/kairos-callback-relay",
            "spec template spec topologySpreadConstraints",
            "[]",
            "not spread across nodes",
        ),
        (
            "Deployment/kairos-worker",
            "spec template spec containers 0 image",
            "kairos:latest",
            "not the kairos image",
        ),
        (
            "Job/kairos-migrate",
            "spec template spec containers 0 args 0",
            "api",
            "no Job runs `kairos migrate`",
        ),
        (
            "Deployment/kairos-dispatcher",
            "spec replicas",
            "1",
            "no failover",
        ),
        (
            "HorizontalPodAutoscaler/kairos-worker",
            "spec scaleTargetRef name",
            "kairos-workers",
            "does not target the worker Deployment",
        ),
        (
            "HorizontalPodAutoscaler/kairos-worker",
            "spec metrics 0 pods target averageValue",
            "32",
            "never reached",
        ),
        (
            "PodDisruptionBudget/kairos-worker",
            "spec selector matchLabels app.kubernetes.io/component",
            "workers",
            "selects no Deployment",
        ),
    ];
    for (resource, path, value, expected) in cases {
        let (kind, name) = resource.split_once('/').unwrap();
        let mut docs = manifests();
        let i = find(&mut docs, kind, name);
        let mut at = &mut docs[i].1;
        for key in path.split(' ') {
            at = match key.parse::<usize>() {
                Ok(n) => &mut at[n],
                Err(_) => &mut at[key],
            };
        }
        *at = serde_yaml::from_str(value).unwrap();
        let found = problems(&docs, &facts);
        assert!(
            found.iter().any(|p| p.contains(expected)),
            "breaking {resource} at {path} should report {expected:?}, got {found:?}"
        );
    }
}

/// Deployed without its placeholders replaced, every process refuses to
/// start, naming the settings (not their values).
#[test]
fn the_shipped_placeholder_secrets_are_refused_at_start() {
    let docs = manifests();
    let secret = docs
        .iter()
        .find(|(_, d)| d["kind"].as_str() == Some("Secret"))
        .map(|(_, d)| d)
        .expect("a Secret");
    let values = secret["stringData"].as_mapping().expect("stringData");
    for process in ["migrate", "api", "dispatcher", "worker", "callback-relay"] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_kairos"));
        cmd.arg(process);
        for (k, v) in values {
            cmd.env(k.as_str().unwrap(), v.as_str().unwrap());
        }
        let out = cmd.output().expect("run kairos");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "kairos {process} started: {err}");
        assert!(
            err.contains("KAIROS_DATABASE_URL")
                && err.contains("KAIROS_AMQP_URL")
                && err.contains("still hold the placeholder CHANGE-ME"),
            "kairos {process}: {err}"
        );
        assert!(
            !err.contains("example.internal"),
            "values are never shown: {err}"
        );
    }
}
