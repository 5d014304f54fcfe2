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
