//! `kairos migrate`: applies the schema for the configured database.

use crate::config::commands::DatabaseCmd;
use crate::config::required;
use anyhow::Result;
use kairos::connect;

pub async fn run(cfg: DatabaseCmd) -> Result<()> {
    let url = required(&cfg.db.database_url, "database_url")?;
    connect::database(url, true).await?;
    println!(
        "schema is up to date at {}",
        kairos_core::redact::redact_url(url)
    );
    Ok(())
}
