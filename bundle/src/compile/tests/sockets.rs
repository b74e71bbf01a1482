//! The socket pass through whole compiles: the census's sockets covered where
//! they would show, the policy's own left reachable, the limit.

use super::*;

fn covered(c: &Compiled, dest: &str) -> bool {
    mount_at(c, dest).iter().any(|m| {
        m.source().as_deref() == Some(Path::new("/dev/null")) && opts(m) == ["bind", "ro", "x-claude-shim-if-present"]
    })
}

fn socket_host() -> FakeHost {
    FakeHost::typical()
        .dir("/mnt")
        .dir("/srv")
        .link("/var/run", "../run")
        .dir("/home/u/.cargo")
        .socket("/mnt/scratch/a.sock")
        .socket("/opt/app/b.sock")
        .socket("/srv/c.sock")
        .socket("/home/u/proj/d.sock")
        .socket("/home/u/.cargo/e.sock")
        .socket("/home/u/.docker/run/docker.sock")
        .socket("/run/docker.sock")
        .socket("/var/run/docker.sock")
        .socket("/tmp/.X11-unix/X0")
        .socket("/run/user/1000/bus")
        .socket("/home/u/.ssh/agent.sock")
        .socket("/weird.sock")
}

#[test]
fn every_socket_that_would_show_is_covered() {
    let mut host = socket_host();
    // Bound once but gone, relative, or no longer a socket: nothing to cover.
    host.sockets.push("/mnt/gone.sock".into());
    host.sockets.push("relative.sock".into());
    let mut host = host.file("/srv/now-a-file.sock");
    host.sockets.push("/srv/now-a-file.sock".into());
    let c = run(&Policy::embedded_default(), &host, &inv());
    for s in [
        "/mnt/scratch/a.sock",
        "/opt/app/b.sock",
        "/srv/c.sock",
        "/home/u/proj/d.sock",
        "/home/u/.cargo/e.sock",
    ] {
        assert!(covered(&c, s), "{s} is not covered");
    }
    for s in [
        "/home/u/.docker/run/docker.sock",
        "/run/docker.sock",
        "/var/run/docker.sock",
        "/tmp/.X11-unix/X0",
        "/run/user/1000/bus",
        "/home/u/.ssh/agent.sock",
        "/mnt/gone.sock",
        "/srv/now-a-file.sock",
        // A socket at the top level gets no mount point in the skeleton.
        "/weird.sock",
    ] {
        assert!(
            mount_at(&c, s).is_empty(),
            "{s} does not show inside, it needs no mount"
        );
    }
    // On top of what shows it: the project's socket after the project.
    let mounts = c.spec.mounts().as_ref().unwrap();
    let at = |d: &str| mounts.iter().rposition(|m| m.destination() == Path::new(d)).unwrap();
    assert!(at("/home/u/proj") < at("/home/u/proj/d.sock"));
    assert!(at("/home/u/.cargo") < at("/home/u/.cargo/e.sock"));
}

#[test]
fn with_the_hosts_home_its_sockets_are_covered() {
    let c = run(&policy("[filesystem]\nhome = \"host\""), &socket_host(), &inv());
    assert!(covered(&c, "/home/u/.docker/run/docker.sock"));
    // Under a hidden directory: hidden already.
    assert!(mount_at(&c, "/home/u/.ssh/agent.sock").is_empty());
}

#[test]
fn sockets_the_policy_names_stay_reachable() {
    let p = policy(
        "[filesystem]\nunix_sockets = [\"/srv/c.sock\", \"/var/run/docker.sock\", \"~/.docker/run/docker.sock\", \"?/srv/none.sock\"]",
    );
    let c = run(&p, &socket_host(), &inv());
    assert!(mount_at(&c, "/srv/c.sock").is_empty(), "it shows already");
    // Resolved, and bound in where it would not show.
    for s in ["/run/docker.sock", "/home/u/.docker/run/docker.sock"] {
        let m = only_mount(&c, s);
        assert_eq!(m.source().as_deref(), Some(Path::new(s)));
        assert_eq!(opts(m), ["bind", "nosuid", "nodev"]);
    }
    assert!(covered(&c, "/mnt/scratch/a.sock"));
    assert_eq!(
        c.opt_outs,
        [
            "filesystem.unix_sockets: /srv/c.sock",
            "filesystem.unix_sockets: /var/run/docker.sock",
            "filesystem.unix_sockets: ~/.docker/run/docker.sock",
            "filesystem.unix_sockets: /srv/none.sock",
        ]
    );
}

#[test]
fn a_named_socket_must_be_one() {
    for (line, want) in [
        (
            "unix_sockets = [\"/srv/none.sock\"]",
            "filesystem.unix_sockets[0]: /srv/none.sock does not exist",
        ),
        (
            "unix_sockets = [\"/etc\"]",
            "filesystem.unix_sockets[0]: /etc is not a unix socket",
        ),
    ] {
        let e = error(&policy(&format!("[filesystem]\n{line}")), &socket_host(), &inv());
        assert!(e.contains(want), "{e}");
    }
    for (line, want) in [
        ("unix_sockets = [\"/proc/1/x\"]", "/proc/1/x is not a host socket path"),
        ("unix_sockets = [\"run/x\"]", "is relative"),
        (
            "unix_sockets = [\"/a.sock\", \"/a.sock\"]",
            "unix_sockets[1]: /a.sock is listed twice",
        ),
        (
            "unix_sockets = [\"~/.ssh/agent.sock\"]",
            "lies under the hidden path ~/.ssh",
        ),
        (
            "unix_sockets = [\"/run/user/1000/bus\"]",
            "lies under the masked path /run/user",
        ),
    ] {
        let e = Policy::from_toml_str(&format!("version = 1\n[filesystem]\n{line}"), "t.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{e}");
    }
}

#[test]
fn too_many_sockets_are_refused() {
    let mut host = FakeHost::typical();
    for i in 0..=1000 {
        host = host.socket(&format!("/opt/s/{i}.sock"));
    }
    let e = error(&Policy::embedded_default(), &host, &inv());
    assert!(e.contains("1000 or more of them would show inside"), "{e}");
}
