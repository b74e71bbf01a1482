# Reads cargo test's output (hack/test's log) and prints one line per failed
# test binary: what reruns it (cargo's `-p CRATE --test NAME`), then its failed
# tests, e.g. `-p claude-shim-e2e --test sandbox (a_test, another)`. A binary
# that died without a result (a crash) is listed without tests.
/^failures:$/ { n = 0; listing = 1; next }
listing && /^    [^ ]+$/ { names[++n] = substr($0, 5); next }
/^test result: FAILED/ {
  failed = ""
  for (i = 1; i <= n; i++) failed = failed (i > 1 ? ", " : "") names[i]
  listing = 0; n = 0; next
}
/^test result: / { listing = 0; n = 0; failed = ""; next }
/^error: test failed, to rerun pass `/ {
  target = $0
  sub(/^[^`]*`/, "", target); sub(/`.*$/, "", target)
  print target (failed != "" ? " (" failed ")" : "")
  failed = ""
}
