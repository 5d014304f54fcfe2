//! Picks the worker for each dispatch: equal-cost (default), round-robin or
//! random, over the workers whose heartbeats say they can take work *and*
//! serve the job's handler (in its worker group, if the job names one). A
//! worker that did not announce its handlers (a legacy worker) serves all.
//!
//! Heartbeats arrive every few seconds, so between two of them the balancer
//! adds what this dispatcher has just sent to the reported `active` count. A
//! burst is therefore spread across workers instead of piling onto whichever
//! looked idlest at the last heartbeat.
//!
//! A worker whose last heartbeat said its pool was full is skipped while
//! another has room. When every worker said so, work still goes out (to the
//! least loaded): the figure is up to a heartbeat old, short jobs free slots
//! in milliseconds, and a worker that really is full refuses the dispatch,
//! which is then rerouted. Holding everything back until the next heartbeat
//! would stall a burst for seconds.

use kairos_core::broker::DispatchQueue;
use kairos_core::protocol::MAX_DISPATCH_BATCH;
use kairos_core::time::Millis;
use kairos_core::worker::{Routable, Serves, WorkerInfo, WorkerState};
use rand::Rng;
use std::collections::HashMap;

/// Which strategy to use (`KAIROS_BALANCER`: its name as [`Strategy::name`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "&'static str")]
pub enum Strategy {
    /// Lowest `active*10 + avg_cost_ms/1000 + (100 - cpu_idle)/10`.
    #[default]
    EqualCost,
    /// Each eligible worker in turn.
    RoundRobin,
    /// Uniformly at random among eligible workers.
    Random,
}

impl Strategy {
    /// The name `KAIROS_BALANCER` takes for this strategy.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::EqualCost => "equal-cost",
            Strategy::RoundRobin => "round-robin",
            Strategy::Random => "random",
        }
    }
}

impl From<Strategy> for &'static str {
    fn from(s: Strategy) -> Self {
        s.name()
    }
}

impl TryFrom<String> for Strategy {
    type Error = String;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl std::str::FromStr for Strategy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "equal-cost" | "equal_cost" => Ok(Strategy::EqualCost),
            "round-robin" | "round_robin" => Ok(Strategy::RoundRobin),
            "random" => Ok(Strategy::Random),
            other => Err(format!(
                "unknown balancer {other:?} (expected equal-cost, round-robin or random)"
            )),
        }
    }
}

/// What a dispatch needs from its worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Want<'a> {
    /// The job's handler.
    pub handler: &'a str,
    /// The job's worker group, if it names one.
    pub group: Option<&'a str>,
}

impl<'a> Want<'a> {
    /// A handler in any group.
    pub fn handler(handler: &'a str) -> Self {
        Self {
            handler,
            group: None,
        }
    }
}

/// A worker as the balancer tracks it.
#[derive(Debug, Clone)]
struct Slot {
    info: WorkerInfo,
    /// Dispatches sent since the heartbeat in `info` was taken.
    sent_since_beat: u32,
}

/// Worker selection state of one dispatcher.
#[derive(Debug)]
pub struct Balancer {
    strategy: Strategy,
    /// A worker whose last heartbeat is older than this is not eligible.
    stale_after_ms: i64,
    slots: Vec<Slot>,
    next_rr: usize,
}

impl Balancer {
    /// An empty balancer.
    pub fn new(strategy: Strategy, stale_after_ms: i64) -> Self {
        Self {
            strategy,
            stale_after_ms,
            slots: Vec::new(),
            next_rr: 0,
        }
    }

    /// Heartbeat age beyond which a worker is not eligible.
    pub fn stale_after_ms(&self) -> i64 {
        self.stale_after_ms
    }

    /// Replaces the worker view with fresh rows, keeping the local correction
    /// for workers whose heartbeat has not changed since.
    pub fn refresh(&mut self, workers: Vec<WorkerInfo>) {
        let old: HashMap<String, (Millis, u32)> = self
            .slots
            .iter()
            .map(|s| {
                (
                    s.info.id.clone(),
                    (s.info.last_heartbeat_at, s.sent_since_beat),
                )
            })
            .collect();
        self.slots = workers
            .into_iter()
            .map(|info| {
                let sent_since_beat = match old.get(&info.id) {
                    Some((beat, sent)) if *beat == info.last_heartbeat_at => *sent,
                    _ => 0,
                };
                Slot {
                    info,
                    sent_since_beat,
                }
            })
            .collect();
        self.slots.sort_by(|a, b| a.info.id.cmp(&b.info.id));
    }

    /// Whether a worker may receive work now: online, heard from recently,
    /// and not excluded.
    fn live(&self, s: &Slot, now: Millis, exclude: Option<&str>) -> bool {
        s.info.state == WorkerState::Online
            && now - s.info.last_heartbeat_at <= self.stale_after_ms
            && exclude != Some(s.info.id.as_str())
    }

    /// Whether its last heartbeat reported a free slot.
    fn has_room(s: &Slot) -> bool {
        s.info.active < s.info.capacity.max(1)
    }

    fn load(s: &Slot) -> f64 {
        let active = f64::from(s.info.active) + f64::from(s.sent_since_beat);
        WorkerInfo::equal_cost_load(active, s.info.avg_cost_ms, s.info.cpu_idle)
    }

    /// Chooses a worker for one dispatch of `want` (never `exclude`), and
    /// counts the dispatch against it. `None` when no live worker serving
    /// the handler (in the group) can take work.
    pub fn pick(&mut self, now: Millis, want: Want<'_>, exclude: Option<&str>) -> Option<String> {
        let mut eligible: Vec<usize> = (0..self.slots.len())
            .filter(|&i| {
                let s = &self.slots[i];
                self.live(s, now, exclude) && s.info.serves.accepts(want.handler, want.group)
            })
            .collect();
        if eligible.iter().any(|&i| Self::has_room(&self.slots[i])) {
            eligible.retain(|&i| Self::has_room(&self.slots[i]));
        }
        if eligible.is_empty() {
            return None;
        }
        let chosen = match self.strategy {
            Strategy::EqualCost => *eligible.iter().min_by(|&&a, &&b| {
                Self::load(&self.slots[a]).total_cmp(&Self::load(&self.slots[b]))
            })?,
            Strategy::RoundRobin => {
                self.next_rr = self.next_rr.wrapping_add(1);
                eligible[self.next_rr % eligible.len()]
            }
            Strategy::Random => eligible[rand::rng().random_range(0..eligible.len())],
        };
        let slot = &mut self.slots[chosen];
        slot.sent_since_beat = slot.sent_since_beat.saturating_add(1);
        Some(slot.info.id.clone())
    }

    /// Every live worker serving `want`, in id order, for a broadcast
    /// trigger: one dispatch each, counted against each. A full worker is
    /// not left out: a broadcast runs on every eligible worker, and one
    /// that is really full refuses its dispatch, which is then rerouted.
    pub fn broadcast(&mut self, now: Millis, want: Want<'_>) -> Vec<String> {
        let chosen: Vec<usize> = (0..self.slots.len())
            .filter(|&i| {
                let s = &self.slots[i];
                self.live(s, now, None) && s.info.serves.accepts(want.handler, want.group)
            })
            .collect();
        chosen
            .into_iter()
            .map(|i| {
                let slot = &mut self.slots[i];
                slot.sent_since_beat = slot.sent_since_beat.saturating_add(1);
                slot.info.id.clone()
            })
            .collect()
    }

    /// Most dispatches `worker` takes in one message (1 if unknown).
    pub fn dispatch_batch(&self, worker: &str) -> u32 {
        self.slots
            .iter()
            .find(|s| s.info.id == worker)
            .map_or(1, |s| s.info.dispatch_batch.clamp(1, MAX_DISPATCH_BATCH))
    }

    /// Which of `worker`'s queues a dispatch goes to: the immediate one for
    /// urgent work (`immediate`) if the worker's heartbeats offer it.
    pub fn queue_for(&self, worker: &str, immediate: bool) -> DispatchQueue {
        let offered = self
            .slots
            .iter()
            .find(|s| s.info.id == worker)
            .is_some_and(|s| s.info.immediate_queue);
        DispatchQueue::of(immediate, offered)
    }

    /// Forgets what was counted against `worker` for one dispatch that failed.
    pub fn unpick(&mut self, worker: &str) {
        if let Some(s) = self.slots.iter_mut().find(|s| s.info.id == worker) {
            s.sent_since_beat = s.sent_since_beat.saturating_sub(1);
        }
    }

    /// Number of workers that could take work now.
    pub fn eligible_count(&self, now: Millis) -> usize {
        self.slots
            .iter()
            .filter(|s| self.live(s, now, None))
            .count()
    }

    /// What the live workers serve: the filter for the sweep of pending
    /// work, so work no worker can run is left waiting without holding up
    /// the rest.
    pub fn routable(&self, now: Millis) -> Routable {
        let mut serves: Vec<Serves> = Vec::new();
        for s in self.slots.iter().filter(|s| self.live(s, now, None)) {
            if !serves.contains(&s.info.serves) {
                serves.push(s.info.serves.clone());
            }
        }
        Routable::Only(serves)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOOP: Want<'static> = Want {
        handler: "noop",
        group: None,
    };

    fn w(id: &str, active: u32, avg_cost_ms: f64, cpu_idle: f64) -> WorkerInfo {
        WorkerInfo {
            id: id.into(),
            queue: format!("kairos.worker.{id}"),
            capacity: 16,
            active,
            avg_cost_ms,
            cpu_idle,
            state: WorkerState::Online,
            last_heartbeat_at: 1_000,
            registered_at: 0,
            serves: Default::default(),
            dispatch_batch: 1,
            immediate_queue: false,
        }
    }

    fn counts(b: &mut Balancer, n: usize) -> HashMap<String, usize> {
        let mut c = HashMap::new();
        for _ in 0..n {
            *c.entry(b.pick(1_000, NOOP, None).unwrap()).or_default() += 1;
        }
        c
    }

    #[test]
    fn equal_cost_prefers_the_least_loaded_worker() {
        let mut b = Balancer::new(Strategy::EqualCost, 15_000);
        b.refresh(vec![w("busy", 5, 100.0, 90.0), w("idle", 0, 100.0, 90.0)]);
        assert_eq!(b.pick(1_000, NOOP, None).as_deref(), Some("idle"));
    }

    #[test]
    fn low_cpu_idle_is_avoided() {
        let mut b = Balancer::new(Strategy::EqualCost, 15_000);
        b.refresh(vec![w("hot", 0, 100.0, 5.0), w("cool", 0, 100.0, 95.0)]);
        assert_eq!(b.pick(1_000, NOOP, None).as_deref(), Some("cool"));
    }

    #[test]
    fn a_burst_between_heartbeats_is_spread() {
        let mut b = Balancer::new(Strategy::EqualCost, 15_000);
        b.refresh(vec![
            w("a", 0, 50.0, 90.0),
            w("b", 0, 50.0, 90.0),
            w("c", 0, 50.0, 90.0),
        ]);
        let c = counts(&mut b, 300);
        for id in ["a", "b", "c"] {
            assert_eq!(c[id], 100, "{c:?}");
        }
    }

    #[test]
    fn correction_survives_a_refresh_without_a_new_heartbeat() {
        let mut b = Balancer::new(Strategy::EqualCost, 15_000);
        b.refresh(vec![w("a", 0, 0.0, 100.0), w("b", 0, 0.0, 100.0)]);
        b.pick(1_000, NOOP, None);
        let first = b.pick(1_000, NOOP, None).unwrap();
        b.refresh(vec![w("a", 0, 0.0, 100.0), w("b", 0, 0.0, 100.0)]);
        // Both have one dispatch counted; the next goes to either, but a fresh
        // heartbeat for one resets only that one.
        let mut fresh = w(&first, 0, 0.0, 100.0);
        fresh.last_heartbeat_at = 2_000;
        let other = if first == "a" { "b" } else { "a" };
        b.refresh(vec![fresh, w(other, 0, 0.0, 100.0)]);
        assert_eq!(b.pick(2_000, NOOP, None), Some(first));
    }

    #[test]
    fn when_every_worker_reported_full_the_least_loaded_still_gets_work() {
        let mut b = Balancer::new(Strategy::EqualCost, 15_000);
        b.refresh(vec![w("a", 16, 10.0, 50.0), w("b", 16, 10.0, 90.0)]);
        assert_eq!(b.pick(1_000, NOOP, None).as_deref(), Some("b"));
        assert_eq!(b.pick(1_000, NOOP, Some("b")).as_deref(), Some("a"));
    }

    #[test]
    fn draining_stale_full_and_excluded_workers_are_skipped() {
        let mut b = Balancer::new(Strategy::EqualCost, 15_000);
        let mut draining = w("draining", 0, 0.0, 100.0);
        draining.state = WorkerState::Draining;
        let mut stale = w("stale", 0, 0.0, 100.0);
        stale.last_heartbeat_at = -20_000;
        let full = w("full", 16, 0.0, 100.0);
        b.refresh(vec![
            draining,
            stale,
            full,
            w("ok", 3, 0.0, 0.0),
            w("refuser", 0, 0.0, 100.0),
        ]);
        assert_eq!(
            b.eligible_count(1_000),
            3,
            "full counts: it may have room by now"
        );
        for _ in 0..10 {
            assert_eq!(b.pick(1_000, NOOP, Some("refuser")).as_deref(), Some("ok"));
        }
    }

    fn serving(id: &str, handlers: &[&str], group: Option<&str>) -> WorkerInfo {
        let mut info = w(id, 0, 0.0, 100.0);
        info.serves = Serves {
            handlers: Some(handlers.iter().map(|h| h.to_string()).collect()),
            group: group.map(str::to_string),
        };
        info
    }

    #[test]
    fn only_workers_serving_the_handler_are_picked() {
        let mut b = Balancer::new(Strategy::EqualCost, 15_000);
        let mut busy_sleeper = serving("sleeper", &["sleep"], None);
        busy_sleeper.active = 15;
        b.refresh(vec![serving("noop-only", &["noop"], None), busy_sleeper]);
        for _ in 0..20 {
            let picked = b.pick(1_000, Want::handler("sleep"), None);
            assert_eq!(picked.as_deref(), Some("sleeper"), "despite its load");
        }
        assert_eq!(b.pick(1_000, Want::handler("http"), None), None);
        assert_eq!(
            b.pick(1_000, Want::handler("sleep"), Some("sleeper")),
            None,
            "the refuser is the only one serving it"
        );
    }

    #[test]
    fn legacy_workers_serve_every_handler() {
        let mut b = Balancer::new(Strategy::RoundRobin, 15_000);
        b.refresh(vec![
            w("legacy", 0, 0.0, 100.0),
            serving("n", &["noop"], None),
        ]);
        assert_eq!(
            b.pick(1_000, Want::handler("custom"), None).as_deref(),
            Some("legacy")
        );
        let c = counts(&mut b, 10);
        assert_eq!(c.len(), 2, "noop goes to both: {c:?}");
    }

    #[test]
    fn a_job_with_a_group_runs_only_in_that_group() {
        let mut b = Balancer::new(Strategy::RoundRobin, 15_000);
        b.refresh(vec![
            serving("edge-1", &["http"], Some("edge")),
            serving("core-1", &["http"], Some("core")),
            serving("plain", &["http"], None),
        ]);
        let edge = Want {
            handler: "http",
            group: Some("edge"),
        };
        for _ in 0..10 {
            assert_eq!(b.pick(1_000, edge, None).as_deref(), Some("edge-1"));
        }
        let nowhere = Want {
            handler: "http",
            group: Some("dmz"),
        };
        assert_eq!(b.pick(1_000, nowhere, None), None);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..12 {
            seen.insert(b.pick(1_000, Want::handler("http"), None).unwrap());
        }
        assert_eq!(seen.len(), 3, "no group: any worker serving the handler");
    }

    #[test]
    fn routable_lists_what_live_workers_serve() {
        let mut b = Balancer::new(Strategy::EqualCost, 15_000);
        let mut gone = serving("gone", &["http"], None);
        gone.state = WorkerState::Offline;
        b.refresh(vec![
            serving("a", &["noop"], None),
            serving("b", &["noop"], None),
            gone,
        ]);
        let r = b.routable(1_000);
        assert_eq!(
            r,
            Routable::Only(vec![Serves {
                handlers: Some(vec!["noop".into()]),
                group: None
            }])
        );
        assert!(r.accepts("noop", None) && !r.accepts("http", None));
    }

    #[test]
    fn a_broadcast_goes_to_every_live_worker_serving_the_job() {
        let mut b = Balancer::new(Strategy::EqualCost, 15_000);
        let mut gone = serving("gone", &["http"], None);
        gone.state = WorkerState::Offline;
        let mut full = serving("full", &["http"], None);
        full.active = 16;
        b.refresh(vec![
            serving("c", &["http"], None),
            serving("a", &["http"], None),
            serving("noop-only", &["noop"], None),
            gone,
            full,
        ]);
        assert_eq!(
            b.broadcast(1_000, Want::handler("http")),
            ["a", "c", "full"],
            "in id order, full or not"
        );
        assert_eq!(
            b.pick(1_000, Want::handler("http"), None).as_deref(),
            Some("a"),
            "the broadcast counts against each worker"
        );
        assert!(b.broadcast(1_000, Want::handler("sleep")).is_empty());
    }

    #[test]
    fn no_worker_means_no_pick() {
        let mut b = Balancer::new(Strategy::RoundRobin, 15_000);
        assert_eq!(b.pick(0, NOOP, None), None);
    }

    #[test]
    fn round_robin_and_random_use_every_worker() {
        for strategy in [Strategy::RoundRobin, Strategy::Random] {
            let mut b = Balancer::new(strategy, 15_000);
            b.refresh(vec![w("a", 9, 0.0, 0.0), w("b", 0, 0.0, 100.0)]);
            let c = counts(&mut b, 200);
            assert!(c.get("a").copied().unwrap_or(0) > 20, "{strategy:?} {c:?}");
            assert!(c.get("b").copied().unwrap_or(0) > 20, "{strategy:?} {c:?}");
        }
    }

    #[test]
    fn strategies_parse_by_name() {
        assert_eq!("round-robin".parse::<Strategy>(), Ok(Strategy::RoundRobin));
        assert!("fastest".parse::<Strategy>().is_err());
    }
}
