//! The filesystem pass: the root (the host's `/` or a rootfs, read-only), the
//! skeleton that gives the host's top-level entries mount points in the
//! bundle, and the mounts in the order the runtime must apply them (parents
//! first): the host's top-level directories read-only, kernel filesystems,
//! private /tmp and /run, masked paths, extra binds, the working directory,
//! protected paths read-only on top, and hidden secrets last.
//!
//! The `Builder` and the passes every sandbox takes live here; a pass with a
//! concern of its own adds its `impl Builder` block in a file beside this one:
//! `git` (the repositories), `review` (the working directory as an overlay
//! for `filesystem.workspace = "review"`), `nested` (the start's one search, and the
//! host-run entries below the top), `present` (what the quarantine at exit
//! compares against), `home` (the empty home, the home as the working
//! directory), `sockets` (the host's unix sockets covered) and `root_only`
//! (what a root-run sandbox in a root-owned project could read that only
//! root may).

mod git;
mod home;
mod nested;
mod present;
pub(super) mod review;
mod root_only;
mod sockets;
mod stack;

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};

use oci_spec::runtime::{Mount, MountBuilder, Root, RootBuilder};

use self::stack::{Layer, Stack};
use super::ctx::Ctx;
use super::input::PathKind;
use super::output::{CompileError, Placeholder, SkeletonEntry};
use super::resolve::{resolve, resolved_kind};
use crate::host_run::{self, Missing, Shape};
use crate::policy::values::{Access, RootSource, Workspace};

/// Top-level names of the host that get their own filesystem inside (or
/// nothing, for lost+found), never a bind of the host's.
const NOT_BOUND: &[&str] = &["proc", "sys", "dev", "tmp", "run", "lost+found"];

/// Directory trees the kernel provides; nothing of the host's is bound there.
const PSEUDO: &[&str] = &["/proc", "/sys", "/dev"];

/// Where the sandbox has fresh tmpfs of its own: host content there is not
/// visible, so masking it is moot.
const PRIVATE_TMPFS: &[&str] = &["/tmp", "/var/tmp", "/run"];

/// runc's and podman's masked paths, plus the sysfs entries that leak host
/// hardware state (powercap: energy counters behind Platypus, CVE-2020-8694).
pub const MASKED_PATHS: &[&str] = &[
    "/proc/acpi",
    "/proc/asound",
    "/proc/interrupts",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/sys/dev/block",
    "/sys/devices/virtual/powercap",
    "/sys/firmware",
    "/sys/fs/selinux",
];

/// runc's read-only paths (/sys is mounted read-only as a whole).
pub const READONLY_PATHS: &[&str] = &["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"];

/// Names of the working directory's files that read as empty (`hide_env_files`).
pub fn is_env_file(name: &str) -> bool {
    name == ".env" || name.starts_with(".env.")
}

/// The names the start's one search looks for (`.env` files for
/// `hide_env_files`, the host-run names and the two that tell a repository
/// or a virtualenv by shape, for the nested pass and the quarantine): the same on every start, so the binary's index of it stays
/// valid whatever the policy, and the same at exit.
pub fn search_names(name: &str) -> bool {
    is_env_file(name) || crate::host_run::is_nested_name(name) || crate::host_run::is_shape_name(name)
}

/// How deep the start's one search looks, and how many .env files and
/// host-run entries it takes; more is refused rather than half-covered.
pub const ENV_FILE_DEPTH: usize = 8;
pub const ENV_FILE_LIMIT: usize = 1000;

const RO_BIND: &[&str] = &["rbind", "ro", "rro", "nosuid", "nodev"];
const RW_BIND: &[&str] = &["rbind", "nosuid", "nodev"];
const HIDE_FILE: &[&str] = &["bind", "ro"];
const HIDE_DIR: &[&str] = &["ro", "nosuid", "nodev", "noexec", "mode=0755", "size=4k"];

pub(crate) struct Filesystem {
    pub root: Root,
    pub mounts: Vec<Mount>,
    pub skeleton: Vec<SkeletonEntry>,
    pub placeholders: Vec<Placeholder>,
    pub masked_paths: Vec<String>,
    pub readonly_paths: Vec<String>,
    /// The host-run entries present at start (see `present`).
    pub host_run: Option<Vec<PathBuf>>,
}

fn mount(dest: &Path, typ: &str, source: &Path, options: &[&str]) -> Mount {
    MountBuilder::default()
        .destination(dest)
        .typ(typ)
        .source(source)
        .options(options.iter().map(|s| s.to_string()).collect::<Vec<_>>())
        .build()
        .expect("a mount with destination, type, source and options is complete")
}

/// A policy path that must exist and does not.
fn missing(ctx: &Ctx<'_>, field: impl Into<String>, path: &Path) -> CompileError {
    ctx.field_error(
        field,
        format!(
            "{} does not exist (a leading \"?\" skips a missing path)",
            path.display()
        ),
    )
}

fn bind(path: &Path, options: &[&str]) -> Mount {
    mount(path, "bind", path, options)
}

fn tmpfs(dest: &Path, options: &[&str]) -> Mount {
    mount(dest, "tmpfs", Path::new("tmpfs"), options)
}

/// `/` or a kernel tree: what no policy path may resolve to.
fn is_forbidden(path: &Path) -> bool {
    path == Path::new("/") || PSEUDO.iter().any(|p| path.starts_with(p))
}

struct Builder<'c, 'a> {
    ctx: &'c Ctx<'a>,
    mounts: Stack,
    skeleton: Vec<SkeletonEntry>,
    placeholders: Vec<Placeholder>,
    /// Host trees visible inside (host root: `/`; rootfs: the binds).
    visible: BTreeSet<PathBuf>,
    /// The start's one search of the working directory, once made.
    found: Option<Vec<(PathBuf, PathKind)>>,
    /// Repositories the git pass has protected.
    git_dirs: Vec<PathBuf>,
    /// Host trees covered by an empty filesystem (the empty home): not
    /// visible, unless an entry of `visible` as deep or deeper (mounted on
    /// top of it) shows part of them.
    covered: Vec<PathBuf>,
    /// What the runtime masks once /proc and /sys are mounted.
    masked_paths: Vec<String>,
}

impl Builder<'_, '_> {
    fn push(&mut self, layer: Layer, m: Mount) {
        self.mounts.push(layer, m);
    }

    /// Whether the sandbox could write the host's `p` with the mounts so
    /// far: the host's `p` shows inside (not under the empty home, say,
    /// whose tmpfs is the sandbox's own) and the topmost mount over it
    /// (deepest, then latest layer) is not read-only.
    fn writable_at(&self, p: &Path) -> bool {
        if !self.is_visible(p) {
            return false;
        }
        // The deepest, then latest layer, then latest pushed.
        self.mounts
            .over(p)
            .max_by_key(|(i, (layer, m))| (depth(m.destination()), *layer, *i))
            .is_some_and(|(_, (_, m))| !m.options().iter().flatten().any(|o| o == "ro"))
    }

    fn is_visible(&self, p: &Path) -> bool {
        if PSEUDO.iter().chain(PRIVATE_TMPFS).any(|x| p.starts_with(x)) {
            // Only what the sandbox itself binds there is visible.
            return p.ancestors().any(|a| a != Path::new("/") && self.visible.contains(a));
        }
        let deepest_visible = p.ancestors().find(|a| self.visible.contains(*a)).map(depth);
        let deepest_covered = self.covered.iter().filter(|v| p.starts_with(v)).map(|v| depth(v)).max();
        match (deepest_visible, deepest_covered) {
            // At equal depth the bind goes on top (a later layer).
            (Some(v), Some(c)) => v >= c,
            (v, _) => v.is_some(),
        }
    }

    /// Whether a host tree other than `/` shows at `p` or below it. The
    /// set is ordered by components, so the paths under `p` follow `p`.
    fn visible_below(&self, p: &Path) -> bool {
        use std::ops::Bound;
        self.visible
            .range::<Path, _>((Bound::Included(p), Bound::Unbounded))
            .find(|v| v.as_path() != Path::new("/"))
            .is_some_and(|v| v.starts_with(p))
    }

    fn host_layout(&mut self) -> Result<(), CompileError> {
        let entries = self
            .ctx
            .host
            .read_dir(Path::new("/"))
            .map_err(|e| CompileError::Invocation(format!("list the host's root directory /: {e}")))?;
        let mut entries = entries;
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        for name in ["dev", "proc", "sys", "tmp", "run"] {
            if !entries.iter().any(|(n, k)| n == name && *k == PathKind::Dir) {
                self.skeleton.push(SkeletonEntry::Dir(PathBuf::from(name)));
            }
        }
        for (name, kind) in entries {
            let rel = PathBuf::from(&name);
            let abs = Path::new("/").join(&name);
            let bound = !name.to_str().is_some_and(|n| NOT_BOUND.contains(&n));
            match kind {
                PathKind::Dir => {
                    self.skeleton.push(SkeletonEntry::Dir(rel));
                    if bound {
                        self.push(Layer::Base, bind(&abs, RO_BIND));
                    }
                }
                PathKind::Symlink(target) => self.skeleton.push(SkeletonEntry::Symlink { path: rel, target }),
                PathKind::File if bound => {
                    self.skeleton.push(SkeletonEntry::File(rel));
                    self.push(Layer::Base, bind(&abs, RO_BIND));
                }
                PathKind::File | PathKind::Other => {}
            }
        }
        self.skeleton.sort_by(|a, b| skeleton_path(a).cmp(skeleton_path(b)));
        Ok(())
    }

    fn kernel_and_tmp(&mut self, rootfs: Option<&Path>) {
        let b = Layer::Base;
        self.push(
            b,
            mount(
                Path::new("/proc"),
                "proc",
                Path::new("proc"),
                &["nosuid", "noexec", "nodev"],
            ),
        );
        self.push(
            b,
            mount(
                Path::new("/sys"),
                "sysfs",
                Path::new("sysfs"),
                &["nosuid", "noexec", "nodev", "ro"],
            ),
        );
        self.push(
            b,
            tmpfs(Path::new("/dev"), &["nosuid", "strictatime", "mode=755", "size=65536k"]),
        );
        let mut pts = vec!["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"];
        if !self.ctx.userns {
            // The tty group; unmapped (and refused) inside a user namespace.
            pts.push("gid=5");
        }
        self.push(b, mount(Path::new("/dev/pts"), "devpts", Path::new("devpts"), &pts));
        self.push(
            b,
            tmpfs(
                Path::new("/dev/shm"),
                &["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"],
            ),
        );
        self.push(
            b,
            mount(
                Path::new("/dev/mqueue"),
                "mqueue",
                Path::new("mqueue"),
                &["nosuid", "noexec", "nodev"],
            ),
        );
        self.push(b, tmpfs(Path::new("/tmp"), &["nosuid", "nodev", "mode=1777"]));
        let var_tmp = match rootfs {
            None => resolved_kind(self.ctx, Path::new("/var/tmp")),
            Some(r) => self.ctx.host.kind(&r.join("var/tmp")),
        };
        if var_tmp == Some(PathKind::Dir) {
            self.push(b, tmpfs(Path::new("/var/tmp"), &["nosuid", "nodev", "mode=1777"]));
        }
        self.push(b, tmpfs(Path::new("/run"), &["nosuid", "nodev", "mode=755"]));
    }

    /// `path` resolved, or a field error naming `field`.
    fn resolve(&self, field: &str, path: &Path) -> Result<PathBuf, CompileError> {
        resolve(self.ctx.host, path).map_err(|e| self.ctx.field_error(field, e))
    }

    /// Resolved, and neither `/` nor in a kernel tree.
    fn resolve_allowed(&self, field: &str, path: &Path, what: &str) -> Result<PathBuf, CompileError> {
        let resolved = self.resolve(field, path)?;
        if is_forbidden(&resolved) {
            let through = if resolved == path {
                String::new()
            } else {
                format!(" (through a symlink: it resolves to {})", resolved.display())
            };
            return Err(self
                .ctx
                .field_error(field, format!("{}{through} cannot be {what}", path.display())));
        }
        Ok(resolved)
    }

    fn extra_binds(&mut self) -> Result<(), CompileError> {
        let fs = &self.ctx.policy.filesystem;
        let home = &self.ctx.inv.home;
        let workdir = &self.ctx.inv.workdir;
        let mut hidden = Vec::new();
        for h in fs.hidden_paths() {
            hidden.push(self.resolve("filesystem.hidden", &h.expand(home))?);
        }
        for (field, list, options) in [("writable", &fs.writable, RW_BIND), ("readonly", &fs.readonly, RO_BIND)] {
            for (i, b) in list.iter().enumerate() {
                let field = format!("filesystem.{field}[{i}]");
                let path = self.resolve_allowed(&field, &b.path.expand(home), "bound")?;
                if let Some(h) = hidden.iter().find(|h| path.starts_with(h)) {
                    return Err(self.ctx.field_error(
                        field,
                        format!("{} lies under the hidden path {}", path.display(), h.display()),
                    ));
                }
                if path == *workdir {
                    continue;
                }
                if PSEUDO.iter().any(|p| path.starts_with(p)) || path == Path::new("/") {
                    return Err(self
                        .ctx
                        .field_error(field, format!("{} cannot be bound", path.display())));
                }
                match self.ctx.host.kind(&path) {
                    Some(_) => {}
                    None if b.optional => continue,
                    None => return Err(missing(self.ctx, field, &path)),
                }
                self.visible.insert(path.clone());
                self.push(Layer::Bind, bind(&path, options));
            }
        }
        Ok(())
    }

    fn workdir(&mut self) -> Result<(), CompileError> {
        let wd = self.ctx.inv.workdir.clone();
        let bad = |m: String| Err(CompileError::Invocation(m));
        if wd == Path::new("/") {
            return bad("use / as the working directory: it would make the whole host writable".to_owned());
        }
        if PSEUDO.iter().any(|p| wd.starts_with(p)) {
            return bad(format!(
                "use {} as the working directory: it is a kernel filesystem",
                wd.display()
            ));
        }
        match self.ctx.host.kind(&wd) {
            Some(PathKind::Dir) => {}
            Some(PathKind::Symlink(_)) => {
                return bad(format!(
                    "use working directory {}: it is a symlink; pass the resolved path",
                    wd.display()
                ))
            }
            Some(_) => return bad(format!("use working directory {}: it is not a directory", wd.display())),
            None => return bad(format!("use working directory {}: it does not exist", wd.display())),
        }
        let home = &self.ctx.inv.home;
        for h in self.ctx.policy.filesystem.hidden_paths() {
            let hp = h.expand(home);
            if wd.starts_with(&hp) {
                return Err(self.ctx.field_error(
                    "filesystem.hidden",
                    format!(
                        "the working directory {} lies under the hidden path {}",
                        wd.display(),
                        hp.display()
                    ),
                ));
            }
        }
        if self.ctx.policy.filesystem.workspace == Workspace::Review {
            return self.review_workdir(&wd);
        }
        let options = match self.ctx.policy.filesystem.workdir {
            Access::Rw => RW_BIND,
            Access::Ro => RO_BIND,
        };
        self.visible.insert(wd.clone());
        self.push(Layer::Bind, bind(&wd, options));
        Ok(())
    }

    fn masked(&mut self) -> Result<(), CompileError> {
        for m in self.ctx.policy.filesystem.masked_paths() {
            let m = self.resolve_allowed("filesystem.masked", &m, "masked")?;
            if !self.is_visible(&m) {
                continue;
            }
            match resolved_kind(self.ctx, &m) {
                Some(PathKind::Dir) => self.push(Layer::Bind, tmpfs(&m, HIDE_DIR)),
                Some(PathKind::File) | Some(PathKind::Other) => {
                    self.push(Layer::Bind, mount(&m, "bind", Path::new("/dev/null"), HIDE_FILE))
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn protected(&mut self) -> Result<(), CompileError> {
        let wd = self.ctx.inv.workdir.clone();
        // Resolved as the home pass resolves it: a home named through a link is still the home.
        let is_home = wd == self.resolve("filesystem.home", &self.ctx.inv.home)?;
        for p in self.ctx.policy.filesystem.protected_paths() {
            let entry = p.path.to_str().and_then(host_run::find);
            if entry.is_some_and(|h| h.shape == Shape::Git) {
                self.root_git()?;
                continue;
            }
            // A host-run entry missing at the top gets a placeholder only
            // where the quarantine at exit cannot cover it (host_run::Missing);
            // a path the policy adds always does.
            let stand_in = match entry.map(|h| h.missing) {
                None | Some(Missing::EmptyDir) => true,
                Some(Missing::EmptyFileInHome) => is_home,
                Some(Missing::Nothing) => false,
            };
            let path = self.resolve("filesystem.protected", &wd.join(&p.path))?;
            if is_forbidden(&path) {
                // A symlink into /proc, /sys, /dev or to /: nothing of the
                // host's that the sandbox could plant there.
                continue;
            }
            match self.ctx.host.kind(&path) {
                Some(_) => self.push(Layer::Protected, bind(&path, RO_BIND)),
                // A placeholder is only ever created inside the working
                // directory, never where a symlink in it points.
                None if !path.starts_with(&wd) || !stand_in => {}
                None => {
                    let parent_is_dir = path
                        .parent()
                        .is_some_and(|d| self.ctx.host.kind(d) == Some(PathKind::Dir));
                    if parent_is_dir {
                        self.placeholders.push(Placeholder {
                            path: path.clone(),
                            dir: p.dir,
                        });
                        self.push(Layer::Protected, bind(&path, RO_BIND));
                    }
                }
            }
        }
        Ok(())
    }

    fn hidden(&mut self) -> Result<(), CompileError> {
        let home = self.ctx.inv.home.clone();
        for h in self.ctx.policy.filesystem.hidden_paths() {
            let path = self.resolve_allowed("filesystem.hidden", &h.expand(&home), "hidden")?;
            if !self.is_visible(&path) {
                continue;
            }
            self.hide(&path);
        }
        if self.ctx.policy.filesystem.hide_env_files {
            let found = self.search()?;
            let env_files = found.into_iter().filter(|(p, kind)| {
                *kind == PathKind::File && p.file_name().and_then(|n| n.to_str()).is_some_and(is_env_file)
            });
            for (f, _) in env_files {
                let f = self.resolve("filesystem.hide_env_files", &f)?;
                if !is_forbidden(&f) {
                    self.hide(&f);
                }
            }
        }
        Ok(())
    }

    fn hide(&mut self, path: &Path) {
        match resolved_kind(self.ctx, path) {
            Some(PathKind::Dir) => self.push(Layer::Hidden, tmpfs(path, HIDE_DIR)),
            Some(PathKind::File) | Some(PathKind::Other) => {
                self.push(Layer::Hidden, mount(path, "bind", Path::new("/dev/null"), HIDE_FILE))
            }
            _ => {}
        }
    }
}

fn skeleton_path(e: &SkeletonEntry) -> &Path {
    match e {
        SkeletonEntry::Dir(p) | SkeletonEntry::File(p) => p,
        SkeletonEntry::Symlink { path, .. } => path,
    }
}

fn depth(p: &Path) -> usize {
    p.components().count()
}

pub(crate) fn compile(ctx: &Ctx<'_>) -> Result<Filesystem, CompileError> {
    let rootfs: Option<PathBuf> = match (&ctx.inv.rootfs, &ctx.policy.filesystem.root) {
        (Some(r), _) => Some(r.clone()),
        (None, RootSource::Rootfs(r)) => Some(r.clone()),
        (None, RootSource::Host) => None,
    };
    let mut b = Builder {
        ctx,
        mounts: Stack::default(),
        skeleton: Vec::new(),
        placeholders: Vec::new(),
        visible: BTreeSet::new(),
        found: None,
        git_dirs: Vec::new(),
        covered: Vec::new(),
        masked_paths: MASKED_PATHS.iter().map(|s| s.to_string()).collect(),
    };
    let root = match &rootfs {
        None => {
            b.visible.insert(PathBuf::from("/"));
            b.host_layout()?;
            RootBuilder::default().path("rootfs").readonly(true).build()
        }
        Some(r) => {
            if ctx.host.kind(r) != Some(PathKind::Dir) {
                let field = if ctx.inv.rootfs.is_some() {
                    "--rootfs"
                } else {
                    "filesystem.root"
                };
                return Err(CompileError::Invocation(format!(
                    "use rootfs {} ({field}): it is not a directory",
                    r.display()
                )));
            }
            RootBuilder::default().path(r.clone()).readonly(true).build()
        }
    }
    .expect("a root with a path is complete");
    b.kernel_and_tmp(rootfs.as_deref());
    b.empty_home()?;
    b.extra_binds()?;
    b.workdir()?;
    b.masked()?;
    // The review workspace binds no host path under the working directory
    // (review.rs), and the quarantine at exit has nothing to look for.
    let review = ctx.policy.filesystem.workspace == Workspace::Review;
    if !review {
        b.protected()?;
        b.nested()?;
    }
    b.hidden()?;
    let host_run = if review { None } else { b.host_run_present()? };
    b.home_workdir()?;
    b.sockets()?;
    b.root_only()?;

    let mut mounts = b.mounts.into_vec();
    // Parents first; among equals, later layers on top. The sort is stable,
    // so the order of the passes decides the rest.
    mounts.sort_by_key(|(layer, m)| (depth(m.destination()), *layer));
    let mut seen: HashSet<(PathBuf, Layer)> = HashSet::new();
    let mut out = Vec::new();
    for (layer, m) in mounts {
        // One mount per destination and layer (a path both masked and hidden).
        if seen.insert((m.destination().clone(), layer)) {
            out.push(m);
        }
    }
    Ok(Filesystem {
        root,
        mounts: out,
        skeleton: b.skeleton,
        placeholders: b.placeholders,
        masked_paths: b.masked_paths,
        readonly_paths: READONLY_PATHS.iter().map(|s| s.to_string()).collect(),
        host_run,
    })
}
