use super::*;

fn node(id: &str) -> NodeSpec {
    NodeSpec {
        id: id.into(),
        handler: "h".into(),
        params: serde_json::Value::Null,
        timeout_ms: None,
        max_attempts: 1,
        retry_backoff_ms: 1_000,
        worker_group: None,
    }
}

fn edge(from: &str, to: &str, condition: EdgeCondition) -> Edge {
    Edge {
        from: from.into(),
        to: to.into(),
        condition,
    }
}

fn wf(nodes: &[&str], edges: &[(&str, &str, EdgeCondition)]) -> Workflow {
    Workflow {
        nodes: nodes.iter().map(|n| node(n)).collect(),
        edges: edges.iter().map(|(f, t, c)| edge(f, t, *c)).collect(),
    }
}

use EdgeCondition::{Always, OnFailure, OnSuccess};
use NodeStatus::*;

/// 1 → 3 in parallel → 1.
fn diamond() -> Workflow {
    wf(
        &["a", "b1", "b2", "b3", "c"],
        &[
            ("a", "b1", OnSuccess),
            ("a", "b2", OnSuccess),
            ("a", "b3", OnSuccess),
            ("b1", "c", OnSuccess),
            ("b2", "c", OnSuccess),
            ("b3", "c", OnSuccess),
        ],
    )
}

fn states(list: &[(&str, NodeStatus)]) -> HashMap<String, NodeStatus> {
    list.iter().map(|(n, s)| (n.to_string(), *s)).collect()
}

#[test]
fn a_valid_dag_passes() {
    assert_eq!(diamond().validate(DEFAULT_MAX_NODES), Ok(()));
}

#[test]
fn invalid_graphs_name_the_offending_node() {
    let cyc = wf(
        &["a", "b", "c", "d"],
        &[
            ("a", "b", OnSuccess),
            ("b", "c", OnSuccess),
            ("c", "b", OnSuccess),
            ("c", "d", OnSuccess),
        ],
    );
    let err = cyc.validate(10).unwrap_err();
    assert_eq!(err.code(), "cycle");
    assert!(matches!(err.node(), Some("b" | "c")), "{err:?}");

    let self_loop = wf(&["a"], &[("a", "a", Always)]);
    assert_eq!(
        self_loop.validate(10),
        Err(DagError::Cycle { node: "a".into() })
    );

    let unknown = wf(&["a"], &[("a", "zz", OnSuccess)]);
    assert_eq!(unknown.validate(10).unwrap_err().node(), Some("zz"));

    let dup = wf(&["a", "b", "a"], &[]);
    assert_eq!(
        dup.validate(10),
        Err(DagError::DuplicateNode { node: "a".into() })
    );

    let big = wf(&["a", "b", "c"], &[]);
    let err = big.validate(2).unwrap_err();
    assert_eq!((err.code(), err.node()), ("too_many_nodes", Some("c")));

    let bad = wf(&["a b"], &[]);
    assert_eq!(bad.validate(10).unwrap_err().code(), "invalid_node_id");
    assert_eq!(wf(&[], &[]).validate(10), Err(DagError::Empty));
    let twice = wf(&["a", "b"], &[("a", "b", OnSuccess), ("a", "b", Always)]);
    assert_eq!(twice.validate(10).unwrap_err().code(), "duplicate_edge");
}

#[test]
fn definitions_read_with_defaults() {
    let w: Workflow = serde_json::from_value(serde_json::json!({
        "nodes": [{"id": "a", "handler": "h"}, {"id": "b", "handler": "h", "maxAttempts": 3}],
        "edges": [{"from": "a", "to": "b"}, {"from": "a", "to": "b", "condition": "onFailure"}]
    }))
    .unwrap();
    assert_eq!(w.nodes[0].max_attempts, 1);
    assert_eq!(w.nodes[1].max_attempts, 3);
    assert_eq!(w.edges[0].condition, OnSuccess);
    assert_eq!(w.edges[1].condition, OnFailure);
}

#[test]
fn a_new_run_starts_its_roots() {
    let step = advance(&diamond(), &HashMap::new());
    assert_eq!(step.due, vec!["a"]);
    assert!(step.skipped.is_empty());
    assert_eq!(step.finished, None);
}

#[test]
fn children_are_due_when_their_parent_succeeded_and_the_fan_in_waits_for_all() {
    let w = diamond();
    let step = advance(&w, &states(&[("a", Succeeded)]));
    assert_eq!(step.due, vec!["b1", "b2", "b3"]);
    let step = advance(
        &w,
        &states(&[
            ("a", Succeeded),
            ("b1", Succeeded),
            ("b2", Succeeded),
            ("b3", Active),
        ]),
    );
    assert_eq!(step, Step::default(), "c waits for b3");
    let all = states(&[
        ("a", Succeeded),
        ("b1", Succeeded),
        ("b2", Succeeded),
        ("b3", Succeeded),
    ]);
    assert_eq!(advance(&w, &all).due, vec!["c"]);
    let mut done = all;
    done.insert("c".into(), Succeeded);
    assert_eq!(advance(&w, &done).finished, Some(RunStatus::Succeeded));
}

#[test]
fn a_failed_middle_node_skips_the_fan_in_and_fails_the_run() {
    let w = diamond();
    let s = states(&[
        ("a", Succeeded),
        ("b1", Succeeded),
        ("b2", Failed),
        ("b3", Succeeded),
    ]);
    let step = advance(&w, &s);
    assert_eq!(step.skipped, vec!["c"]);
    assert!(step.due.is_empty());
    assert_eq!(step.finished, Some(RunStatus::Failed));
}

#[test]
fn an_on_failure_branch_runs_and_handles_the_failure() {
    let w = wf(
        &["a", "ok", "fix"],
        &[("a", "ok", OnSuccess), ("a", "fix", OnFailure)],
    );
    let step = advance(&w, &states(&[("a", Failed)]));
    assert_eq!(step.due, vec!["fix"]);
    assert_eq!(step.skipped, vec!["ok"]);
    assert_eq!(step.finished, None);
    let end = advance(
        &w,
        &states(&[("a", Failed), ("ok", Skipped), ("fix", Succeeded)]),
    );
    assert_eq!(end.finished, Some(RunStatus::Succeeded));
    // The same run where `a` succeeded skips the repair branch.
    let step = advance(&w, &states(&[("a", Succeeded)]));
    assert_eq!(
        (step.due, step.skipped),
        (vec!["ok".into()], vec!["fix".into()])
    );
}

#[test]
fn skips_cascade_and_always_edges_still_run() {
    let w = wf(
        &["a", "b", "c", "cleanup"],
        &[
            ("a", "b", OnSuccess),
            ("b", "c", OnSuccess),
            ("c", "cleanup", Always),
        ],
    );
    let step = advance(&w, &states(&[("a", Failed)]));
    assert_eq!(step.skipped, vec!["b", "c"]);
    assert_eq!(step.due, vec!["cleanup"]);
    let end = advance(
        &w,
        &states(&[
            ("a", Failed),
            ("b", Skipped),
            ("c", Skipped),
            ("cleanup", Succeeded),
        ]),
    );
    assert_eq!(
        end.finished,
        Some(RunStatus::Failed),
        "a's failure is not handled"
    );
}

#[test]
fn a_cancelled_node_ends_the_run_cancelled() {
    let w = wf(&["a", "b"], &[("a", "b", Always)]);
    let step = advance(&w, &states(&[("a", Cancelled)]));
    assert_eq!(step.skipped, vec!["b"]);
    assert_eq!(step.finished, Some(RunStatus::Cancelled));
}

#[test]
fn node_and_run_moves_are_legal_only_from_their_states() {
    assert!(NodeTransition::Start.allowed_from(Waiting));
    assert!(!NodeTransition::Start.allowed_from(Active));
    assert!(NodeTransition::Settle(Succeeded).allowed_from(Active));
    assert!(!NodeTransition::Settle(Succeeded).allowed_from(Cancelled));
    assert!(NodeTransition::Cancel.allowed_from(Active));
    assert!(!NodeTransition::Cancel.allowed_from(Succeeded));
    for end in [
        RunStatus::Succeeded,
        RunStatus::Failed,
        RunStatus::Cancelled,
    ] {
        let t = RunTransition::ending_in(end).unwrap();
        assert!(t.allowed_from(RunStatus::Running));
        for from in RunStatus::ALL.into_iter().filter(|s| s.is_terminal()) {
            assert!(!t.allowed_from(from), "{from:?} is final");
        }
    }
    for s in NodeStatus::ALL {
        assert_eq!(NodeStatus::parse(s.as_str()), Some(s));
    }
    assert_eq!(NodeStatus::of_execution(ExecStatus::TimedOut), Some(Failed));
    assert_eq!(NodeStatus::of_execution(ExecStatus::Running), None);
}

#[test]
fn only_active_workflows_pause_only_paused_ones_resume_and_deleted_ones_stay() {
    use WorkflowStatus::{Active, Deleted, Paused};
    let t = WorkflowTransition::Pause;
    assert!(t.allowed_from(Active) && !t.allowed_from(Paused) && !t.allowed_from(Deleted));
    assert_eq!(t.to_state(Active), Paused);
    let r = WorkflowTransition::Resume;
    assert!(r.allowed_from(Paused) && !r.allowed_from(Active) && !r.allowed_from(Deleted));
    assert_eq!(r.to_state(Paused), Active);
    for t in [WorkflowTransition::Edit, WorkflowTransition::Delete] {
        assert!(t.allowed_from(Active) && t.allowed_from(Paused) && !t.allowed_from(Deleted));
    }
    assert_eq!(WorkflowTransition::Edit.to_state(Paused), Paused);
    assert!(triggerable(Active) && !triggerable(Paused) && !triggerable(Deleted));
    for s in [Active, Paused, Deleted] {
        assert_eq!(WorkflowStatus::parse(s.as_str()), Some(s));
    }
}

#[test]
fn a_resume_fires_a_missed_trigger_once_unless_the_policy_skips_it() {
    use crate::schedule::{MisfirePolicy, Schedule};
    let t0 = 1_767_225_600_000;
    let cron = Schedule::cron("*/10 * * * * *", "UTC");
    assert_eq!(
        resumed_next_trigger(Some(&cron), Some(t0 + 10_000), t0 + 35_000),
        Some(t0 + 10_000),
        "fireOnce: the missed one, late"
    );
    let mut skip = cron.clone();
    if let Schedule::Recurring(r) = &mut skip {
        r.misfire = MisfirePolicy::Skip;
    }
    assert_eq!(
        resumed_next_trigger(Some(&skip), Some(t0 + 10_000), t0 + 35_000),
        Some(t0 + 40_000)
    );
    assert_eq!(
        resumed_next_trigger(Some(&skip), Some(t0 + 40_000), t0 + 35_000),
        Some(t0 + 40_000),
        "nothing missed: unchanged"
    );
    assert_eq!(resumed_next_trigger(None, None, t0), None);
}

#[test]
fn a_run_end_payload_names_the_run_and_each_node_execution() {
    let run = WorkflowRun {
        id: "r".into(),
        workflow_id: "w".into(),
        tenant: "t".into(),
        status: RunStatus::Failed,
        scheduled_at: 0,
        created_at: 0,
        finished_at: Some(5),
        definition_version: 1,
    };
    let ran = RunNode {
        node_id: "a".into(),
        status: NodeStatus::Failed,
        execution_id: Some("e".into()),
        execution_status: Some(ExecStatus::TimedOut),
        attempt: Some(2),
        decided_at: Some(0),
        started_at: Some(1),
        finished_at: Some(4),
    };
    let skipped = RunNode {
        node_id: "b".into(),
        status: NodeStatus::Skipped,
        execution_id: None,
        execution_status: None,
        attempt: None,
        decided_at: Some(4),
        started_at: None,
        finished_at: None,
    };
    let body = crate::callback::run_payload(&run, &[ran, skipped]);
    assert_eq!(body["event"], crate::callback::RUN_ENDED_EVENT);
    assert_eq!(
        (body["workflowId"].as_str(), body["runId"].as_str()),
        (Some("w"), Some("r"))
    );
    assert_eq!(body["status"], "failed");
    assert_eq!(body["nodes"][0]["executionId"], "e");
    assert_eq!(body["nodes"][0]["executionStatus"], "timed_out");
    assert_eq!(body["nodes"][1]["state"], "skipped");
    assert!(body["nodes"][1]["executionId"].is_null());
    assert!(
        body.get("jobId").is_none(),
        "told apart from a job's callback"
    );
}
