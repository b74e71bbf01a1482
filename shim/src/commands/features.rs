//! `features`: what this runtime supports, as OCI features JSON
//! (runtime-spec features.md).

use anyhow::Result;
use serde_json::json;

pub const CAPABILITIES: &[&str] = &[
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_LINUX_IMMUTABLE",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_BROADCAST",
    "CAP_NET_ADMIN",
    "CAP_NET_RAW",
    "CAP_IPC_LOCK",
    "CAP_IPC_OWNER",
    "CAP_SYS_MODULE",
    "CAP_SYS_RAWIO",
    "CAP_SYS_CHROOT",
    "CAP_SYS_PTRACE",
    "CAP_SYS_PACCT",
    "CAP_SYS_ADMIN",
    "CAP_SYS_BOOT",
    "CAP_SYS_NICE",
    "CAP_SYS_RESOURCE",
    "CAP_SYS_TIME",
    "CAP_SYS_TTY_CONFIG",
    "CAP_MKNOD",
    "CAP_LEASE",
    "CAP_AUDIT_WRITE",
    "CAP_AUDIT_CONTROL",
    "CAP_SETFCAP",
    "CAP_MAC_OVERRIDE",
    "CAP_MAC_ADMIN",
    "CAP_SYSLOG",
    "CAP_WAKE_ALARM",
    "CAP_BLOCK_SUSPEND",
    "CAP_AUDIT_READ",
    "CAP_PERFMON",
    "CAP_BPF",
    "CAP_CHECKPOINT_RESTORE",
];

pub fn features_json() -> serde_json::Value {
    let mount_options = [
        "async",
        "atime",
        "bind",
        "defaults",
        "dev",
        "diratime",
        "dirsync",
        "exec",
        "iversion",
        "lazytime",
        "loud",
        "mand",
        "noatime",
        "nodev",
        "nodiratime",
        "noexec",
        "noiversion",
        "nolazytime",
        "nomand",
        "norelatime",
        "nostrictatime",
        "nosuid",
        "nosymfollow",
        "private",
        "rbind",
        "relatime",
        "remount",
        "ro",
        "rprivate",
        "rshared",
        "rslave",
        "runbindable",
        "rw",
        "shared",
        "silent",
        "slave",
        "strictatime",
        "suid",
        "symfollow",
        "sync",
        "tmpcopyup",
        "unbindable",
    ];
    json!({
        "ociVersionMin": "1.0.0",
        "ociVersionMax": libcontainer::oci_spec::runtime::VERSION,
        "hooks": ["prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop"],
        "mountOptions": mount_options.to_vec(),
        "linux": {
            "namespaces": ["cgroup", "ipc", "mount", "network", "pid", "user", "uts", "time"],
            "capabilities": CAPABILITIES,
            "cgroup": { "v1": true, "v2": true, "systemd": true, "systemdUser": true, "rdma": false },
            "seccomp": {
                "enabled": true,
                "actions": ["SCMP_ACT_ALLOW", "SCMP_ACT_ERRNO", "SCMP_ACT_KILL", "SCMP_ACT_KILL_PROCESS",
                            "SCMP_ACT_KILL_THREAD", "SCMP_ACT_LOG", "SCMP_ACT_NOTIFY", "SCMP_ACT_TRACE", "SCMP_ACT_TRAP"],
                "operators": ["SCMP_CMP_EQ", "SCMP_CMP_GE", "SCMP_CMP_GT", "SCMP_CMP_LE", "SCMP_CMP_LT",
                              "SCMP_CMP_MASKED_EQ", "SCMP_CMP_NE"],
                "archs": ["SCMP_ARCH_X86", "SCMP_ARCH_X86_64", "SCMP_ARCH_X32"],
                "knownFlags": ["SECCOMP_FILTER_FLAG_TSYNC", "SECCOMP_FILTER_FLAG_SPEC_ALLOW", "SECCOMP_FILTER_FLAG_LOG",
                               "SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV"],
                "supportedFlags": ["SECCOMP_FILTER_FLAG_TSYNC", "SECCOMP_FILTER_FLAG_SPEC_ALLOW", "SECCOMP_FILTER_FLAG_LOG"]
            },
            "apparmor": { "enabled": true },
            "selinux": { "enabled": false },
            "intelRdt": { "enabled": false },
            "mountExtensions": { "idmap": { "enabled": false } }
        },
        "annotations": {
            "io.github.seccomp.libseccomp.version": crate::runtime::guards::libseccomp_version(),
            "run.claude-shim.version": env!("CARGO_PKG_VERSION"),
            "run.claude-shim.libcontainer.version": "0.7.0"
        }
    })
}

pub fn features() -> Result<i32> {
    println!("{}", serde_json::to_string_pretty(&features_json())?);
    Ok(0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn features_parse_as_oci_features() {
        let v = super::features_json();
        let f: libcontainer::oci_spec::runtime::Features = serde_json::from_value(v).unwrap();
        assert_eq!(f.oci_version_min(), "1.0.0");
        assert!(f
            .linux()
            .as_ref()
            .unwrap()
            .seccomp()
            .as_ref()
            .unwrap()
            .enabled()
            .unwrap());
    }
}
