//! Parsers of what tools and the kernel print: `--version` lines, runsc's flag
//! listing, /proc/loadavg, /proc/PID/smaps_rollup, and the probe's own output
//! lines. Each is unit-tested on output saved from the real tool.

use std::collections::BTreeMap;

use serde::Serialize;

/// A tool's version as its `--version` says, with the `key: value` lines
/// that follow (runc's commit, spec, go and libseccomp, for example).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct ToolVersion {
    /// None when the tool does not say (pasta from Debian 12 prints "unknown version").
    pub version: Option<String>,
    pub fields: BTreeMap<String, String>,
}

/// Reads `NAME version X`, `NAME X`, `NAME (distro) X` first lines, then `key: value` lines.
pub fn version(output: &str) -> ToolVersion {
    let mut lines = output.lines().filter(|l| !l.trim().is_empty());
    let first = lines.next().unwrap_or_default();
    let tokens: Vec<&str> = first.split_whitespace().collect();
    let version = match tokens.iter().position(|t| *t == "version") {
        // "runc version 1.1.5+ds1"; "pasta unknown version" has nothing after it.
        Some(i) if i + 1 < tokens.len() => Some(tokens[i + 1].to_owned()),
        Some(_) => None,
        // "bubblewrap 0.8.0", "gcc (Debian 12.2.0-14) 12.2.0", "GNU Make 4.3": the last token that reads as a number.
        None => tokens
            .iter()
            .skip(1)
            .rev()
            .find(|t| t.chars().next().is_some_and(|c| c.is_ascii_digit()))
            .map(|t| (*t).to_owned()),
    };
    let version = version.filter(|v| v != "unknown");
    let mut fields = BTreeMap::new();
    for line in lines {
        if let Some((k, v)) = line.split_once(':') {
            let k = k.trim();
            if !k.is_empty() && !k.contains(' ') {
                fields.insert(k.to_owned(), v.trim().to_owned());
            }
        }
    }
    ToolVersion { version, fields }
}

/// The default of `-platform` in `runsc flags` ("... (default \"ptrace\")").
pub fn runsc_default_platform(flags_output: &str) -> Option<String> {
    let mut lines = flags_output.lines();
    while let Some(line) = lines.next() {
        if line.trim_start().starts_with("-platform ") {
            let help = lines.next().unwrap_or_default();
            let start = help.rfind("(default \"")? + "(default \"".len();
            let end = help[start..].find('"')? + start;
            return Some(help[start..end].to_owned());
        }
    }
    None
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LoadAvg {
    pub one: f64,
    pub five: f64,
    pub fifteen: f64,
    pub running: u32,
    pub total: u32,
}

/// /proc/loadavg: "0.52 0.58 0.59 2/345 12345" (proc(5)).
pub fn loadavg(s: &str) -> Option<LoadAvg> {
    let f: Vec<&str> = s.split_whitespace().collect();
    if f.len() < 4 {
        return None;
    }
    let (running, total) = f[3].split_once('/')?;
    Some(LoadAvg {
        one: f[0].parse().ok()?,
        five: f[1].parse().ok()?,
        fifteen: f[2].parse().ok()?,
        running: running.parse().ok()?,
        total: total.parse().ok()?,
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
pub struct Memory {
    pub rss_kib: u64,
    pub pss_kib: u64,
}

/// /proc/PID/smaps_rollup: the `Rss:` and `Pss:` lines, in kB (proc(5)).
pub fn smaps_rollup(s: &str) -> Option<Memory> {
    let field = |name: &str| -> Option<u64> {
        let line = s.lines().find(|l| l.starts_with(name))?;
        let rest = line[name.len()..].trim();
        let num = rest.split_whitespace().next()?;
        num.parse().ok()
    };
    Some(Memory {
        rss_kib: field("Rss:")?,
        pss_kib: field("Pss:")?,
    })
}

/// The syscall probe's lines: `syscall NAME NS_PER_OP ITERATIONS`.
pub fn probe_syscalls(s: &str) -> Result<Vec<(String, f64)>, String> {
    let mut out = Vec::new();
    for line in s.lines().filter(|l| l.starts_with("syscall ")) {
        let f: Vec<&str> = line.split_whitespace().collect();
        let [_, name, ns, _iters] = f[..] else {
            return Err(format!("probe line {line:?} is not `syscall NAME NS ITERATIONS`"));
        };
        let ns: f64 = ns
            .parse()
            .map_err(|_| format!("probe line {line:?}: {ns:?} is not a number"))?;
        out.push((name.to_owned(), ns));
    }
    if out.is_empty() {
        return Err(format!("no `syscall` line in the probe's output {:?}", s.trim()));
    }
    Ok(out)
}

/// The timing probe's line: `elapsed_ns N`.
pub fn probe_elapsed(s: &str) -> Result<f64, String> {
    let line = s
        .lines()
        .find(|l| l.starts_with("elapsed_ns "))
        .ok_or_else(|| format!("no `elapsed_ns` line in the probe's output {:?}", s.trim()))?;
    line["elapsed_ns ".len()..]
        .trim()
        .parse::<u64>()
        .map(|n| n as f64)
        .map_err(|_| format!("probe line {line:?} is not `elapsed_ns N`"))
}

/// The transfer probe's line: `transfer BYTES NS`.
pub fn probe_transfer(s: &str) -> Result<(u64, u64), String> {
    let line = s
        .lines()
        .find(|l| l.starts_with("transfer "))
        .ok_or_else(|| format!("no `transfer` line in the probe's output {:?}", s.trim()))?;
    let f: Vec<&str> = line.split_whitespace().collect();
    match f[..] {
        [_, bytes, ns] => match (bytes.parse(), ns.parse()) {
            (Ok(b), Ok(n)) => Ok((b, n)),
            _ => Err(format!("probe line {line:?} is not `transfer BYTES NS`")),
        },
        _ => Err(format!("probe line {line:?} is not `transfer BYTES NS`")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Saved from the Debian 12 packages on the development machine.
    const RUNC: &str =
        "runc version 1.1.5+ds1\ncommit: 1.1.5+ds1-1+deb12u1\nspec: 1.0.2-dev\ngo: go1.19.8\nlibseccomp: 2.5.4\n";
    const CRUN: &str = "crun version 1.8.1\ncommit: f8a096be060b22ccd3d5f3ebe44108517fbf6c30\nrundir: /run/crun\nspec: 1.0.0\n+SYSTEMD +SELINUX +APPARMOR +CAP +SECCOMP +EBPF +YAJL\n";
    const RUNSC: &str = "runsc version 0.0~20221219.0\nspec: 1.0.2-dev\n";
    const BWRAP: &str = "bubblewrap 0.8.0\n";
    const PASTA: &str = "pasta unknown version\nCopyright Red Hat\nGNU Affero GPL version 3 or later <https://www.gnu.org/licenses/agpl-3.0.html>\nThis is free software: you are free to change and redistribute it.\nThere is NO WARRANTY, to the extent permitted by law.\n";
    const PASTA_NEW: &str = "pasta 2024_08_21.1d6142f\nCopyright Red Hat\n";
    const SHIM: &str = "claude-shim version 0.1.0\nspec: 1.0.2-dev\nlibcontainer: 0.7.0\nlibseccomp: 2.5.4\n";
    const GCC: &str = "gcc (Debian 12.2.0-14+deb12u1) 12.2.0\nCopyright (C) 2022 Free Software Foundation, Inc.\n";
    const GIT: &str = "git version 2.47.3\n";
    const MAKE: &str = "GNU Make 4.3\nBuilt for x86_64-pc-linux-gnu\n";

    #[test]
    fn runc_version_and_fields() {
        let v = version(RUNC);
        assert_eq!(v.version.as_deref(), Some("1.1.5+ds1"));
        assert_eq!(v.fields["commit"], "1.1.5+ds1-1+deb12u1");
        assert_eq!(v.fields["libseccomp"], "2.5.4");
        assert_eq!(v.fields["go"], "go1.19.8");
    }

    #[test]
    fn crun_version_ignores_the_feature_line() {
        let v = version(CRUN);
        assert_eq!(v.version.as_deref(), Some("1.8.1"));
        assert_eq!(v.fields["rundir"], "/run/crun");
        assert_eq!(v.fields.len(), 3);
    }

    #[test]
    fn runsc_version() {
        let v = version(RUNSC);
        assert_eq!(v.version.as_deref(), Some("0.0~20221219.0"));
        assert_eq!(v.fields["spec"], "1.0.2-dev");
    }

    #[test]
    fn bwrap_version_has_no_version_word() {
        assert_eq!(version(BWRAP).version.as_deref(), Some("0.8.0"));
    }

    #[test]
    fn pasta_unknown_version_is_none_and_a_dated_one_is_read() {
        let v = version(PASTA);
        assert_eq!(v.version, None);
        assert!(v.fields.is_empty(), "{:?}", v.fields);
        assert_eq!(version(PASTA_NEW).version.as_deref(), Some("2024_08_21.1d6142f"));
    }

    #[test]
    fn claude_shim_gcc_git_make_versions() {
        assert_eq!(version(SHIM).version.as_deref(), Some("0.1.0"));
        assert_eq!(version(SHIM).fields["libcontainer"], "0.7.0");
        assert_eq!(version(GCC).version.as_deref(), Some("12.2.0"));
        assert_eq!(version(GIT).version.as_deref(), Some("2.47.3"));
        assert_eq!(version(MAKE).version.as_deref(), Some("4.3"));
        assert_eq!(version("").version, None);
    }

    #[test]
    fn runsc_flags_default_platform() {
        let flags = "  -platform string\n    \tspecifies which platform to use: ptrace (default), kvm. (default \"ptrace\")\n  -platform_device_path string\n";
        assert_eq!(runsc_default_platform(flags).as_deref(), Some("ptrace"));
        let newer = "  -platform string\n    \tspecifies which platform to use: systrap (default), ptrace, kvm. (default \"systrap\")\n";
        assert_eq!(runsc_default_platform(newer).as_deref(), Some("systrap"));
        assert_eq!(runsc_default_platform("  -network value\n"), None);
    }

    #[test]
    fn loadavg_fields() {
        let l = loadavg("3.61 2.67 2.85 4/120 31618\n").unwrap();
        assert_eq!(
            (l.one, l.five, l.fifteen, l.running, l.total),
            (3.61, 2.67, 2.85, 4, 120)
        );
        assert_eq!(loadavg("garbage"), None);
    }

    #[test]
    fn smaps_rollup_rss_and_pss() {
        let s = "557eb8822000-7ffe9d458000 ---p 00000000 00:00 0                          [rollup]\n\
Rss:                1616 kB\nPss:                 209 kB\nPss_Dirty:           112 kB\nPss_Anon:            112 kB\n\
Pss_File:             97 kB\nShared_Clean:       1464 kB\nSwap:                  0 kB\nSwapPss:               0 kB\n";
        assert_eq!(
            smaps_rollup(s),
            Some(Memory {
                rss_kib: 1616,
                pss_kib: 209
            })
        );
        assert_eq!(smaps_rollup(""), None);
    }

    #[test]
    fn probe_lines() {
        let out = "syscall getppid 61.2 1000000\nsyscall stat 402.9 100000\n";
        assert_eq!(
            probe_syscalls(out).unwrap(),
            vec![("getppid".to_owned(), 61.2), ("stat".to_owned(), 402.9)]
        );
        assert!(probe_syscalls("").is_err());
        assert!(probe_syscalls("syscall getppid fast 1\n").is_err());
        assert_eq!(probe_elapsed("elapsed_ns 12345\n").unwrap(), 12345.0);
        assert!(probe_elapsed("elapsed_ns -1\n").is_err());
        assert_eq!(
            probe_transfer("transfer 1048576 2000000\n").unwrap(),
            (1048576, 2000000)
        );
        assert!(probe_transfer("transfer 1\n").is_err());
    }
}
