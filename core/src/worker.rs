//! Workers as the dispatcher sees them: lifecycle state and load figures.

use crate::time::Millis;
use serde::{Deserialize, Serialize};

/// A worker's lifecycle state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkerState {
    /// Accepting work.
    Online,
    /// Finishing what it has; the balancer skips it.
    Draining,
    /// Gone: deregistered, or declared dead by the reaper.
    Offline,
}

impl WorkerState {
    /// The name stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkerState::Online => "online",
            WorkerState::Draining => "draining",
            WorkerState::Offline => "offline",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "online" => Some(WorkerState::Online),
            "draining" => Some(WorkerState::Draining),
            "offline" => Some(WorkerState::Offline),
            _ => None,
        }
    }
}

/// What a worker runs: its handlers and its group, as its heartbeats announce.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Serves {
    /// Handler names; `None` for a legacy worker that did not say, taken to
    /// serve every handler.
    pub handlers: Option<Vec<String>>,
    /// Worker group, if any.
    pub group: Option<String>,
}

impl Serves {
    /// Whether a worker serving this may run `handler` for a job that asked
    /// for worker group `group`. A job without a group runs on any worker
    /// serving its handler; a job with one only on workers of that group.
    pub fn accepts(&self, handler: &str, group: Option<&str>) -> bool {
        group.is_none_or(|g| self.group.as_deref() == Some(g))
            && self
                .handlers
                .as_ref()
                .is_none_or(|hs| hs.iter().any(|h| h == handler))
    }
}

/// What the live workers can run, as a filter for pending work (see
/// [`crate::store::Dispatch::executions_find_unpublished`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Routable {
    /// Any work (tests, tools).
    Any,
    /// Only work some entry [accepts](Serves::accepts); empty = none.
    Only(Vec<Serves>),
}

impl Routable {
    /// Whether some live worker can run `handler` in `group`.
    pub fn accepts(&self, handler: &str, group: Option<&str>) -> bool {
        match self {
            Routable::Any => true,
            Routable::Only(list) => list.iter().any(|s| s.accepts(handler, group)),
        }
    }
}

/// A worker row: the latest heartbeat figures.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerInfo {
    /// Stable id.
    pub id: String,
    /// Queue it consumes.
    pub queue: String,
    /// Handlers it runs in parallel.
    pub capacity: u32,
    /// Handlers running at the last heartbeat.
    pub active: u32,
    /// Mean handler duration at the last heartbeat.
    pub avg_cost_ms: f64,
    /// CPU idle percentage at the last heartbeat.
    pub cpu_idle: f64,
    /// Lifecycle state.
    pub state: WorkerState,
    /// Time of the last heartbeat (ms UTC, worker clock).
    pub last_heartbeat_at: Millis,
    /// First registration.
    pub registered_at: Millis,
    /// Handlers and group it announced.
    pub serves: Serves,
    /// Most dispatches it takes in one message; 1 for a worker that reads
    /// only one per message (see `HeartbeatMsg::dispatch_batch`).
    pub dispatch_batch: u32,
    /// Whether it consumes its immediate queue (see
    /// `HeartbeatMsg::immediate_queue`).
    pub immediate_queue: bool,
}

impl WorkerInfo {
    /// The seed's "equal cost" load: lower is better.
    /// `active*10 + avg_cost_ms/1000 + (100 - cpu_idle)/10`.
    pub fn equal_cost_load(active: f64, avg_cost_ms: f64, cpu_idle: f64) -> f64 {
        active * 10.0 + avg_cost_ms / 1000.0 + (100.0 - cpu_idle.clamp(0.0, 100.0)) / 10.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serving_is_by_handler_and_group() {
        let legacy = Serves::default();
        assert!(legacy.accepts("anything", None));
        assert!(!legacy.accepts("anything", Some("edge")));
        let noop = Serves {
            handlers: Some(vec!["noop".into()]),
            group: Some("edge".into()),
        };
        assert!(noop.accepts("noop", None));
        assert!(noop.accepts("noop", Some("edge")));
        assert!(!noop.accepts("noop", Some("core")));
        assert!(!noop.accepts("http", None));
        assert!(Routable::Only(vec![legacy, noop.clone()]).accepts("http", None));
        assert!(!Routable::Only(vec![noop]).accepts("http", None));
        assert!(!Routable::Only(vec![]).accepts("noop", None));
    }

    #[test]
    fn load_formula_matches_the_seed() {
        assert_eq!(
            WorkerInfo::equal_cost_load(2.0, 500.0, 80.0),
            20.0 + 0.5 + 2.0
        );
        assert!(
            WorkerInfo::equal_cost_load(0.0, 0.0, 10.0)
                > WorkerInfo::equal_cost_load(0.0, 0.0, 90.0)
        );
    }
}
