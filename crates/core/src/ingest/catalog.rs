//! The products a request's interests name: a workspace's live products, kept with its
//! sources (`ingest::kept`), or those a request names read for it (pings, the CLI).
//!
//! Owns resolving a product reference (slug or id) within one workspace. The SQL and the
//! product record are `config::product`'s.

use std::collections::{HashMap, HashSet};

use rusqlite::Connection;

use super::validate::LeadDraft;
use crate::config::product::{self, Product};

/// Products of one workspace, by slug and by id. Only live ones: an archived product takes
/// no new leads, so a name that is not here names no product of the workspace.
#[derive(Debug, Default)]
pub struct Catalog {
    products: Vec<Product>,
    by_slug: HashMap<String, usize>,
    by_id: HashMap<String, usize>,
}

impl Catalog {
    /// The catalog of `products` (one workspace's), leaving out the archived ones.
    pub fn of(products: impl IntoIterator<Item = Product>) -> Catalog {
        let mut catalog = Catalog::default();
        for product in products {
            catalog.add(product);
        }
        catalog
    }

    fn add(&mut self, product: Product) {
        if product.is_archived() {
            return;
        }
        let index = self.products.len();
        self.by_slug.insert(product.slug.clone(), index);
        self.by_id.insert(product.id.clone(), index);
        self.products.push(product);
    }

    pub fn by_slug(&self, slug: &str) -> Option<&Product> {
        self.by_slug.get(slug).map(|&index| &self.products[index])
    }

    pub fn by_id(&self, id: &str) -> Option<&Product> {
        self.by_id.get(id).map(|&index| &self.products[index])
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
    for slug in &references.slugs {
        if let Some(found) = product::find_by_slug(conn, workspace_id, slug)? {
            catalog.add(found);
        }
    }
    for id in &references.ids {
        if let Some(found) = product::find(conn, id)?
            && found.workspace_id == workspace_id
            && catalog.by_id(id).is_none()
        {
            catalog.add(found);
        }
    }
    Ok(catalog)
}

/// The live products of `workspace_id`: what ingest keeps for it.
pub fn of_workspace(conn: &Connection, workspace_id: &str) -> rusqlite::Result<Catalog> {
    Ok(Catalog::of(product::live_in(conn, workspace_id)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn product(id: &str, slug: &str, archived: bool) -> Product {
        Product {
            id: id.into(),
            workspace_id: "ws".into(),
            slug: slug.into(),
            name: id.into(),
            fields: Vec::new(),
            default_supplier_cost_cents: None,
            created_at: 0,
            archived_at: archived.then_some(1),
            bid_subscriptions: false,
        }
    }

    #[test]
    fn a_catalog_names_its_live_products_by_slug_and_by_id_and_no_archived_one() {
        let catalog = Catalog::of([
            product("p1", "solar", false),
            product("p2", "roofs", true),
            product("p3", "heat", false),
        ]);
        assert_eq!(catalog.by_slug("solar").map(|p| p.id.as_str()), Some("p1"));
        assert_eq!(catalog.by_id("p3").map(|p| p.slug.as_str()), Some("heat"));
        assert!(catalog.by_slug("roofs").is_none());
        assert!(catalog.by_id("p2").is_none());
        assert!(catalog.by_slug("p1").is_none(), "an id is not a slug");
        assert!(catalog.by_id("solar").is_none(), "a slug is not an id");
    }
}
