//! `kairos migrate`: applies the schema for the configured database.

use crate::cli::MigrateArgs;
use crate::settings::{FileSettings, require};
use anyhow::Result;
use kairos::connect;

pub async fn run(args: MigrateArgs, file: &FileSettings) -> Result<()> {
    let url = require(
        args.db.database_url,
        file.database_url.clone(),
        "KAIROS_DATABASE_URL",
    )?;
    connect::database(&url, true).await?;
    println!(
        "schema is up to date at {}",
        kairos_core::redact::redact_url(&url)
    );
    Ok(())
}
