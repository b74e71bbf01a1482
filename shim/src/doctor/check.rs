//! One line of `doctor`'s report, and the helpers its checks share to ask
//! programs on the machine.

/// How bad a finding is: `Fail` means the caller's usage cannot work here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Ok,
    Warn,
    Fail,
}

/// One printed line: what was checked, what was found, and what to do.
pub struct Check {
    pub status: Status,
    pub name: &'static str,
    pub found: String,
    pub fix: Option<String>,
}

impl Check {
    pub fn ok(name: &'static str, found: impl Into<String>) -> Self {
        Check {
            status: Status::Ok,
            name,
            found: found.into(),
            fix: None,
        }
    }
    pub fn warn(name: &'static str, found: impl Into<String>, fix: impl Into<String>) -> Self {
        Check {
            status: Status::Warn,
            name,
            found: found.into(),
            fix: Some(fix.into()),
        }
    }
    pub fn fail(name: &'static str, found: impl Into<String>, fix: impl Into<String>) -> Self {
        Check {
            status: Status::Fail,
            name,
            found: found.into(),
            fix: Some(fix.into()),
        }
    }

    /// `ok   seccomp: ...`, `FAIL pasta: ...; fix: ...`, one line whatever the text held.
    pub fn line(&self) -> String {
        let status = match self.status {
            Status::Ok => "ok  ",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
        };
        let mut line = format!("{status} {}: {}", self.name, self.found);
        if let Some(fix) = &self.fix {
            line.push_str("; fix: ");
            line.push_str(fix);
        }
        line.replace(['\n', '\r'], " ")
    }
}

/// The first line of a command's output (stdout, else stderr), or why it did not run.
pub fn first_line(program: &std::path::Path, args: &[&str]) -> Result<String, String> {
    let out = std::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("run {}: {e}", program.display()))?;
    let text = if out.stdout.is_empty() {
        &out.stderr
    } else {
        &out.stdout
    };
    let line = String::from_utf8_lossy(text)
        .lines()
        .next()
        .unwrap_or_default()
        .trim()
        .to_owned();
    if out.status.success() {
        Ok(line)
    } else {
        Err(format!(
            "{} {} exited with {}: {line}",
            program.display(),
            args.join(" "),
            out.status
        ))
    }
}
