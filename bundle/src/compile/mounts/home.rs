//! The home pass, between the kernel mounts and the policy's binds: the
//! caller's home by inversion (`home = "empty"`: an empty tmpfs, what tools
//! need coming back through `readonly`), and, after the protected paths,
//! the home's start-up and tool files kept read-only when the working
//! directory is the home itself (and claude-shim's own state whenever it
//! lies in the working directory).
//!
//! Why an inversion: a read-only mount does not stop connect(2) on a unix
//! socket, and Docker Desktop, Rancher Desktop, colima and podman keep
//! their daemon sockets in the home. An empty home shows none of them, and
//! none a daemon binds there after the start.

use std::path::{Path, PathBuf};

use super::{bind, is_forbidden, tmpfs, Builder, Layer, RO_BIND, RW_BIND};
use crate::compile::input::PathKind;
use crate::compile::output::{CompileError, Placeholder};
use crate::compile::process;
use crate::policy::values::HomeMode;

/// Read-only when the working directory is the home: what the host runs
/// from it later without being asked to run the project. A trailing `/`
/// marks a directory, which gets an empty placeholder when it is missing
/// (its parent existing); a missing file is left to the exit's quarantine.
const HOME_WORKDIR_PROTECTED: &[&str] = &[
    // bash, zsh and sh read these when a shell starts (login, interactive,
    // exit); Debian's .bashrc sources .bash_aliases, Fedora's .bashrc.d/*.
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".bash_aliases",
    ".bashrc.d/",
    ".profile",
    ".zshrc",
    ".zprofile",
    ".zshenv",
    ".zlogin",
    ".zlogout",
    // The X session and PAM read these at login.
    ".xprofile",
    ".xsessionrc",
    ".xinitrc",
    ".pam_environment",
    // XDG config: git's global config and hooks, desktop autostart entries,
    // systemd user units, fish, and every tool's settings.
    ".config/",
    // On PATH on most distributions (Debian's .profile adds it when present).
    ".local/bin/",
    // Desktop launchers run their Exec= lines; systemd user units.
    ".local/share/applications/",
    ".local/share/systemd/",
    // git runs its aliases, hooks and fsmonitor in every repository.
    ".gitconfig",
    // cargo runs [alias], build.rustc-wrapper and target runners on every call.
    ".cargo/config.toml",
    ".cargo/config",
    // Editors and tmux run code from their start-up files.
    ".vimrc",
    ".vim/",
    ".emacs",
    ".emacs.d/",
    ".tmux.conf",
];

/// The empty home's tmpfs: writable by the process, private to it.
fn home_options(uid: u32, gid: u32) -> Vec<String> {
    let mut o: Vec<String> = ["nosuid", "nodev", "mode=0700"].iter().map(|s| s.to_string()).collect();
    o.push(format!("uid={uid}"));
    o.push(format!("gid={gid}"));
    o
}

impl Builder<'_, '_> {
    /// `home = "empty"` with the host's root: the home becomes an empty
    /// tmpfs, below the policy's binds (which come back on top of it). Not
    /// when the working directory is the home (it is the project then), nor
    /// with a rootfs (no host home shows there unless bound).
    pub(super) fn empty_home(&mut self) -> Result<(), CompileError> {
        if self.ctx.policy.filesystem.home != HomeMode::Empty || !self.visible.contains(Path::new("/")) {
            return Ok(());
        }
        let home = self.resolve("filesystem.home", &self.ctx.inv.home)?;
        if is_forbidden(&home) || home == self.ctx.inv.workdir || self.ctx.host.kind(&home) != Some(PathKind::Dir) {
            return Ok(());
        }
        let (uid, gid) = process::ids(self.ctx);
        let options = home_options(uid, gid);
        let options: Vec<&str> = options.iter().map(String::as_str).collect();
        self.push(Layer::Home, tmpfs(&home, &options));
        self.covered.push(home);
        Ok(())
    }

    /// The working directory is the home: its start-up files, XDG config,
    /// desktop entries and the directories of the caller's PATH in it stay
    /// read-only. claude-shim's own state stays read-only whenever the
    /// working directory holds it.
    pub(super) fn home_workdir(&mut self) -> Result<(), CompileError> {
        let wd = self.ctx.inv.workdir.clone();
        let home = self.resolve("filesystem.home", &self.ctx.inv.home)?;
        let mut wanted: Vec<(PathBuf, bool)> = Vec::new();
        if home == wd && !is_forbidden(&wd) {
            for p in HOME_WORKDIR_PROTECTED {
                wanted.push((wd.join(p.trim_end_matches('/')), p.ends_with('/')));
            }
            // Whatever sits on PATH in the home runs instead of the host's
            // tools (a planted ~/bin/git).
            for d in self.env("PATH").unwrap_or_default().split(':').map(Path::new) {
                if d.is_absolute() && d.starts_with(&wd) && d != wd {
                    wanted.push((d.to_path_buf(), true));
                }
            }
        }
        let state = match self.env("XDG_STATE_HOME").map(PathBuf::from) {
            Some(x) if x.is_absolute() => x,
            _ => home.join(".local/state"),
        }
        .join("claude-shim");
        if state.starts_with(&wd) && state != wd {
            wanted.push((state, true));
        }
        for (path, dir) in wanted {
            self.pin_between(&wd, &path, dir)?;
            self.protect_in_workdir(&wd, &path, dir)?;
        }
        Ok(())
    }

    /// The folders between the working directory and a protected path
    /// deeper in it become mount points of their own (a writable bind of
    /// themselves), as `.git` does: `mv .local .local-x` stops at EBUSY
    /// instead of taking the read-only `.local/bin` along and leaving room
    /// for a new one on PATH. A missing one is made empty for the run (a
    /// placeholder, removed after if still empty) when a protected
    /// directory is below it, so that one can be stood in for too.
    fn pin_between(&mut self, wd: &Path, path: &Path, leaf_dir: bool) -> Result<(), CompileError> {
        let Ok(rel) = path.strip_prefix(wd) else {
            return Ok(());
        };
        let mut parents: Vec<PathBuf> = rel.ancestors().skip(1).map(|a| wd.join(a)).collect();
        parents.retain(|p| p != wd);
        parents.reverse();
        for dir in parents {
            // A link: what it points to is not the home's own folder to pin.
            if self.resolve("filesystem.workdir", &dir)? != dir {
                return Ok(());
            }
            match self.ctx.host.kind(&dir) {
                Some(PathKind::Dir) => {}
                None => {
                    let parent_made = dir.parent().is_some_and(|d| {
                        d == wd || self.ctx.host.kind(d) == Some(PathKind::Dir) || self.is_placeholder_dir(d)
                    });
                    // A missing file below cannot be stood in for: nothing to make room for.
                    if !parent_made || !leaf_dir {
                        return Ok(());
                    }
                    if !self.is_placeholder_dir(&dir) {
                        self.placeholders.push(Placeholder {
                            path: dir.clone(),
                            dir: true,
                        });
                    }
                }
                Some(_) => return Ok(()),
            }
            if !self.mounts.has_dest(&dir) {
                self.push(Layer::Protected, bind(&dir, RW_BIND));
            }
        }
        Ok(())
    }

    fn is_placeholder_dir(&self, p: &Path) -> bool {
        self.placeholders.iter().any(|x| x.dir && x.path == p)
    }

    fn env(&self, name: &str) -> Option<String> {
        self.ctx.inv.env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }

    /// `path` (under `wd`) read-only: bound over itself when it exists, an
    /// empty directory placeholder when a missing directory's parent exists.
    fn protect_in_workdir(&mut self, wd: &Path, path: &Path, dir: bool) -> Result<(), CompileError> {
        let resolved = self.resolve("filesystem.workdir", path)?;
        // A link to the working directory or above it: nothing of the
        // home's own to keep (and the working directory stays writable).
        if is_forbidden(&resolved) || wd.starts_with(&resolved) {
            return Ok(());
        }
        let exists = self.ctx.host.kind(&resolved).is_some();
        let placeholder = !exists
            && dir
            && resolved.starts_with(wd)
            && resolved
                .parent()
                .is_some_and(|d| self.ctx.host.kind(d) == Some(PathKind::Dir) || self.is_placeholder_dir(d));
        if placeholder && !self.placeholders.iter().any(|p| p.path == resolved) {
            self.placeholders.push(Placeholder {
                path: resolved.clone(),
                dir: true,
            });
        }
        if exists || placeholder {
            self.push(Layer::Protected, bind(&resolved, RO_BIND));
        }
        Ok(())
    }
}
