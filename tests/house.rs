//! The shape of the house (issue 29), checked on every test run: no source file
//! outside `vendor/` grows past [`MAX_LINES`], and within each crate no two
//! files import each other, directly or around a longer circle. Arrows between
//! modules point one way: what two modules share lives in a module below both.
//!
//! Imports are read with `syn`, not by pattern: every `use` tree and every path
//! in the code (`crate::`, `super::`, `self::` or a child module's name) is
//! resolved to the file that defines the item, following re-exports, so a
//! facade that only re-exports a sibling's item is not an edge to the facade.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// "About 600 lines" from the issue, as a hard bound.
const MAX_LINES: usize = 600;

/// The crate roots whose module graphs are checked, besides every
/// integration test file (each its own crate) found in [`TEST_DIRS`].
const CRATE_ROOTS: &[&str] = &[
    "shim/src/main.rs",
    "bundle/src/lib.rs",
    "bench/src/main.rs",
    "tests/src/lib.rs",
    "tests/mock-api/src/lib.rs",
];
const TEST_DIRS: &[&str] = &["tests", "bench/tests", "bundle/tests", "shim/tests"];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display())) {
        let entry = entry.expect("directory entry");
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let kind = entry.file_type().expect("file type");
        if kind.is_dir() {
            if !matches!(name.as_ref(), "vendor" | "target" | ".git" | "node_modules") {
                rust_files(&path, out);
            }
        } else if kind.is_file() && name.ends_with(".rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_source_file_passes_the_line_bound() {
    let root = repo();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    assert!(
        files.len() > 50,
        "found only {} source files under {}",
        files.len(),
        root.display()
    );
    let mut long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let lines = std::fs::read_to_string(f).expect("read source").lines().count();
            (lines > MAX_LINES).then(|| format!("{} ({lines} lines)", f.strip_prefix(&root).unwrap().display()))
        })
        .collect();
    long.sort();
    assert!(
        long.is_empty(),
        "files past {MAX_LINES} lines (split them by concern):\n  {}",
        long.join("\n  ")
    );
}

#[test]
fn no_two_modules_import_each_other() {
    let root = repo();
    let mut roots: Vec<String> = CRATE_ROOTS.iter().map(|r| r.to_string()).collect();
    for dir in TEST_DIRS {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
            continue;
        };
        for e in entries {
            let name = e.expect("directory entry").file_name().to_string_lossy().into_owned();
            if name.ends_with(".rs") {
                roots.push(format!("{dir}/{name}"));
            }
        }
    }
    roots.sort();
    let mut circles = Vec::new();
    for krate in &roots {
        let graph = Crate::load(&root.join(krate));
        let is_lib = CRATE_ROOTS.contains(&krate.as_str()) && !krate.contains("mock-api");
        assert!(!is_lib || graph.files.len() > 1, "{krate}: no modules found");
        for circle in graph.circles() {
            circles.push(format!("{krate}: {}", circle.join(" -> ")));
        }
    }
    assert!(
        circles.is_empty(),
        "modules that import each other (move what they share below both):\n  {}",
        circles.join("\n  ")
    );
}

/// A module path from the crate root (`[]` is the root itself).
type ModPath = Vec<String>;

/// One file of a crate, parsed.
struct File {
    ast: syn::File,
}

/// A crate's file-modules, keyed by module path.
struct Crate {
    files: BTreeMap<ModPath, File>,
}

impl Crate {
    fn load(root_file: &Path) -> Self {
        let mut files = BTreeMap::new();
        load_module(root_file, Vec::new(), true, &mut files);
        Self { files }
    }

    /// Where the item `name` of module `module` is defined: the module itself,
    /// or, through a `use` in it, another file (followed a few steps).
    fn defining_file(&self, module: &ModPath, name: &str, depth: u8) -> ModPath {
        let Some(file) = self.files.get(module) else {
            return module.clone();
        };
        if depth == 0 || defines(&file.ast.items, name) {
            return module.clone();
        }
        for item in &file.ast.items {
            if let syn::Item::Use(u) = item {
                for imported in expand_use(&u.tree) {
                    if imported.last().map(String::as_str) == Some(name) {
                        if let Some(target) = self.resolve(module, &[], &imported, depth - 1) {
                            return target;
                        }
                    }
                }
            }
        }
        module.clone()
    }

    /// The file a path written in `module` (inside the inline modules `inline`)
    /// refers to, or None for paths outside the crate.
    fn resolve(&self, module: &ModPath, inline: &[String], segs: &[String], depth: u8) -> Option<ModPath> {
        let first = segs.first()?;
        let mut base: ModPath = module.iter().chain(inline).cloned().collect();
        let mut rest = segs;
        match first.as_str() {
            "crate" => {
                base.clear();
                rest = &segs[1..];
            }
            "super" | "self" => {
                while let Some(s) = rest.first() {
                    match s.as_str() {
                        "super" => {
                            base.pop();
                        }
                        "self" => {}
                        _ => break,
                    }
                    rest = &rest[1..];
                }
            }
            _ => {
                // A bare path names a child module of this file (2018 paths).
                let mut child = base.clone();
                child.push(first.clone());
                if !inline.is_empty() || !self.files.contains_key(&child) {
                    return None;
                }
            }
        }
        // Descend through file-modules as far as the path goes, then through
        // re-exports to where the next name is defined.
        let mut at = base;
        let mut i = 0;
        while i < rest.len() {
            let mut next = at.clone();
            next.push(rest[i].clone());
            if self.files.contains_key(&next) {
                at = next;
                i += 1;
            } else {
                break;
            }
        }
        // Inline modules are part of their file.
        while !at.is_empty() && !self.files.contains_key(&at) {
            at.pop();
        }
        match rest.get(i) {
            Some(name) if name != "*" => Some(self.defining_file(&at, name, depth)),
            _ => Some(at),
        }
    }

    /// Every edge file -> file this crate's code makes.
    fn edges(&self) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
        let mut edges: BTreeMap<ModPath, BTreeSet<ModPath>> = BTreeMap::new();
        for (module, file) in &self.files {
            let mut refs = Refs::default();
            refs.visit_file(&file.ast);
            let out = edges.entry(module.clone()).or_default();
            for (inline, segs) in refs.paths {
                if let Some(target) = self.resolve(module, &inline, &segs, 4) {
                    if &target != module {
                        out.insert(target);
                    }
                }
            }
        }
        edges
    }

    /// Each circle of imports, as the files on it in order.
    fn circles(&self) -> Vec<Vec<String>> {
        let edges = self.edges();
        let name = |m: &ModPath| {
            if m.is_empty() {
                "crate".to_string()
            } else {
                m.join("::")
            }
        };
        let mut found = BTreeSet::new();
        for start in edges.keys() {
            // Shortest path back to `start`, breadth first.
            let mut prev: BTreeMap<ModPath, ModPath> = BTreeMap::new();
            let mut queue = std::collections::VecDeque::from([start.clone()]);
            'search: while let Some(at) = queue.pop_front() {
                for next in edges.get(&at).into_iter().flatten() {
                    if next == start {
                        let mut circle = vec![name(&at)];
                        let mut cur = at.clone();
                        while let Some(p) = prev.get(&cur) {
                            circle.push(name(p));
                            cur = p.clone();
                        }
                        circle.reverse();
                        // One entry per circle, whichever file it was found from.
                        let min = circle.iter().enumerate().min_by_key(|(_, n)| (*n).clone()).unwrap().0;
                        circle.rotate_left(min);
                        circle.push(circle[0].clone());
                        found.insert(circle);
                        break 'search;
                    }
                    if next != start && !prev.contains_key(next) {
                        prev.insert(next.clone(), at.clone());
                        queue.push_back(next.clone());
                    }
                }
            }
        }
        found.into_iter().collect()
    }
}

fn load_module(path: &Path, module: ModPath, owns_dir: bool, files: &mut BTreeMap<ModPath, File>) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("parse {}: {e}", path.display()));
    // Children of a.rs live in a/, children of a/mod.rs (or a crate root) beside it.
    let dir = if owns_dir {
        path.parent().unwrap().to_path_buf()
    } else {
        path.with_extension("")
    };
    for item in &ast.items {
        let syn::Item::Mod(m) = item else { continue };
        if m.content.is_some() {
            continue;
        }
        let name = m.ident.to_string();
        let mut child = module.clone();
        child.push(name.clone());
        let explicit = m.attrs.iter().find_map(|a| {
            let syn::Meta::NameValue(nv) = &a.meta else { return None };
            if !nv.path.is_ident("path") {
                return None;
            }
            let syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s), ..
            }) = &nv.value
            else {
                return None;
            };
            Some(path.parent().unwrap().join(s.value()))
        });
        match explicit {
            // A `#[path]` file owns its directory, as a mod.rs does.
            Some(file) => load_module(&file, child, true, files),
            None => {
                let flat = dir.join(format!("{name}.rs"));
                if flat.exists() {
                    load_module(&flat, child, false, files);
                } else {
                    load_module(&dir.join(&name).join("mod.rs"), child, true, files);
                }
            }
        }
    }
    files.insert(module, File { ast });
}

/// Whether `items` define `name` (not merely import it).
fn defines(items: &[syn::Item], name: &str) -> bool {
    items.iter().any(|item| {
        let ident = match item {
            syn::Item::Fn(i) => &i.sig.ident,
            syn::Item::Struct(i) => &i.ident,
            syn::Item::Enum(i) => &i.ident,
            syn::Item::Trait(i) => &i.ident,
            syn::Item::Type(i) => &i.ident,
            syn::Item::Const(i) => &i.ident,
            syn::Item::Static(i) => &i.ident,
            syn::Item::Union(i) => &i.ident,
            syn::Item::Mod(i) => &i.ident,
            syn::Item::Macro(i) => match &i.ident {
                Some(id) => id,
                None => return false,
            },
            _ => return false,
        };
        ident == name
    })
}

/// The paths a `use` tree imports, braces expanded, renames dropped.
fn expand_use(tree: &syn::UseTree) -> Vec<Vec<String>> {
    match tree {
        syn::UseTree::Path(p) => expand_use(&p.tree)
            .into_iter()
            .map(|mut rest| {
                rest.insert(0, p.ident.to_string());
                rest
            })
            .collect(),
        syn::UseTree::Name(n) => vec![vec![n.ident.to_string()]],
        syn::UseTree::Rename(r) => vec![vec![r.ident.to_string()]],
        syn::UseTree::Glob(_) => vec![vec!["*".to_string()]],
        syn::UseTree::Group(g) => g.items.iter().flat_map(expand_use).collect(),
    }
}

/// Every path a file writes, with the inline modules it sits in.
#[derive(Default)]
struct Refs {
    inline: Vec<String>,
    paths: Vec<(Vec<String>, Vec<String>)>,
}

impl<'ast> Visit<'ast> for Refs {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if m.content.is_some() {
            self.inline.push(m.ident.to_string());
            syn::visit::visit_item_mod(self, m);
            self.inline.pop();
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        for segs in expand_use(&u.tree) {
            self.paths.push((self.inline.clone(), segs));
        }
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        if p.segments.len() > 1 {
            let segs = p.segments.iter().map(|s| s.ident.to_string()).collect();
            self.paths.push((self.inline.clone(), segs));
        }
        syn::visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        // Paths inside macro calls (format!, assert!...) are read as expressions where they parse.
        if let Ok(args) = m.parse_body_with(syn::punctuated::Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated)
        {
            for arg in &args {
                self.visit_expr(arg);
            }
        }
        syn::visit::visit_macro(self, m);
    }
}

#[test]
fn the_import_check_sees_a_circle() {
    // The check itself: two files that import each other are found, a re-export is followed.
    let dir = tempfile::tempdir().unwrap();
    let w = |p: &str, s: &str| std::fs::write(dir.path().join(p), s).unwrap();
    w("lib.rs", "mod a; mod b; mod c; pub use c::Shared;");
    w("a.rs", "use crate::b::g; pub fn f() { g() }");
    w("b.rs", "pub fn g() { crate::a::f() }");
    w("c.rs", "pub struct Shared; pub fn h() -> crate::Shared { Shared }");
    let graph = Crate::load(&dir.path().join("lib.rs"));
    assert_eq!(graph.circles(), vec![vec!["a".to_string(), "b".into(), "a".into()]]);
}

#[test]
fn the_import_check_reads_path_modules() {
    // A `#[path]` module is part of the graph, not a way around it.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("x")).unwrap();
    let w = |p: &str, s: &str| std::fs::write(dir.path().join(p), s).unwrap();
    w("main.rs", "#[path = \"x/p.rs\"] mod p; mod q; fn main() {}");
    w("x/p.rs", "pub fn f() { crate::q::g() }");
    w("q.rs", "use super::p; pub fn g() { p::f() }");
    let graph = Crate::load(&dir.path().join("main.rs"));
    assert_eq!(graph.circles(), vec![vec!["p".to_string(), "q".into(), "p".into()]]);
}

/// The test rootfs (hack/rootfs) links its applets to busybox by relative
/// paths: an absolute `/bin/busybox` made a host-side `chmod go-x
/// rootfs/bin/echo` (runc's start_hello.bats does it) follow the link and
/// change the host's own /bin/busybox, and every later test failed on it.
#[test]
fn the_test_rootfs_links_never_leave_it() {
    let out = tempfile::tempdir().unwrap();
    let rootfs = out.path().join("rootfs");
    let status = std::process::Command::new(repo().join("hack/rootfs"))
        .arg(&rootfs)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "hack/rootfs failed");
    let rootfs = rootfs.canonicalize().unwrap();
    let mut links = 0;
    let mut dirs = vec![rootfs.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                dirs.push(path);
            } else if meta.file_type().is_symlink() {
                links += 1;
                let target = std::fs::read_link(&path).unwrap();
                assert!(
                    target.is_relative(),
                    "{} -> {} is absolute",
                    path.display(),
                    target.display()
                );
                let resolved = path.canonicalize().unwrap();
                assert!(
                    resolved.starts_with(&rootfs),
                    "{} resolves to {}",
                    path.display(),
                    resolved.display()
                );
            }
        }
    }
    assert!(links > 100, "only {links} applet links: the walk saw no rootfs");
}
