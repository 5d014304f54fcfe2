//! Workflows: a DAG of job templates (nodes) joined by conditional edges,
//! validated once when it is defined ([`Workflow::validate`]), and the state
//! machines of its runs ([`RunStatus`]) and of each node in a run
//! ([`NodeStatus`]), with the pure decision of what a run does next
//! ([`advance`]).
//!
//! # The rule
//!
//! - A node is *decided* once every parent is settled (succeeded, failed,
//!   skipped or cancelled). It then becomes **due** if every incoming edge's
//!   condition holds, and is **skipped** otherwise. A node without parents
//!   (a root) is due when the run starts.
//! - `onSuccess` (the default) holds when the parent succeeded; `onFailure`
//!   when it failed (after its retries: failed, timed out or lost);
//!   `always` when it succeeded, failed or was skipped. A cancelled parent
//!   satisfies no condition.
//! - Skipping cascades: a skipped node settles at once, so its children are
//!   decided in the same step.
//! - The run ends when every node is settled. It is **cancelled** if a node
//!   was cancelled (the run was cancelled, or a node's execution was
//!   stopped from outside); else **failed** if some node failed and none of
//!   its outgoing edges is `onFailure` or `always` (an *unhandled*
//!   failure); else **succeeded**. Skipped nodes never fail a run. A run
//!   does not stop early on a failure: independent branches run to their
//!   end, so what they did is recorded, and the run ends with them.

pub mod budget;
pub mod followup;
mod store;
#[cfg(test)]
mod tests;

pub use store::*;

use crate::execution::ExecStatus;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};

/// Default for [`Workflow::validate`]'s node limit (`KAIROS_WORKFLOW_MAX_NODES`).
pub const DEFAULT_MAX_NODES: usize = 100;
/// Longest node id.
pub const MAX_NODE_ID_LEN: usize = 64;

/// One node: a job template a run executes once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeSpec {
    /// Id within the workflow (letters, digits, `-`, `_`, `.`).
    pub id: String,
    /// Handler a worker runs.
    pub handler: String,
    /// Handler input.
    #[serde(default)]
    pub params: serde_json::Value,
    /// Handler time limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Attempts in all, including the first.
    #[serde(default = "one")]
    pub max_attempts: u32,
    /// Delay before the second attempt (doubles after).
    #[serde(default = "default_backoff")]
    pub retry_backoff_ms: u64,
    /// Only workers of this group run it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_group: Option<String>,
}

fn one() -> u32 {
    1
}

fn default_backoff() -> u64 {
    crate::job::RetryPolicy::default().backoff_ms
}

/// When an edge lets its child run, given how the parent ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum EdgeCondition {
    /// The parent succeeded.
    #[default]
    OnSuccess,
    /// The parent failed after its retries (failed, timed out or lost).
    OnFailure,
    /// The parent ended at all: succeeded, failed or skipped.
    Always,
}

impl EdgeCondition {
    /// Whether a parent that settled in `parent` lets the child run.
    pub fn holds(self, parent: NodeStatus) -> bool {
        match self {
            EdgeCondition::OnSuccess => parent == NodeStatus::Succeeded,
            EdgeCondition::OnFailure => parent == NodeStatus::Failed,
            EdgeCondition::Always => matches!(
                parent,
                NodeStatus::Succeeded | NodeStatus::Failed | NodeStatus::Skipped
            ),
        }
    }

    /// Whether this edge handles a failure of its parent (so that failure
    /// does not fail the run).
    pub fn handles_failure(self) -> bool {
        matches!(self, EdgeCondition::OnFailure | EdgeCondition::Always)
    }
}

/// A parent → child dependency.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Edge {
    /// Parent node id.
    pub from: String,
    /// Child node id.
    pub to: String,
    /// When the child may run.
    #[serde(default)]
    pub condition: EdgeCondition,
}

/// A workflow's graph: what it runs and in which order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Workflow {
    /// Nodes, in the caller's order (kept: listings and decisions follow it).
    pub nodes: Vec<NodeSpec>,
    /// Edges.
    #[serde(default)]
    pub edges: Vec<Edge>,
}

/// Why a graph is not a valid workflow; each names the offending node.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DagError {
    /// No node at all.
    #[error("a workflow needs at least one node")]
    Empty,
    /// More nodes than allowed.
    #[error("{count} nodes: at most {max} are allowed (node {node:?} is one too many)")]
    TooManyNodes {
        /// The first node past the limit.
        node: String,
        /// Nodes given.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// A node id is empty, too long or has characters outside `[A-Za-z0-9_.-]`.
    #[error("node id {node:?} is invalid: 1 to 64 letters, digits, '-', '_' or '.'")]
    InvalidId {
        /// The id.
        node: String,
    },
    /// Two nodes share an id.
    #[error("node id {node:?} is used twice")]
    DuplicateNode {
        /// The id.
        node: String,
    },
    /// An edge names a node that does not exist.
    #[error("edge {from:?} -> {to:?} names unknown node {node:?}")]
    UnknownNode {
        /// The unknown id.
        node: String,
        /// The edge's parent.
        from: String,
        /// The edge's child.
        to: String,
    },
    /// The same parent → child pair twice.
    #[error("edge {from:?} -> {to:?} is given twice")]
    DuplicateEdge {
        /// The parent (also reported as the offending node).
        from: String,
        /// The child.
        to: String,
    },
    /// The edges form a cycle through `node`.
    #[error("the edges form a cycle through node {node:?}")]
    Cycle {
        /// A node on the cycle.
        node: String,
    },
}

impl DagError {
    /// The node the error is about (`None` only for [`DagError::Empty`]).
    pub fn node(&self) -> Option<&str> {
        match self {
            DagError::Empty => None,
            DagError::TooManyNodes { node, .. }
            | DagError::InvalidId { node }
            | DagError::DuplicateNode { node }
            | DagError::UnknownNode { node, .. }
            | DagError::Cycle { node } => Some(node),
            DagError::DuplicateEdge { from, .. } => Some(from),
        }
    }

    /// A stable machine-readable name.
    pub fn code(&self) -> &'static str {
        match self {
            DagError::Empty => "empty",
            DagError::TooManyNodes { .. } => "too_many_nodes",
            DagError::InvalidId { .. } => "invalid_node_id",
            DagError::DuplicateNode { .. } => "duplicate_node",
            DagError::UnknownNode { .. } => "unknown_node",
            DagError::DuplicateEdge { .. } => "duplicate_edge",
            DagError::Cycle { .. } => "cycle",
        }
    }
}

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_NODE_ID_LEN
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

impl Workflow {
    /// Checks the graph is a DAG of at most `max_nodes` uniquely named
    /// nodes whose edges name only its nodes. Errors name the first
    /// offending node in the caller's order.
    pub fn validate(&self, max_nodes: usize) -> Result<(), DagError> {
        if self.nodes.is_empty() {
            return Err(DagError::Empty);
        }
        if let Some(extra) = self.nodes.get(max_nodes) {
            return Err(DagError::TooManyNodes {
                node: extra.id.clone(),
                count: self.nodes.len(),
                max: max_nodes,
            });
        }
        let mut ids = HashSet::new();
        for n in &self.nodes {
            if !valid_id(&n.id) {
                return Err(DagError::InvalidId { node: n.id.clone() });
            }
            if !ids.insert(n.id.as_str()) {
                return Err(DagError::DuplicateNode { node: n.id.clone() });
            }
        }
        let mut pairs = HashSet::new();
        for e in &self.edges {
            for end in [&e.from, &e.to] {
                if !ids.contains(end.as_str()) {
                    return Err(DagError::UnknownNode {
                        node: end.clone(),
                        from: e.from.clone(),
                        to: e.to.clone(),
                    });
                }
            }
            if !pairs.insert((e.from.as_str(), e.to.as_str())) {
                return Err(DagError::DuplicateEdge {
                    from: e.from.clone(),
                    to: e.to.clone(),
                });
            }
        }
        match self.cycle_node() {
            Some(node) => Err(DagError::Cycle { node }),
            None => Ok(()),
        }
    }

    /// A node on a cycle, if the edges have one. Kahn's algorithm removes
    /// every node not on or behind a cycle; every node left has a parent
    /// left, so walking parents from one must come back to a node seen:
    /// that node is on a cycle (not merely downstream of one).
    fn cycle_node(&self) -> Option<String> {
        let mut indegree: HashMap<&str, usize> =
            self.nodes.iter().map(|n| (n.id.as_str(), 0)).collect();
        for e in &self.edges {
            *indegree.entry(e.to.as_str()).or_default() += 1;
        }
        let mut ready: Vec<&str> = self
            .nodes
            .iter()
            .map(|n| n.id.as_str())
            .filter(|id| indegree.get(id) == Some(&0))
            .collect();
        while let Some(id) = ready.pop() {
            for e in self.edges.iter().filter(|e| e.from == id) {
                if let Some(d) = indegree.get_mut(e.to.as_str()) {
                    *d -= 1;
                    if *d == 0 {
                        ready.push(e.to.as_str());
                    }
                }
            }
        }
        let left = |id: &str| indegree.get(id).is_some_and(|d| *d > 0);
        let start = self.nodes.iter().find(|n| left(&n.id))?;
        let mut seen = HashSet::new();
        let mut at = start.id.as_str();
        while seen.insert(at) {
            at = self
                .edges
                .iter()
                .find(|e| e.to == at && left(&e.from))
                .map(|e| e.from.as_str())?;
        }
        Some(at.to_string())
    }

    /// The node with this id.
    pub fn node(&self, id: &str) -> Option<&NodeSpec> {
        self.nodes.iter().find(|n| n.id == id)
    }

    /// The edges into `id`.
    pub fn parents_of<'a>(&'a self, id: &'a str) -> impl Iterator<Item = &'a Edge> + 'a {
        self.edges.iter().filter(move |e| e.to == id)
    }

    /// Whether a failure of `id` is handled by one of its outgoing edges.
    pub fn handles_failure_of(&self, id: &str) -> bool {
        self.edges
            .iter()
            .any(|e| e.from == id && e.condition.handles_failure())
    }
}

/// Where a run is. Legal moves are defined only by [`RunTransition`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Some node is not settled yet.
    Running,
    /// Every node settled, with no unhandled failure. Terminal.
    Succeeded,
    /// Every node settled, and some node failed unhandled. Terminal.
    Failed,
    /// Cancelled by the caller (or a node was stopped from outside). Terminal.
    Cancelled,
}

/// A move of the run state machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunTransition {
    /// Its last node settled without an unhandled failure.
    Succeed,
    /// Its last node settled, with an unhandled failure.
    Fail,
    /// The caller cancelled it (or a node was cancelled).
    Cancel,
}

impl RunTransition {
    /// The states this move may start from.
    pub fn from_states(self) -> &'static [RunStatus] {
        &[RunStatus::Running]
    }

    /// The state this move ends in.
    pub fn to_state(self) -> RunStatus {
        match self {
            RunTransition::Succeed => RunStatus::Succeeded,
            RunTransition::Fail => RunStatus::Failed,
            RunTransition::Cancel => RunStatus::Cancelled,
        }
    }

    /// Whether this move may be applied to a run in `from`.
    pub fn allowed_from(self, from: RunStatus) -> bool {
        self.from_states().contains(&from)
    }

    /// The move that ends a run in `end`, `None` for `Running`.
    pub fn ending_in(end: RunStatus) -> Option<Self> {
        match end {
            RunStatus::Running => None,
            RunStatus::Succeeded => Some(RunTransition::Succeed),
            RunStatus::Failed => Some(RunTransition::Fail),
            RunStatus::Cancelled => Some(RunTransition::Cancel),
        }
    }
}

impl RunStatus {
    /// All states.
    pub const ALL: [RunStatus; 4] = [
        RunStatus::Running,
        RunStatus::Succeeded,
        RunStatus::Failed,
        RunStatus::Cancelled,
    ];

    /// The name stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Succeeded => "succeeded",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// Whether no move leaves this state.
    pub fn is_terminal(self) -> bool {
        self != RunStatus::Running
    }
}

/// Where one node of a run is. While `Active`, its execution says more
/// (pending, dispatched, running, and its attempts); the API shows that.
/// Legal moves are defined only by [`NodeTransition`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeStatus {
    /// Some parent has not settled.
    Waiting,
    /// Its execution exists (pending, dispatched or running).
    Active,
    /// Its execution succeeded. Settled.
    Succeeded,
    /// Its execution failed after its retries (failed, timed out, lost). Settled.
    Failed,
    /// An edge condition can no longer be met: it never runs. Settled.
    Skipped,
    /// The run was cancelled before it ended, or its execution was
    /// cancelled. Settled.
    Cancelled,
}

/// A move of the node state machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeTransition {
    /// Its parents allow it: its execution is created.
    Start,
    /// Its parents no longer allow it.
    Skip,
    /// Its execution ended; the state is [`NodeStatus::of_execution`].
    Settle(NodeStatus),
    /// The run was cancelled.
    Cancel,
}

impl NodeTransition {
    /// The states this move may start from.
    pub fn from_states(self) -> &'static [NodeStatus] {
        use NodeStatus::*;
        match self {
            NodeTransition::Start | NodeTransition::Skip => &[Waiting],
            NodeTransition::Settle(_) => &[Active],
            NodeTransition::Cancel => &[Waiting, Active],
        }
    }

    /// The state this move ends in.
    pub fn to_state(self) -> NodeStatus {
        match self {
            NodeTransition::Start => NodeStatus::Active,
            NodeTransition::Skip => NodeStatus::Skipped,
            NodeTransition::Settle(s) => s,
            NodeTransition::Cancel => NodeStatus::Cancelled,
        }
    }

    /// Whether this move may be applied to a node in `from`.
    pub fn allowed_from(self, from: NodeStatus) -> bool {
        self.from_states().contains(&from)
    }
}

impl NodeStatus {
    /// All states.
    pub const ALL: [NodeStatus; 6] = [
        NodeStatus::Waiting,
        NodeStatus::Active,
        NodeStatus::Succeeded,
        NodeStatus::Failed,
        NodeStatus::Skipped,
        NodeStatus::Cancelled,
    ];

    /// The name stored.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeStatus::Waiting => "waiting",
            NodeStatus::Active => "active",
            NodeStatus::Succeeded => "succeeded",
            NodeStatus::Failed => "failed",
            NodeStatus::Skipped => "skipped",
            NodeStatus::Cancelled => "cancelled",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// Whether the node will not change any more.
    pub fn is_settled(self) -> bool {
        !matches!(self, NodeStatus::Waiting | NodeStatus::Active)
    }

    /// What a node becomes when its execution reaches `exec`; `None` while
    /// the execution is live.
    pub fn of_execution(exec: ExecStatus) -> Option<NodeStatus> {
        match exec {
            ExecStatus::Pending | ExecStatus::Dispatched | ExecStatus::Running => None,
            ExecStatus::Succeeded => Some(NodeStatus::Succeeded),
            ExecStatus::Failed | ExecStatus::TimedOut | ExecStatus::Lost => {
                Some(NodeStatus::Failed)
            }
            ExecStatus::Cancelled | ExecStatus::Skipped => Some(NodeStatus::Cancelled),
        }
    }
}

/// What a run does next.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Step {
    /// Nodes whose execution is to be created now, in definition order.
    pub due: Vec<String>,
    /// Nodes that will never run, in the order they were decided.
    pub skipped: Vec<String>,
    /// How the run ends, if every node is now settled.
    pub finished: Option<RunStatus>,
}

/// Given the nodes' states (a node missing from `states` counts as
/// `Waiting`), which nodes become due and which are skipped, and whether
/// the run is finished and how (see the module's rule). Pure: the store
/// calls it in the transaction that settled a node, and applies the step.
pub fn advance(wf: &Workflow, states: &HashMap<String, NodeStatus>) -> Step {
    let mut now: HashMap<&str, NodeStatus> = wf
        .nodes
        .iter()
        .map(|n| {
            let st = states.get(&n.id).copied().unwrap_or(NodeStatus::Waiting);
            (n.id.as_str(), st)
        })
        .collect();
    let mut step = Step::default();
    // Each pass decides what the previous one settled; skips cascade, so
    // at most one pass per level of the graph.
    loop {
        let mut settled_any = false;
        for n in &wf.nodes {
            if now.get(n.id.as_str()) != Some(&NodeStatus::Waiting) {
                continue;
            }
            let mut ready = true;
            let mut met = true;
            for e in wf.parents_of(&n.id) {
                match now.get(e.from.as_str()) {
                    Some(p) if p.is_settled() => met &= e.condition.holds(*p),
                    _ => ready = false,
                }
            }
            if !ready {
                continue;
            }
            if met {
                step.due.push(n.id.clone());
                now.insert(&n.id, NodeStatus::Active);
            } else {
                step.skipped.push(n.id.clone());
                now.insert(&n.id, NodeStatus::Skipped);
                settled_any = true;
            }
        }
        if !settled_any {
            break;
        }
    }
    step.due.sort_by_key(|id| position(wf, id));
    if now.values().all(|s| s.is_settled()) {
        step.finished = Some(outcome(wf, &now));
    }
    step
}

fn position(wf: &Workflow, id: &str) -> usize {
    wf.nodes
        .iter()
        .position(|n| n.id == id)
        .unwrap_or(usize::MAX)
}

/// How a run whose nodes are all settled ends.
fn outcome(wf: &Workflow, states: &HashMap<&str, NodeStatus>) -> RunStatus {
    if states.values().any(|s| *s == NodeStatus::Cancelled) {
        return RunStatus::Cancelled;
    }
    let unhandled = wf.nodes.iter().any(|n| {
        states.get(n.id.as_str()) == Some(&NodeStatus::Failed) && !wf.handles_failure_of(&n.id)
    });
    if unhandled {
        RunStatus::Failed
    } else {
        RunStatus::Succeeded
    }
}
