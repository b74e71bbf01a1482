//! The API gateway of `claude-shim claude`: the agent's only way to the model
//! API, so that the credential never enters the sandbox. It runs in the proxy
//! helper (outside the sandbox, listening on 127.0.0.1:3180 inside the
//! sandbox's network namespace) and forwards the few paths Claude Code uses
//! to the caller's upstream (`ANTHROPIC_BASE_URL`, default
//! https://api.anthropic.com), with the caller's credential added there and
//! whatever the sandbox sent in its place dropped. Only the shapes Claude
//! Code sends go up: its paths and query (`target`), its headers and beta
//! flags (`headers`), and a JSON body using no server-side feature the
//! policy does not list (`body`), so the key cannot make the API reach out
//! for the agent. One request per connection; the body is read whole
//! (bounded), judged, and sent as it came; the response comes back as it
//! arrives (SSE). Each request is logged with method, path, status, bytes
//! and duration, and what was dropped: never a body, never a header value
//! but a beta flag.

mod body;
mod headers;
mod http;
mod serve;
mod target;
mod upstream;

pub use self::serve::serve;
pub use self::upstream::{Config, Credential, Gateway, Upstream, ANNOTATION, TOOLS_ANNOTATION};

/// Where the gateway listens inside the sandbox.
pub const PORT: u16 = 3180;
/// The base URL the agent is given.
pub const BASE_URL: &str = "http://127.0.0.1:3180";

/// The variables the credential is read from, outside, in this order.
pub const CREDENTIAL_VARS: &[&str] = &["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"];
