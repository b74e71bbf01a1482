//! What a container's probe script reports: the shell function the script
//! calls for each probe, and its `@@NAME RC OUTPUT` lines, parsed for the tests.

use std::collections::HashMap;

/// The shell function the probe scripts use: `p NAME CMD...` prints
/// `@@NAME RC OUTPUT` on one line.
pub(crate) const PROBE_FN: &str = r#"p() { n=$1; shift; o=$(busybox timeout 20 "$@" 2>&1 </dev/null); r=$?; echo "@@$n $r $(echo $o | tr -d '\r' | tr '\n' ' ')"; }
L="/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 --library-path /usr/lib/x86_64-linux-gnu"
"#;

pub(crate) struct Probes(HashMap<String, (i32, String)>);

impl Probes {
    pub(crate) fn parse(stdout: &str) -> Self {
        let mut m = HashMap::new();
        for line in stdout.lines().filter_map(|l| l.strip_prefix("@@")) {
            let mut parts = line.splitn(3, ' ');
            let name = parts.next().unwrap().to_owned();
            let rc: i32 = parts.next().unwrap_or("-1").parse().unwrap_or(-1);
            m.insert(name, (rc, parts.next().unwrap_or_default().to_owned()));
        }
        Probes(m)
    }

    pub(crate) fn get(&self, name: &str) -> &(i32, String) {
        self.0
            .get(name)
            .unwrap_or_else(|| panic!("probe {name} did not run: {:?}", self.0))
    }

    /// Succeeded and printed `want`.
    pub(crate) fn reached(&self, name: &str, want: &str) {
        let (rc, out) = self.get(name);
        assert!(
            *rc == 0 && out.contains(want),
            "probe {name} should reach {want}: rc {rc}, {out:?}"
        );
    }

    /// Failed, and no test server answered.
    pub(crate) fn blocked(&self, name: &str) {
        let (rc, out) = self.get(name);
        assert!(
            *rc != 0 && !out.contains("hello-"),
            "probe {name} should be blocked: rc {rc}, {out:?}"
        );
    }

    /// Answered by the proxy with `status` and `why`, and no test server answered.
    pub(crate) fn refused_with(&self, name: &str, status: &str, why: &str) {
        let (_, out) = self.get(name);
        assert!(
            out.contains(status) && out.contains(why) && !out.contains("hello-"),
            "probe {name} should be refused with {status} ({why:?}): {out:?}"
        );
    }

    /// Failed with `want` in its output.
    pub(crate) fn failed_with(&self, name: &str, want: &str) {
        let (rc, out) = self.get(name);
        assert!(
            *rc != 0 && out.contains(want),
            "probe {name} should fail with {want:?}: rc {rc}, {out:?}"
        );
    }
}
