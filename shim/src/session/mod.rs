//! The session sandbox of `claude --per-command` (issue 27): one sandbox
//! for the whole Claude Code session, made when it starts (start.rs), whose
//! init is a spawner (spawner.rs) that runs each Bash call (call.rs) handed
//! to it by `claude-shim-shell` (client.rs) over a socket only the host
//! sees (wire.rs). A Bash call then costs a connection and a fork, not a
//! container.

pub mod call;
pub mod client;
pub mod spawner;
pub mod start;
pub mod wire;

/// Where the spawner (the runtime's binary) is bound inside, and its verb.
pub const SPAWNER_PATH: &str = "/dev/.claude-shim-spawner";
pub const SPAWNER_VERB: &str = "__spawner";
/// What `claude --per-command` tells `claude-shim-shell`: the session socket.
pub const SESSION_ENV: &str = "CLAUDE_SHIM_SESSION";
