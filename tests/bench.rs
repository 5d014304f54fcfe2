//! `kairos bench` as a user runs it: the embedded deployment it starts
//! itself, every workload, figures written as JSON. Checks that the figures
//! exist and are consistent, not how large they are (a benchmark measures;
//! tests do not time things).

use serde_json::Value;
use std::process::Command;

fn bench(args: &[&str]) -> Value {
    let json = std::env::temp_dir().join(format!(
        "kairos-bench-test-{}-{}.json",
        std::process::id(),
        args[0]
    ));
    let out = Command::new(env!("CARGO_BIN_EXE_kairos"))
        .arg("bench")
        .args(args)
        .arg("--json")
        .arg(&json)
        .env("KAIROS_LOG", "warn")
        .output()
        .expect("run kairos bench");
    assert!(
        out.status.success(),
        "kairos bench {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&json).expect("JSON written");
    let _ = std::fs::remove_file(&json);
    serde_json::from_str(&text).expect("valid JSON")
}

fn series<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["latencies"]
        .as_array()
        .and_then(|l| l.iter().find(|s| s["name"] == name))
        .unwrap_or_else(|| panic!("no series {name:?} in {report}"))
}

#[test]
fn create_reports_every_job_from_server_timestamps() {
    let report = bench(&["create", "-n", "60", "-c", "4"]);
    assert_eq!(report["workload"], "create");
    let succeeded = series(&report, "create → succeeded");
    assert_eq!(succeeded["samples"], 60, "{report}");
    let (p50, p99, max) = (
        succeeded["p50_ms"].as_f64().unwrap(),
        succeeded["p99_ms"].as_f64().unwrap(),
        succeeded["max_ms"].as_f64().unwrap(),
    );
    assert!(0.0 <= p50 && p50 <= p99 && p99 <= max, "{report}");
    let started = series(&report, "create → started");
    assert!(started["p50_ms"].as_f64().unwrap() <= p50, "{report}");
}

#[test]
fn burst_and_cron_report_their_figures() {
    let burst = bench(&["burst", "-n", "40", "-c", "4", "--lead-ms", "2000"]);
    assert_eq!(series(&burst, "due → succeeded")["samples"], 40, "{burst}");
    let bulk = bench(&["burst", "-n", "45", "--batch", "20", "--lead-ms", "2000"]);
    assert_eq!(series(&bulk, "due → succeeded")["samples"], 45, "{bulk}");
    assert_eq!(
        series(&bulk, "batch of 20 (HTTP round trip)")["samples"],
        3,
        "{bulk}"
    );
    let cron = bench(&["cron", "--schedules", "3", "--seconds", "2"]);
    let lateness = series(&cron, "scheduled → started (lateness)");
    assert!(lateness["samples"].as_u64().unwrap() >= 3, "{cron}");
}

#[test]
fn priority_reports_both_groups() {
    let report = bench(&[
        "priority",
        "-n",
        "300",
        "--batch",
        "100",
        "--lead-ms",
        "3000",
    ]);
    assert_eq!(report["workload"], "priority");
    assert_eq!(
        series(&report, "priority 9: due → succeeded")["samples"],
        100,
        "{report}"
    );
    assert_eq!(
        series(&report, "priority 0: due → succeeded")["samples"],
        300,
        "{report}"
    );
    let before = figure(
        &report,
        "priority 0 jobs finished before the last priority 9 one",
    );
    assert!((0.0..=300.0).contains(&before), "{report}");
}

fn figure(report: &Value, name: &str) -> f64 {
    report["figures"]
        .as_array()
        .and_then(|f| f.iter().find(|x| x["name"] == name))
        .and_then(|x| x["value"].as_f64())
        .unwrap_or_else(|| panic!("no figure {name:?} in {report}"))
}

#[test]
fn preloaded_jobs_are_stored_before_the_workload_and_left_alone() {
    let report = bench(&[
        "create",
        "-n",
        "20",
        "-c",
        "4",
        "--preload",
        "2500",
        "--preload-cron",
        "5",
    ]);
    assert_eq!(figure(&report, "preloaded future jobs"), 2500.0, "{report}");
    assert_eq!(
        figure(&report, "preloaded every-minute schedules"),
        5.0,
        "{report}"
    );
    assert_eq!(
        series(&report, "create → succeeded")["samples"],
        20,
        "only the workload's own jobs are measured: {report}"
    );
}
