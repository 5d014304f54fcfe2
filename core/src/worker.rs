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
