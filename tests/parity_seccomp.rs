//! runc parity for seccomp (issue 37): a syscall newer than the profile
//! answers ENOSYS (runc's stub) where the profile's default errno would say
//! "not permitted", a notify profile reaches the seccomp agent for an
//! `exec`'d process too, and a startContainer hook the filter kills is named
//! with runc's words. Each runs the same bundle under claude-shim and runc
//! 1.1.5, prints both and compares them.

use std::io::IoSliceMut;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixListener;
use std::process::Command;

use claude_shim_e2e::oracle::*;
use claude_shim_e2e::*;
use serde_json::{json, Value};

/// A static program that makes syscall `nr` and prints its result and
/// errno, bound at /probe in the container.
fn syscall_probe(env: &Env, v: &mut Value, nr: i64) {
    let dir = env.dir.path().join(format!("probe-{nr}"));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("probe.c");
    std::fs::write(
        &src,
        format!(
            "#include <errno.h>\n#include <stdio.h>\n#include <unistd.h>\n#include <sys/syscall.h>\n\
             int main(void) {{ long r = syscall({nr}, 0, 0, 0); printf(\"%ld %d\\n\", r, r < 0 ? errno : 0); return 0; }}\n"
        ),
    )
    .unwrap();
    let out = Command::new("gcc")
        .args(["-static", "-O1", "-o"])
        .arg(dir.join("probe"))
        .arg(&src)
        .output()
        .expect("gcc (hack/setup installs it)");
    assert!(out.status.success(), "gcc: {}", text(&out.stderr));
    v["mounts"].as_array_mut().unwrap().push(json!({
        "destination": "/probe", "type": "bind", "source": dir.join("probe"), "options": ["rbind", "ro"]
    }));
}

/// Every x86_64 syscall up to rseq (334) but unshare, by name (from the
/// kernel's headers, libc6-dev): the profile's highest is rseq.
fn older_than_rseq() -> Vec<String> {
    let h = std::fs::read_to_string("/usr/include/x86_64-linux-gnu/asm/unistd_64.h")
        .expect("the kernel's syscall numbers (hack/setup installs libc6-dev)");
    h.lines()
        .filter_map(|l| {
            let mut w = l.strip_prefix("#define __NR_")?.split_whitespace();
            let (name, nr) = (w.next()?, w.next()?.parse::<u32>().ok()?);
            (nr <= 334 && name != "unshare").then(|| name.to_owned())
        })
        .collect()
}

/// A profile whose default is EPERM and whose highest syscall is rseq (334):
/// syscall 1000 is newer than the profile. runc answers ENOSYS (38), so
/// that libc falls back as on an older kernel; claude-shim said EPERM (1).
#[test]
fn a_syscall_newer_than_the_profile_is_enosys_as_under_runc() {
    let env = Env::new();
    let bundle = env.bundle("enosys", |v| {
        syscall_probe(&env, v, 1000);
        set_args(v, &["/probe"]);
        v["process"]["noNewPrivileges"] = true.into();
        v["linux"]["seccomp"] = json!({
            "defaultAction": "SCMP_ACT_ERRNO",
            "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
            "syscalls": [{
                "names": older_than_rseq(),
                "action": "SCMP_ACT_ALLOW"
            }]
        });
    });
    let [ours, theirs] = run_both(&env, &bundle, "enosys");
    assert_eq!(text(&ours.stdout), "-1 38\n", "claude-shim");
    assert_eq!(text(&ours.stdout), text(&theirs.stdout), "claude-shim, then runc");

    // A syscall below the profile's highest keeps the profile's answer
    // (unshare: 272, in no rule: the default, EPERM).
    let bundle = env.bundle("enosys-known", |v| {
        syscall_probe(&env, v, libc::SYS_unshare);
        set_args(v, &["/probe"]);
        v["process"]["noNewPrivileges"] = true.into();
        v["linux"]["seccomp"] = json!({
            "defaultAction": "SCMP_ACT_ERRNO",
            "architectures": ["SCMP_ARCH_X86_64"],
            "syscalls": [{
                "names": older_than_rseq(),
                "action": "SCMP_ACT_ALLOW"
            }]
        });
    });
    let [ours, theirs] = run_both(&env, &bundle, "enosys-known");
    assert_eq!(text(&ours.stdout), "-1 1\n", "claude-shim");
    assert_eq!(text(&ours.stdout), text(&theirs.stdout), "claude-shim, then runc");
}

/// A startContainer hook runs under the container's filter; killed by it,
/// the run fails naming the hook as runc does ("error running hook #0: ...
/// bad system call"); claude-shim exited 255 without a word.
#[test]
fn a_start_container_hook_killed_by_the_filter_is_named_as_under_runc() {
    let env = Env::new();
    let bundle = env.bundle("hookkill", |v| {
        set_args(v, &["/bin/true"]);
        v["linux"]["seccomp"] = json!({
            "defaultAction": "SCMP_ACT_ALLOW",
            "architectures": ["SCMP_ARCH_X86", "SCMP_ARCH_X32"],
            "syscalls": [{"names": ["mkdir"], "action": "SCMP_ACT_KILL"}]
        });
        v["hooks"] = json!({"startContainer": [{"path": "/bin/sh", "args": ["sh", "-c", "mkdir /tmp/foo"]}]});
    });
    let [ours, theirs] = run_both(&env, &bundle, "hookkill");
    for (rt, out) in [("claude-shim", &ours), ("runc", &theirs)] {
        let all = text(&out.stdout) + &text(&out.stderr);
        assert!(!out.status.success(), "{rt}: {all}");
        assert!(
            all.contains("error running hook") && all.contains("bad system call"),
            "{rt}: {all}"
        );
    }
}

/// Receives the listener descriptor a runtime sends to the seccomp agent
/// (runc's protocol: the state JSON, the descriptor in SCM_RIGHTS), and
/// the JSON.
fn receive_listener(sock: &UnixListener) -> (OwnedFd, Value) {
    use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};
    let (conn, _) = sock.accept().unwrap();
    let mut buf = vec![0u8; 64 * 1024];
    let mut cmsg = nix::cmsg_space!([RawFd; 4]);
    let mut iov = [IoSliceMut::new(&mut buf)];
    let msg = recvmsg::<()>(conn.as_raw_fd(), &mut iov, Some(&mut cmsg), MsgFlags::empty()).unwrap();
    let fd = msg
        .cmsgs()
        .unwrap()
        .find_map(|c| match c {
            ControlMessageOwned::ScmRights(fds) => fds.first().copied(),
            _ => None,
        })
        .expect("a descriptor");
    let len = msg.bytes;
    // SAFETY: the kernel just installed fd in this process for us alone.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    (fd, serde_json::from_slice(&buf[..len]).unwrap())
}

/// Answers one notification on `listener` with `errno`; the syscall's number.
fn answer_one(listener: &OwnedFd, errno: i32) -> i32 {
    // SECCOMP_IOCTL_NOTIF_RECV / _SEND: _IOWR('!', 0 and 1, ...).
    const RECV: libc::c_ulong = 0xc050_2100;
    const SEND: libc::c_ulong = 0xc018_2101;
    // SAFETY: zeroed plain-data structs the kernel fills and reads.
    let mut req: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    // SAFETY: ioctl with a pointer to a struct of the size the request names.
    let r = unsafe { libc::ioctl(listener.as_raw_fd(), RECV, &mut req) };
    assert_eq!(r, 0, "NOTIF_RECV: {}", std::io::Error::last_os_error());
    let mut resp: libc::seccomp_notif_resp = unsafe { std::mem::zeroed() };
    resp.id = req.id;
    resp.error = -errno;
    // SAFETY: as above.
    let r = unsafe { libc::ioctl(listener.as_raw_fd(), SEND, &mut resp) };
    assert_eq!(r, 0, "NOTIF_SEND: {}", std::io::Error::last_os_error());
    req.data.nr
}

/// A notify profile on `mkdir`: the agent gets the init's listener at
/// create and, under runc, an `exec`'d process's listener too, and answers
/// its mkdir. claude-shim refused such an exec ("seccomp notify rules are not
/// supported here").
#[test]
fn an_exec_under_a_notify_profile_reaches_the_agent_as_under_runc() {
    let env = Env::new();
    let socket = env.dir.path().join("agent.sock");
    let bundle = env.bundle("notifyexec", |v| {
        set_args(v, &["sleep", "60"]);
        v["linux"]["seccomp"] = json!({
            "defaultAction": "SCMP_ACT_ALLOW",
            "listenerPath": socket,
            "listenerMetadata": "meta",
            "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
            "syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_NOTIFY"}]
        });
    });
    let b = in_bundle(&bundle);
    let id = unique_id("notifyexec");
    let mut seen = vec![];
    for (rt, name) in [("claude-shim", id.clone()), ("runc", format!("runc-{id}"))] {
        let sock = UnixListener::bind(&socket).unwrap();
        let call = |args: &[&str]| if rt == "runc" { runc(&env, args) } else { env.run(args) };
        let mut create = vec!["run", "--detach"];
        create.extend(b.iter().map(String::as_str));
        create.push(&name);
        let agent = std::thread::scope(|s| {
            let init = s.spawn(|| receive_listener(&sock));
            let out = call(&create);
            show("notifyexec run -d", rt, &out);
            assert!(out.status.success(), "{rt}: {}", text(&out.stderr));
            init.join().unwrap()
        });
        assert_eq!(agent.1["metadata"], "meta", "{rt}: {}", agent.1);
        let exec = std::thread::scope(|s| {
            let agent = s.spawn(|| {
                let (fd, state) = receive_listener(&sock);
                (answer_one(&fd, libc::ENOANO), state)
            });
            let out = call(&["exec", &name, "mkdir", "/tmp/x"]);
            show("notifyexec exec mkdir", rt, &out);
            let (nr, state) = agent.join().unwrap();
            assert!(
                nr == libc::SYS_mkdir as i32 || nr == libc::SYS_mkdirat as i32,
                "{rt}: syscall {nr}"
            );
            assert_eq!(state["state"]["id"], name.as_str(), "{rt}: {state}");
            out
        });
        seen.push((exec.status.code(), text(&exec.stderr).contains("No anode")));
        drop(sock);
        std::fs::remove_file(&socket).unwrap();
        let out = call(&["delete", "--force", &name]);
        assert!(out.status.success(), "{rt}: {}", text(&out.stderr));
    }
    env.assert_no_leaks(&id);
    assert_eq!(seen[0], (Some(1), true), "claude-shim: mkdir answered by the agent");
    assert_eq!(seen[0], seen[1], "claude-shim, then runc");
}
