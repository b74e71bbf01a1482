//! The spec as a whole: both shipped policies compile and read back, bad
//! invocations are refused in one line, nothing of the sample spec is left.

use super::*;

#[test]
fn both_shipped_policies_compile_as_root_and_unprivileged() {
    for p in [Policy::embedded_default(), Policy::embedded_offline()] {
        for unprivileged in [true, false] {
            let i = Invocation { unprivileged, ..inv() };
            let c = run(&p, &FakeHost::typical(), &i);
            // What runc reads back is what was compiled.
            let json = serde_json::to_string(&c.spec).unwrap();
            let back: oci_spec::runtime::Spec = serde_json::from_str(&json).unwrap();
            assert_eq!(back, c.spec);
            assert!(c.opt_outs.is_empty());
        }
    }
}

#[test]
fn bad_invocations_are_refused() {
    let p = Policy::embedded_default();
    let host = FakeHost::typical();
    let cases: Vec<(Invocation, &str)> = vec![
        (
            Invocation {
                workdir: "proj".into(),
                ..inv()
            },
            "working directory proj is not absolute",
        ),
        (
            Invocation {
                workdir: "/nope".into(),
                ..inv()
            },
            "use working directory /nope: it does not exist",
        ),
        (
            Invocation {
                workdir: "/".into(),
                ..inv()
            },
            "use / as the working directory",
        ),
        (
            Invocation {
                workdir: "/proc/1".into(),
                ..inv()
            },
            "kernel filesystem",
        ),
        (
            Invocation {
                workdir: "/bin".into(),
                ..inv()
            },
            "it is a symlink",
        ),
        (
            Invocation {
                workdir: "/vmlinuz.old".into(),
                ..inv()
            },
            "it is not a directory",
        ),
        (
            Invocation {
                workdir: "/home/u/.ssh".into(),
                ..inv()
            },
            "lies under the hidden path /home/u/.ssh",
        ),
        (Invocation { args: vec![], ..inv() }, "no command to run"),
        (
            Invocation {
                rootfs: Some("/nope".into()),
                ..inv()
            },
            "use rootfs /nope (--rootfs): it is not a directory",
        ),
    ];
    for (i, want) in cases {
        let e = error(&p, &host, &i);
        assert!(e.contains(want), "got {e}, want {want}");
    }
}

#[test]
fn config_json_has_no_leftovers_of_the_sample_spec() {
    let json = serde_json::to_value(&agent().spec).unwrap();
    let linux = json["linux"].as_object().unwrap();
    for absent in ["cgroupsPath", "devices", "sysctl"] {
        assert!(!linux.contains_key(absent), "linux.{absent}");
    }
    let process = json["process"].as_object().unwrap();
    for absent in ["rlimits", "apparmorProfile", "consoleSize"] {
        assert!(!process.contains_key(absent), "process.{absent}");
    }
    assert_eq!(json["hostname"], "sandbox");
}
