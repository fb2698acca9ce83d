//! Integration tests: the real server on port 0 against a temp database, called with a real
//! HTTP client; the real binary for CLI tests. One binary, shared helpers in `util`.

mod util;

mod cli;
mod foundation;
mod ingest;
mod ingest_access;
mod ingest_cli;
mod ingest_dedupe;
mod ingest_validation;
