//! Concurrency limits: how many executions of a handler, a tenant or a job
//! may be live (`dispatched` or `running`) at once, and the pure decision of
//! which candidates a dispatch round admits under them.
//!
//! A limit is named by a [`ScopeKey`] (`handler:<name>`, `tenant:<id>`,
//! `job:<id>`). The store counts what is in use per key (in the transaction
//! that dispatches, so every dispatcher sees the same count) and asks a
//! [`Gate`] which candidates go; the gate is arithmetic only. An operator's
//! limit may also cap the rate of dispatches ([`Bucket`], a token bucket
//! kept with the limit and refilled by time).

use crate::execution::ExecStatus;
use crate::time::Millis;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// The states that hold a slot: work in a worker's queue or running there.
/// A `pending` execution holds none, so a retry or a requeue gives its slot
/// back, and so does every end.
pub const OCCUPYING: [ExecStatus; 2] = [ExecStatus::Dispatched, ExecStatus::Running];

/// The largest limit accepted (per job, handler or tenant).
pub const MAX_LIMIT: u32 = 100_000;

/// What a limit applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Every execution of one handler, across tenants.
    Handler,
    /// Every execution of one tenant's jobs.
    Tenant,
    /// Every execution of one job (its `maxConcurrency`).
    Job,
}

impl Scope {
    /// The scopes an operator sets through the limits resource (a job's own
    /// limit is a field of the job).
    pub const OPERATOR: [Scope; 2] = [Scope::Handler, Scope::Tenant];

    /// The name stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Handler => "handler",
            Scope::Tenant => "tenant",
            Scope::Job => "job",
        }
    }

    /// Parses a stored or requested name.
    pub fn parse(s: &str) -> Option<Self> {
        [Scope::Handler, Scope::Tenant, Scope::Job]
            .into_iter()
            .find(|sc| sc.as_str() == s)
    }
}

/// One limited thing: a scope and its name (`handler:export`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ScopeKey(String);

impl ScopeKey {
    /// The key of `name` in `scope`.
    pub fn new(scope: Scope, name: &str) -> Self {
        ScopeKey(format!("{}:{name}", scope.as_str()))
    }

    /// As stored (`<scope>:<name>`).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// A stored key back, `None` if it names no scope.
    pub fn parse(s: &str) -> Option<Self> {
        let (scope, name) = s.split_once(':')?;
        Scope::parse(scope).map(|sc| ScopeKey::new(sc, name))
    }

    /// Its scope and name.
    pub fn parts(&self) -> (Scope, &str) {
        let (scope, name) = self.0.split_once(':').unwrap_or(("job", &self.0));
        (Scope::parse(scope).unwrap_or(Scope::Job), name)
    }
}

/// The three keys an execution counts against: its handler's, its tenant's
/// and its job's.
pub fn scopes_of(handler: &str, tenant: &str, job_id: &str) -> [ScopeKey; 3] {
    [
        ScopeKey::new(Scope::Handler, handler),
        ScopeKey::new(Scope::Tenant, tenant),
        ScopeKey::new(Scope::Job, job_id),
    ]
}

/// An operator's limit on a handler or a tenant: on what runs at once, on
/// the rate of dispatches, or both.
#[derive(Debug, Clone, PartialEq)]
pub struct Limit {
    /// What it applies to.
    pub scope: Scope,
    /// The handler's name or the tenant's id.
    pub name: String,
    /// Live executions allowed at once (`None`: no cap).
    pub max_running: Option<u32>,
    /// Dispatches allowed per second, in bursts of up to one second's worth
    /// (`None`: no cap).
    pub rate_per_sec: Option<f64>,
}

/// The largest rate accepted, per second.
pub const MAX_RATE: f64 = 100_000.0;

/// Why a rate is refused.
pub fn check_rate(value: f64) -> Result<f64, String> {
    if value.is_finite() && value > 0.0 && value <= MAX_RATE {
        Ok(value)
    } else {
        Err(format!("must be above 0 and at most {MAX_RATE}"))
    }
}

/// A token bucket of dispatches: `rate` tokens a second, holding up to one
/// second's worth (at least one token); each dispatch takes one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bucket {
    /// Tokens added per second.
    pub rate: f64,
    /// Tokens held at `at`.
    pub tokens: f64,
    /// When `tokens` was counted (ms UTC).
    pub at: Millis,
}

impl Bucket {
    /// A full bucket at `now`.
    pub fn full(rate: f64, now: Millis) -> Self {
        let mut b = Bucket {
            rate,
            tokens: 0.0,
            at: now,
        };
        b.tokens = b.capacity();
        b
    }

    /// The most tokens it holds.
    pub fn capacity(&self) -> f64 {
        self.rate.max(1.0)
    }

    /// The bucket as of `now` (refilled for the time passed; a clock that
    /// went back adds nothing).
    pub fn at(mut self, now: Millis) -> Self {
        let passed = (now - self.at).max(0) as f64 / 1000.0;
        self.tokens = (self.tokens + passed * self.rate).min(self.capacity());
        self.at = self.at.max(now);
        self
    }

    /// Takes a token if there is one.
    pub fn take(&mut self) -> bool {
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// When the next token is there (`at` if it is already).
    pub fn next_token_at(&self) -> Millis {
        let missing = (1.0 - self.tokens).max(0.0);
        self.at + (missing * 1000.0 / self.rate).ceil() as Millis
    }
}

impl Limit {
    /// Its key.
    pub fn key(&self) -> ScopeKey {
        ScopeKey::new(self.scope, &self.name)
    }
}

/// Why a limit's value is refused.
pub fn check_limit(value: i64) -> Result<u32, String> {
    match u32::try_from(value) {
        Ok(v) if (1..=MAX_LIMIT).contains(&v) => Ok(v),
        _ => Err(format!("must be between 1 and {MAX_LIMIT}")),
    }
}

/// What the gate decided for one candidate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// None of its scopes is limited: nothing to count.
    Unlimited,
    /// Admitted: it takes a slot in each of these scopes with a cap on what
    /// runs at once (none when only rates apply).
    Admitted(Vec<ScopeKey>),
    /// A scope is at its limit: it waits (the first full one named).
    Waiting(ScopeKey),
    /// A scope's rate is used up: it waits until the given time, when the
    /// next token is there.
    RateLimited(ScopeKey, Millis),
}

impl Admission {
    /// What a held-back candidate is recorded as waiting for
    /// (`executions.waiting_for`): the key, prefixed `rate:` for a rate;
    /// `None` for an admitted one.
    pub fn waiting_for(&self) -> Option<String> {
        match self {
            Admission::Waiting(k) => Some(k.as_str().to_string()),
            Admission::RateLimited(k, _) => Some(format!("{RATE_PREFIX}{}", k.as_str())),
            Admission::Unlimited | Admission::Admitted(_) => None,
        }
    }
}

/// How a `waiting_for` names a rate limit, before the limit's key.
pub const RATE_PREFIX: &str = "rate:";

/// Limits and what is in use under them, for one dispatch round. Candidates
/// are offered in the order they should go (oldest first); each admitted
/// one is counted at once, so a round never admits past a limit.
#[derive(Debug, Clone, Default)]
pub struct Gate {
    limits: HashMap<ScopeKey, u32>,
    in_use: HashMap<ScopeKey, u32>,
    buckets: HashMap<ScopeKey, Bucket>,
}

impl Gate {
    /// A gate over `limits`, with `in_use` live executions per key.
    pub fn new(limits: HashMap<ScopeKey, u32>, in_use: HashMap<ScopeKey, u32>) -> Self {
        Gate {
            limits,
            in_use,
            buckets: HashMap::new(),
        }
    }

    /// The gate with rate limits too: `buckets` as stored, refilled to `now`.
    pub fn with_rates(mut self, buckets: HashMap<ScopeKey, Bucket>, now: Millis) -> Self {
        self.buckets = buckets.into_iter().map(|(k, b)| (k, b.at(now))).collect();
        self
    }

    /// Whether any limit is set at all (none: nothing to count).
    pub fn is_open(&self) -> bool {
        self.limits.is_empty() && self.buckets.is_empty()
    }

    /// Admits a candidate counting against `keys` if every limited one has a
    /// slot free and every rated one a token, and takes those.
    pub fn admit(&mut self, keys: &[ScopeKey]) -> Admission {
        let limited: Vec<&ScopeKey> = keys
            .iter()
            .filter(|k| self.limits.contains_key(*k))
            .collect();
        let rated: Vec<&ScopeKey> = keys
            .iter()
            .filter(|k| self.buckets.contains_key(*k))
            .collect();
        if limited.is_empty() && rated.is_empty() {
            return Admission::Unlimited;
        }
        for k in &limited {
            let used = self.in_use.get(*k).copied().unwrap_or(0);
            if used >= self.limits[*k] {
                return Admission::Waiting((*k).clone());
            }
        }
        for k in &rated {
            let b = &self.buckets[*k];
            if b.tokens < 1.0 {
                return Admission::RateLimited((*k).clone(), b.next_token_at());
            }
        }
        for k in &rated {
            if let Some(b) = self.buckets.get_mut(*k) {
                b.take();
            }
        }
        for k in &limited {
            *self.in_use.entry((*k).clone()).or_default() += 1;
        }
        Admission::Admitted(limited.into_iter().cloned().collect())
    }

    /// The rate buckets as they are after the round, to store back.
    pub fn buckets(&self) -> &HashMap<ScopeKey, Bucket> {
        &self.buckets
    }

    /// Slots in use under `key` as the gate counts them now.
    pub fn in_use(&self, key: &ScopeKey) -> u32 {
        self.in_use.get(key).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(s: &str) -> ScopeKey {
        ScopeKey::parse(s).unwrap()
    }

    #[test]
    fn keys_round_trip() {
        let k = ScopeKey::new(Scope::Handler, "export:v2");
        assert_eq!(k.as_str(), "handler:export:v2");
        assert_eq!(ScopeKey::parse(k.as_str()), Some(k.clone()));
        assert_eq!(k.parts(), (Scope::Handler, "export:v2"));
        assert_eq!(ScopeKey::parse("queue:x"), None);
    }

    #[test]
    fn unlimited_candidates_take_nothing() {
        let mut g = Gate::default();
        assert!(g.is_open());
        let keys = scopes_of("h", "t", "j");
        assert_eq!(g.admit(&keys), Admission::Unlimited);
        assert_eq!(g.in_use(&keys[0]), 0);
    }

    #[test]
    fn a_round_admits_up_to_the_limit_counting_what_runs() {
        let h = key("handler:export");
        let mut g = Gate::new(
            HashMap::from([(h.clone(), 3)]),
            HashMap::from([(h.clone(), 1)]),
        );
        let keys = scopes_of("export", "t", "j");
        assert_eq!(g.admit(&keys), Admission::Admitted(vec![h.clone()]));
        assert_eq!(g.admit(&keys), Admission::Admitted(vec![h.clone()]));
        assert_eq!(g.admit(&keys), Admission::Waiting(h.clone()));
        assert_eq!(g.in_use(&h), 3);
        // Another handler is not held up.
        assert_eq!(g.admit(&scopes_of("other", "t", "j")), Admission::Unlimited);
    }

    #[test]
    fn every_limited_scope_must_have_room_and_a_refusal_takes_none() {
        let (h, t) = (key("handler:a"), key("tenant:acme"));
        let mut g = Gate::new(
            HashMap::from([(h.clone(), 5), (t.clone(), 1)]),
            HashMap::new(),
        );
        assert_eq!(
            g.admit(&scopes_of("a", "acme", "j1")),
            Admission::Admitted(vec![h.clone(), t.clone()])
        );
        assert_eq!(
            g.admit(&scopes_of("a", "acme", "j2")),
            Admission::Waiting(t.clone())
        );
        assert_eq!(g.in_use(&h), 1, "the waiting one took no handler slot");
        assert_eq!(
            g.admit(&scopes_of("a", "other", "j3")),
            Admission::Admitted(vec![h.clone()])
        );
    }

    #[test]
    fn over_the_limit_after_a_lowering_waits_until_below() {
        let j = key("job:j");
        let mut g = Gate::new(
            HashMap::from([(j.clone(), 2)]),
            HashMap::from([(j.clone(), 4)]),
        );
        assert_eq!(g.admit(&scopes_of("h", "t", "j")), Admission::Waiting(j));
    }

    #[test]
    fn a_rate_admits_a_burst_then_one_per_interval() {
        let h = key("handler:api");
        let t0 = 1_000_000;
        let mut g =
            Gate::default().with_rates(HashMap::from([(h.clone(), Bucket::full(2.0, t0))]), t0);
        assert!(!g.is_open());
        let keys = scopes_of("api", "t", "j");
        assert_eq!(g.admit(&keys), Admission::Admitted(vec![]));
        assert_eq!(g.admit(&keys), Admission::Admitted(vec![]));
        assert_eq!(g.admit(&keys), Admission::RateLimited(h.clone(), t0 + 500));
        // Half a second later, one more token.
        let b = g.buckets()[&h];
        let mut g = Gate::default().with_rates(HashMap::from([(h.clone(), b)]), t0 + 500);
        assert_eq!(g.admit(&keys), Admission::Admitted(vec![]));
        assert!(matches!(g.admit(&keys), Admission::RateLimited(..)));
    }

    #[test]
    fn a_rate_refusal_takes_no_slot_and_a_slot_refusal_no_token() {
        let h = key("handler:api");
        let mut g = Gate::new(HashMap::from([(h.clone(), 1)]), HashMap::new())
            .with_rates(HashMap::from([(h.clone(), Bucket::full(1.0, 0))]), 0);
        let keys = scopes_of("api", "t", "j");
        assert_eq!(g.admit(&keys), Admission::Admitted(vec![h.clone()]));
        assert_eq!(
            g.admit(&keys),
            Admission::Waiting(h.clone()),
            "the slot first"
        );
        assert_eq!(g.buckets()[&h].tokens, 0.0);
    }

    #[test]
    fn buckets_refill_up_to_a_second_and_never_back() {
        let b = Bucket {
            rate: 10.0,
            tokens: 0.0,
            at: 1_000,
        };
        assert_eq!(b.at(1_100).tokens, 1.0);
        assert_eq!(b.at(60_000).tokens, 10.0, "a second's worth at most");
        assert_eq!(b.at(500).tokens, 0.0, "a clock going back adds nothing");
        let slow = Bucket::full(0.5, 0);
        assert_eq!(slow.capacity(), 1.0, "at least one token");
        assert_eq!(
            Bucket {
                tokens: 0.0,
                ..slow
            }
            .next_token_at(),
            2_000
        );
        assert!(check_rate(0.0).is_err() && check_rate(f64::NAN).is_err());
        assert_eq!(check_rate(50.0), Ok(50.0));
    }

    #[test]
    fn limits_are_checked() {
        assert_eq!(check_limit(1), Ok(1));
        assert_eq!(check_limit(i64::from(MAX_LIMIT)), Ok(MAX_LIMIT));
        assert!(check_limit(0).is_err());
        assert!(check_limit(-3).is_err());
        assert!(check_limit(i64::from(MAX_LIMIT) + 1).is_err());
    }
}
