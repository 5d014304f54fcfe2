//! Partitioned dispatch in storage (see [`kairos_core::partition`]): the
//! partition count recorded at migration, and each job's `partition_no`,
//! given at create and filled in for rows older than the migration. The
//! partitioned claim and its fences are in `dispatch::partitioned`.

use crate::db::Pool;
use crate::error::corrupt;
use crate::rows::R;
use crate::sql::Sql;
use kairos_core::partition::{self, DEFAULT_PARTITIONS};
use kairos_core::store::StoreResult;
use std::collections::HashMap;

/// Rows filled in per statement batch by [`fill_in`].
const FILL_BATCH: u32 = 1_000;

/// The partition count recorded at migration. This release hashes with
/// [`DEFAULT_PARTITIONS`] (new jobs get their partition at create, without
/// a read); a database that records another count was set up by a release
/// that hashes differently, and is refused rather than misread.
pub(crate) async fn recorded(pool: &Pool) -> StoreResult<u32> {
    let n: i64 = Sql::new("SELECT partitions FROM dispatch_partitions WHERE id = 1")
        .scalar(pool, "partitions")
        .await?;
    if n != i64::from(DEFAULT_PARTITIONS) {
        return Err(corrupt(
            "dispatch_partitions",
            format!("{n} partitions recorded; this release hashes jobs into {DEFAULT_PARTITIONS}"),
        ));
    }
    Ok(DEFAULT_PARTITIONS)
}

/// The `partition_no` a new job is stored with.
pub(crate) fn of_new(job_id: &str) -> i64 {
    i64::from(partition::of(job_id, DEFAULT_PARTITIONS))
}

/// Gives every job stored before the partitions migration (`partition_no`
/// -1) its partition, a batch at a time; runs after each migration, and
/// costs one indexed read once every row has its partition.
pub(crate) async fn fill_in(pool: &Pool) -> StoreResult<()> {
    let count = recorded(pool).await?;
    loop {
        let rows = Sql::new("SELECT id FROM jobs WHERE partition_no = -1 LIMIT ")
            .bind(FILL_BATCH)
            .fetch_all(pool)
            .await?;
        if rows.is_empty() {
            return Ok(());
        }
        let mut by_partition: HashMap<u32, Vec<String>> = HashMap::new();
        for row in &rows {
            let id = R::new(row, "jobs").string("id")?;
            by_partition
                .entry(partition::of(&id, count))
                .or_default()
                .push(id);
        }
        let mut tx = pool.begin().await?;
        for (p, ids) in &by_partition {
            Sql::new("UPDATE jobs SET partition_no = ")
                .bind(i64::from(*p))
                .push(" WHERE id IN ")
                .list(ids.iter().map(String::as_str))
                .execute(&mut tx)
                .await?;
        }
        tx.commit().await?;
    }
}
