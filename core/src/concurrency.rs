//! Concurrency limits: how many executions of a handler, a tenant or a job
//! may be live (`dispatched` or `running`) at once, and the pure decision of
//! which candidates a dispatch round admits under them.
//!
//! A limit is named by a [`ScopeKey`] (`handler:<name>`, `tenant:<id>`,
//! `job:<id>`). The store counts what is in use per key (in the transaction
//! that dispatches, so every dispatcher sees the same count) and asks a
//! [`Gate`] which candidates go; the gate is arithmetic only.

use crate::execution::ExecStatus;
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

/// An operator's limit on a handler or a tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limit {
    /// What it applies to.
    pub scope: Scope,
    /// The handler's name or the tenant's id.
    pub name: String,
    /// Live executions allowed at once.
    pub max_running: u32,
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
    /// Admitted: it takes a slot in each of these limited scopes.
    Admitted(Vec<ScopeKey>),
    /// A scope is at its limit: it waits (the first full one named).
    Waiting(ScopeKey),
}

/// Limits and what is in use under them, for one dispatch round. Candidates
/// are offered in the order they should go (oldest first); each admitted
/// one is counted at once, so a round never admits past a limit.
#[derive(Debug, Clone, Default)]
pub struct Gate {
    limits: HashMap<ScopeKey, u32>,
    in_use: HashMap<ScopeKey, u32>,
}

impl Gate {
    /// A gate over `limits`, with `in_use` live executions per key.
    pub fn new(limits: HashMap<ScopeKey, u32>, in_use: HashMap<ScopeKey, u32>) -> Self {
        Gate { limits, in_use }
    }

    /// Whether any limit is set at all (none: nothing to count).
    pub fn is_open(&self) -> bool {
        self.limits.is_empty()
    }

    /// Admits a candidate counting against `keys` if every limited one has a
    /// slot free, and takes those slots.
    pub fn admit(&mut self, keys: &[ScopeKey]) -> Admission {
        let limited: Vec<&ScopeKey> = keys
            .iter()
            .filter(|k| self.limits.contains_key(*k))
            .collect();
        if limited.is_empty() {
            return Admission::Unlimited;
        }
        for k in &limited {
            let used = self.in_use.get(*k).copied().unwrap_or(0);
            if used >= self.limits[*k] {
                return Admission::Waiting((*k).clone());
            }
        }
        for k in &limited {
            *self.in_use.entry((*k).clone()).or_default() += 1;
        }
        Admission::Admitted(limited.into_iter().cloned().collect())
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
    fn limits_are_checked() {
        assert_eq!(check_limit(1), Ok(1));
        assert_eq!(check_limit(i64::from(MAX_LIMIT)), Ok(MAX_LIMIT));
        assert!(check_limit(0).is_err());
        assert!(check_limit(-3).is_err());
        assert!(check_limit(i64::from(MAX_LIMIT) + 1).is_err());
    }
}
