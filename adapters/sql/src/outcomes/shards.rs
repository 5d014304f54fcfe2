//! The triggers of broadcast and sharded jobs that a batch of results may
//! end: every shard of each, read once per batch, so that the job moves,
//! records its last result and gets its callback only when the trigger's
//! last shard ends, with the aggregate outcome.
//!
//! The shards are read after `load` locked the job rows (every writer of a
//! job's executions' outcomes locks its job first; `load` leaves a workflow
//! node's job unlocked only for executions that are not fanned out), under
//! READ COMMITTED:
//! two dispatchers applying the last two shards of one trigger take turns,
//! and the second one sees the first one's shard ended.

use crate::db::Tx;
use crate::rows::{self, EXEC_COLS};
use crate::sql::{Sql, fetch_chunked};
use kairos_core::execution::{ExecStatus, Execution};
use kairos_core::shard::{self, TriggerEnd};
use kairos_core::store::StoreResult;
use kairos_core::time::Millis;
use std::collections::{BTreeMap, HashMap, HashSet};

/// A trigger: its job and due time.
type Key = (String, Millis);

/// Every shard of the fanned-out triggers a batch touches, by shard index,
/// kept up to date as the batch ends them.
#[derive(Default)]
pub(super) struct Triggers {
    shards: HashMap<Key, BTreeMap<u32, Execution>>,
}

/// What ending one execution did to its trigger.
pub(super) enum Ended {
    /// Not fanned out: the execution is the trigger.
    Single,
    /// Another shard is still live.
    Pending,
    /// It was the last shard: the trigger's outcome and every shard, by index.
    Last(ExecStatus, Vec<Execution>),
}

impl Triggers {
    /// Reads every shard of the fanned-out triggers of `ending` (executions
    /// with a final outcome in the batch).
    pub(super) async fn load(tx: &mut Tx, ending: &[&Execution]) -> StoreResult<Triggers> {
        let keys: HashSet<Key> = ending
            .iter()
            .filter(|e| e.shard.is_fanned_out())
            .map(|e| (e.job_id.clone(), e.scheduled_at))
            .collect();
        let mut triggers = Triggers::default();
        if keys.is_empty() {
            return Ok(triggers);
        }
        let jobs: Vec<&str> = {
            let set: HashSet<&str> = keys.iter().map(|(j, _)| j.as_str()).collect();
            set.into_iter().collect()
        };
        let times: Vec<Millis> = {
            let set: HashSet<Millis> = keys.iter().map(|(_, t)| *t).collect();
            set.into_iter().collect()
        };
        let found = fetch_chunked(&mut *tx, &jobs, |chunk| {
            let mut s = Sql::new("SELECT ");
            s.columns("e", &EXEC_COLS)
                .push(" FROM executions e WHERE e.job_id IN ")
                .list(chunk.iter().copied())
                .push(" AND e.scheduled_at IN ")
                .list(times.iter().map(|t| crate::sql::time(*t)));
            s
        })
        .await?;
        for row in &found {
            let e = rows::execution(row)?;
            let key = (e.job_id.clone(), e.scheduled_at);
            if keys.contains(&key) {
                triggers
                    .shards
                    .entry(key)
                    .or_default()
                    .insert(e.shard.index, e);
            }
        }
        Ok(triggers)
    }

    /// Records that `exec` reached its final state; what that did to its
    /// trigger.
    pub(super) fn end(&mut self, exec: &Execution) -> Ended {
        if !exec.shard.is_fanned_out() {
            return Ended::Single;
        }
        let Some(shards) = self
            .shards
            .get_mut(&(exec.job_id.clone(), exec.scheduled_at))
        else {
            // Not read (cannot happen: every ending execution's trigger
            // is): treat it as a trigger of its own rather than stall.
            return Ended::Single;
        };
        shards.insert(exec.shard.index, exec.clone());
        // A trigger whose rows are not all there yet (cannot happen: they
        // are inserted in one claim) is not over.
        if shards.len() < exec.shard.count as usize {
            return Ended::Pending;
        }
        match shard::aggregate(shards.values().map(|e| e.status)) {
            TriggerEnd::Pending => Ended::Pending,
            TriggerEnd::Ended(outcome) => Ended::Last(outcome, shards.values().cloned().collect()),
        }
    }
}
