//! The console's pages, one module each: what the page reads (through the read pool, in
//! one closure, so a page is one trip to a blocking thread) and the HTML it shows.

pub(super) mod audit;
pub(super) mod buyers;
pub(super) mod lead;
pub(super) mod leads;
pub(super) mod outbox;
pub(super) mod overview;
pub(super) mod reports;
pub(super) mod returns;
pub(super) mod sources;
