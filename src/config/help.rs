//! The clap command with each setting's default added to its help, taken
//! from the command's config (so `--help` cannot drift from the code).

use super::{SECRET_KEYS, commands};
use clap::CommandFactory;

/// The `kairos` command line, defaults shown.
pub fn command() -> clap::Command {
    let mut cmd = crate::cli::Cli::command();
    for (name, defaults) in commands::defaults_by_command() {
        let Some(defaults) = defaults.as_object().cloned() else {
            continue;
        };
        let with = move |c: clap::Command| with_defaults(c, &defaults);
        let print = with.clone();
        cmd = cmd
            .mut_subcommand(name, with)
            .mut_subcommand("config", move |c| {
                c.mut_subcommand("print", move |p| {
                    if p.find_subcommand(name).is_some() {
                        p.mut_subcommand(name, print)
                    } else {
                        p
                    }
                })
            });
    }
    cmd
}

/// `cmd` (and its subcommands) with `[default: …]` after each setting's help.
fn with_defaults(
    mut cmd: clap::Command,
    defaults: &serde_json::Map<String, serde_json::Value>,
) -> clap::Command {
    let ids: Vec<String> = cmd
        .get_arguments()
        .map(|a| a.get_id().to_string())
        .collect();
    for id in ids {
        let Some(value) = defaults.get(&id) else {
            continue;
        };
        if SECRET_KEYS.contains(&id.as_str()) {
            continue;
        }
        let Some(shown) = super::display(value) else {
            continue;
        };
        cmd = cmd.mut_arg(&id, |a| {
            let help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
            let long = a.get_long_help().map(|h| h.to_string());
            let a = a.help(format!("{help} [default: {shown}]"));
            match long {
                Some(l) => a.long_help(format!("{l}\n\n[default: {shown}]")),
                None => a,
            }
        });
    }
    let subs: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    for sub in subs {
        cmd = cmd.mut_subcommand(sub, |s| with_defaults(s, defaults));
    }
    cmd
}
