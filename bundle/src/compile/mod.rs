//! Policy + invocation -> OCI spec. One pass per concern, in the order of the
//! spec: filesystem (`mounts`: root, skeleton, mounts, masked and read-only
//! paths), process (`process`: user, capabilities, no_new_privileges,
//! rlimits, environment), kernel isolation (`linux`: namespaces, id maps,
//! seccomp, resources) and the network annotations (`network`). Everything
//! about the machine comes through `HostView`, so the passes are pure and
//! unit-tested against a fake host.

mod ctx;
mod input;
mod linux;
mod mounts;
mod network;
mod output;
mod process;
mod resolve;
mod run_as;

/// The kernel paths every sandbox masks and keeps read-only, and the CPU
/// period of its quota: the runtime's admin policy applies them to specs an
/// engine wrote.
pub use linux::CPU_PERIOD;
pub use mounts::review::attach_layer;
pub use mounts::{search_names, ENV_FILE_DEPTH, ENV_FILE_LIMIT, MASKED_PATHS, READONLY_PATHS};
pub use network::{git_ssh_command, CONNECT_PATH, CONNECT_VERB};

pub use input::{HostView, Invocation, Owner, PathKind};
pub use output::{CompileError, Compiled, Placeholder, SkeletonEntry};
pub use run_as::RunAs;

/// The environment `compile` gives the process of `policy` for a caller
/// with `vars` and `home` (the process and network passes): what a session
/// sandbox's spawner gives each command, computed by the caller outside.
pub fn environment(
    policy: &Policy,
    vars: &[(String, String)],
    home: &std::path::Path,
) -> std::collections::BTreeMap<String, String> {
    let mut env = process::environment_of(policy, vars, home);
    network::environment_for(policy, &mut env);
    env
}

use std::collections::HashMap;

use oci_spec::runtime::SpecBuilder;

use self::ctx::Ctx;
use crate::annotations;
use crate::policy::Policy;

fn check_invocation(inv: &Invocation) -> Result<(), CompileError> {
    let bad = |m: String| Err(CompileError::Invocation(m));
    if !inv.workdir.is_absolute() {
        return bad(format!("working directory {} is not absolute", inv.workdir.display()));
    }
    if !inv.home.is_absolute() {
        return bad(format!("home directory {} is not absolute", inv.home.display()));
    }
    if inv.args.is_empty() || inv.args[0].is_empty() {
        return bad("no command to run".to_owned());
    }
    if let Some(r) = &inv.rootfs {
        if !r.is_absolute() {
            return bad(format!("rootfs {} is not absolute", r.display()));
        }
    }
    Ok(())
}

/// Compiles `policy` for one run.
pub fn compile(policy: &Policy, host: &dyn HostView, inv: &Invocation) -> Result<Compiled, CompileError> {
    check_invocation(inv)?;
    let userns = linux::wants_user_namespace(policy, inv).map_err(|m| CompileError::Field {
        origin: policy.origin.clone(),
        field: "identity.user_namespace".into(),
        message: m,
    })?;
    let ctx = Ctx {
        policy,
        host,
        inv,
        userns,
        run_as: RunAs::decide(host, inv),
    };

    let fs = mounts::compile(&ctx)?;
    let mut env = process::environment(&ctx);
    network::environment(&ctx, &mut env);
    let proc = process::process(&ctx, env)?;
    let linux = linux::linux(&ctx, fs.masked_paths, fs.readonly_paths)?;

    let opt_outs = policy.opt_outs();
    let mut ann = HashMap::new();
    ann.insert(annotations::POLICY.to_owned(), policy.name().to_owned());
    network::annotations(&ctx, &mut ann);
    if policy.resources.best_effort {
        ann.insert(annotations::BEST_EFFORT_RESOURCES.to_owned(), "true".to_owned());
    }
    ann.insert(
        annotations::OPT_OUTS.to_owned(),
        serde_json::to_string(&opt_outs).expect("strings serialize"),
    );

    let spec = SpecBuilder::default()
        .version(oci_spec::runtime::VERSION)
        .root(fs.root)
        .mounts(fs.mounts)
        .process(proc)
        .hostname("sandbox")
        .annotations(ann)
        .linux(linux)
        .build()
        .map_err(|e| CompileError::Invocation(format!("build the spec: {e}")))?;
    Ok(Compiled {
        spec,
        skeleton: fs.skeleton,
        placeholders: fs.placeholders,
        host_run: fs.host_run,
        opt_outs,
    })
}

#[cfg(test)]
mod tests;
