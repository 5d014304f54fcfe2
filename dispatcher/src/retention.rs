//! Retention (issue 45): the leader deletes finished history past its
//! retention period — executions (with their events, logs and deliveries),
//! one-shot jobs, workflow runs, audit entries and expired sessions — one
//! bounded batch at a time with a pause between batches, so the hot path
//! keeps its latency while a large backlog drains.
//!
//! It runs inside the leader's term (see `crate::lease`): one dispatcher
//! purges at a time, and it stops between two batches when the term ends.
//! Each tenant's overrides ([`TenantRetention`]) are read at the start of
//! every pass, so a change applies from the next one.

use crate::lease::Term;
use crate::metrics;
use kairos_core::retention::{History, Period, RetentionStore, TenantRetention};
use kairos_core::time::{Millis, now_ms};
use std::sync::Arc;
use std::time::Duration;
use tracing::{debug, warn};

/// Rows counted at most per tenant and kind for the backlog figure.
const BACKLOG_CAP: u32 = 100_000;

/// How long each kind of history is kept, and how fast it is purged.
/// Setting fields are named like their `KAIROS_*` variables.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, clap::Args)]
#[serde(default)]
pub struct RetentionConfig {
    /// `KAIROS_RETAIN_EXECUTIONS`: finished executions (with their events,
    /// log lines and callback deliveries) are deleted this long after they
    /// finished.
    #[arg(long, env = "KAIROS_RETAIN_EXECUTIONS", value_name = "DURATION")]
    pub retain_executions: Period,
    /// `KAIROS_RETAIN_JOBS`: finished one-shot jobs are deleted this long
    /// after they finished, once none of their executions is left.
    #[arg(long, env = "KAIROS_RETAIN_JOBS", value_name = "DURATION")]
    pub retain_jobs: Period,
    /// `KAIROS_RETAIN_WORKFLOW_RUNS`: ended workflow runs (with their node
    /// rows and run callbacks) are deleted this long after they ended.
    #[arg(long, env = "KAIROS_RETAIN_WORKFLOW_RUNS", value_name = "DURATION")]
    pub retain_workflow_runs: Period,
    /// `KAIROS_RETAIN_AUDIT`: audit entries are deleted this long after
    /// they were written.
    #[arg(long, env = "KAIROS_RETAIN_AUDIT", value_name = "DURATION")]
    pub retain_audit: Period,
    /// `KAIROS_RETAIN_SESSIONS`: dashboard sessions are deleted this long
    /// after they expired.
    #[arg(long, env = "KAIROS_RETAIN_SESSIONS", value_name = "DURATION")]
    pub retain_sessions: Period,
    /// `KAIROS_RETENTION_BATCH`: rows deleted per transaction.
    #[arg(long, env = "KAIROS_RETENTION_BATCH", value_name = "ROWS")]
    pub retention_batch: u32,
    /// `KAIROS_RETENTION_PAUSE_MS`: pause after each batch, so a backlog
    /// drains without crowding out the dispatcher's own writes.
    #[arg(long, env = "KAIROS_RETENTION_PAUSE_MS", value_name = "MS")]
    pub retention_pause_ms: u64,
    /// How often a pass looks for history past its retention.
    #[serde(skip)]
    #[arg(skip)]
    pub purge_every: Duration,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        Self {
            retain_executions: Period::days(30),
            retain_jobs: Period::days(30),
            retain_workflow_runs: Period::days(30),
            retain_audit: Period::days(365),
            retain_sessions: Period::days(1),
            retention_batch: 500,
            retention_pause_ms: 100,
            purge_every: Duration::from_secs(30),
        }
    }
}

impl RetentionConfig {
    /// The deployment's period for `kind`.
    pub fn period(&self, kind: History) -> Period {
        match kind {
            History::Executions => self.retain_executions,
            History::Jobs => self.retain_jobs,
            History::WorkflowRuns => self.retain_workflow_runs,
            History::Audit => self.retain_audit,
            History::Sessions => self.retain_sessions,
        }
    }

    /// The period for `kind` of a tenant with `overrides`.
    pub fn period_for(&self, kind: History, overrides: &TenantRetention) -> Millis {
        overrides
            .get(kind)
            .unwrap_or_else(|| self.period(kind).ms())
    }

    /// Refuses values the purge cannot run with, naming the variable.
    pub fn validate(&self) -> Result<(), crate::ConfigError> {
        if self.retention_batch == 0 || self.retention_batch > 5_000 {
            return Err(crate::ConfigError(
                "KAIROS_RETENTION_BATCH must be between 1 and 5000".into(),
            ));
        }
        Ok(())
    }
}

/// Purges every `purge_every` until the term ends.
pub(crate) async fn run(store: Arc<dyn RetentionStore>, cfg: RetentionConfig, term: Term) {
    loop {
        if !pass(store.as_ref(), &cfg, &term).await {
            return;
        }
        tokio::select! {
            _ = term.token.cancelled() => return,
            _ = tokio::time::sleep(cfg.purge_every) => {}
        }
    }
}

/// One pass over every kind and tenant; `false` once the term has ended.
async fn pass(store: &dyn RetentionStore, cfg: &RetentionConfig, term: &Term) -> bool {
    let tenants = match store.tenants_retention().await {
        Ok(t) => t,
        Err(e) => {
            warn!(error = %e, "cannot read the tenants' retention; purging later");
            return true;
        }
    };
    let now = now_ms();
    for kind in History::ALL {
        let scopes: Vec<(Option<&str>, Millis)> = if kind.per_tenant() {
            tenants
                .iter()
                .map(|(id, o)| (Some(id.as_str()), cfg.period_for(kind, o)))
                .collect()
        } else {
            vec![(None, cfg.period(kind).ms())]
        };
        let mut backlog = 0;
        for (tenant, keep) in &scopes {
            let before = now.saturating_sub(*keep);
            match store
                .history_backlog(kind, *tenant, before, BACKLOG_CAP)
                .await
            {
                Ok(n) => backlog += n,
                Err(e) => {
                    warn!(error = %e, kind = kind.as_str(), "cannot count history past its retention")
                }
            }
        }
        metrics::retention_backlog(kind, backlog);
        for (tenant, keep) in &scopes {
            let before = now.saturating_sub(*keep);
            match drain(store, cfg, term, kind, *tenant, before, &mut backlog).await {
                Drained::Done => {}
                Drained::TermEnded => return false,
            }
        }
    }
    true
}

/// How a drain of one scope ended.
enum Drained {
    /// Nothing left (or an error, logged: the next pass tries again).
    Done,
    /// The term ended between two batches.
    TermEnded,
}

/// Deletes the scope's history older than `before`, batch after paced batch.
async fn drain(
    store: &dyn RetentionStore,
    cfg: &RetentionConfig,
    term: &Term,
    kind: History,
    tenant: Option<&str>,
    before: Millis,
    backlog: &mut u64,
) -> Drained {
    let pause = Duration::from_millis(cfg.retention_pause_ms);
    loop {
        if !term.is_valid() {
            return Drained::TermEnded;
        }
        let n = match store
            .history_purge(kind, tenant, before, cfg.retention_batch)
            .await
        {
            Ok(n) => n,
            Err(e) => {
                warn!(error = %e, kind = kind.as_str(), "cannot purge history past its retention; retrying at the next pass");
                return Drained::Done;
            }
        };
        if n > 0 {
            debug!(
                kind = kind.as_str(),
                tenant,
                purged = n,
                "purged history past its retention"
            );
            metrics::retention_purged(kind, n);
            *backlog = backlog.saturating_sub(n);
            metrics::retention_backlog(kind, *backlog);
        }
        if n < u64::from(cfg.retention_batch) {
            return Drained::Done;
        }
        tokio::select! {
            _ = term.token.cancelled() => return Drained::TermEnded,
            _ = tokio::time::sleep(pause) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_override_wins_over_the_deployment_period() {
        let cfg = RetentionConfig::default();
        let none = TenantRetention::default();
        assert_eq!(
            cfg.period_for(History::Executions, &none),
            Period::days(30).ms()
        );
        let short = TenantRetention {
            executions_ms: Some(60_000),
            ..TenantRetention::default()
        };
        assert_eq!(cfg.period_for(History::Executions, &short), 60_000);
        assert_eq!(
            cfg.period_for(History::Audit, &short),
            Period::days(365).ms()
        );
    }

    #[test]
    fn batches_are_bounded() {
        let mut cfg = RetentionConfig::default();
        assert!(cfg.validate().is_ok());
        cfg.retention_batch = 0;
        assert!(cfg.validate().is_err());
        cfg.retention_batch = 5_001;
        assert!(cfg.validate().is_err());
    }
}
