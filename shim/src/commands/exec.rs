//! `exec`: a new process in a running container. Without --process the process
//! is built from the container's own (capabilities, no_new_privs, rlimits) with
//! the command line's overrides, as runc does.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use libcontainer::oci_spec::runtime::{Process, UserBuilder};

use crate::runtime::foreground::{self, ConsoleSocket};
use crate::runtime::{ExecRequest, Runtime};

fn process_from_args(rt: &Runtime, args: &liboci_cli::Exec, tty: bool) -> Result<Process> {
    let id = &args.container_id;
    if let Some(path) = &args.process {
        let raw = crate::bounded::read(path, crate::bounded::SPEC_LIMIT)
            .with_context(|| format!("read process file {}", path.display()))?;
        let what = format!("process file {}", path.display());
        let p: Process = crate::runtime::unknown_caps::parse(&raw, "/capabilities", &what)?;
        crate::runtime::validate::process(&p).with_context(|| format!("use process file {}", path.display()))?;
        return Ok(p);
    }
    if args.command.is_empty() {
        bail!("exec in container {id}: give a command or --process");
    }
    let spec = rt.effective_spec(id)?;
    let mut p = spec.process().clone().unwrap_or_default();
    p.set_args(Some(args.command.clone()));
    p.set_terminal(Some(tty));
    let mut env: Vec<String> = p.env().clone().unwrap_or_default();
    for (k, v) in &args.env {
        env.retain(|e| e.split('=').next() != Some(k.as_str()));
        env.push(format!("{k}={v}"));
    }
    p.set_env(Some(env));
    if let Some(cwd) = &args.cwd {
        p.set_cwd(cwd.clone());
    }
    if let Some((uid, gid)) = args.user {
        let mut user = UserBuilder::default().uid(uid).gid(gid.unwrap_or(0));
        if !args.additional_gids.is_empty() {
            user = user.additional_gids(args.additional_gids.clone());
        }
        p.set_user(user.build()?);
    }
    if let Some(profile) = &args.apparmor {
        p.set_apparmor_profile(Some(profile.clone()));
    }
    if let Some(label) = &args.process_label {
        p.set_selinux_label(Some(label.clone()));
    }
    if args.no_new_privs {
        p.set_no_new_privileges(Some(true));
    }
    if !args.cap.is_empty() {
        add_capabilities(&mut p, &args.cap).with_context(|| format!("exec in container {id}"))?;
    }
    // The command line's overrides are held to what a process file is.
    crate::runtime::validate::process(&p).with_context(|| format!("exec in container {id}"))?;
    Ok(p)
}

fn bounding(p: &Process) -> Vec<String> {
    p.capabilities()
        .as_ref()
        .and_then(|c| c.bounding().as_ref())
        .map(|b| b.iter().map(|c| format!("CAP_{c}")).collect())
        .unwrap_or_default()
}

/// runc's `exec --cap`: each capability joins the bounding, effective and
/// permitted sets, and the ambient set when the process has inheritable ones.
/// The admin policy's limits are applied afterwards (`admin::tighten_exec`).
fn add_capabilities(p: &mut Process, caps: &[String]) -> Result<()> {
    use libcontainer::oci_spec::runtime::{Capabilities, Capability, LinuxCapabilities};
    let mut set = p.capabilities().clone().unwrap_or_else(|| {
        let mut none = LinuxCapabilities::default();
        none.set_bounding(None);
        none.set_effective(None);
        none.set_permitted(None);
        none.set_inheritable(None);
        none.set_ambient(None);
        none
    });
    let with_inheritable = set.inheritable().as_ref().is_some_and(|i| !i.is_empty());
    for name in caps {
        let upper = name.to_ascii_uppercase();
        let full = if upper.starts_with("CAP_") {
            upper
        } else {
            format!("CAP_{upper}")
        };
        // runc warns about a name it does not know and goes on without it.
        let Ok(cap) = serde_json::from_value::<Capability>(serde_json::Value::String(full)) else {
            tracing::warn!("ignoring --cap {name:?}: it is not a capability name");
            continue;
        };
        let add = |s: &Option<Capabilities>| {
            let mut s = s.clone().unwrap_or_default();
            s.insert(cap);
            Some(s)
        };
        set.set_bounding(add(set.bounding()));
        set.set_effective(add(set.effective()));
        set.set_permitted(add(set.permitted()));
        if with_inheritable {
            set.set_ambient(add(set.ambient()));
        }
    }
    p.set_capabilities(Some(set));
    Ok(())
}

pub fn exec(rt: &Runtime, args: &liboci_cli::Exec) -> Result<i32> {
    let id = &args.container_id;
    rt.load(id)?;
    let mut process = process_from_args(rt, args, args.tty)?;
    if let Some(meta) = rt.read_meta(id) {
        let asked = bounding(&process);
        crate::admin::tighten_exec(&meta, &rt.effective_spec(id)?, &mut process);
        if !args.cap.is_empty() {
            // A deliberate difference from runc: --cap cannot reach past the admin policy.
            let kept = bounding(&process);
            if let Some(cap) = asked.iter().find(|c| !kept.contains(c)) {
                let policy = meta.admin_policy.as_deref().unwrap_or(std::path::Path::new("?"));
                bail!(
                    "exec in container {id} with --cap: the admin policy {} does not grant {cap} \
                     (identity.capabilities); claude-shim refuses what runc would add",
                    policy.display()
                );
            }
        }
    }
    let terminal = process.terminal().unwrap_or(false);
    let own_console = terminal && !args.detach && args.console_socket.is_none();
    let meta_dir = rt.meta_dir(id);
    let console = if own_console {
        Some(ConsoleSocket::bind(&meta_dir)?)
    } else {
        None
    };
    let process_file: PathBuf = meta_dir.join(format!("exec-{}.json", std::process::id()));
    std::fs::write(&process_file, serde_json::to_vec(&process)?)
        .with_context(|| format!("write {}", process_file.display()))?;
    let req = ExecRequest {
        id,
        process: &process_file,
        pid_file: args.pid_file.as_deref(),
        console_socket: console
            .as_ref()
            .map(|c| c.path.as_path())
            .or(args.console_socket.as_deref()),
        terminal,
        preserve_fds: args.preserve_fds,
        ignore_paused: args.ignore_paused,
        cgroup: args.cgroup.as_deref(),
        stdio: None,
    };
    let result = rt.exec(req);
    let _ = std::fs::remove_file(&process_file);
    let pid = result?;
    if args.detach {
        return Ok(0);
    }
    let signals = foreground::block_signals()?;
    let master = match &console {
        Some(c) => Some(c.receive()?),
        None => None,
    };
    drop(console);
    foreground::wait(
        pid,
        &signals,
        master,
        foreground::Forwarding {
            map: &mut Some,
            grace: None,
            pending: None,
        },
    )
}
