//! The operator key of `kairos dev`: created on first start for the
//! `default` tenant, kept in a file beside the SQLite database
//! (`kairos.db.key`, mode 0600) so a restart prints the same working key. It
//! is an operator's so that it may do everything: every tenant, their keys,
//! the workers, and the `default` tenant's jobs. The database holds only
//! the key's hash, so the file is the one place its secret is kept; delete
//! the file (or revoke the key) to get a new one on the next start.

use anyhow::{Context, Result};
use kairos_core::store::TenantStore;
use kairos_core::tenant::{DEFAULT_TENANT, Role};
use kairos_core::time::now_ms;
use std::path::PathBuf;

/// Where the dev key of `db_url` is kept: beside a SQLite file, else in the
/// working directory.
pub fn key_path(db_url: &str) -> PathBuf {
    let file = db_url
        .strip_prefix("sqlite://")
        .or_else(|| db_url.strip_prefix("sqlite:"))
        .map(|rest| rest.split('?').next().unwrap_or(rest))
        .filter(|p| !p.is_empty() && !p.contains(":memory:"));
    match file {
        Some(p) => PathBuf::from(format!("{p}.key")),
        None => PathBuf::from("kairos-dev.key"),
    }
}

/// The dev operator key: the one in the key file if the database still accepts
/// it, otherwise a new one (written to the file): the key, the file, and
/// whether it was created now.
pub async fn ensure(store: &dyn TenantStore, db_url: &str) -> Result<(String, PathBuf, bool)> {
    let path = key_path(db_url);
    if let Ok(saved) = std::fs::read_to_string(&path) {
        let saved = saved.trim().to_string();
        if let Some((prefix, secret)) = kairos_api::auth::keys::parse(&saved)
            && let Some(key) = store.api_key_get(prefix).await?
            && key.usable_at(now_ms())
            && kairos_api::auth::keys::secret_matches(secret, &key.secret_hash)
        {
            return Ok((saved, path, false));
        }
    }
    let issued = kairos_api::auth::keys::issue(
        DEFAULT_TENANT,
        Role::Operator,
        Some("kairos dev".into()),
        None,
        now_ms(),
    );
    if !store.api_key_create(&issued.key).await? {
        anyhow::bail!("cannot create the dev key: the default tenant is missing");
    }
    write_private(&path, &issued.token)
        .with_context(|| format!("cannot write the dev key to {}", path.display()))?;
    Ok((issued.token, path, true))
}

fn write_private(path: &PathBuf, token: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts.open(path)?;
    writeln!(f, "{token}")?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_lives_beside_the_database() {
        assert_eq!(
            key_path("sqlite://kairos.db"),
            PathBuf::from("kairos.db.key")
        );
        assert_eq!(
            key_path("sqlite:///tmp/x.db?mode=rwc"),
            PathBuf::from("/tmp/x.db.key")
        );
        assert_eq!(
            key_path("mysql://root@h/db"),
            PathBuf::from("kairos-dev.key")
        );
        assert_eq!(key_path("sqlite::memory:"), PathBuf::from("kairos-dev.key"));
    }
}
