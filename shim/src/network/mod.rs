//! The container's network, after `create` built it and before `start` runs
//! it: the mode comes from the spec's annotations (`prepare`, before
//! libcontainer sees the spec), and `attach` makes it so in the container's
//! network namespace: loopback only (none; in a namespace someone else wired,
//! such as a Kubernetes pod's, a filter that passes only lo), a proxy that
//! admits the listed hosts (allowlist), or pasta behind an nftables filter
//! (public); in any mode, published ports forwarded from the host's
//! loopback (`publish`). Helpers
//! started here are recorded in the container's meta.json as they start and
//! stopped at delete (`stop_helpers`). Every failure refuses the container.

mod args;
mod attach;
pub mod connect;
pub mod control;
pub mod gateway;
mod helpers;
pub mod log;
pub mod netns;
pub mod nft;
mod pasta;
mod plan;
pub mod policy;
mod prepare;
pub mod process;
pub mod proxy;
pub mod publish;
mod relay;
pub mod routing;
pub mod watch;
pub mod wire;

use anyhow::Result;

pub use self::args::{HelperArgs, HelperRole};
pub use self::attach::attach;
pub use self::helpers::{state_annotations, stop_helpers};
pub use self::prepare::{find_tool, prepare, NFT_ENV, PASTA_ENV, PROXY_ENV};

pub fn run_helper(args: &HelperArgs) -> Result<i32> {
    match &args.role {
        HelperRole::Watch(o) => watch::run(o)?,
        HelperRole::Hook { state_dir } => netns::hook(state_dir)?,
    }
    Ok(0)
}
