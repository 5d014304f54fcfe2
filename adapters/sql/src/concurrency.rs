//! The concurrency gate inside the transactions that dispatch (claims and
//! admissions of pending work), and the operators' limits
//! ([`LimitStore`]).
//!
//! What is in use under a limited key is counted from `concurrency_slots`
//! joined with `executions`: a slot row counts only while its execution is
//! `dispatched` or `running`. So an execution gives its slot back by
//! whatever path it ends, is retried or is requeued (results, the reaper's
//! verdicts, a dead worker's recovery, cancel, stop, replace) without any of
//! those paths knowing about limits: no slot can outlive its execution. Rows
//! of executions no longer live are deleted when their key is gated next.
//!
//! Every count-then-admit decision holds the gate's row lock ([`lock`]),
//! taken only when [`any_limit`] finds a limit, so claims and admissions of
//! unlimited work never wait for each other here. So does everything else
//! that writes slot rows while reading or deleting others: the purge, and
//! the start of an attempt that was handed back ([`occupy`]), which could
//! otherwise see its slot row, find it already there, and have a gate that
//! had counted it as ended delete it under its feet (it would then run
//! uncounted to its end).

use crate::db::Tx;
use crate::rows::R;
use crate::sql::{self, CHUNK, Fields, Sql, time};
use crate::store::SqlStore;
use async_trait::async_trait;
use kairos_core::concurrency::{
    Admission, Bucket, Gate, Limit, OCCUPYING, Scope, ScopeKey, scopes_of,
};
use kairos_core::store::{LimitStore, LimitUsage, StoreError, StoreResult};
use kairos_core::time::Millis;
use std::collections::{BTreeSet, HashMap};

/// An execution about to take a worker, with what it counts against.
pub(crate) struct Candidate<'a> {
    pub(crate) execution_id: &'a str,
    pub(crate) handler: &'a str,
    pub(crate) tenant: &'a str,
    pub(crate) job_id: &'a str,
    /// The job's own limit.
    pub(crate) max_concurrency: Option<u32>,
}

/// Name of the `leader_fences` row whose exclusive lock serializes the
/// gate (its fence is unused, 0). A row of its own, not a dispatcher
/// fence's: those are share-locked by every dispatching transaction (see
/// `crate::dispatch`), and taking one exclusively on top would be a lock
/// upgrade, which deadlocks between two holders of the share.
const GATE_ROW: &str = "concurrency-gate";

/// Takes the gate's row lock, to the commit. The row is created if missing:
/// a lock on a missing row would serialize nothing under `READ COMMITTED`.
/// (SQLite: the write transaction already excludes every other writer.)
pub(crate) async fn lock(tx: &mut Tx) -> StoreResult<()> {
    for _ in 0..2 {
        let mut read = Sql::new("SELECT fence FROM leader_fences WHERE name = ");
        read.bind(GATE_ROW).for_update();
        if read.fetch_optional(&mut *tx).await?.is_some() {
            return Ok(());
        }
        let row = Fields::new().with("name", GATE_ROW).with("fence", 0_i64);
        Sql::new("")
            .insert_ignore_into()
            .push("leader_fences")
            .rows([&row])
            .on_conflict_ignore()
            .execute(&mut *tx)
            .await?;
    }
    Ok(())
}

/// Decides, in order, which candidates may go now, and takes the slots of
/// those admitted under a limit. One decision per candidate. Without any
/// limit on them, every one is `Unlimited` and nothing is locked; otherwise
/// the gate's lock is taken first ([`lock`]) and the limits read again
/// under it (a rate's tokens are taken and written back).
pub(crate) async fn gate(
    tx: &mut Tx,
    candidates: &[Candidate<'_>],
    now: Millis,
) -> StoreResult<Vec<Admission>> {
    if candidates.is_empty() || !any_limit(tx, candidates, now).await? {
        return Ok(vec![Admission::Unlimited; candidates.len()]);
    }
    lock(tx).await?;
    let keys: Vec<[ScopeKey; 3]> = candidates
        .iter()
        .map(|c| scopes_of(c.handler, c.tenant, c.job_id))
        .collect();
    let (mut limits, buckets) = operator_limits(tx, &keys, now).await?;
    for (c, k) in candidates.iter().zip(&keys) {
        if let Some(n) = c.max_concurrency {
            limits.insert(k[2].clone(), n);
        }
    }
    if limits.is_empty() && buckets.is_empty() {
        return Ok(vec![Admission::Unlimited; candidates.len()]);
    }
    let limited: Vec<&str> = limits.keys().map(ScopeKey::as_str).collect();
    let in_use = count_in_use(tx, &limited).await?;
    let mut gate = Gate::new(limits, in_use).with_rates(buckets, now);
    let decisions: Vec<Admission> = keys.iter().map(|k| gate.admit(k)).collect();
    for (key, b) in gate.buckets() {
        Sql::new("UPDATE concurrency_limits SET rate_tokens = ")
            .bind(b.tokens)
            .push(", rate_at = ")
            .bind(time(b.at))
            .push(" WHERE scope_key = ")
            .bind(key.as_str())
            .execute(&mut *tx)
            .await?;
    }

    let admitted: Vec<(&str, &[ScopeKey])> = candidates
        .iter()
        .zip(&decisions)
        .filter_map(|(c, d)| match d {
            Admission::Admitted(keys) => Some((c.execution_id, keys.as_slice())),
            _ => None,
        })
        .collect();
    insert_slots(tx, &admitted, now).await?;
    Ok(decisions)
}

/// Records that each execution occupies a slot under each of its keys,
/// without a decision: it runs already (see the outcomes' ghost starts).
/// Under the gate's lock: a gate that read such an execution as `pending`
/// deletes its old slot row before this looks for it, or counts it running.
pub(crate) async fn occupy(
    tx: &mut Tx,
    running: &[(String, [ScopeKey; 3])],
    now: Millis,
) -> StoreResult<()> {
    if running.is_empty() {
        return Ok(());
    }
    lock(tx).await?;
    let slots: Vec<(&str, &[ScopeKey])> = running
        .iter()
        .map(|(id, keys)| (id.as_str(), keys.as_slice()))
        .collect();
    insert_slots(tx, &slots, now).await
}

/// One slot row per (execution, key); rows already there are kept.
async fn insert_slots(tx: &mut Tx, slots: &[(&str, &[ScopeKey])], now: Millis) -> StoreResult<()> {
    let rows: Vec<Fields> = slots
        .iter()
        .flat_map(|(id, keys)| {
            keys.iter().map(move |k| {
                Fields::new()
                    .with("scope_key", k.as_str())
                    .with("execution_id", *id)
                    .with("created_at", time(now))
            })
        })
        .collect();
    for chunk in rows.chunks(CHUNK) {
        Sql::new("")
            .insert_ignore_into()
            .push("concurrency_slots")
            .rows(chunk)
            .on_conflict_ignore()
            .execute(&mut *tx)
            .await?;
    }
    Ok(())
}

/// Whether any limit (a job's own, an operator's cap or rate) applies to
/// one of `candidates`: read without a lock, so a claim or admission takes
/// the gate's lock only when it has something to count. A limit set while
/// the claim runs counts from the next claim, as it would under the lock.
async fn any_limit(tx: &mut Tx, candidates: &[Candidate<'_>], now: Millis) -> StoreResult<bool> {
    if candidates.iter().any(|c| c.max_concurrency.is_some()) {
        return Ok(true);
    }
    let keys: Vec<[ScopeKey; 3]> = candidates
        .iter()
        .map(|c| scopes_of(c.handler, c.tenant, c.job_id))
        .collect();
    let (limits, buckets) = operator_limits(tx, &keys, now).await?;
    Ok(!limits.is_empty() || !buckets.is_empty())
}

/// Caps on what runs at once, and rate buckets, by key.
type OperatorLimits = (HashMap<ScopeKey, u32>, HashMap<ScopeKey, Bucket>);

/// The handler and tenant limits set for any of `keys`: their caps on what
/// runs at once and their rate buckets (a new one full at `now`).
async fn operator_limits(
    tx: &mut Tx,
    keys: &[[ScopeKey; 3]],
    now: Millis,
) -> StoreResult<OperatorLimits> {
    let wanted: Vec<&str> = keys
        .iter()
        .flat_map(|k| [k[0].as_str(), k[1].as_str()])
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let rows = sql::fetch_chunked(&mut *tx, &wanted, |chunk| {
        let mut s = Sql::new(
            "SELECT scope_key, max_running, rate_per_sec, rate_tokens, rate_at \
             FROM concurrency_limits WHERE scope_key IN ",
        );
        s.list(chunk.iter().copied());
        s
    })
    .await?;
    let mut limits = HashMap::with_capacity(rows.len());
    let mut buckets = HashMap::new();
    for row in &rows {
        let r = R::new(row, "concurrency_limits");
        let Some(key) = ScopeKey::parse(&r.string("scope_key")?) else {
            continue;
        };
        if let Some(n) = r.opt_i64("max_running")? {
            limits.insert(key.clone(), u32::try_from(n).unwrap_or(u32::MAX));
        }
        if let Some(rate) = r.opt_f64("rate_per_sec")? {
            let full = Bucket::full(rate, now);
            buckets.insert(
                key,
                Bucket {
                    rate,
                    tokens: r.opt_f64("rate_tokens")?.unwrap_or(full.tokens),
                    at: r.opt_time("rate_at")?.unwrap_or(now),
                },
            );
        }
    }
    Ok((limits, buckets))
}

/// Live executions per key, and the rows of those no longer live deleted.
async fn count_in_use(tx: &mut Tx, keys: &[&str]) -> StoreResult<HashMap<ScopeKey, u32>> {
    let rows = sql::fetch_chunked(&mut *tx, keys, |chunk| {
        let mut s = Sql::new(
            "SELECT s.scope_key AS scope_key, s.execution_id AS execution_id, \
             e.status AS status FROM concurrency_slots s \
             LEFT JOIN executions e ON e.id = s.execution_id WHERE s.scope_key IN ",
        );
        s.list(chunk.iter().copied());
        s
    })
    .await?;
    let mut in_use: HashMap<ScopeKey, u32> = HashMap::new();
    let mut ended = BTreeSet::new();
    for row in &rows {
        let r = R::new(row, "concurrency_slots");
        let live = r
            .opt_exec_status("status")?
            .is_some_and(|s| OCCUPYING.contains(&s));
        if live {
            if let Some(key) = ScopeKey::parse(&r.string("scope_key")?) {
                *in_use.entry(key).or_default() += 1;
            }
        } else {
            ended.insert(r.string("execution_id")?);
        }
    }
    let ended: Vec<String> = ended.into_iter().collect();
    for chunk in ended.chunks(CHUNK) {
        Sql::new("DELETE FROM concurrency_slots WHERE execution_id IN ")
            .list(chunk.iter())
            .execute(&mut *tx)
            .await?;
    }
    Ok(in_use)
}

/// Deletes up to `limit` rows whose execution holds no slot any more, under
/// the gate's lock, as a gate does.
pub(crate) async fn purge(tx: &mut Tx, limit: u32) -> StoreResult<u64> {
    lock(tx).await?;
    let mut s = Sql::new(
        "SELECT s.execution_id AS execution_id FROM concurrency_slots s \
         LEFT JOIN executions e ON e.id = s.execution_id \
         WHERE e.id IS NULL OR e.status NOT IN ",
    );
    s.list(OCCUPYING.iter().map(|st| st.as_str()))
        .push(" LIMIT ")
        .bind(limit);
    let rows = s.fetch_all(&mut *tx).await?;
    let mut ended = BTreeSet::new();
    for row in &rows {
        ended.insert(R::new(row, "concurrency_slots").string("execution_id")?);
    }
    let ended: Vec<String> = ended.into_iter().collect();
    let mut gone = 0;
    for chunk in ended.chunks(CHUNK) {
        gone += Sql::new("DELETE FROM concurrency_slots WHERE execution_id IN ")
            .list(chunk.iter())
            .execute(&mut *tx)
            .await?;
    }
    Ok(gone)
}

/// `SELECT scope_key, COUNT(*)` of live executions holding a slot, for `key`
/// or (`None`) every key.
fn usage_sql(key: Option<&str>) -> Sql {
    let mut s = Sql::new(
        "SELECT s.scope_key AS scope_key, COUNT(*) AS n FROM concurrency_slots s \
         JOIN executions e ON e.id = s.execution_id WHERE e.status IN ",
    );
    s.list(OCCUPYING.iter().map(|st| st.as_str()));
    if let Some(key) = key {
        s.push(" AND s.scope_key = ").bind(key);
    }
    s.push(" GROUP BY s.scope_key");
    s
}

#[async_trait]
impl LimitStore for SqlStore {
    async fn limits_list(&self) -> StoreResult<Vec<LimitUsage>> {
        let rows = Sql::new(
            "SELECT scope_key, scope, name, max_running, rate_per_sec FROM concurrency_limits \
             ORDER BY scope_key",
        )
        .fetch_all(self.read())
        .await?;
        let used = usage_sql(None).fetch_all(self.read()).await?;
        let mut running: HashMap<String, u32> = HashMap::new();
        for row in &used {
            let r = R::new(row, "concurrency_slots");
            running.insert(r.string("scope_key")?, r.u32("n")?);
        }
        rows.iter()
            .map(|row| {
                let r = R::new(row, "concurrency_limits");
                let scope = r.parsed("scope", Scope::parse)?;
                Ok(LimitUsage {
                    limit: Limit {
                        scope,
                        name: r.string("name")?,
                        max_running: r
                            .opt_i64("max_running")?
                            .map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
                        rate_per_sec: r.opt_f64("rate_per_sec")?,
                    },
                    running: running.get(&r.string("scope_key")?).copied().unwrap_or(0),
                })
            })
            .collect()
    }

    async fn limit_set(&self, limit: &Limit, now: Millis) -> StoreResult<()> {
        if limit.scope == Scope::Job {
            return Err(StoreError::Corrupt {
                table: "concurrency_limits",
                reason: "a job's limit is its maxConcurrency".into(),
            });
        }
        let key = limit.key();
        let row = Fields::new()
            .with("scope_key", key.as_str())
            .with("scope", limit.scope.as_str())
            .with("name", limit.name.as_str())
            .with("max_running", limit.max_running)
            .with("rate_per_sec", limit.rate_per_sec)
            // A changed rate starts with a full bucket.
            .with("rate_tokens", None::<f64>)
            .with("rate_at", time(None::<Millis>))
            .with("updated_at", time(now));
        Sql::new("INSERT INTO concurrency_limits")
            .rows([&row])
            .upsert(
                "scope_key",
                &[
                    "max_running",
                    "rate_per_sec",
                    "rate_tokens",
                    "rate_at",
                    "updated_at",
                ],
            )
            .execute(self.write())
            .await?;
        if limit.max_running.is_none() {
            return Ok(());
        }
        // What already runs under a new limit counts against it from the
        // start: its executions take their slots now.
        let mut seed = Sql::new("");
        seed.insert_ignore_into()
            .push("concurrency_slots (scope_key, execution_id, created_at) SELECT ")
            .bind(key.as_str())
            .push(", e.id, ")
            .bind(time(now))
            .push(" FROM executions e JOIN jobs j ON j.id = e.job_id WHERE e.status IN ")
            .list(OCCUPYING.iter().map(|st| st.as_str()));
        match limit.scope {
            Scope::Handler => seed.push(" AND j.handler = "),
            _ => seed.push(" AND e.tenant = "),
        };
        seed.bind(limit.name.as_str())
            .on_conflict_ignore()
            .execute(self.write())
            .await?;
        Ok(())
    }

    async fn limit_delete(&self, scope: Scope, name: &str) -> StoreResult<bool> {
        let key = ScopeKey::new(scope, name);
        let gone = Sql::new("DELETE FROM concurrency_limits WHERE scope_key = ")
            .bind(key.as_str())
            .execute(self.write())
            .await?;
        // Without a limit its key is no longer gated, so its rows would
        // never be cleaned up; a new limit counts from what it admits.
        Sql::new("DELETE FROM concurrency_slots WHERE scope_key = ")
            .bind(key.as_str())
            .execute(self.write())
            .await?;
        Ok(gone > 0)
    }

    async fn concurrency_in_use(&self, key: &ScopeKey) -> StoreResult<u32> {
        let row = usage_sql(Some(key.as_str()))
            .fetch_optional(self.read())
            .await?;
        match row {
            Some(row) => R::new(&row, "concurrency_slots").u32("n"),
            None => Ok(0),
        }
    }
}
