//! What the network modes need on the host: pasta (found, its version, and
//! /dev/net/tun openable, which it needs to run at all) and nft, found where
//! the runtime itself looks for them (network::find_tool).

use std::fs::OpenOptions;

use super::check::{first_line, Check};
use crate::network::{find_tool, NFT_ENV, PASTA_ENV};

pub fn checks() -> Vec<Check> {
    vec![pasta(), tun(), nft()]
}

fn pasta() -> Check {
    let path = match find_tool("pasta", PASTA_ENV, "passt") {
        Ok(p) => p,
        Err(e) => {
            return Check::fail(
                "pasta",
                format!("{e:#}"),
                "apt-get install passt (the public network mode needs it; none and allowlist do not)",
            )
        }
    };
    match first_line(&path, &["--version"]) {
        Ok(v) => Check::ok("pasta", format!("{} ({v})", path.display())),
        Err(e) => Check::fail("pasta", e, "reinstall passt"),
    }
}

/// pasta opens /dev/net/tun inside the container's namespaces; without it the
/// public network mode cannot start.
fn tun() -> Check {
    match OpenOptions::new().read(true).write(true).open("/dev/net/tun") {
        Ok(_) => Check::ok("pasta /dev/net/tun", "opened read-write"),
        Err(e) => Check::fail(
            "pasta /dev/net/tun",
            format!("open /dev/net/tun: {e}"),
            "modprobe tun, then create it (mknod /dev/net/tun c 10 200) and chmod 0666 /dev/net/tun; pasta cannot run without it",
        ),
    }
}

fn nft() -> Check {
    let path =
        match find_tool("nft", NFT_ENV, "nftables") {
            Ok(p) => p,
            Err(e) => return Check::fail(
                "nft",
                format!("{e:#}"),
                "apt-get install nftables (the public network mode, and a namespace an engine wired, filter with it)",
            ),
        };
    match first_line(&path, &["--version"]) {
        Ok(v) => Check::ok("nft", format!("{} ({v})", path.display())),
        Err(e) => Check::fail("nft", e, "reinstall nftables"),
    }
}
