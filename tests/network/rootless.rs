//! Rootless sandboxes: the allowlist and public checks again, as an
//! unprivileged user.

use std::fs;

use claude_shim_e2e::*;

use crate::allowlist::{allowlist_policy, check_allowlist, ALLOWLIST_SCRIPT};
use crate::container::{assert_all_gone, id_of, net_bundle, Net};
use crate::probes::Probes;
use crate::public::{check_public, public_policy, PUBLIC_SCRIPT};
use crate::world::World;

/// /dev/net/tun must be usable by the test user for rootless pasta.
pub(crate) fn require_tun_for_users() {
    let mode = std::os::unix::fs::PermissionsExt::mode(&fs::metadata("/dev/net/tun").unwrap().permissions());
    assert_eq!(
        mode & 0o666,
        0o666,
        "/dev/net/tun is mode {mode:o}: run hack/setup (rootless pasta needs 0666)"
    );
}

#[test]
fn rootless_sandboxes_get_the_same_network() {
    require_tun_for_users();
    let world = World::new();
    let (uid, gid) = test_user();
    let env = Env::as_user(uid, gid);
    for (name, mode, policy, script) in [
        ("rl-allow", "allowlist", allowlist_policy(), ALLOWLIST_SCRIPT),
        ("rl-public", "public", public_policy(), PUBLIC_SCRIPT),
    ] {
        let net = Net {
            mode,
            policy,
            host_tools: true,
        };
        let bundle = net_bundle(&env, &world, name, Some(&net), script);
        let id = id_of(name);
        let out = world.ok(&env, &["run", "--bundle", bundle.to_str().unwrap(), &id]);
        let p = Probes::parse(&out);
        if mode == "allowlist" {
            check_allowlist(&p);
        } else {
            check_public(&p);
        }
        assert_all_gone(&env, &id);
    }
}
