//! The network pass: the mode, the egress lists and the published ports
//! travel to the network helper as annotations (`run.claude-shim.network`,
//! `run.claude-shim.network.policy`, `run.claude-shim.network.publish`),
//! with the run's working directory (`run.claude-shim.workdir`, which
//! `allow` and `denials` find a project's runs by); in allowlist mode the environment
//! points every client at the sandbox's proxy inside its network namespace.

use std::collections::HashMap;

use serde::Serialize;

use super::ctx::Ctx;
use super::process::Env;
use crate::annotations;
use crate::policy::values::NetworkMode;

/// The proxy the network helper runs in allowlist mode (HTTP CONNECT and plain HTTP).
pub const HTTP_PROXY: &str = "http://127.0.0.1:3128";
/// Its SOCKS5 side; `socks5h` so names are resolved by the proxy, which checks them.
pub const SOCKS_PROXY: &str = "socks5h://127.0.0.1:1080";
pub const NO_PROXY: &str = "localhost,127.0.0.1,::1";
/// Where the runtime binds its own binary in an allowlist sandbox, as ssh's
/// ProxyCommand: ssh has no proxy setting, and the sandbox no route out.
pub const CONNECT_PATH: &str = "/dev/.claude-shim-connect";
/// The verb of that binary that relays one stream through the SOCKS proxy.
pub const CONNECT_VERB: &str = "__connect";

/// GIT_SSH_COMMAND in an allowlist sandbox, unless the policy sets its own.
pub fn git_ssh_command() -> String {
    format!("ssh -o 'ProxyCommand={CONNECT_PATH} {CONNECT_VERB} %h %p'")
}

/// The `run.claude-shim.network.policy` JSON.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct NetworkPolicyAnnotation {
    pub allow: Vec<String>,
    pub deny: Vec<String>,
    pub allow_cidrs: Vec<String>,
}

pub(crate) fn annotations(ctx: &Ctx<'_>, ann: &mut HashMap<String, String>) {
    let net = &ctx.policy.network;
    ann.insert(annotations::NETWORK.to_owned(), net.mode.as_str().to_owned());
    let body = NetworkPolicyAnnotation {
        allow: net.allow.iter().map(|p| p.0.clone()).collect(),
        deny: net.deny.iter().map(|p| p.0.clone()).collect(),
        allow_cidrs: net.allow_cidrs.iter().map(|c| c.0.clone()).collect(),
    };
    ann.insert(
        annotations::NETWORK_POLICY.to_owned(),
        serde_json::to_string(&body).expect("strings serialize"),
    );
    if !net.publish.is_empty() {
        let list: Vec<String> = net.publish.iter().map(|p| p.to_string()).collect();
        ann.insert(annotations::NETWORK_PUBLISH.to_owned(), list.join(","));
    }
    ann.insert(
        annotations::WORKDIR.to_owned(),
        ctx.inv.workdir.to_string_lossy().into_owned(),
    );
}

pub(crate) fn environment(ctx: &Ctx<'_>, env: &mut Env) {
    environment_for(ctx.policy, env)
}

pub(crate) fn environment_for(policy: &crate::Policy, env: &mut Env) {
    if policy.network.mode != NetworkMode::Allowlist {
        return;
    }
    for (name, value) in [
        ("HTTP_PROXY", HTTP_PROXY),
        ("HTTPS_PROXY", HTTP_PROXY),
        ("ALL_PROXY", SOCKS_PROXY),
        ("NO_PROXY", NO_PROXY),
    ] {
        env.insert(name.to_owned(), value.to_owned());
        env.insert(name.to_ascii_lowercase(), value.to_owned());
    }
    if !env.contains_key("GIT_SSH_COMMAND") {
        env.insert("GIT_SSH_COMMAND".to_owned(), git_ssh_command());
    }
}
