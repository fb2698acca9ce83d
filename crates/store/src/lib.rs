//! leadrelay's storage: the database handle ([`db`]: one SQLite file, a pool of read
//! connections, the writer thread, the checkpoint thread, migrations, the database files),
//! the stored form of ids ([`ids`]), the request id a writer job carries ([`request_id`])
//! and the log line format ([`logging`]). It owns no table's rows: the domain crate's
//! owners do. No HTTP.

// Items are crate-visible unless a crate above names them (see the root crate's lib.rs).
#![warn(unreachable_pub)]

pub mod db;
pub mod ids;
pub mod logging;
pub mod request_id;

use leadrelay_rules::{clock, duration};
