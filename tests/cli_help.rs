//! Every command's `--help`: each flag and argument has a description, each command ends
//! with an example, and each example is a command line the binary accepts.

use clap::CommandFactory;

use leadrelay::cli::Cli;

/// Every command with its path of names (`leadrelay buyer terms set`), groups included.
fn commands() -> Vec<(String, clap::Command)> {
    fn walk(path: String, command: &clap::Command, all: &mut Vec<(String, clap::Command)>) {
        all.push((path.clone(), command.clone()));
        for sub in command.get_subcommands() {
            if sub.get_name() == "help" {
                continue;
            }
            walk(format!("{path} {}", sub.get_name()), sub, all);
        }
    }
    let mut root = Cli::command();
    root.build();
    let mut all = Vec::new();
    walk("leadrelay".to_string(), &root, &mut all);
    all
}

/// The example lines of a command's help (`  leadrelay …` after `Example:`).
fn examples(help: &str) -> Vec<String> {
    let Some((_, after)) = help.split_once("Example:") else {
        return Vec::new();
    };
    after
        .lines()
        .map(str::trim)
        .filter(|line| line.starts_with("leadrelay "))
        .map(str::to_string)
        .collect()
}

/// Whether `line` runs the command `path`: its names in order (global flags may come
/// between them).
fn is_example_of(line: &str, path: &str) -> bool {
    let mut words = line.split_whitespace();
    path.split(' ').all(|name| words.any(|word| word == name))
}

#[test]
fn every_flag_has_help_and_every_command_an_example_that_parses() {
    let mut problems = Vec::new();
    let all = commands();
    assert!(all.len() > 60, "the walk finds the commands: {}", all.len());
    for (path, mut command) in all {
        for arg in command.get_arguments() {
            let id = arg.get_id().as_str();
            if id == "help" || id == "version" {
                continue;
            }
            let described = arg
                .get_help()
                .is_some_and(|help| !help.to_string().trim().is_empty());
            if !described {
                problems.push(format!("{path}: --{id} has no help text"));
            }
        }
        if command.has_subcommands() && command.get_arguments().all(|a| !a.is_positional()) {
            // A group (`leadrelay buyer`): its subcommands carry the examples.
            continue;
        }
        let help = command.render_long_help().to_string();
        let lines = examples(&help);
        if !lines.iter().any(|line| is_example_of(line, &path)) {
            problems.push(format!("{path}: no example of it in its help"));
        }
        for line in lines {
            let words = shlex::split(&line).unwrap_or_else(|| panic!("{path}: {line}"));
            let args: Vec<std::ffi::OsString> = words.into_iter().map(Into::into).collect();
            if let Err(e) = leadrelay::cli::parse_from(&args) {
                problems.push(format!("{path}: example `{line}` does not parse: {e:?}"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// A command's help lists its own flags under `Options:` and the flags every command
/// takes (`--db`, `--json`, `--busy-timeout`, `--get`) after them, under their own heading.
#[test]
fn global_flags_are_listed_apart_from_a_commands_own() {
    let shown = crate::util::bin()
        .args(["buyer", "create", "--help"])
        .output()
        .expect("the binary runs");
    assert!(shown.status.success());
    let help = String::from_utf8(shown.stdout).expect("help is text");
    let (own, global) = help
        .split_once("Global options:")
        .unwrap_or_else(|| panic!("no Global options heading:\n{help}"));
    for flag in ["--workspace", "--name", "--webhook-url", "--credit-limit"] {
        assert!(
            own.contains(flag),
            "{flag} not among its own options:\n{help}"
        );
    }
    for flag in ["--db", "--json", "--busy-timeout", "--get"] {
        assert!(
            !own.contains(flag),
            "{flag} among the command's own options:\n{help}"
        );
        assert!(
            global.contains(flag),
            "{flag} not under Global options:\n{help}"
        );
    }
}
