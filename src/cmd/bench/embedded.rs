//! The deployment `kairos bench` measures when no `--url` is given: this
//! very binary's `kairos dev`, on a temporary SQLite file and a free port, as
//! a child process, so the figures are those of the real command.

use anyhow::{Context, Result};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;
use tokio::process::{Child, Command};

/// A running `kairos dev` child and the directory it owns.
pub(super) struct Dev {
    pub(super) base: String,
    /// Where `kairos dev` keeps the admin key it creates on first start.
    key_file: PathBuf,
    child: Child,
    dir: PathBuf,
}

impl Dev {
    /// Starts `kairos dev` on a new SQLite file; its log goes to a file in the
    /// same temporary directory (named on failure).
    pub(super) async fn start() -> Result<Self> {
        let dir = temp_dir()?;
        let db_url = temp_sqlite(&dir);
        Self::start_in(dir, db_url).await
    }

    /// Starts `kairos dev` on `db_url`, in `dir` (which it removes when
    /// stopped): for a database that is not a file, the key it creates on
    /// first start is kept in `dir`.
    pub(super) async fn start_in(dir: PathBuf, db_url: String) -> Result<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .context("no free local port")?
            .port();
        let log = std::fs::File::create(dir.join("dev.log")).context("cannot create the log")?;
        let exe = std::env::current_exe().context("cannot find the kairos binary")?;
        let key_file = dir.join(kairos::dev_key::key_path(&db_url));
        let child = Command::new(exe)
            .arg("dev")
            .current_dir(&dir)
            .env("KAIROS_DATABASE_URL", &db_url)
            .env("KAIROS_HTTP_ADDR", format!("127.0.0.1:{port}"))
            .env("KAIROS_LOG", "warn")
            // The bench measures the system, not the per-key limiter: its
            // own deployment lets it create as fast as it can.
            .env("KAIROS_API_CREATE_RATE", "1000000000")
            .env("KAIROS_API_CREATE_BURST", "1000000000")
            .env("KAIROS_API_MAX_LIVE_JOBS", "1000000000")
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .context("cannot start kairos dev")?;
        eprintln!(
            "started kairos dev on 127.0.0.1:{port} (log: {})",
            dir.join("dev.log").display()
        );
        Ok(Self {
            base: format!("http://127.0.0.1:{port}"),
            key_file,
            child,
            dir,
        })
    }

    /// The admin key `kairos dev` printed, once it has written it.
    pub(super) async fn key(&self) -> Result<String> {
        for _ in 0..300 {
            if let Ok(key) = std::fs::read_to_string(&self.key_file) {
                let key = key.trim().to_string();
                if !key.is_empty() {
                    return Ok(key);
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        anyhow::bail!("kairos dev wrote no key to {}", self.key_file.display())
    }

    /// Stops the child (SIGTERM, then SIGKILL after 10 s) and removes its files.
    pub(super) async fn stop(mut self) {
        if let Some(pid) = self.child.id() {
            let _ = std::process::Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status();
        }
        if tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A new temporary directory for one embedded deployment.
pub(super) fn temp_dir() -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!(
        "kairos-bench-{}-{}",
        std::process::id(),
        uuid::Uuid::now_v7().simple()
    ));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    Ok(dir)
}

/// The URL of a SQLite file in `dir`.
pub(super) fn temp_sqlite(dir: &std::path::Path) -> String {
    format!("sqlite://{}/bench.db", dir.display())
}
