//! The soak's workflows: while the faults run, workflows of three shapes
//! (a 1 → 3 → 1 DAG, `noop` first and last and `sleep` in the middle, so
//! worker kills land on running nodes; the same with a failing middle node,
//! its failure handled by an `onFailure` branch or not) are created through
//! the API with `clientRequestId` retries, some are triggered by hand
//! again, and one has a cron schedule that fires a known, bounded set of
//! times. Afterwards [`check`] reads the database: every run terminal in
//! the state its shape implies, every node in its state, one execution per
//! node of a run (nodes are internal jobs: no node job has an execution no
//! node row points at, so no node ran twice as two triggers; retries of one
//! execution are attempts), and each node's dispatch carried its parents'
//! outputs (a `noop` node's output is its params, a `sleep` node's
//! `{"sleptMs": …}`).

use super::Rng;
use kairos_core::time::Millis;
use serde_json::{Value, json};
use sqlx::MySqlPool;
use sqlx::types::chrono::{DateTime, NaiveDateTime};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

/// What a workflow is made of, and so how each of its runs must end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// a → b1, b2, b3 → c (`b1` and `b3` sleep, the others are `noop`):
    /// succeeds.
    Diamond,
    /// The diamond with `b2` running `fail`, and `b2 → fix` on failure: `c`
    /// is skipped, `fix` runs, and the run succeeds (the failure is handled).
    Repaired,
    /// The diamond with `b2` running `fail` and nothing on failure: `c` is
    /// skipped and the run fails.
    Broken,
}

/// The nodes of the 1 → 3 → 1 DAG, and their parents.
const DIAMOND: [(&str, &[&str]); 5] = [
    ("a", &[]),
    ("b1", &["a"]),
    ("b2", &["a"]),
    ("b3", &["a"]),
    ("c", &["b1", "b2", "b3"]),
];

impl Shape {
    fn nodes(self) -> Vec<(&'static str, &'static [&'static str])> {
        let mut nodes = DIAMOND.to_vec();
        if self == Shape::Repaired {
            nodes.push(("fix", &["b2"]));
        }
        nodes
    }

    /// How long a `sleep` node of workflow `i` sleeps: 200–999 ms, so some
    /// are running when a worker is killed (the `sleep` handler's limit
    /// applies to them too).
    fn sleep_ms(i: usize, node: &str) -> Option<usize> {
        let offset = match node {
            "b1" => 0,
            "b3" => 397,
            _ => return None,
        };
        Some(200 + (i * 131 + offset) % 800)
    }

    /// The params of node `node` of workflow number `i`.
    fn params(i: usize, node: &str) -> Value {
        match Shape::sleep_ms(i, node) {
            Some(ms) => json!({"wf": i, "node": node, "ms": ms}),
            None => json!({"wf": i, "node": node}),
        }
    }

    /// What node `node` of workflow `i` answers when it succeeds: a `noop`
    /// node its params, a `sleep` node how long it slept.
    fn output(i: usize, node: &str) -> Value {
        match Shape::sleep_ms(i, node) {
            Some(ms) => json!({"sleptMs": ms}),
            None => Shape::params(i, node),
        }
    }

    fn body(self, i: usize, seed: u64, schedule: Option<&str>) -> Value {
        let nodes: Vec<Value> = self
            .nodes()
            .iter()
            .map(|(id, _)| {
                if *id == "b2" && self != Shape::Diamond {
                    // One attempt: it fails for good (or is lost with its
                    // worker, which fails the node as well).
                    json!({"id": id, "handler": "fail", "maxAttempts": 1,
                           "params": {"message": "soak node failure"}})
                } else {
                    let handler = match Shape::sleep_ms(i, id) {
                        Some(_) => "sleep",
                        None => "noop",
                    };
                    json!({"id": id, "handler": handler, "maxAttempts": 10,
                           "retryBackoffMs": 100, "params": Shape::params(i, id)})
                }
            })
            .collect();
        let mut edges: Vec<Value> = Vec::new();
        for (id, parents) in self.nodes() {
            for p in parents {
                let condition = if id == "fix" {
                    "onFailure"
                } else {
                    "onSuccess"
                };
                edges.push(json!({"from": p, "to": id, "condition": condition}));
            }
        }
        let mut body = json!({
            "name": format!("soak-wf-{i}"),
            "nodes": nodes,
            "edges": edges,
            "clientRequestId": format!("soak-wf-{seed}-{i}"),
        });
        if let Some(cron) = schedule {
            body["cronExpr"] = json!(cron);
        }
        body
    }

    fn run_status(self) -> &'static str {
        match self {
            Shape::Diamond | Shape::Repaired => "succeeded",
            Shape::Broken => "failed",
        }
    }

    fn node_status(self, node: &str) -> &'static str {
        match (self, node) {
            (Shape::Diamond, _) => "succeeded",
            (_, "b2") => "failed",
            (_, "c") => "skipped",
            _ => "succeeded",
        }
    }
}

/// The execution states a node in `node_status` may have ended with: a
/// failed node's only attempt failed, or was lost with its worker.
fn execution_statuses(node_status: &str) -> &'static [&'static str] {
    match node_status {
        "succeeded" => &["succeeded"],
        "failed" => &["failed", "lost"],
        _ => &[],
    }
}

/// One workflow the soak made.
#[derive(Debug)]
pub struct Made {
    /// Its number (in its name, params and `clientRequestId`).
    pub i: usize,
    pub id: String,
    pub shape: Shape,
    /// The trigger times of its cron schedule, if it has one.
    pub cron: Option<Vec<Millis>>,
    /// Manual triggers answered `202`.
    pub triggered: usize,
    /// Manual triggers whose answer was lost or a 5xx: each may or may not
    /// have started a run.
    pub unsure: usize,
}

/// A cron expression (seconds first, UTC) firing `count` times, `every`
/// seconds apart, within one minute starting at least `lead` from now, and
/// those trigger times. One minute, so the seconds list is the whole set:
/// the schedule fires these times and (a year later) no others the soak
/// waits for.
fn bounded_cron(now: Millis, lead: Millis, count: i64, every: i64) -> (String, Vec<Millis>) {
    let start = (now + lead).div_euclid(1000) + 1;
    let span = (count - 1) * every;
    // The first trigger's second in its minute: where `start` falls if the
    // whole set fits before the minute ends, else at the next minute.
    let first = if start % 60 + span < 60 {
        start
    } else {
        (start / 60 + 1) * 60
    };
    let times: Vec<Millis> = (0..count).map(|k| (first + k * every) * 1000).collect();
    let at = DateTime::from_timestamp_millis(times[0]).expect("a time");
    let seconds: Vec<String> = times.iter().map(|t| (t / 1000 % 60).to_string()).collect();
    let expr = format!("{} {}", seconds.join(","), at.format("%-M %-H %-d %-m *"));
    (expr, times)
}

/// Creates one workflow, retrying until answered (see
/// [`super::post_until_created`]); the answer.
async fn create(http: &reqwest::Client, base: &str, body: &Value) -> Value {
    super::post_until_created(http, &format!("{base}/openapi/workflows"), body).await
}

/// Triggers `made` once, retrying until answered `202`: a trigger has no
/// idempotency key, so each attempt whose answer was lost (or a 5xx, which
/// may come after the commit) is counted as unsure. 429 is refused before
/// anything is written.
async fn trigger(http: &reqwest::Client, base: &str, made: &mut Made) {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let sent = http
            .post(format!("{base}/openapi/workflows/{}/trigger", made.id))
            .timeout(Duration::from_secs(10))
            .send()
            .await;
        match sent {
            Ok(r) if r.status().as_u16() == 202 => {
                made.triggered += 1;
                return;
            }
            Ok(r) if r.status().as_u16() == 429 => {}
            Ok(r) if r.status().is_server_error() => made.unsure += 1,
            Ok(r) => panic!(
                "trigger of {} refused with {}: {}",
                made.id,
                r.status(),
                r.text().await.unwrap_or_default()
            ),
            Err(_) => made.unsure += 1,
        }
        assert!(Instant::now() < deadline, "could not trigger {}", made.id);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Creates the cron workflow and `count` more, a second or two apart,
/// triggering one made earlier by hand after about every other create.
pub async fn drive(
    http: reqwest::Client,
    base: String,
    seed: u64,
    mut rng: Rng,
    count: usize,
) -> Vec<Made> {
    let mut made: Vec<Made> = Vec::with_capacity(count + 1);
    let (expr, times) = bounded_cron(kairos_core::time::now_ms(), 10_000, 6, 6);
    println!("workflows: cron {expr:?} fires {} times", times.len());
    let reply = create(&http, &base, &Shape::Diamond.body(0, seed, Some(&expr))).await;
    made.push(Made {
        i: 0,
        id: reply["workflow"]["id"]
            .as_str()
            .expect("workflow id")
            .into(),
        shape: Shape::Diamond,
        cron: Some(times),
        triggered: 0,
        unsure: 0,
    });
    for i in 1..=count {
        tokio::time::sleep(Duration::from_millis(rng.range(800, 2000))).await;
        let shape = match rng.range(0, 4) {
            0 => Shape::Repaired,
            1 => Shape::Broken,
            _ => Shape::Diamond,
        };
        let reply = create(&http, &base, &shape.body(i, seed, None)).await;
        made.push(Made {
            i,
            id: reply["workflow"]["id"]
                .as_str()
                .expect("workflow id")
                .into(),
            shape,
            cron: None,
            triggered: 0,
            unsure: 0,
        });
        if rng.range(0, 2) == 0 {
            // Not the cron workflow: its runs are counted exactly.
            let pick = rng.range(1, made.len() as u64) as usize;
            trigger(&http, &base, &mut made[pick]).await;
        }
    }
    made
}

fn ms(t: NaiveDateTime) -> Millis {
    t.and_utc().timestamp_millis()
}

/// Whether every run has ended and the cron workflow has no trigger of
/// the soak's left; `None` while not, or when the database does not answer.
pub async fn settled(pool: &MySqlPool, made: &[Made]) -> Option<()> {
    let running: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM workflow_runs WHERE status = 'running'")
            .fetch_one(pool)
            .await
            .ok()?;
    for m in made {
        let Some(last) = m.cron.as_ref().and_then(|t| t.last()) else {
            continue;
        };
        let next: Option<NaiveDateTime> =
            sqlx::query_scalar("SELECT next_trigger_at FROM workflows WHERE id = ?")
                .bind(&m.id)
                .fetch_one(pool)
                .await
                .ok()?;
        if next.is_none_or(|n| ms(n) <= *last) {
            return None;
        }
    }
    (running == 0).then_some(())
}

/// The runs a cron workflow created at `created` must have, given when
/// each run was started: the first trigger at or after the create, then
/// after each run the first trigger later than its own and not before the
/// moment it started (triggers missed meanwhile fire once, late).
fn cron_expected(times: &[Millis], created: Millis, started: &[(Millis, Millis)]) -> Vec<Millis> {
    let mut out = Vec::new();
    let mut next = times.iter().copied().find(|t| *t >= created);
    let mut fired = started.iter();
    while let Some(at) = next {
        out.push(at);
        let Some((_, started_at)) = fired.next() else {
            break;
        };
        next = times.iter().copied().find(|t| *t > at && *t >= *started_at);
    }
    out
}

/// What the soak's workflows did, for its summary line.
pub struct Summary {
    pub runs: usize,
    pub node_executions: usize,
    /// Attempts of those executions (more than one: retried after a loss).
    pub node_attempts: i64,
    /// Those that ended `lost` (a failing node's only attempt, with its worker).
    pub nodes_lost: usize,
    pub cron: String,
}

/// Checks everything the module's doc promises; the problems found.
pub async fn check(pool: &MySqlPool, made: &[Made]) -> (Vec<String>, Summary) {
    let mut wrong = Vec::new();
    let wfs: Vec<(String, String, NaiveDateTime)> = sqlx::query_as(
        "SELECT id, CAST(node_jobs AS CHAR), created_at FROM workflows ORDER BY created_at",
    )
    .fetch_all(pool)
    .await
    .expect("workflows");
    if wfs.len() != made.len() {
        wrong.push(format!(
            "{} workflows stored, {} created (one per clientRequestId)",
            wfs.len(),
            made.len()
        ));
    }
    let wf_rows: HashMap<&str, (BTreeMap<String, String>, Millis)> = wfs
        .iter()
        .map(|(id, jobs, created)| {
            let jobs = serde_json::from_str(jobs).expect("node_jobs is a JSON object");
            (id.as_str(), (jobs, ms(*created)))
        })
        .collect();

    let runs: Vec<(String, String, String, NaiveDateTime, NaiveDateTime)> = sqlx::query_as(
        "SELECT id, workflow_id, status, scheduled_at, created_at FROM workflow_runs \
         ORDER BY scheduled_at",
    )
    .fetch_all(pool)
    .await
    .expect("runs");
    let mut runs_of: HashMap<&str, Vec<(&str, &str, Millis, Millis)>> = HashMap::new();
    for (id, wf, status, at, created) in &runs {
        runs_of
            .entry(wf.as_str())
            .or_default()
            .push((id, status, ms(*at), ms(*created)));
    }
    let nodes: Vec<(String, String, String, Option<String>)> =
        sqlx::query_as("SELECT run_id, node_id, status, execution_id FROM workflow_run_nodes")
            .fetch_all(pool)
            .await
            .expect("run nodes");
    let mut nodes_of: HashMap<&str, HashMap<&str, (&str, Option<&str>)>> = HashMap::new();
    for (run, node, status, exec) in &nodes {
        nodes_of
            .entry(run.as_str())
            .or_default()
            .insert(node.as_str(), (status.as_str(), exec.as_deref()));
    }
    // Every execution of every node job, whether or not a node row names it.
    let execs: Vec<(String, String, String, NaiveDateTime, Option<String>, i64)> = sqlx::query_as(
        "SELECT e.id, e.job_id, e.status, e.scheduled_at, CAST(e.parent_outputs AS CHAR), e.attempt \
         FROM executions e JOIN jobs j ON j.id = e.job_id WHERE j.workflow_id IS NOT NULL",
    )
    .fetch_all(pool)
    .await
    .expect("node executions");
    let exec_by_id: HashMap<&str, (&str, &str, Millis, Option<Value>)> = execs
        .iter()
        .map(|(id, job, status, at, parents, _)| {
            let parents = parents
                .as_deref()
                .map(|p| serde_json::from_str(p).expect("parent_outputs is JSON"));
            (
                id.as_str(),
                (job.as_str(), status.as_str(), ms(*at), parents),
            )
        })
        .collect();

    let mut named: HashSet<&str> = HashSet::new();
    let mut cron_line = String::from("no cron workflow");
    for m in made {
        let Some((jobs, created)) = wf_rows.get(m.id.as_str()) else {
            wrong.push(format!("workflow {} ({}) not stored", m.id, m.i));
            continue;
        };
        let runs = runs_of.get(m.id.as_str()).cloned().unwrap_or_default();
        if let Some(times) = &m.cron {
            let started: Vec<(Millis, Millis)> = runs.iter().map(|r| (r.2, r.3)).collect();
            let expected = cron_expected(times, *created, &started);
            let fired: Vec<Millis> = started.iter().map(|s| s.0).collect();
            if fired != expected {
                wrong.push(format!(
                    "cron workflow {}: runs at {fired:?} (started {started:?}), expected \
                     {expected:?} of triggers {times:?} (created {created})",
                    m.id
                ));
            }
            cron_line = format!(
                "cron: {} of its {} triggers ran (the rest missed while no dispatcher led)",
                fired.len(),
                times.len()
            );
        } else {
            // The create's run, one per trigger answered, and perhaps one
            // per trigger whose answer was lost.
            let (least, most) = (1 + m.triggered, 1 + m.triggered + m.unsure);
            if runs.len() < least || runs.len() > most {
                wrong.push(format!(
                    "workflow {} ({}) has {} runs, expected {least}..={most}",
                    m.id,
                    m.i,
                    runs.len()
                ));
            }
        }
        for (run, status, at, _) in &runs {
            if *status != m.shape.run_status() {
                wrong.push(format!(
                    "run {run} of workflow {} ({:?}) is {status}",
                    m.id, m.shape
                ));
            }
            let rows = nodes_of.get(run).cloned().unwrap_or_default();
            if rows.len() != m.shape.nodes().len() {
                wrong.push(format!("run {run} has {} node rows", rows.len()));
            }
            for (node, parents) in m.shape.nodes() {
                let Some((state, exec)) = rows.get(node).copied() else {
                    wrong.push(format!("run {run} has no node {node}"));
                    continue;
                };
                let want = m.shape.node_status(node);
                if state != want {
                    wrong.push(format!("run {run} node {node} is {state}, not {want}"));
                }
                let Some(exec) = exec else {
                    if want != "skipped" {
                        wrong.push(format!("run {run} node {node} has no execution"));
                    }
                    continue;
                };
                named.insert(exec);
                let Some((job, e_status, e_at, outputs)) = exec_by_id.get(exec) else {
                    wrong.push(format!("run {run} node {node}: execution {exec} missing"));
                    continue;
                };
                if jobs.get(node).map(String::as_str) != Some(*job) {
                    wrong.push(format!("run {run} node {node}: {exec} is of job {job}"));
                }
                if e_at != at {
                    wrong.push(format!(
                        "run {run} node {node}: {exec} scheduled at {e_at}, the run at {at}"
                    ));
                }
                if !execution_statuses(want).contains(e_status) {
                    wrong.push(format!("run {run} node {node}: {exec} is {e_status}"));
                }
                wrong.extend(parents_seen(m, run, node, parents, outputs.as_ref()));
            }
        }
    }
    // Node jobs have no trigger of their own and the soak triggers none by
    // hand: an execution no node row names would be a node run twice.
    for (id, (job, status, at, _)) in &exec_by_id {
        if !named.contains(id) {
            wrong.push(format!(
                "execution {id} ({status}, at {at}) of node job {job} belongs to no node of a run"
            ));
        }
    }
    let summary = Summary {
        runs: runs.len(),
        node_executions: execs.len(),
        node_attempts: execs.iter().map(|e| e.5).sum(),
        nodes_lost: execs.iter().filter(|e| e.2 == "lost").count(),
        cron: cron_line,
    };
    (wrong, summary)
}

/// What node `node` of `run` was dispatched with: its parents' outputs by
/// parent id, a succeeded parent's being its output and a failed parent's
/// `null`; nothing for a root.
fn parents_seen(
    m: &Made,
    run: &str,
    node: &str,
    parents: &[&str],
    outputs: Option<&Value>,
) -> Option<String> {
    let expected = (!parents.is_empty()).then(|| {
        let map: serde_json::Map<String, Value> = parents
            .iter()
            .map(|p| {
                let out = match m.shape.node_status(p) {
                    "succeeded" => Shape::output(m.i, p),
                    _ => Value::Null,
                };
                (p.to_string(), out)
            })
            .collect();
        Value::Object(map)
    });
    (outputs != expected.as_ref()).then(|| {
        format!("run {run} node {node} saw parent outputs {outputs:?}, expected {expected:?}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bounded_cron_fires_within_one_minute() {
        // 12:00:50.5 + 10 s: from 12:01:01, six triggers 6 s apart fit in
        // the minute (second 1 + 30 < 60).
        let now = DateTime::parse_from_rfc3339("2026-12-06T12:00:50.500Z")
            .unwrap()
            .timestamp_millis();
        let (expr, times) = bounded_cron(now, 10_000, 6, 6);
        assert_eq!(expr, "1,7,13,19,25,31 1 12 6 12 *");
        assert_eq!(times[0], now + 10_500);
        // From 12:00:20 + 10 s, second 31 + 30 > 59: the next minute, from 0.
        let now = now - 30_500;
        let (expr, times) = bounded_cron(now, 10_000, 6, 6);
        assert_eq!(expr, "0,6,12,18,24,30 1 12 6 12 *");
        assert_eq!(times[5] - times[0], 30_000);
    }

    #[test]
    fn missed_cron_triggers_fire_once_late() {
        let times = [10, 20, 30, 40, 50];
        // On time throughout.
        let on_time = [(10, 10), (20, 21), (30, 30), (40, 41), (50, 50)];
        assert_eq!(cron_expected(&times, 0, &on_time), times);
        // The run for 20 started at 35: 30 was missed, 40 is next.
        let late = [(10, 10), (20, 35), (40, 40), (50, 50)];
        assert_eq!(cron_expected(&times, 0, &late), [10, 20, 40, 50]);
        // Created after the first trigger: it starts at the second.
        assert_eq!(cron_expected(&times, 15, &on_time[1..]), [20, 30, 40, 50]);
    }
}
