//! Store suite for issue 13: the handlers and group workers announce, pending
//! work filtered by what live workers serve, a job's worker group, and the
//! bounded execution log — on SQLite and on MySQL.

#[macro_use]
mod store_support;
use store_support as support;

use kairos_core::protocol::{HeartbeatMsg, LogLevel, LogLine, LogMsg, PROTOCOL_VERSION};
use kairos_core::store::{Dispatch, History, LogLimits, LogStore, WorkerStore};
use kairos_core::worker::{Routable, Serves, WorkerState};
use kairos_store_sql::SqlStore;
use support::{T0, claim, create, one_shot};

store_cases!(
    heartbeats_record_handlers_and_group,
    heartbeats_record_the_dispatch_batch_offered,
    unpublished_work_is_filtered_by_what_workers_serve,
    logs_are_bounded_paged_and_purged,
);

fn beat(id: &str, handlers: Option<&[&str]>, group: Option<&str>) -> HeartbeatMsg {
    HeartbeatMsg {
        v: PROTOCOL_VERSION,
        worker_id: id.into(),
        queue: format!("kairos.worker.{id}"),
        capacity: 4,
        active: 0,
        avg_cost_ms: 0.0,
        cpu_idle: 100.0,
        state: WorkerState::Online,
        at: T0,
        handlers: handlers.map(|h| h.iter().map(|s| s.to_string()).collect()),
        group: group.map(str::to_string),
        incarnation: None,
        held: None,
        dispatch_batch: None,
        immediate_queue: false,
    }
}

fn serves(handlers: Option<&[&str]>, group: Option<&str>) -> Serves {
    Serves {
        handlers: handlers.map(|h| h.iter().map(|s| s.to_string()).collect()),
        group: group.map(str::to_string),
    }
}

async fn heartbeats_record_handlers_and_group(store: SqlStore) {
    store
        .workers_record_heartbeats(
            &[
                beat("legacy", None, None),
                beat("edge", Some(&["http", "noop"]), Some("edge")),
            ],
            T0,
        )
        .await
        .unwrap();
    let workers = store.workers_list().await.unwrap();
    assert_eq!(workers[0].id, "edge");
    assert_eq!(
        workers[0].serves,
        serves(Some(&["http", "noop"]), Some("edge"))
    );
    assert_eq!(workers[1].serves, Serves::default());
    // A later beat replaces what was announced.
    store
        .workers_record_heartbeats(&[beat("edge", Some(&["noop"]), None)], T0 + 1)
        .await
        .unwrap();
    let workers = store.workers_list().await.unwrap();
    assert_eq!(workers[0].serves, serves(Some(&["noop"]), None));
}

async fn heartbeats_record_the_dispatch_batch_offered(store: SqlStore) {
    let batching = HeartbeatMsg {
        dispatch_batch: Some(32),
        immediate_queue: true,
        ..beat("batching", None, None)
    };
    let single = HeartbeatMsg {
        dispatch_batch: Some(1),
        ..beat("single", None, None)
    };
    store
        .workers_record_heartbeats(&[batching, single, beat("legacy", None, None)], T0)
        .await
        .unwrap();
    let offers: Vec<(String, u32, bool)> = store
        .workers_list()
        .await
        .unwrap()
        .into_iter()
        .map(|w| (w.id, w.dispatch_batch, w.immediate_queue))
        .collect();
    let expected = [
        ("batching", 32, true),
        ("legacy", 1, false),
        ("single", 1, false),
    ];
    let expected: Vec<(String, u32, bool)> = expected
        .iter()
        .map(|(w, n, i)| (w.to_string(), *n, *i))
        .collect();
    assert_eq!(offers, expected);
    // A later beat without the offers takes them back.
    store
        .workers_record_heartbeats(&[beat("batching", None, None)], T0 + 1)
        .await
        .unwrap();
    let workers = store.workers_list().await.unwrap();
    assert_eq!(
        (workers[0].dispatch_batch, workers[0].immediate_queue),
        (1, false)
    );
}

async fn unpublished_work_is_filtered_by_what_workers_serve(store: SqlStore) {
    let mut noop = one_shot("t", T0);
    noop.handler = "noop".into();
    let mut report = one_shot("t", T0);
    report.handler = "report".into();
    let mut edge = one_shot("t", T0);
    edge.handler = "noop".into();
    edge.worker_group = Some("edge".into());
    let (noop, report, edge) = (
        create(&store, noop).await,
        create(&store, report).await,
        create(&store, edge).await,
    );
    assert_eq!(edge.worker_group.as_deref(), Some("edge"));
    let (w_noop, w_report, w_edge) = (
        claim(&store, &noop, None).await,
        claim(&store, &report, None).await,
        claim(&store, &edge, None).await,
    );
    assert_eq!(
        w_edge.worker_group.as_deref(),
        Some("edge"),
        "claims carry the group"
    );
    let found = |r: Routable| {
        let store = &store;
        async move {
            let mut ids: Vec<String> = store
                .executions_find_unpublished(T0, 10, &r)
                .await
                .unwrap()
                .into_iter()
                .map(|w| w.execution_id)
                .collect();
            ids.sort();
            ids
        }
    };
    let sorted = |mut v: Vec<&String>| {
        v.sort();
        v.into_iter().cloned().collect::<Vec<String>>()
    };
    let (n, r, e) = (
        &w_noop.execution_id,
        &w_report.execution_id,
        &w_edge.execution_id,
    );
    assert_eq!(found(Routable::Any).await, sorted(vec![n, r, e]));
    assert!(
        found(Routable::Only(vec![])).await.is_empty(),
        "no live worker"
    );
    assert_eq!(
        found(Routable::Only(vec![serves(Some(&["noop"]), None)])).await,
        vec![n.clone()],
        "a worker without a group takes no job asking for one"
    );
    assert_eq!(
        found(Routable::Only(vec![serves(Some(&["noop"]), Some("edge"))])).await,
        sorted(vec![n, e]),
        "a grouped worker takes its group's jobs and ungrouped ones"
    );
    assert_eq!(
        found(Routable::Only(vec![serves(None, None)])).await,
        sorted(vec![n, r]),
        "a legacy worker serves every handler"
    );
    assert_eq!(
        found(Routable::Only(vec![
            serves(Some(&["report"]), None),
            serves(Some(&["noop"]), Some("edge")),
        ]))
        .await,
        sorted(vec![n, r, e])
    );
}

fn lines(from: u32, to: u32, text: &str) -> Vec<LogLine> {
    (from..=to)
        .map(|i| LogLine {
            at: T0 + i64::from(i),
            level: LogLevel::Info,
            message: format!("{text}{i}"),
        })
        .collect()
}

fn batch(execution_id: &str, attempt: u32, lines: Vec<LogLine>, progress: Option<f64>) -> LogMsg {
    LogMsg {
        v: PROTOCOL_VERSION,
        execution_id: execution_id.into(),
        attempt,
        worker_id: "w1".into(),
        lines,
        progress,
    }
}

async fn logs_are_bounded_paged_and_purged(store: SqlStore) {
    let job = create(&store, one_shot("t", T0)).await;
    let work = claim(&store, &job, None).await;
    let id = work.execution_id.as_str();
    let limits = LogLimits {
        max_lines: 5,
        max_bytes: 1_000,
        max_line_bytes: 100,
    };
    store
        .logs_append(
            &[
                batch(id, 1, lines(1, 4, "line "), Some(10.0)),
                batch(id, 1, lines(5, 7, "line "), Some(40.0)),
                batch("no-such-execution", 1, lines(1, 1, "x"), Some(1.0)),
                // An earlier attempt's figure never overwrites the current one's.
                batch(id, 0, Vec::new(), Some(99.0)),
            ],
            &limits,
            T0,
        )
        .await
        .unwrap();
    let page = store.logs_page(id, None, 10).await.unwrap();
    let texts: Vec<&str> = page.items.iter().map(|l| l.message.as_str()).collect();
    assert_eq!(
        texts,
        ["line 3", "line 4", "line 5", "line 6", "line 7"],
        "oldest dropped"
    );
    assert!(page.next_cursor.is_none());
    assert!(
        store
            .logs_page("no-such-execution", None, 10)
            .await
            .unwrap()
            .items
            .is_empty()
    );
    let exec = store.execution_get("t", id).await.unwrap().unwrap();
    assert_eq!(exec.progress, Some(40.0));

    // Paging: the cursor continues after the last line shown.
    let first = store.logs_page(id, None, 2).await.unwrap();
    assert_eq!(first.items.len(), 2);
    let next = store
        .logs_page(id, first.next_cursor.as_deref(), 10)
        .await
        .unwrap();
    assert_eq!(next.items[0].message, "line 5");
    assert!(
        store
            .logs_page(id, Some("garbage"), 10)
            .await
            .unwrap()
            .items
            .is_empty()
    );

    // The byte bound, and long lines cut.
    let long = LogLine {
        at: T0,
        level: LogLevel::Error,
        message: "é".repeat(400),
    };
    let many: Vec<LogLine> = std::iter::repeat_n(long, 12).collect();
    store
        .logs_append(&[batch(id, 1, many, None)], &limits, T0 + 1)
        .await
        .unwrap();
    let page = store.logs_page(id, None, 100).await.unwrap();
    let bytes: usize = page.items.iter().map(|l| l.message.len()).sum();
    assert!(bytes <= 1_000, "{bytes} bytes kept");
    assert!(
        page.items
            .iter()
            .all(|l| l.message.len() == 100 && l.level == LogLevel::Error)
    );
    assert_eq!(page.items.len(), 5, "the line bound holds too");

    // Retention.
    store
        .logs_append(
            &[batch(id, 1, lines(1, 1, "new "), None)],
            &limits,
            T0 + 10_000,
        )
        .await
        .unwrap();
    let purged = store.logs_purge(T0 + 5_000, 100).await.unwrap();
    assert_eq!(purged, 4);
    let left = store.logs_page(id, None, 100).await.unwrap();
    assert_eq!(left.items.len(), 1);
    assert_eq!(left.items[0].message, "new 1");
}
