//! The containment table's shape, as results.json records it: one column
//! per sandbox with a B / E / n/a cell per escape check and its totals.
//! Below `results` and `containment_table`, which both use it.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::runtimes::Kind;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Cell {
    B,
    E,
    #[serde(rename = "n/a")]
    NotApplicable,
}

#[derive(Debug, Clone, Serialize)]
pub struct Column {
    pub name: String,
    pub kind: Kind,
    pub variant: String,
    /// Why the column is empty.
    pub reason: Option<String>,
    /// A column run as the unprivileged user: the root column it pairs with.
    pub pair: Option<String>,
    pub blocked: usize,
    pub applicable: usize,
    /// check -> cell, with what the probe observed for E cells.
    pub cells: BTreeMap<String, Cell>,
    pub escapes: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Containment {
    pub policy: &'static str,
    /// The checks, in verify's order, with their group and what blocks them.
    pub checks: Vec<(String, String, String)>,
    pub columns: Vec<Column>,
}

impl Column {
    pub fn total(&self) -> String {
        match &self.reason {
            Some(_) => "n/a".into(),
            None => format!("{}/{}", self.blocked, self.applicable),
        }
    }
}
