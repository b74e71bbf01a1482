//! Each container engine on the machine and claude-shim's registration with
//! it, as the engine itself reports it where it can (`docker info`,
//! `containerd config dump`; podman's containers.conf files, merged in its
//! order); with `--engines IMAGE`, a container started through each.

use std::path::{Path, PathBuf};

use super::check::Check;
use crate::program::find as find_program;

/// The runtime name hack/install registers with every engine.
const NAME: &str = "claude-shim";
const FIX: &str = "run hack/install (it registers claude-shim with every engine it finds)";

pub fn checks(image: Option<&str>) -> Vec<Check> {
    let mut out = Vec::new();
    for (name, found) in [("podman", podman()), ("docker", docker()), ("containerd", containerd())] {
        match found {
            Found::Absent => out.push(Check::ok(name, "not installed")),
            // Asked to start a container through every engine, one that
            // cannot is a failure; otherwise only a warning (claude-shim
            // itself does not need an engine).
            Found::Unregistered(why) if image.is_some() => out.push(Check::fail(name, why, FIX)),
            Found::Unregistered(why) => out.push(Check::warn(name, why, FIX)),
            Found::Registered(how, path) => {
                out.push(Check::ok(name, how));
                if let Some(image) = image {
                    out.push(start(name, &path, image));
                }
            }
        }
    }
    out
}

enum Found {
    Absent,
    Unregistered(String),
    /// What was seen, and the binary registered.
    Registered(String, PathBuf),
}

/// podman merges containers.conf, then the drop-ins in name order; the last
/// `[engine.runtimes] claude-shim` wins. The user's files count when not root.
fn podman() -> Found {
    if find_program("podman").is_none() {
        return Found::Absent;
    }
    let mut files: Vec<PathBuf> = Vec::new();
    let mut dirs: Vec<PathBuf> = vec!["/usr/share/containers".into(), "/etc/containers".into()];
    if !nix::unistd::geteuid().is_root() {
        let config = std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".config")));
        dirs.extend(config.map(|c| c.join("containers")));
    }
    for dir in &dirs {
        files.push(dir.join("containers.conf"));
        let mut dropins: Vec<PathBuf> = std::fs::read_dir(dir.join("containers.conf.d"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "conf"))
            .collect();
        dropins.sort();
        files.extend(dropins);
    }
    if let Some(c) = std::env::var_os("CONTAINERS_CONF") {
        // podman then reads that file alone.
        files = vec![PathBuf::from(c)];
    }
    let mut found = None;
    for f in &files {
        let Ok(text) = std::fs::read_to_string(f) else { continue };
        let Ok(doc) = text.parse::<toml::Table>() else {
            return Found::Unregistered(format!("{} does not parse as TOML", f.display()));
        };
        let entry = doc
            .get("engine")
            .and_then(|e| e.get("runtimes"))
            .and_then(|r| r.get(NAME));
        if let Some(paths) = entry.and_then(|v| v.as_array()) {
            let first = paths
                .iter()
                .filter_map(|p| p.as_str())
                .map(PathBuf::from)
                .find(|p| p.is_file());
            found = Some((f.clone(), first));
        }
    }
    match found {
        Some((f, Some(bin))) => {
            Found::Registered(format!("runtime {NAME} = {} (in {})", bin.display(), f.display()), bin)
        }
        Some((f, None)) => Found::Unregistered(format!(
            "{} names runtime {NAME}, but none of its paths is a file",
            f.display()
        )),
        None => Found::Unregistered(format!("no [engine.runtimes] {NAME} in podman's containers.conf files")),
    }
}

/// dockerd's own answer when it runs, else its daemon.json.
fn docker() -> Found {
    if find_program("dockerd").is_none() {
        return Found::Absent;
    }
    let from_daemon = find_program("docker").and_then(|docker| {
        let out = std::process::Command::new(docker)
            .args(["info", "--format", "{{json .Runtimes}}"])
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| serde_json::from_slice::<serde_json::Value>(&out.stdout).ok())
            .flatten()
    });
    let (runtimes, source) = match from_daemon {
        Some(r) => (r, "docker info"),
        None => {
            let path = "/etc/docker/daemon.json";
            match std::fs::read(path) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Found::Unregistered(format!("dockerd is not running and {path} does not exist"))
                }
                Err(e) => return Found::Unregistered(format!("read {path}: {e}")),
                Ok(bytes) => match serde_json::from_slice::<serde_json::Value>(&bytes) {
                    Ok(v) => (
                        v.get("runtimes").cloned().unwrap_or_default(),
                        "/etc/docker/daemon.json (dockerd is not running)",
                    ),
                    Err(e) => return Found::Unregistered(format!("{path} does not parse: {e}")),
                },
            }
        }
    };
    match runtimes.get(NAME).and_then(|r| r.get("path")).and_then(|p| p.as_str()) {
        Some(p) => Found::Registered(format!("runtime {NAME} = {p} (from {source})"), PathBuf::from(p)),
        None => Found::Unregistered(format!("no runtime {NAME} in {source}")),
    }
}

/// containerd's merged configuration (its config.toml and every import).
fn containerd() -> Found {
    let Some(containerd) = find_program("containerd") else {
        return Found::Absent;
    };
    let out = match std::process::Command::new(containerd)
        .args(["config", "dump"])
        .stdin(std::process::Stdio::null())
        .output()
    {
        Ok(o) if o.status.success() => o.stdout,
        Ok(o) => {
            let err = String::from_utf8_lossy(&o.stderr);
            return Found::Unregistered(format!(
                "containerd config dump failed: {}",
                err.lines().last().unwrap_or_default()
            ));
        }
        Err(e) => return Found::Unregistered(format!("run containerd config dump: {e}")),
    };
    let Ok(doc) = String::from_utf8_lossy(&out).parse::<toml::Table>() else {
        return Found::Unregistered("containerd config dump is not TOML".into());
    };
    let runtime = doc
        .get("plugins")
        .and_then(|p| p.get("io.containerd.grpc.v1.cri"))
        .and_then(|c| c.get("containerd"))
        .and_then(|c| c.get("runtimes"))
        .and_then(|r| r.get(NAME));
    let binary = runtime
        .and_then(|r| r.get("options"))
        .and_then(|o| o.get("BinaryName"))
        .and_then(|b| b.as_str());
    match binary {
        Some(b) => Found::Registered(
            format!("CRI runtime {NAME}, BinaryName {b} (containerd config dump); ctr: --runc-binary {b}"),
            PathBuf::from(b),
        ),
        None => Found::Unregistered(format!("no CRI runtime {NAME} in containerd config dump")),
    }
}

/// `ENGINE run --rm --runtime claude-shim IMAGE true` (ctr: --runc-binary),
/// without a network, as a user would type it.
fn start(engine: &'static str, binary: &Path, image: &str) -> Check {
    let id = format!("claude-shim-doctor-{}", std::process::id());
    let binary = binary.display().to_string();
    let args: Vec<&str> = match engine {
        "podman" => vec!["run", "--rm", "--runtime", NAME, "--network", "none", image, "true"],
        "docker" => vec!["run", "--rm", "--runtime", NAME, "--network", "none", image, "true"],
        _ => vec!["run", "--rm", "--runc-binary", &binary, image, &id, "true"],
    };
    let program = if engine == "containerd" { "ctr" } else { engine };
    let name = match engine {
        "podman" => "podman run",
        "docker" => "docker run",
        _ => "ctr run",
    };
    let Some(path) = find_program(program) else {
        return Check::warn(
            name,
            format!("{program} is not installed"),
            format!("install {program}"),
        );
    };
    match std::process::Command::new(&path)
        .args(&args)
        .stdin(std::process::Stdio::null())
        .output()
    {
        Ok(o) if o.status.success() => Check::ok(name, format!("{program} {} exited 0", args.join(" "))),
        Ok(o) => {
            let err = String::from_utf8_lossy(&o.stderr);
            Check::fail(
                name,
                format!(
                    "{program} {} failed: {}",
                    args.join(" "),
                    err.lines().last().unwrap_or_default().trim()
                ),
                "see the engine's error; the image must be in its store already (claude-shim doctor pulls nothing)",
            )
        }
        Err(e) => Check::fail(name, format!("run {program}: {e}"), format!("install {program}")),
    }
}
