//! The agent's commits, brought by `apply` as the branch `claude-shim/RUN`
//! of the user's repository: the commit the layer's HEAD names (read as
//! data from the layer's `.git` over the project's; git never runs there,
//! with the layer's config or at all), its objects copied into the user's
//! repository (content-addressed: each loose object's bytes hashed against
//! its name before it is written, packs checked by the host's own
//! `git index-pack`), the history checked complete, and one new ref made.
//! The host's git runs only on the user's own repository, as its owner,
//! with no hooks; HEAD, the index, the config and the hooks never change.

use std::io::Read;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use sha1::Digest;

use super::layer;
use crate::hostfs::{Dir, Kind};

/// The most a loose object may hold, decompressed.
const OBJECT_LIMIT: u64 = 256 << 20;
const REF_LIMIT: u64 = 1 << 20;

fn is_hex_id(s: &str) -> bool {
    (s.len() == 40 || s.len() == 64) && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A ref name as git writes one under `refs/`: plain names, no `..`, no
/// control or special characters (`git check-ref-format`, the part that
/// matters for reading one as a path).
fn is_ref_name(r: &str) -> bool {
    r.starts_with("refs/")
        && !r.contains("..")
        && !r.ends_with('/')
        && r.split('/').all(|c| !c.is_empty() && !c.starts_with('.'))
        && r.bytes().all(|b| b > 0x20 && b != 0x7f && !b"~^:?*[\\".contains(&b))
}

/// The commit `.git/HEAD` names, through `read` (the project alone, or the
/// layer over it): a symbolic ref followed to its loose file or its line in
/// `packed-refs`, a detached HEAD taken as it is.
pub fn head(read: &dyn Fn(&Path) -> Option<Vec<u8>>) -> Option<String> {
    let mut at = String::from("HEAD");
    for _ in 0..5 {
        let raw = read(&Path::new(".git").join(&at));
        let value = raw.as_deref().map(|r| String::from_utf8_lossy(r).trim().to_owned());
        match value.as_deref() {
            Some(v) if is_hex_id(v) => return Some(v.to_owned()),
            Some(v) if v.starts_with("ref: ") => {
                let r = v.trim_start_matches("ref: ").trim();
                if !is_ref_name(r) {
                    return None;
                }
                at = r.to_owned();
            }
            Some(_) => return None,
            None if at != "HEAD" => {
                let packed = read(Path::new(".git/packed-refs"))?;
                return String::from_utf8_lossy(&packed).lines().find_map(|l| {
                    let (id, name) = l.split_once(' ')?;
                    (name == at && is_hex_id(id)).then(|| id.to_owned())
                });
            }
            None => return None,
        }
    }
    None
}

/// The commit the project's HEAD names now.
pub fn project_head(project: &Dir) -> Option<String> {
    head(&|rel| project.read(rel, REF_LIMIT).ok())
}

/// A loose object's bytes checked against `id`: zlib data holding
/// `TYPE SIZE\0CONTENT`, of a known type and the size it says, whose SHA-1
/// (or SHA-256, for a 64-digit id) is `id`. Returns the decompressed object.
pub fn verify_loose(id: &str, compressed: &[u8]) -> Result<Vec<u8>, String> {
    let mut raw = Vec::new();
    flate2::read::ZlibDecoder::new(compressed)
        .take(OBJECT_LIMIT + 1)
        .read_to_end(&mut raw)
        .map_err(|e| format!("it is not zlib data: {e}"))?;
    if raw.len() as u64 > OBJECT_LIMIT {
        return Err(format!("it holds more than {} MiB", OBJECT_LIMIT >> 20));
    }
    let nul = raw.iter().position(|&b| b == 0).ok_or("it has no header")?;
    let header = std::str::from_utf8(&raw[..nul]).map_err(|_| "its header is not text")?;
    let (kind, size) = header.split_once(' ').ok_or("its header has no size")?;
    if !matches!(kind, "commit" | "tree" | "blob" | "tag") {
        return Err(format!("its type {:?} is not git's", crate::terminal::escaped(kind)));
    }
    if size.parse::<usize>().ok() != Some(raw.len() - nul - 1) {
        return Err("its size is not what its header says".into());
    }
    let digest = if id.len() == 40 {
        hex(&sha1::Sha1::digest(&raw))
    } else {
        hex(&sha2::Sha256::digest(&raw))
    };
    if digest != id {
        return Err(format!("its content hashes to {digest}, not to its name"));
    }
    Ok(raw)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The first line of a commit object's message (for the user to recognise it).
pub fn subject(raw: &[u8]) -> Option<String> {
    let body = &raw[raw.iter().position(|&b| b == 0)? + 1..];
    let at = body.windows(2).position(|w| w == b"\n\n")?;
    let msg = &body[at + 2..];
    let line = msg.split(|&b| b == b'\n').next()?;
    Some(crate::terminal::escaped(&String::from_utf8_lossy(line)).into_owned())
}

/// The agent's HEAD commit in the layer over `project`, unless it is the
/// one the project had at start: the commit and its subject when the layer
/// holds it loose.
pub fn agent_commit(upper: &Dir, project: &Dir, start: Option<&str>) -> Result<Option<(String, Option<String>)>> {
    let (u, h) = (upper.open_fd()?, project.open_fd()?);
    let read = |rel: &Path| layer::merged_read(u.as_fd(), h.as_fd(), rel, REF_LIMIT).ok().flatten();
    let Some(id) = head(&read) else { return Ok(None) };
    if start == Some(id.as_str()) {
        return Ok(None);
    }
    let loose = Path::new(".git/objects").join(&id[..2]).join(&id[2..]);
    let subject = upper
        .read(&loose, OBJECT_LIMIT)
        .ok()
        .and_then(|c| verify_loose(&id, &c).ok())
        .and_then(|raw| subject(&raw));
    Ok(Some((id, subject)))
}

/// The host's git on the user's repository `git_dir`, as its owner (git
/// refuses a repository another user owns), with no hooks; stdout.
fn git(git_dir: &Path, owner: (u32, u32), args: &[&str], stdin: Option<std::fs::File>) -> Result<String> {
    use std::os::unix::process::CommandExt;
    let mut c = Command::new("git");
    c.env_clear()
        .env(
            "PATH",
            std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into()),
        )
        .env("LC_ALL", "C")
        .env("GIT_DIR", git_dir)
        .args(["-c", "core.hooksPath=/dev/null"])
        .args(args)
        .stdin(stdin.map_or_else(Stdio::null, Stdio::from))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let me = nix::unistd::geteuid().as_raw();
    if me == 0 && owner.0 != 0 {
        c.uid(owner.0).gid(owner.1);
    }
    let user = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(if me == 0 { owner.0 } else { me }))
        .ok()
        .flatten();
    if let Some(u) = user {
        c.env("HOME", u.dir);
    }
    let out = c.output().context("run the host's git")?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let line = err.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
        bail!("git {}: {}", args.join(" "), crate::terminal::escaped(line));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Copies the layer's objects into the project's repository and makes
/// `refs/heads/claude-shim/RUN` point at `id`. Returns the objects copied.
pub fn import(upper: &Dir, project: &Dir, run: &str, id: &str) -> Result<usize> {
    let git_dir = Path::new(".git");
    match project.stat(git_dir)? {
        Some(st) if st.kind == Kind::Dir => {}
        _ => bail!(
            "bring the agent's commit {id}: the project's .git is not a folder (a linked worktree's commits are made in its main repository, outside the project)"
        ),
    }
    let owner = project.stat(git_dir)?.map(|s| (s.uid, s.gid)).unwrap_or((0, 0));
    let host_objects = project.sub(&git_dir.join("objects"))?;
    let mut copied = 0;
    let objects = Path::new(".git/objects");
    if upper.stat(objects)?.is_some_and(|s| s.kind == Kind::Dir) {
        for (fan, kind) in upper.list(objects)? {
            let fan_s = fan.to_string_lossy();
            if kind != Kind::Dir || fan_s.len() != 2 || !fan_s.bytes().all(|b| b.is_ascii_hexdigit()) {
                continue;
            }
            for (name, k) in upper.list(&objects.join(&fan))? {
                let id = format!("{fan_s}{}", name.to_string_lossy());
                if k != Kind::File || !is_hex_id(&id) {
                    continue;
                }
                let to = PathBuf::from(&*fan_s).join(&name);
                if host_objects.stat(&to)?.is_some() {
                    continue;
                }
                let data = upper.read(&objects.join(&fan).join(&name), OBJECT_LIMIT * 2)?;
                verify_loose(&id, &data).map_err(|e| anyhow::anyhow!("copy the agent's git object {id}: {e}"))?;
                if host_objects.stat(Path::new(&*fan_s))?.is_none() {
                    host_objects.create_dir(Path::new(&*fan_s), 0o755)?;
                    chown_to(&host_objects, Path::new(&*fan_s), owner);
                }
                match host_objects.write_new(&to, &data, 0o444) {
                    Ok(()) => chown_to(&host_objects, &to, owner),
                    Err(e) if e.is_exists() => continue,
                    Err(e) => return Err(e.into()),
                }
                copied += 1;
            }
        }
        let packs = objects.join("pack");
        if upper.stat(&packs)?.is_some_and(|s| s.kind == Kind::Dir) {
            for (name, k) in upper.list(&packs)? {
                if k == Kind::File && name.to_string_lossy().ends_with(".pack") {
                    let f = upper.open_file(&packs.join(&name))?;
                    git(&project.join(git_dir), owner, &["index-pack", "--stdin"], Some(f))
                        .context("check and copy the agent's git pack")?;
                    copied += 1;
                }
            }
        }
    }
    let abs = project.join(git_dir);
    let kind = git(&abs, owner, &["cat-file", "-t", id], None)?;
    if kind != "commit" {
        bail!("bring the agent's commit {id}: it is a {kind}, not a commit");
    }
    git(
        &abs,
        owner,
        &["rev-list", "--objects", "--quiet", id, "--not", "--all"],
        None,
    )
    .with_context(|| format!("bring the agent's commit {id}: its history is incomplete"))?;
    let zero = "0".repeat(id.len());
    let reference = format!("refs/heads/claude-shim/{run}");
    git(
        &abs,
        owner,
        &[
            "update-ref",
            "-m",
            &format!("claude-shim apply {run}"),
            &reference,
            id,
            &zero,
        ],
        None,
    )?;
    Ok(copied)
}

/// As root, what `import` writes into a user's repository is the user's.
fn chown_to(dir: &Dir, rel: &Path, (uid, gid): (u32, u32)) {
    if nix::unistd::geteuid().is_root() && uid != 0 {
        let _ = dir.chown(rel, uid, gid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loose(kind: &str, content: &[u8]) -> (String, Vec<u8>) {
        let mut raw = format!("{kind} {}\0", content.len()).into_bytes();
        raw.extend_from_slice(content);
        let id = hex(&sha1::Sha1::digest(&raw));
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        std::io::Write::write_all(&mut z, &raw).unwrap();
        (id, z.finish().unwrap())
    }

    #[test]
    fn a_loose_object_is_taken_only_when_its_bytes_hash_to_its_name() {
        let (id, data) = loose("blob", b"hello\n");
        assert_eq!(id, "ce013625030ba8dba906f756967f9e9ca394464a");
        assert!(verify_loose(&id, &data).is_ok());
        let (other, _) = loose("blob", b"other\n");
        assert!(verify_loose(&other, &data).unwrap_err().contains("hashes to"));
        let (_, evil) = loose("evil", b"x");
        let e = verify_loose(&hex(&sha1::Sha1::digest(b"evil 1\0x")), &evil).unwrap_err();
        assert!(e.contains("not git's"), "{e}");
        assert!(verify_loose(&id, b"not zlib").unwrap_err().contains("zlib"));
    }

    #[test]
    fn head_follows_a_symbolic_ref_to_a_loose_or_packed_ref() {
        let id = "ce013625030ba8dba906f756967f9e9ca394464a";
        let files = |loose: bool| {
            move |p: &Path| -> Option<Vec<u8>> {
                match p.to_str()? {
                    ".git/HEAD" => Some(b"ref: refs/heads/main\n".to_vec()),
                    ".git/refs/heads/main" if loose => Some(format!("{id}\n").into_bytes()),
                    ".git/packed-refs" => Some(format!("# pack-refs\n{id} refs/heads/main\n").into_bytes()),
                    _ => None,
                }
            }
        };
        assert_eq!(head(&files(true)).as_deref(), Some(id));
        assert_eq!(head(&files(false)).as_deref(), Some(id));
        let escape = |p: &Path| -> Option<Vec<u8>> {
            (p == Path::new(".git/HEAD")).then(|| b"ref: refs/../../etc/passwd".to_vec())
        };
        assert_eq!(head(&escape), None);
        let detached = |_: &Path| Some(format!("{id}\n").into_bytes());
        assert_eq!(head(&detached).as_deref(), Some(id));
    }

    #[test]
    fn a_commit_subject_is_its_first_message_line_escaped() {
        let (_, _) = loose("commit", b"");
        let raw = b"commit 60\0tree x\nauthor a\n\nfix: the \x1b[31mbug\nmore\n";
        assert_eq!(subject(raw).as_deref(), Some("fix: the \\u{1b}[31mbug"));
    }
}
