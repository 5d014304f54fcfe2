//! Fan-out of one trigger: a job's [`ExecutionMode`] (one execution, one per
//! eligible worker, or `shardCount` of them), the [`Shard`] each execution
//! runs, and the trigger's aggregate outcome once its last shard ends.
//!
//! Every execution of a fanned-out trigger is a normal execution (its own
//! attempts, retries and worker); only the job's move, its last result and
//! the callback wait for the trigger's last shard, and take the aggregate.

use crate::execution::{ExecStatus, Execution};
use crate::job::{Job, JobTransition};
use crate::store::Claim;
use crate::time::{Millis, to_rfc3339};
use serde::{Deserialize, Serialize};

/// Default upper bound of `shardCount` (`KAIROS_API_MAX_SHARD_COUNT`).
pub const DEFAULT_MAX_SHARD_COUNT: u32 = 1024;

/// Most executions one claim round creates once triggers are fanned out
/// (see [`within_budget`]): a batch of due sharded jobs could otherwise
/// make one claim transaction insert batch × `shardCount` rows.
pub const FAN_OUT_PER_ROUND: usize = 10_000;

/// How many executions one trigger of a job makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExecutionMode {
    /// One execution on one worker chosen by the balancer.
    #[default]
    Single,
    /// One execution per eligible worker (serving the handler, in the job's
    /// group) alive when the trigger is claimed, each sent to its worker.
    Broadcast,
    /// `count` executions, shard indices `0..count`, each placed by the
    /// balancer and retried on its own.
    Sharded {
        /// Executions per trigger, at least 1.
        count: u32,
    },
}

/// Why an execution mode was refused; `field` names the API field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct ModeError {
    /// `executionMode` or `shardCount`.
    pub field: &'static str,
    /// What is wrong.
    pub reason: String,
}

impl ExecutionMode {
    /// The names the API takes and shows.
    pub const NAMES: [&'static str; 3] = ["single", "broadcast", "sharded"];

    /// The name stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            ExecutionMode::Single => "single",
            ExecutionMode::Broadcast => "broadcast",
            ExecutionMode::Sharded { .. } => "sharded",
        }
    }

    /// `shardCount` of a sharded job, `None` otherwise.
    pub fn shard_count(self) -> Option<u32> {
        match self {
            ExecutionMode::Sharded { count } => Some(count),
            _ => None,
        }
    }

    /// The mode a request asks for: `mode` absent is `single`; `shardCount`
    /// is required for `sharded` (1 to `max`) and refused for the others.
    pub fn parse(
        mode: Option<&str>,
        shard_count: Option<u64>,
        max: u32,
    ) -> Result<Self, ModeError> {
        let err = |field, reason: String| ModeError { field, reason };
        let mode = match mode.unwrap_or("single") {
            "single" => ExecutionMode::Single,
            "broadcast" => ExecutionMode::Broadcast,
            "sharded" => {
                let Some(n) = shard_count else {
                    return Err(err(
                        "shardCount",
                        "required when executionMode is \"sharded\"".into(),
                    ));
                };
                return match u32::try_from(n) {
                    Ok(count) if (1..=max).contains(&count) => Ok(ExecutionMode::Sharded { count }),
                    _ => Err(err("shardCount", format!("must be between 1 and {max}"))),
                };
            }
            other => {
                return Err(err(
                    "executionMode",
                    format!("unknown mode {other:?} (expected single, broadcast or sharded)"),
                ));
            }
        };
        match shard_count {
            Some(_) => Err(err(
                "shardCount",
                format!(
                    "only allowed with executionMode \"sharded\" (this job is \"{}\")",
                    mode.as_str()
                ),
            )),
            None => Ok(mode),
        }
    }

    /// Reads the stored columns back; `None` for an unknown name.
    pub fn from_stored(mode: &str, shard_count: Option<u32>) -> Option<Self> {
        match (mode, shard_count) {
            ("single", _) => Some(ExecutionMode::Single),
            ("broadcast", _) => Some(ExecutionMode::Broadcast),
            ("sharded", Some(count)) if count >= 1 => Some(ExecutionMode::Sharded { count }),
            _ => None,
        }
    }
}

/// The part of its trigger's work one execution does: `index` of `count`.
/// `(0, 1)` for a job in `single` mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Shard {
    /// From 0.
    pub index: u32,
    /// Executions of the trigger, at least 1.
    pub count: u32,
}

impl Shard {
    /// The only shard of a single execution.
    pub const SINGLE: Shard = Shard { index: 0, count: 1 };

    /// Shard `index` of `count`.
    pub fn new(index: u32, count: u32) -> Self {
        Shard { index, count }
    }

    /// Whether its trigger made more than one execution: its end alone
    /// does not end the trigger.
    pub fn is_fanned_out(self) -> bool {
        self.count > 1
    }

    /// As the dispatch message carries it: absent for a single execution,
    /// so older workers and SDKs see the message they always saw.
    pub fn for_message(self) -> Option<Shard> {
        self.is_fanned_out().then_some(self)
    }
}

impl Default for Shard {
    fn default() -> Self {
        Shard::SINGLE
    }
}

/// Where a fanned-out trigger is once one of its executions ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TriggerEnd {
    /// Some shard is still live: the job waits.
    Pending,
    /// Every shard ended: the trigger's outcome.
    Ended(ExecStatus),
}

/// The trigger's outcome from its shards' statuses: `Pending` while one is
/// live, then `succeeded` if every shard succeeded, else `failed`.
pub fn aggregate(statuses: impl IntoIterator<Item = ExecStatus>) -> TriggerEnd {
    let mut all_ok = true;
    for s in statuses {
        if !s.is_terminal() {
            return TriggerEnd::Pending;
        }
        all_ok &= s == ExecStatus::Succeeded;
    }
    TriggerEnd::Ended(if all_ok {
        ExecStatus::Succeeded
    } else {
        ExecStatus::Failed
    })
}

/// The job move a trigger's end makes: the one planned from its last
/// shard's own outcome, with a one-shot's end following the aggregate
/// instead (a last shard that succeeded after another failed fails the job).
pub fn job_move(planned: Option<JobTransition>, outcome: ExecStatus) -> Option<JobTransition> {
    match planned {
        Some(JobTransition::Succeed | JobTransition::Fail) => {
            Some(if outcome == ExecStatus::Succeeded {
                JobTransition::Succeed
            } else {
                JobTransition::Fail
            })
        }
        other => other,
    }
}

/// The callback body of a fanned-out trigger whose last shard is `last`:
/// the usual fields (the status is the aggregate), plus `shardCount` and
/// each shard's own result, by index.
pub fn callback_payload(
    last: &Execution,
    outcome: ExecStatus,
    shards: &[&Execution],
) -> serde_json::Value {
    let t = |ms: Option<Millis>| ms.map(to_rfc3339);
    let mut body = crate::callback::payload(last);
    body["status"] = outcome.as_str().into();
    body["shardCount"] = shards.len().into();
    body["shards"] = shards
        .iter()
        .map(|e| {
            serde_json::json!({
                "shardIndex": e.shard.index,
                "executionId": e.id,
                "status": e.status.as_str(),
                "attempt": e.attempt,
                "workerId": e.worker_id,
                "output": e.output,
                "error": e.error,
                "startedAt": t(e.started_at),
                "finishedAt": t(e.finished_at),
            })
        })
        .collect();
    body
}

/// Fans each claim of a broadcast or sharded job out into one claim per
/// shard, each with its own execution id; claims of single jobs pass
/// through. A sharded trigger gets `count` claims without a worker (the
/// balancer places each); a broadcast one gets a claim per worker
/// `eligible` lists for its job (in that order: the position is the shard
/// index), each sent to its worker. A broadcast with no eligible worker
/// stays one claim, shard 0 of 1, that waits for a worker like any other.
pub fn fan_out(claims: Vec<Claim>, mut eligible: impl FnMut(&Job) -> Vec<String>) -> Vec<Claim> {
    let mut out = Vec::with_capacity(claims.len());
    for c in claims {
        let workers: Vec<Option<String>> = match c.job.execution_mode {
            ExecutionMode::Single => {
                out.push(c);
                continue;
            }
            ExecutionMode::Sharded { count } => vec![None; count as usize],
            ExecutionMode::Broadcast => eligible(&c.job).into_iter().map(Some).collect(),
        };
        let Ok(count) = u32::try_from(workers.len()) else {
            out.push(c);
            continue;
        };
        if count <= 1 && workers.iter().all(Option::is_none) {
            out.push(c);
            continue;
        }
        for (index, worker_id) in (0..count).zip(workers) {
            out.push(Claim {
                execution_id: if index == 0 {
                    c.execution_id.clone()
                } else {
                    uuid::Uuid::now_v7().to_string()
                },
                worker_id,
                shard: Shard::new(index, count),
                ..c.clone()
            });
        }
    }
    out
}

/// Splits fanned-out claims into those of the first jobs whose executions
/// fit in `budget` — whole jobs only (a job's claims win or lose together),
/// and always the first job's — and the rest. The jobs left out are still
/// due, and a later round claims them.
pub fn within_budget(claims: Vec<Claim>, budget: usize) -> (Vec<Claim>, Vec<Claim>) {
    if claims.len() <= budget {
        return (claims, Vec::new());
    }
    let mut kept: Vec<Claim> = Vec::with_capacity(budget);
    let mut rest = claims.into_iter().peekable();
    while let Some(c) = rest.next() {
        let job = c.job.clone();
        let mut group = vec![c];
        while let Some(next) = rest.next_if(|n| std::sync::Arc::ptr_eq(&n.job, &job)) {
            group.push(next);
        }
        if !kept.is_empty() && kept.len() + group.len() > budget {
            group.extend(rest);
            return (kept, group);
        }
        kept.extend(group);
    }
    (kept, Vec::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(mode: ExecutionMode, at: Millis) -> Claim {
        let job = Job {
            id: "j".into(),
            tenant: "t".into(),
            name: "n".into(),
            handler: "noop".into(),
            params: serde_json::Value::Null,
            sensitive_params: Vec::new(),
            schedule: crate::schedule::Schedule::Once { at },
            next_trigger_at: Some(at),
            status: crate::job::JobStatus::Scheduled,
            version: 1,
            revision: 1,
            callback_url: None,
            client_request_id: None,
            request_hash: None,
            retry: Default::default(),
            timeout_ms: None,
            worker_group: None,
            priority: Default::default(),
            lane: Default::default(),
            max_concurrency: None,
            trace: None,
            execution_mode: mode,
            pause_reason: None,
            last_result: None,
            last_result_at: None,
            fail_streak: 0,
            created_at: 0,
            updated_at: 0,
        };
        Claim {
            job: std::sync::Arc::new(job),
            scheduled_at: at,
            next_trigger_at: None,
            execution_id: format!("e{at}"),
            worker_id: None,
            shard: Shard::SINGLE,
        }
    }

    #[test]
    fn claims_fan_out_per_mode() {
        let workers = |_: &Job| vec!["a".to_string(), "b".to_string(), "c".to_string()];
        let out = fan_out(
            vec![
                claim(ExecutionMode::Single, 1),
                claim(ExecutionMode::Sharded { count: 4 }, 2),
                claim(ExecutionMode::Broadcast, 3),
            ],
            workers,
        );
        let seen: Vec<(Millis, u32, u32, Option<&str>)> = out
            .iter()
            .map(|c| {
                (
                    c.scheduled_at,
                    c.shard.index,
                    c.shard.count,
                    c.worker_id.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                (1, 0, 1, None),
                (2, 0, 4, None),
                (2, 1, 4, None),
                (2, 2, 4, None),
                (2, 3, 4, None),
                (3, 0, 3, Some("a")),
                (3, 1, 3, Some("b")),
                (3, 2, 3, Some("c")),
            ]
        );
        let ids: std::collections::HashSet<&str> =
            out.iter().map(|c| c.execution_id.as_str()).collect();
        assert_eq!(ids.len(), out.len(), "one execution id per shard");
    }

    #[test]
    fn a_round_fans_out_whole_jobs_within_its_budget() {
        let out = fan_out(
            vec![
                claim(ExecutionMode::Sharded { count: 4 }, 1),
                claim(ExecutionMode::Single, 2),
                claim(ExecutionMode::Sharded { count: 3 }, 3),
            ],
            |_| Vec::new(),
        );
        let due = |cs: &[Claim]| cs.iter().map(|c| c.scheduled_at).collect::<Vec<_>>();
        let (kept, left) = within_budget(out.clone(), 6);
        assert_eq!(due(&kept), [1, 1, 1, 1, 2]);
        assert_eq!(due(&left), [3, 3, 3], "the last job waits");
        let (kept, left) = within_budget(out.clone(), 8);
        assert_eq!((kept.len(), left.len()), (8, 0));
        let (kept, left) = within_budget(out, 2);
        assert_eq!((kept.len(), left.len()), (4, 4), "the first job goes whole");
    }

    #[test]
    fn a_broadcast_without_workers_waits_as_one_execution() {
        let out = fan_out(vec![claim(ExecutionMode::Broadcast, 1)], |_| Vec::new());
        assert_eq!(out.len(), 1);
        assert_eq!(
            (out[0].shard, out[0].worker_id.as_deref()),
            (Shard::SINGLE, None)
        );
        let one = fan_out(vec![claim(ExecutionMode::Broadcast, 1)], |_| {
            vec!["a".into()]
        });
        assert_eq!(
            (one[0].shard, one[0].worker_id.as_deref()),
            (Shard::SINGLE, Some("a"))
        );
    }

    #[test]
    fn modes_parse_with_their_shard_count() {
        let p = |m: Option<&str>, n: Option<u64>| ExecutionMode::parse(m, n, 16);
        assert_eq!(p(None, None), Ok(ExecutionMode::Single));
        assert_eq!(p(Some("broadcast"), None), Ok(ExecutionMode::Broadcast));
        assert_eq!(
            p(Some("sharded"), Some(16)),
            Ok(ExecutionMode::Sharded { count: 16 })
        );
        assert_eq!(p(Some("sharded"), None).unwrap_err().field, "shardCount");
        assert_eq!(p(Some("sharded"), Some(0)).unwrap_err().field, "shardCount");
        assert_eq!(
            p(Some("sharded"), Some(17)).unwrap_err().field,
            "shardCount"
        );
        assert_eq!(
            p(Some("sharded"), Some(u64::MAX)).unwrap_err().field,
            "shardCount"
        );
        assert_eq!(p(Some("single"), Some(2)).unwrap_err().field, "shardCount");
        assert_eq!(
            p(Some("broadcast"), Some(2)).unwrap_err().field,
            "shardCount"
        );
        assert_eq!(p(Some("fanout"), None).unwrap_err().field, "executionMode");
    }

    #[test]
    fn stored_modes_round_trip() {
        for m in [
            ExecutionMode::Single,
            ExecutionMode::Broadcast,
            ExecutionMode::Sharded { count: 8 },
        ] {
            assert_eq!(
                ExecutionMode::from_stored(m.as_str(), m.shard_count()),
                Some(m)
            );
        }
        assert_eq!(ExecutionMode::from_stored("sharded", None), None);
        assert_eq!(ExecutionMode::from_stored("x", None), None);
    }

    #[test]
    fn a_single_shard_is_left_out_of_the_message() {
        assert_eq!(Shard::SINGLE.for_message(), None);
        assert_eq!(Shard::new(3, 8).for_message(), Some(Shard::new(3, 8)));
        assert_eq!(
            serde_json::to_value(Shard::new(3, 8)).unwrap(),
            serde_json::json!({"index": 3, "count": 8})
        );
    }

    #[test]
    fn the_trigger_ends_with_its_last_shard() {
        use ExecStatus::*;
        assert_eq!(aggregate([Succeeded, Running]), TriggerEnd::Pending);
        assert_eq!(aggregate([Pending, Failed]), TriggerEnd::Pending);
        assert_eq!(
            aggregate([Succeeded, Succeeded]),
            TriggerEnd::Ended(Succeeded)
        );
        assert_eq!(aggregate([Succeeded, TimedOut]), TriggerEnd::Ended(Failed));
        assert_eq!(aggregate([Cancelled, Succeeded]), TriggerEnd::Ended(Failed));
    }

    #[test]
    fn a_one_shot_ends_as_its_trigger() {
        use JobTransition::*;
        assert_eq!(job_move(Some(Succeed), ExecStatus::Failed), Some(Fail));
        assert_eq!(job_move(Some(Fail), ExecStatus::Succeeded), Some(Succeed));
        assert_eq!(
            job_move(Some(Reschedule), ExecStatus::Failed),
            Some(Reschedule)
        );
        assert_eq!(job_move(None, ExecStatus::Failed), None);
    }
}
