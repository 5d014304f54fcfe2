//! A panic in a task spawned with `spawn_critical` ends the whole process with
//! `EXIT_TASK_PANICKED`. Checked in a child process (this test binary run
//! again), since the point is that the process exits.

use kairos_core::supervise::{EXIT_TASK_PANICKED, spawn_critical};
use std::process::Command;
use std::time::Duration;

const CHILD: &str = "KAIROS_CRITICAL_PANIC_CHILD";

#[test]
fn a_panicking_critical_task_stops_the_process() {
    if std::env::var_os(CHILD).is_some() {
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        rt.block_on(async {
            spawn_critical("doomed", async { panic!("on purpose") });
            // The process must end from the task's panic, long before this.
            tokio::time::sleep(Duration::from_secs(30)).await;
        });
        unreachable!("the process should have exited");
    }
    let status = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "a_panicking_critical_task_stops_the_process",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .status()
        .expect("run the child");
    assert_eq!(status.code(), Some(EXIT_TASK_PANICKED));
}
