//! The clap command with each setting's default taken from the command's
//! config (so `--help` cannot drift from the code, and `kairos dev` shows
//! its own defaults), and the help text of each setting taken from its
//! field's doc comment without the leading `` `KAIROS_…`: ``.

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

/// `cmd` (and its subcommands) with each setting's default set from
/// `defaults` and its help cleaned. A setting with a default is never
/// required: the derive marks non-optional fields required, since the
/// defaults live in the configs' `Default` impls, not in attributes.
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
        let shown = super::display(value);
        let secret = SECRET_KEYS.contains(&id.as_str());
        cmd = cmd.mut_arg(&id, |a| {
            let a = clean_help(a);
            match &shown {
                Some(shown) => a
                    .required(false)
                    .default_value(shown.clone())
                    .hide_default_value(secret),
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

/// `arg` without the `` `KAIROS_…`: `` its doc comment starts with (clap
/// prints the variable itself), the rest capitalized.
fn clean_help(arg: clap::Arg) -> clap::Arg {
    fn clean(text: String) -> String {
        let rest = match text.strip_prefix("`KAIROS_") {
            Some(rest) => match rest.split_once("`: ") {
                Some((_, rest)) => rest,
                None => return text,
            },
            None => return text,
        };
        let mut chars = rest.chars();
        match chars.next() {
            Some(first) => first.to_uppercase().chain(chars).collect(),
            None => String::new(),
        }
    }
    let help = arg.get_help().map(|h| clean(h.to_string()));
    let long = arg.get_long_help().map(|h| clean(h.to_string()));
    let arg = match help {
        Some(h) => arg.help(h),
        None => arg,
    };
    match long {
        Some(l) => arg.long_help(l),
        None => arg,
    }
}
