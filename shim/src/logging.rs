//! Logging through `tracing`, in runc's two shapes: logrus text
//! (`time="..." level=warning msg="..."`) and logrus JSON
//! (`{"level":"error","msg":"...","time":"..."}`). containerd shows a user only
//! error lines of that JSON shape, so the shape is kept exactly.

use std::fmt::Write as _;
use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::Path;
use std::sync::Mutex;

use anyhow::{Context, Result};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context as LayerContext, Layer};
use tracing_subscriber::prelude::*;

use crate::cli::LogFormat;

/// Where log lines go and in which shape.
pub struct LogSink {
    format: LogFormat,
    to_stderr: bool,
    out: Mutex<Box<dyn Write + Send>>,
}

impl LogSink {
    fn write_line(&self, level: Level, msg: &str) {
        let line = render(self.format, self.to_stderr, level, msg, &now());
        if let Ok(mut out) = self.out.lock() {
            // A log line that cannot be written must not turn into a second error.
            let _ = out.write_all(line.as_bytes());
            let _ = out.flush();
        }
    }
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// logrus's names for the levels.
fn level_name(level: Level) -> &'static str {
    match level {
        Level::ERROR => "error",
        Level::WARN => "warning",
        Level::INFO => "info",
        Level::DEBUG => "debug",
        Level::TRACE => "trace",
    }
}

/// One log line. Text lines for a person reading stderr are plain
/// (`claude-shim: error: ...`, `claude-shim: warning: ...`: tools and engines
/// look for the word, as in runc's `level=error`); text lines in a log file are logrus text.
pub fn render(format: LogFormat, to_stderr: bool, level: Level, msg: &str, time: &str) -> String {
    match format {
        LogFormat::Json => {
            // Keys in logrus's (sorted) order.
            let value = serde_json::json!({ "level": level_name(level), "msg": msg, "time": time });
            format!("{value}\n")
        }
        LogFormat::Text if to_stderr => {
            // A message may quote what a sandbox named (a path, a host).
            let msg = crate::terminal::escaped(msg);
            match level {
                Level::ERROR => format!("claude-shim: error: {msg}\n"),
                Level::WARN => format!("claude-shim: warning: {msg}\n"),
                _ => format!("claude-shim: {}: {msg}\n", level_name(level)),
            }
        }
        LogFormat::Text => {
            format!("time=\"{time}\" level={} msg={}\n", level_name(level), quote(msg))
        }
    }
}

/// logrus quotes a value that holds anything but plain characters.
fn quote(s: &str) -> String {
    let plain = !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-._/@^+".contains(c));
    if plain {
        s.to_owned()
    } else {
        format!("{s:?}")
    }
}

struct MessageVisitor {
    message: String,
    fields: String,
}

impl Visit for MessageVisitor {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            let _ = write!(self.fields, " {}={}", field.name(), value);
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            let _ = write!(self.fields, " {}={:?}", field.name(), value);
        }
    }
}

struct SinkLayer {
    sink: &'static LogSink,
    debug: bool,
}

impl<S: Subscriber> Layer<S> for SinkLayer {
    fn enabled(&self, metadata: &tracing::Metadata<'_>, _: LayerContext<'_, S>) -> bool {
        let ours = metadata.target().starts_with("claude_shim");
        if self.debug {
            *metadata.level() <= Level::DEBUG
        } else {
            // libcontainer logs its own errors before returning them; claude-shim
            // reports each failure once, so the library's lines show only with --debug.
            ours && *metadata.level() <= Level::WARN
        }
    }

    fn on_event(&self, event: &Event<'_>, _: LayerContext<'_, S>) {
        let mut visitor = MessageVisitor {
            message: String::new(),
            fields: String::new(),
        };
        event.record(&mut visitor);
        let mut msg = visitor.message;
        msg.push_str(&visitor.fields);
        self.sink.write_line(*event.metadata().level(), &msg);
    }
}

/// Installs the subscriber; returns the sink so the final error can be written to it.
pub fn init(log: Option<&Path>, format: LogFormat, debug: bool) -> Result<&'static LogSink> {
    let (out, to_stderr): (Box<dyn Write + Send>, bool) = match log {
        Some(path) if path != Path::new("/dev/stderr") => {
            let file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("open log file {}", path.display()))?;
            (Box::new(file), false)
        }
        _ => (Box::new(io::stderr()), true),
    };
    let sink: &'static LogSink = Box::leak(Box::new(LogSink {
        format,
        to_stderr,
        out: Mutex::new(out),
    }));
    tracing_subscriber::registry().with(SinkLayer { sink, debug }).init();
    Ok(sink)
}

/// Reports the error that ends the command: into the log, and, when the log is
/// a file, once more on stderr for the person or engine that ran us.
pub fn report_error(sink: Option<&LogSink>, msg: &str) {
    match sink {
        Some(sink) => {
            sink.write_line(Level::ERROR, msg);
            if !sink.to_stderr {
                eprintln!("claude-shim: error: {msg}");
            }
        }
        None => eprintln!("claude-shim: error: {msg}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_line_has_runc_shape() {
        let line = render(
            LogFormat::Json,
            false,
            Level::ERROR,
            "failed to x: \"y\"",
            "2026-01-02T03:04:05Z",
        );
        assert_eq!(
            line,
            "{\"level\":\"error\",\"msg\":\"failed to x: \\\"y\\\"\",\"time\":\"2026-01-02T03:04:05Z\"}\n"
        );
        let parsed: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(parsed.as_object().unwrap().len(), 3);
    }

    #[test]
    fn text_line_has_logrus_shape() {
        let line = render(
            LogFormat::Text,
            false,
            Level::WARN,
            "clamped rlimit",
            "2026-01-02T03:04:05Z",
        );
        assert_eq!(
            line,
            "time=\"2026-01-02T03:04:05Z\" level=warning msg=\"clamped rlimit\"\n"
        );
        let line = render(LogFormat::Text, false, Level::INFO, "plain", "T");
        assert_eq!(line, "time=\"T\" level=info msg=plain\n");
    }

    #[test]
    fn stderr_text_is_plain() {
        assert_eq!(
            render(LogFormat::Text, true, Level::ERROR, "failed to x", "T"),
            "claude-shim: error: failed to x\n"
        );
        assert_eq!(
            render(
                LogFormat::Text,
                true,
                Level::WARN,
                "remove /w/\u{1b}]0;T\u{7}: busy",
                "T"
            ),
            "claude-shim: warning: remove /w/\\u{1b}]0;T\\u{7}: busy\n"
        );
    }
}
