//! Reading a policy from TOML. toml reports errors with a byte span and a
//! multi-line snippet; this module turns them into one line that names the
//! origin and the field path (`seccomp.allow[1]`), found by walking the
//! document's spans.

use toml::de::{DeTable, DeValue};
use toml::Spanned;

use super::schema::Policy;

/// A policy that cannot be used, in one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// A field (or the value at it) is wrong.
    #[error("use policy {origin}: {field}: {message}")]
    Field {
        origin: String,
        field: String,
        message: String,
    },
    /// The text is not TOML.
    #[error("use policy {origin}: line {line}: {message}")]
    Syntax {
        origin: String,
        line: usize,
        message: String,
    },
}

impl PolicyError {
    pub(crate) fn field(origin: &str, field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Field {
            origin: origin.to_owned(),
            field: field.into(),
            message: message.into(),
        }
    }
}

impl Policy {
    /// Parses and checks a policy; `origin` names it in errors.
    pub fn from_toml_str(text: &str, origin: &str) -> Result<Self, PolicyError> {
        parse(text, origin)
    }
}

pub(super) fn parse(text: &str, origin: &str) -> Result<Policy, PolicyError> {
    let doc = DeTable::parse(text).map_err(|e| {
        let line = e.span().map(|s| line_of(text, s.start)).unwrap_or(1);
        PolicyError::Syntax {
            origin: origin.to_owned(),
            line,
            message: one_line(e.message()),
        }
    })?;
    let mut policy: Policy = toml::from_str(text).map_err(|e| {
        let (field, message) = describe(&doc, e.span(), e.message());
        PolicyError::field(origin, field, message)
    })?;
    policy.origin = origin.to_owned();
    policy
        .validate()
        .map_err(|(field, message)| PolicyError::field(origin, field, message))?;
    Ok(policy)
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

fn one_line(s: &str) -> String {
    let s: Vec<&str> = s.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    s.join("; ")
}

/// The field path and message for a deserialization error.
fn describe(doc: &Spanned<DeTable<'_>>, span: Option<std::ops::Range<usize>>, message: &str) -> (String, String) {
    let message = one_line(message);
    let mut path = span
        .and_then(|s| find(doc.get_ref(), s.start, &message))
        .unwrap_or_default();
    // serde names the offending key in the message; put it in the path.
    if let Some(rest) = message.strip_prefix("unknown field `") {
        if let Some((key, expected)) = rest.split_once('`') {
            if path.last().map(String::as_str) != Some(key) {
                path.push(key.to_owned());
            }
            let expected = expected.trim_start_matches(", ").replace('`', "");
            return (join(&path), format!("unknown field ({expected})"));
        }
    }
    if let Some(rest) = message.strip_prefix("missing field `") {
        if let Some((key, _)) = rest.split_once('`') {
            // Only top-level fields are required; the span is the document's.
            let path = vec![key.to_owned()];
            let hint = if key == "version" { " (write version = 1)" } else { "" };
            return (join(&path), format!("missing{hint}"));
        }
    }
    if path.is_empty() {
        return ("(top level)".to_owned(), message);
    }
    (join(&path), message)
}

fn join(path: &[String]) -> String {
    let mut out = String::new();
    for seg in path {
        if seg.starts_with('[') {
            out.push_str(seg);
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            if seg.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') && !seg.is_empty() {
                out.push_str(seg);
            } else {
                out.push_str(&format!("{seg:?}"));
            }
        }
    }
    out
}

/// The path of the deepest key or value whose span holds `at`.
fn find(table: &DeTable<'_>, at: usize, message: &str) -> Option<Vec<String>> {
    for (key, value) in table.iter() {
        if let Some(mut inner) = find_value(value, at, message) {
            inner.insert(0, key.get_ref().to_string());
            return Some(inner);
        }
        if key.span().contains(&at) || value.span().contains(&at) {
            return Some(vec![key.get_ref().to_string()]);
        }
    }
    None
}

fn find_value(value: &Spanned<DeValue<'_>>, at: usize, message: &str) -> Option<Vec<String>> {
    match value.get_ref() {
        DeValue::Table(t) => find(t, at, message),
        DeValue::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                if let Some(mut inner) = find_value(item, at, message) {
                    inner.insert(0, format!("[{i}]"));
                    return Some(inner);
                }
                if item.span().contains(&at) {
                    return Some(vec![format!("[{i}]")]);
                }
            }
            // toml gives an element's own error (a value refused by its type's
            // check) the span of the whole array; every such message quotes
            // the value, which singles the element out.
            if value.span().contains(&at) {
                let quoted: Vec<usize> = items
                    .iter()
                    .enumerate()
                    .filter(|(_, item)| {
                        item.get_ref()
                            .as_str()
                            .is_some_and(|s| message.contains(&format!("{s:?}")))
                    })
                    .map(|(i, _)| i)
                    .collect();
                if let [i] = quoted[..] {
                    return Some(vec![format!("[{i}]")]);
                }
            }
            None
        }
        _ => None,
    }
}
