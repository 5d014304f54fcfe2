//! The merge order, the errors, `config print`, and the docs and `--help`
//! checked against the configs' own defaults.

use super::commands::{DevCmd, WorkerCmd, defaults_by_command};
use super::*;
use crate::cli::{Cli, Command};
use clap::FromArgMatches;

fn file(text: &str) -> tempfile_path::TempToml {
    tempfile_path::TempToml::new(text)
}

/// A TOML file removed when dropped.
mod tempfile_path {
    pub struct TempToml(pub std::path::PathBuf);
    impl TempToml {
        pub fn new(text: &str) -> Self {
            let path = std::env::temp_dir().join(format!(
                "kairos-config-{}.toml",
                uuid::Uuid::now_v7().simple()
            ));
            std::fs::write(&path, text).unwrap();
            Self(path)
        }
    }
    impl Drop for TempToml {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

fn parse(args: &[&str]) -> (Cli, Given) {
    let matches = command().try_get_matches_from(args).unwrap();
    let cli = Cli::from_arg_matches(&matches).unwrap();
    (cli, Given::from_matches(&matches))
}

/// What `kairos worker ARGS` lays over the file.
fn worker_args(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["kairos", "worker"];
    all.extend_from_slice(args);
    match parse(&all) {
        (
            Cli {
                command: Command::Worker(a),
                ..
            },
            given,
        ) => given.of(&a).unwrap(),
        (other, _) => panic!("{other:?}"),
    }
}

#[test]
fn flags_win_over_the_file_which_wins_over_defaults() {
    let f = file("worker_capacity = 4\nworker_grace_ms = 1234\nredis_url = 'redis://x'");
    let cfg: WorkerCmd = load(Some(&f.0), &worker_args(&["--worker-capacity", "7"])).unwrap();
    assert_eq!(cfg.worker.worker_capacity, 7);
    assert_eq!(cfg.worker.worker_grace_ms, 1234);
    assert_eq!(cfg.redis.redis_url.as_deref(), Some("redis://x"));
    assert_eq!(
        cfg.worker.worker_heartbeat_ms,
        kairos_worker::WorkerConfig::default().worker_heartbeat_ms
    );
    let none: WorkerCmd = load(None, &worker_args(&[])).unwrap();
    assert_eq!(none, WorkerCmd::default());
}

#[test]
fn unknown_file_keys_are_refused_by_name() {
    let f = file("databse_url = 'x'");
    let err = load::<WorkerCmd>(Some(&f.0), &worker_args(&[]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("unknown key `databse_url`"), "{err}");
    // A key of another process is fine: one file may serve a deployment.
    let f = file("database_url = 'sqlite://x.db'\nworker_capacity = 4");
    load::<WorkerCmd>(Some(&f.0), &worker_args(&[])).unwrap();
}

#[test]
fn unparsable_file_values_name_the_variable() {
    let f = file("worker_capacity = 'many'");
    let err = load::<WorkerCmd>(Some(&f.0), &worker_args(&[]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("KAIROS_WORKER_CAPACITY"), "{err}");
    let f = file("balancer = 'fastest'");
    let err = load::<commands::DispatcherCmd>(Some(&f.0), &serde_json::json!({}))
        .unwrap_err()
        .to_string();
    assert!(err.contains("KAIROS_BALANCER"), "{err}");
}

#[test]
fn a_missing_setting_names_every_way_to_set_it() {
    let err = required(&None, "redis_url").unwrap_err().to_string();
    assert!(err.contains("KAIROS_REDIS_URL"), "{err}");
    assert!(err.contains("--redis-url"), "{err}");
    assert!(err.contains("redis_url"), "{err}");
}

#[test]
fn bounds_are_checked_with_the_variable_named() {
    let f = file("worker_attempt_key_ttl_ms = 59999\nlease_ttl_ms = 499");
    let w: WorkerCmd = load(Some(&f.0), &worker_args(&[])).unwrap();
    let err = w.worker.validate().unwrap_err().to_string();
    assert!(err.contains("KAIROS_WORKER_ATTEMPT_KEY_TTL_MS"), "{err}");
    let d: commands::DispatcherCmd = load(Some(&f.0), &serde_json::json!({})).unwrap();
    let err = d.dispatcher.validate().unwrap_err().to_string();
    assert!(err.contains("KAIROS_LEASE_TTL_MS"), "{err}");
}

#[test]
fn dev_keeps_its_own_defaults() {
    let dev = DevCmd::default();
    assert_eq!(dev.db.database_url.as_deref(), Some("sqlite://kairos.db"));
    assert!(dev.worker.http_allow_private);
    assert!(dev.relay.callback_allow_private);
    assert_eq!(dev.relay.callback_secret, kairos::embedded::DEV_SECRET);
}

#[test]
fn config_print_shows_merged_values_and_hides_secrets() {
    let f = file(
        "amqp_url = 'amqp://guest:hunter2@mq:5672/%2f'\nworker_capacity = 5\ncallback_secret = 'top-secret'",
    );
    let (cli, given) = parse(&[
        "kairos",
        "config",
        "print",
        "worker",
        "--worker-grace-ms",
        "9",
    ]);
    let Command::Config(crate::cli::ConfigCommand::Print(process)) = cli.command else {
        panic!("not config print");
    };
    let out = crate::cmd::print_for_test(process, Some(&f.0), &given).unwrap();
    assert!(out.contains("worker_capacity = 5"), "{out}");
    assert!(out.contains("worker_grace_ms = 9"), "{out}");
    assert!(out.contains("amqp_queue_type = \"classic\""), "{out}");
    assert!(!out.contains("hunter2"), "{out}");
    assert!(out.contains("# worker_id is not set"), "{out}");
    let relay = render(&commands::RelayCmd {
        relay: kairos_callback_relay::RelayConfig::new("top-secret", ""),
        ..Default::default()
    })
    .unwrap();
    assert!(!relay.contains("top-secret"), "{relay}");
    assert!(
        relay.contains("callback_secret = \"<redacted>\""),
        "{relay}"
    );
}

/// The cells of the README's settings table row naming `var`.
fn readme_row(readme: &str, var: &str) -> Option<(usize, Vec<String>)> {
    readme.lines().find_map(|line| {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let vars: Vec<&str> = cells
            .get(1)?
            .split(" / ")
            .map(|v| v.trim_matches('`'))
            .collect();
        let i = vars.iter().position(|v| *v == var)?;
        Some((i, cells.iter().map(|c| c.to_string()).collect()))
    })
}

#[test]
fn the_readme_table_lists_every_setting_with_its_default() {
    let readme = include_str!("../../README.md");
    let mut problems = Vec::new();
    for (command, defaults) in defaults_by_command() {
        for (key, value) in defaults.as_object().unwrap() {
            let var = var_of(key);
            let Some((i, cells)) = readme_row(readme, &var) else {
                problems.push(format!("{command}: no README row for {var}"));
                continue;
            };
            let default_cell = &cells[3];
            let parts: Vec<&str> = default_cell.split(" / ").collect();
            let cell = parts.get(i).copied().unwrap_or(default_cell);
            if SECRET_KEYS.contains(&key.as_str()) {
                continue;
            }
            let Some(shown) = display(value) else {
                continue;
            };
            if !cell.contains(&shown) {
                problems.push(format!(
                    "{command}: README shows {var} default {cell:?}, the code {shown:?}"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn operations_doc_quotes_the_defaults() {
    let doc = include_str!("../../docs/operations.md");
    let mut all = serde_json::Map::new();
    for (_, d) in defaults_by_command().into_iter().rev() {
        all.extend(d.as_object().unwrap().clone());
    }
    let mut checked = 0;
    for (key, value) in &all {
        let var = var_of(key);
        for marker in [format!("`{var}` (default "), format!("`{var}` = ")] {
            for (at, _) in doc.match_indices(&marker) {
                let rest = &doc[at + marker.len()..];
                let quoted: String = rest
                    .trim_start_matches('`')
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                    .collect();
                let want = display(value).unwrap_or_default();
                assert_eq!(quoted, want, "docs/operations.md: {var}");
                checked += 1;
            }
        }
    }
    assert!(checked >= 3, "the doc quotes defaults this test reads");
}

#[test]
fn every_command_help_lists_its_variables() {
    let mut cmd = command();
    for (name, defaults) in defaults_by_command() {
        let help = cmd
            .find_subcommand_mut(name)
            .unwrap()
            .render_long_help()
            .to_string();
        for key in defaults.as_object().unwrap().keys() {
            let var = var_of(key);
            assert!(help.contains(&var), "`kairos {name} --help` lacks {var}");
            assert!(
                help.contains(&format!("--{}", key.replace('_', "-"))),
                "`kairos {name} --help` lacks its flag for {var}"
            );
        }
    }
}

#[test]
fn help_shows_defaults_from_the_code() {
    let mut cmd = command();
    let help = cmd
        .find_subcommand_mut("worker")
        .unwrap()
        .render_long_help()
        .to_string();
    let cap = kairos_worker::WorkerConfig::default().worker_capacity;
    assert!(help.contains(&format!("[default: {cap}]")), "{help}");
    let dev = cmd
        .find_subcommand_mut("dev")
        .unwrap()
        .render_long_help()
        .to_string();
    assert!(dev.contains("[default: sqlite://kairos.db]"), "{dev}");
    assert!(!dev.contains(kairos::embedded::DEV_SECRET), "{dev}");
}

/// A setting is declared once, on its config's field: every key a command
/// reads is a flag and a variable of that command, named from the key, and
/// the command takes no setting that is not a key of its config.
#[test]
fn a_new_field_is_a_flag_a_variable_and_a_file_key() {
    let cmd = command();
    for (name, defaults) in defaults_by_command() {
        let sub = cmd.find_subcommand(name).unwrap();
        let keys: BTreeSet<&String> = defaults.as_object().unwrap().keys().collect();
        let args: BTreeSet<String> = sub
            .get_arguments()
            .filter(|a| !a.is_global_set() && a.get_id() != "help")
            .map(|a| a.get_id().to_string())
            .collect();
        for key in &keys {
            let arg = sub
                .get_arguments()
                .find(|a| a.get_id() == key.as_str())
                .unwrap_or_else(|| panic!("`kairos {name}` has no argument for `{key}`"));
            assert_eq!(
                arg.get_long(),
                Some(key.replace('_', "-").as_str()),
                "{name}: {key}"
            );
            assert_eq!(
                arg.get_env().and_then(|v| v.to_str()),
                Some(var_of(key).as_str()),
                "{name}: {key}"
            );
            assert!(!arg.is_required_set(), "{name}: {key} must not be required");
        }
        for id in &args {
            assert!(keys.contains(id), "`kairos {name} --{id}` is no config key");
        }
    }
}

#[test]
fn a_flag_wins_and_an_unset_flag_leaves_the_file_alone() {
    let f = file("worker_capacity = 4\nworker_buffer = 2");
    let (cli, given) = parse(&["kairos", "dev", "--worker-buffer", "9"]);
    let Command::Dev(args) = cli.command else {
        panic!("not dev");
    };
    let dev: DevCmd = load(Some(&f.0), &given.of(&args).unwrap()).unwrap();
    assert_eq!(dev.worker.worker_capacity, 4);
    assert_eq!(dev.worker.worker_buffer, Some(9));
    // Dev's own defaults hold where nothing was given.
    assert!(dev.worker.http_allow_private);
    assert_eq!(dev.db.database_url.as_deref(), Some("sqlite://kairos.db"));
}
