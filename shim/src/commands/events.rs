//! `events [--stats] [--interval D] ID`: runc's event stream of a running
//! container (runtime/events.rs): one stats event and exit with `--stats`;
//! otherwise a stats event every interval (runc's default 5s) and an oom
//! event as soon as the OOM killer acts, until the container stops.

use std::io::Write;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::runtime::events::{oom_kills, Event};
use crate::runtime::Runtime;

/// How often the stream looks for OOM kills and for the container's end.
const TICK: Duration = Duration::from_millis(100);

pub fn events(rt: &Runtime, args: &crate::cli::Events) -> Result<i32> {
    let id = args.container_id.as_str();
    let interval = parse_duration(&args.interval)?;
    let (path, systemd) = rt.events_cgroup(id)?;
    let mut out = std::io::stdout().lock();
    let mut emit = |e: &Event| -> Result<()> {
        writeln!(out, "{}", serde_json::to_string(e)?)?;
        out.flush().context("write an event")
    };
    if args.stats {
        let data = rt.stats(id, &path, systemd)?;
        emit(&Event {
            kind: "stats",
            id,
            data: Some(data),
        })?;
        return Ok(0);
    }
    let mut ooms = oom_kills(&path).unwrap_or(0);
    let mut next = Instant::now();
    while rt.still_running(id) {
        if let Some(n) = oom_kills(&path) {
            for _ in ooms..n {
                emit(&Event {
                    kind: "oom",
                    id,
                    data: None,
                })?;
            }
            ooms = ooms.max(n);
        }
        if Instant::now() >= next {
            // As runc: a failed reading is logged and the stream goes on.
            match rt.stats(id, &path, systemd) {
                Ok(data) => emit(&Event {
                    kind: "stats",
                    id,
                    data: Some(data),
                })?,
                Err(e) => tracing::error!("{e:#}"),
            }
            next = Instant::now() + interval;
        }
        std::thread::sleep(TICK.min(interval));
    }
    Ok(0)
}

/// A Go duration as runc's `--interval` takes it: `5s`, `100ms`, `1m30s`, `1.5s`.
pub fn parse_duration(text: &str) -> Result<Duration> {
    let mut total = 0f64;
    let mut rest = text.trim();
    if rest.is_empty() {
        bail!("parse duration {text:?}: empty");
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let unit_len = rest[digits..]
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len() - digits);
        let (number, unit) = (&rest[..digits], &rest[digits..digits + unit_len]);
        let n: f64 = number
            .parse()
            .with_context(|| format!("parse duration {text:?}: {number:?} is not a number"))?;
        let scale = match unit {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            u => bail!("parse duration {text:?}: unknown unit {u:?}"),
        };
        total += n * scale;
        rest = &rest[digits + unit_len..];
    }
    if total <= 0.0 {
        bail!("parse duration {text:?}: duration must be greater than 0");
    }
    Ok(Duration::from_secs_f64(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_go_writes_them() {
        assert_eq!(parse_duration("5s").unwrap(), Duration::from_secs(5));
        assert_eq!(parse_duration("100ms").unwrap(), Duration::from_millis(100));
        assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        for bad in ["", "5", "5x", "0s"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
