//! The helpers' event logs (<state>/network.log of the watch, proxy.log of
//! the proxy and its API gateway): one JSON line per event, stamped with the
//! time and the container. Below the helpers that write them.

use std::fs;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::Mutex;

use anyhow::{Context, Result};
use serde_json::{json, Value};

/// One JSON line per event, appended to the log file.
pub struct Log {
    container: String,
    file: Mutex<fs::File>,
}

impl Log {
    pub fn open(path: &Path, container: &str) -> Result<Self> {
        let file = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(path)
            .with_context(|| format!("open {}", path.display()))?;
        Ok(Self {
            container: container.to_owned(),
            file: Mutex::new(file),
        })
    }

    pub fn write(&self, mut fields: Value) {
        fields["time"] = json!(chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
        fields["container"] = json!(self.container);
        let line = format!("{fields}\n");
        if let Ok(mut f) = self.file.lock() {
            // One write per line: lines from many threads never interleave.
            let _ = f.write_all(line.as_bytes());
        }
    }
}
