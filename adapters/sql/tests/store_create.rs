//! Group commit and bulk creation: many jobs per transaction without losing
//! per-request idempotency or letting one bad row fail the others.

#[macro_use]
mod store_support;
use store_support as support;

use kairos_core::store::{CreateOutcome, JobStore, TenantStore};
use kairos_store_sql::SqlStore;
use std::collections::HashSet;
use support::{T0, one_shot};

store_cases!(
    concurrent_creates_are_all_committed,
    concurrent_creates_with_one_key_make_one_job,
    a_bad_row_fails_only_its_own_create,
    bulk_create_is_idempotent_per_item,
    creates_are_audited_in_their_own_transaction,
);

fn created_id(o: &CreateOutcome) -> &str {
    match o {
        CreateOutcome::Created(j) | CreateOutcome::Existing(j) => &j.id,
    }
}

async fn concurrent_creates_are_all_committed(store: SqlStore) {
    let jobs: Vec<_> = (0..300).map(|_| one_shot("acme", T0)).collect();
    let outcomes =
        futures::future::join_all(jobs.iter().map(|j| store.job_create(j.clone()))).await;
    for (job, outcome) in jobs.iter().zip(&outcomes) {
        match outcome {
            Ok(CreateOutcome::Created(created)) => assert_eq!(created.id, job.id),
            other => panic!("not created: {other:?}"),
        }
        // Answered only after its commit: readable at once.
        assert!(store.job_get("acme", &job.id).await.unwrap().is_some());
    }
}

async fn concurrent_creates_with_one_key_make_one_job(store: SqlStore) {
    let jobs: Vec<_> = (0..40)
        .map(|_| {
            let mut j = one_shot("acme", T0);
            j.client_request_id = Some("same-key".into());
            j
        })
        .collect();
    let outcomes =
        futures::future::join_all(jobs.iter().map(|j| store.job_create(j.clone()))).await;
    let outcomes: Vec<CreateOutcome> = outcomes.into_iter().map(Result::unwrap).collect();
    let created = outcomes
        .iter()
        .filter(|o| matches!(o, CreateOutcome::Created(_)))
        .count();
    assert_eq!(created, 1, "{outcomes:?}");
    let ids: HashSet<&str> = outcomes.iter().map(created_id).collect();
    assert_eq!(ids.len(), 1, "every replay answers with the one job");
    // The same key in another tenant is another job.
    let mut other = one_shot("globex", T0);
    other.client_request_id = Some("same-key".into());
    assert!(matches!(
        store.job_create(other).await.unwrap(),
        CreateOutcome::Created(_)
    ));
}

async fn a_bad_row_fails_only_its_own_create(store: SqlStore) {
    let stored = one_shot("acme", T0);
    store.job_create(stored.clone()).await.unwrap();
    // A second row with an id already taken (primary key) among good ones.
    let mut jobs: Vec<_> = (0..20).map(|_| one_shot("acme", T0)).collect();
    let mut clash = one_shot("acme", T0);
    clash.id = stored.id.clone();
    jobs.insert(7, clash);
    let outcomes =
        futures::future::join_all(jobs.iter().map(|j| store.job_create(j.clone()))).await;
    for (i, outcome) in outcomes.iter().enumerate() {
        if i == 7 {
            assert!(outcome.is_err(), "the clashing row fails: {outcome:?}");
        } else {
            assert!(
                matches!(outcome, Ok(CreateOutcome::Created(_))),
                "row {i}: {outcome:?}"
            );
        }
    }
}

async fn bulk_create_is_idempotent_per_item(store: SqlStore) {
    let mut earlier = one_shot("acme", T0);
    earlier.client_request_id = Some("k-earlier".into());
    store.job_create(earlier.clone()).await.unwrap();

    let mut replay = one_shot("acme", T0);
    replay.client_request_id = Some("k-earlier".into());
    let mut twice_a = one_shot("acme", T0);
    twice_a.client_request_id = Some("k-twice".into());
    let mut twice_b = one_shot("acme", T0);
    twice_b.client_request_id = Some("k-twice".into());
    let plain = one_shot("acme", T0);
    let batch = vec![replay, twice_a.clone(), plain.clone(), twice_b];
    let out = store.jobs_create_many(batch).await.unwrap();
    assert!(
        matches!(&out[0], CreateOutcome::Existing(j) if j.id == earlier.id),
        "{out:?}"
    );
    assert!(
        matches!(&out[1], CreateOutcome::Created(j) if j.id == twice_a.id),
        "{out:?}"
    );
    assert!(
        matches!(&out[2], CreateOutcome::Created(j) if j.id == plain.id),
        "{out:?}"
    );
    assert!(
        matches!(&out[3], CreateOutcome::Existing(j) if j.id == twice_a.id),
        "{out:?}"
    );

    // All or nothing: a clash rolls the whole batch back.
    let fresh = one_shot("acme", T0);
    let mut clash = one_shot("acme", T0);
    clash.id = plain.id.clone();
    assert!(
        store
            .jobs_create_many(vec![fresh.clone(), clash])
            .await
            .is_err()
    );
    assert!(store.job_get("acme", &fresh.id).await.unwrap().is_none());
}

async fn creates_are_audited_in_their_own_transaction(store: SqlStore) {
    let keyed = |key: &str| {
        let mut j = one_shot("acme", T0);
        j.created_by = Some("kai_pfx".into());
        j.client_request_id = Some(key.into());
        j
    };
    // Concurrent creates (grouped), a lone one, a replay and an unaudited one.
    let jobs: Vec<_> = (0..50).map(|i| keyed(&format!("k{i}"))).collect();
    for o in futures::future::join_all(jobs.iter().map(|j| store.job_create(j.clone()))).await {
        assert!(matches!(o, Ok(CreateOutcome::Created(_))), "{o:?}");
    }
    let lone = keyed("lone");
    store.job_create(lone.clone()).await.unwrap();
    let replay = keyed("lone");
    assert!(matches!(
        store.job_create(replay).await.unwrap(),
        CreateOutcome::Existing(_)
    ));
    store.job_create(one_shot("acme", T0)).await.unwrap();

    let page = store.audit_list(Some("acme"), 500, None).await.unwrap();
    let mut targets: Vec<&str> = page
        .items
        .iter()
        .inspect(|e| {
            assert_eq!(
                (e.action.as_str(), e.actor.as_str()),
                ("job.create", "kai_pfx")
            );
            assert_eq!(e.at, T0, "stamped with the job's creation time");
        })
        .map(|e| e.target.as_str())
        .collect();
    targets.sort_unstable();
    let mut expected: Vec<&str> = jobs.iter().map(|j| j.id.as_str()).collect();
    expected.push(lone.id.as_str());
    expected.sort_unstable();
    assert_eq!(
        targets, expected,
        "one entry per created job: none for the replay or the unaudited create"
    );
    assert!(
        store
            .audit_list(Some("globex"), 500, None)
            .await
            .unwrap()
            .items
            .is_empty()
    );
}
