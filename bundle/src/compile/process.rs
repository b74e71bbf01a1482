//! The process pass: who the agent runs as (`RunAs`), with which
//! capabilities (none unless the policy keeps some), no_new_privileges,
//! rlimits, and the environment: cleared, then the allow list, minus the
//! fixed secret rule, plus what the policy sets and IS_SANDBOX=1.

use std::collections::BTreeMap;

use oci_spec::runtime::{
    Capabilities, LinuxCapabilitiesBuilder, PosixRlimitBuilder, Process, ProcessBuilder, UserBuilder,
};

use super::ctx::Ctx;
use super::output::CompileError;
use crate::policy::{is_secret_name, FIXED_ENV};

/// When the caller has no PATH.
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The environment as name -> value (sorted, so config.json is stable).
pub(crate) type Env = BTreeMap<String, String>;

pub(crate) fn environment(ctx: &Ctx<'_>) -> Env {
    environment_of(ctx.policy, &ctx.inv.env, &ctx.inv.home)
}

/// The process pass's environment from the caller's `vars` and home alone
/// (without the network pass's proxy settings), for one command run by a
/// session sandbox's spawner: the same rule the compile applies.
pub(crate) fn environment_of(policy: &crate::Policy, vars: &[(String, String)], home: &std::path::Path) -> Env {
    let policy = &policy.environment;
    let allowed = |name: &str| FIXED_ENV.contains(&name) || policy.allow.iter().any(|p| p.matches(name));
    let mut env = Env::new();
    for (name, value) in vars {
        let passes = if policy.pass_secrets.iter().any(|p| p.0 == *name) {
            true
        } else {
            allowed(name) && !is_secret_name(name)
        };
        if passes {
            env.insert(name.clone(), value.clone());
        }
    }
    env.entry("PATH".to_owned()).or_insert_with(|| DEFAULT_PATH.to_owned());
    env.entry("HOME".to_owned())
        .or_insert_with(|| home.display().to_string());
    for (name, value) in &policy.set {
        env.insert(name.0.clone(), value.clone());
    }
    env.insert("IS_SANDBOX".to_owned(), "1".to_owned());
    env
}

/// The uid and gid the process runs as (the empty home's tmpfs belongs to
/// them): who `run_as` says, and in a user namespace root there, to which
/// those ids are mapped (see linux.rs).
pub(crate) fn ids(ctx: &Ctx<'_>) -> (u32, u32) {
    if ctx.userns {
        (0, 0)
    } else {
        ctx.run_as.host_ids()
    }
}

pub(crate) fn process(ctx: &Ctx<'_>, env: Env) -> Result<Process, CompileError> {
    let identity = &ctx.policy.identity;
    let caps: Capabilities = identity.capabilities.iter().map(|c| c.0).collect();
    let capabilities = LinuxCapabilitiesBuilder::default()
        .bounding(caps.clone())
        .effective(caps.clone())
        .inheritable(caps.clone())
        .permitted(caps.clone())
        .ambient(caps)
        .build()
        .expect("capability sets are complete");
    let (uid, gid) = ids(ctx);
    let mut user = UserBuilder::default().uid(uid).gid(gid);
    if ctx.run_as.drops_groups() {
        // libcontainer calls setgroups only for a non-empty list: the
        // process's own group alone replaces whatever groups root had.
        user = user.additional_gids(vec![gid]);
    }
    let user = user.build().expect("a user with ids is complete");
    let mut rlimits = Vec::new();
    for (name, limit) in &ctx.policy.resources.rlimits {
        rlimits.push(
            PosixRlimitBuilder::default()
                .typ(name.oci())
                .soft(limit.0)
                .hard(limit.0)
                .build()
                .expect("an rlimit with type and limits is complete"),
        );
    }
    // The builder fills unset fields from Process::default() (runc's sample
    // spec: an rlimit, default capabilities...), so every field is set here.
    let mut p = ProcessBuilder::default()
        .terminal(ctx.inv.terminal)
        .user(user)
        .args(ctx.inv.args.clone())
        .env(env.into_iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>())
        .cwd(ctx.inv.workdir.clone())
        .capabilities(capabilities)
        .build()
        .map_err(|e| CompileError::Invocation(format!("build the process: {e}")))?;
    p.set_rlimits(if rlimits.is_empty() { None } else { Some(rlimits) });
    // "false" is left out rather than written: it is the OCI default, and
    // libcontainer 0.7 mistakes the field's presence for "true".
    p.set_no_new_privileges(if identity.no_new_privileges { Some(true) } else { None });
    p.set_console_size(None);
    p.set_apparmor_profile(None);
    p.set_selinux_label(None);
    p.set_oom_score_adj(None);
    Ok(p)
}
