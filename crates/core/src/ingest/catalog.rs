//! The products a request's interests name, looked up once per request in the source's
//! workspace.
//!
//! Owns collecting the product references of a request and resolving them with one read.
//! The SQL and the product record are `config::product`'s.

use std::collections::{HashMap, HashSet};

use rusqlite::Connection;

use super::validate::LeadDraft;
use crate::config::product::{self, Product};

/// The products of one workspace that a request names, by slug and by id. A name that is
/// not in the catalog names no product of the workspace.
#[derive(Debug, Default)]
pub struct Catalog {
    by_slug: HashMap<String, Product>,
    by_id: HashMap<String, Product>,
}

impl Catalog {
    pub fn by_slug(&self, slug: &str) -> Option<&Product> {
        self.by_slug.get(slug)
    }

    pub fn by_id(&self, id: &str) -> Option<&Product> {
        self.by_id.get(id)
    }
}

/// The distinct product slugs and ids that the drafts' interests name.
#[derive(Debug, Default)]
pub struct References {
    slugs: HashSet<String>,
    ids: HashSet<String>,
}

impl References {
    pub fn of<'a>(drafts: impl IntoIterator<Item = &'a LeadDraft>) -> References {
        let mut references = References::default();
        for interest in drafts.into_iter().flat_map(|d| &d.interests) {
            if let Some(slug) = &interest.product_slug {
                references.slugs.insert(slug.clone());
            }
            if let Some(id) = &interest.product_id {
                references.ids.insert(id.clone());
            }
        }
        references
    }

    pub fn is_empty(&self) -> bool {
        self.slugs.is_empty() && self.ids.is_empty()
    }
}

/// Looks up every referenced product in `workspace_id`.
pub fn load(
    conn: &Connection,
    workspace_id: &str,
    references: &References,
) -> rusqlite::Result<Catalog> {
    let mut catalog = Catalog::default();
    // An archived product takes no new leads: it names nothing here.
    for slug in &references.slugs {
        if let Some(found) = product::find_by_slug(conn, workspace_id, slug)?
            && !found.is_archived()
        {
            catalog.by_slug.insert(slug.clone(), found);
        }
    }
    for id in &references.ids {
        if let Some(found) = product::find(conn, id)?
            && found.workspace_id == workspace_id
            && !found.is_archived()
        {
            catalog.by_id.insert(id.clone(), found);
        }
    }
    Ok(catalog)
}
