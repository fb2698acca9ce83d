//! The `leadrelay` binary: parse the command line, run the command, map errors to exit
//! codes (2 for usage errors; 1 for everything else), printed by `cli`.

use std::process::ExitCode;

/// mimalloc instead of the system allocator: requests are parsed on one thread and their
/// leads freed on another, a pattern where glibc's malloc spends a sixth of ingest's CPU.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // Before anything can open a connection, while this is the only thread.
    leadrelay::db::sqlite_memory::configure();
    leadrelay::db::sqlite_page_cache::configure();
    let cli = leadrelay::cli::parse();
    let json = cli.json;
    if !matches!(cli.command, leadrelay::cli::Command::Serve(_)) {
        exit_quietly_on_closed_stdout();
    }
    // The server logs a line per request; other commands print their result on stdout and
    // only warnings on stderr. RUST_LOG overrides both.
    let default_level = match cli.command {
        leadrelay::cli::Command::Serve(_) => "info",
        _ => "warn",
    };
    leadrelay::logging::init(default_level);
    match leadrelay::cli::run(cli) {
        Ok(code) => code,
        Err(e) => leadrelay::cli::report(&e, json),
    }
}

/// Lets a command end quietly when the reader of its output goes away (`leadrelay lead list
/// | head`), as Unix tools do, instead of panicking on the broken pipe. Not for `serve`: the
/// server must see a closed client socket as an error on that socket, not die of SIGPIPE.
fn exit_quietly_on_closed_stdout() {
    #[cfg(unix)]
    // SAFETY: called once at start-up before any thread exists; SIG_DFL is a valid handler.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
