//! The fencing check at the start of every dispatching transaction: the
//! leader's (`dispatcher` row of `leader_fences`) for claims, admissions and
//! the slot purge, and a partition owner's (`dispatcher/p<n>` rows) for
//! partitioned claims.
//!
//! Within a term the stored fence is already ours and is read under a
//! **shared** row lock, held to the commit. That is enough for fencing: a
//! newer leader (or partition owner) raises the fence with a write, which
//! waits for every transaction holding the share to commit, and every
//! check after that raise reads the new fence and is refused. Shared, so
//! the claims of one leader (its main loop's big batches and its immediate
//! lane's small ones) and its admissions do not queue behind each other on
//! the row. What must be decided one transaction at a time, the
//! concurrency gate, is serialized on a row of its own
//! (`crate::concurrency::lock`), and only when a limit applies: taking this
//! row exclusively for it would be a shared-to-exclusive upgrade, which
//! deadlocks as soon as two holders of the share both ask for it.

use crate::db::Tx;
use crate::dialect::Dialect;
use crate::sql::{Fields, Sql, from_u64};
use kairos_core::store::{StoreError, StoreResult};

/// Name of the dispatcher lease in `leader_fences`.
pub(super) const DISPATCH_FENCE: &str = "dispatcher";

/// Checks the leader's fence: refused if a newer leader's is stored, raised
/// to ours when our term begins. See [`check_fence_named`].
pub(super) async fn check_fence(tx: &mut Tx, fence: u64) -> StoreResult<()> {
    check_fence_named(tx, DISPATCH_FENCE, fence).await
}

/// Raises the stored fence `name` to ours (never lowers it) and fails if a
/// newer one is already there; the row stays share-locked (or, after a
/// raise, locked) to the commit.
pub(super) async fn check_fence_named(tx: &mut Tx, name: &str, fence: u64) -> StoreResult<()> {
    let ours = from_u64(fence);
    let mut read = Sql::new("SELECT fence FROM leader_fences WHERE name = ");
    read.bind(name).for_share();
    let stored = match read.fetch_optional(&mut *tx).await? {
        Some(row) => Some(row.get::<i64>("leader_fences", "fence")?),
        None => None,
    };
    let current = match stored {
        Some(current) if current >= ours => current,
        // A new term: the raise turns the share into an exclusive lock. Two
        // first transactions of one term may each hold the share and wait
        // for the other's: the database then rolls one back as a deadlock
        // victim, and `SqlStore::transaction` runs it again (it finds the
        // fence raised). Once per term at most.
        _ => raise(tx, name, ours).await?,
    };
    if current > ours {
        return Err(StoreError::Fenced {
            ours: fence,
            current: u64::try_from(current).unwrap_or_default(),
        });
    }
    Ok(())
}

/// Raises the stored fence `name` to `ours` (never lowers it, creating the
/// row if missing) and returns the fence stored after it.
pub(super) async fn raise(tx: &mut Tx, name: &str, ours: i64) -> StoreResult<i64> {
    let row = Fields::new().with("name", name).with("fence", ours);
    let mut upsert = Sql::new("INSERT INTO leader_fences");
    upsert.rows([&row]).dialect(
        " ON DUPLICATE KEY UPDATE fence = GREATEST(fence, VALUES(fence))",
        " ON CONFLICT(name) DO UPDATE SET \
         fence = GREATEST(leader_fences.fence, excluded.fence)",
        " ON CONFLICT(name) DO UPDATE SET fence = MAX(fence, excluded.fence)",
    );
    // Where the upsert can return the stored fence, one statement does.
    if tx.dialect() == Dialect::MySql {
        upsert.execute(&mut *tx).await?;
        Sql::new("SELECT fence FROM leader_fences WHERE name = ")
            .bind(name)
            .scalar(&mut *tx, "fence")
            .await
    } else {
        upsert
            .push(" RETURNING fence")
            .scalar(&mut *tx, "fence")
            .await
    }
}
