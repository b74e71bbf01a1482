//! The probes that run inside each sandbox (`claude-shim-bench __probe ...`;
//! the binary is static, so it runs in any rootfs): a syscall loop, a timer
//! around one workload command, and the two ends of a TCP transfer. Each
//! measures only its own phase with the monotonic clock and prints one line
//! per figure, which `parse` reads back on the harness side.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// The file `stat` and `open` use: present in every rootfs the harness builds
/// (the host's /usr, read-only) and on the host.
const PROBE_FILE: &std::ffi::CStr = c"/usr/bin/true";

/// The environment every workload runs with, identical under every runtime and
/// on the host, so that no runtime's defaults (HOME, locale, git config) change
/// what the workload does.
pub fn workload_env(tmp: &Path) -> Vec<(String, String)> {
    vec![
        ("PATH".into(), "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin".into()),
        ("HOME".into(), tmp.display().to_string()),
        ("TMPDIR".into(), tmp.display().to_string()),
        ("LC_ALL".into(), "C".into()),
        ("GIT_CONFIG_NOSYSTEM".into(), "1".into()),
        ("GIT_CONFIG_GLOBAL".into(), "/dev/null".into()),
        ("GIT_OPTIONAL_LOCKS".into(), "0".into()),
    ]
}

#[derive(clap::Args, Debug)]
pub struct ProbeArgs {
    #[command(subcommand)]
    pub what: Probe,
}

#[derive(clap::Subcommand, Debug)]
pub enum Probe {
    /// Loop getppid, stat, open+close and write to /dev/null; print ns per call
    Syscalls {
        /// Time spent on each syscall, in milliseconds
        #[arg(long, default_value_t = 200)]
        budget_ms: u64,
    },
    /// Run a command with the fixed workload environment; print its wall time
    Time {
        #[arg(long)]
        cwd: PathBuf,
        /// TMPDIR and HOME of the workload
        #[arg(long)]
        tmp: PathBuf,
        #[arg(trailing_var_arg = true, required = true)]
        argv: Vec<String>,
    },
    /// Accept transfers and acknowledge each (with --once: until one succeeds)
    Sink {
        #[arg(long)]
        listen: SocketAddr,
        #[arg(long)]
        once: bool,
    },
    /// Send BYTES to a sink and print the time from the first byte to its acknowledgement
    Source {
        #[arg(long)]
        connect: String,
        #[arg(long)]
        bytes: u64,
        /// Reach the sink through this HTTP CONNECT proxy (host:port)
        #[arg(long)]
        proxy: Option<String>,
        /// How long to retry until the sink says ready, in milliseconds
        #[arg(long, default_value_t = 10000)]
        patience_ms: u64,
    },
}

pub fn run(args: &ProbeArgs) -> Result<i32> {
    match &args.what {
        Probe::Syscalls { budget_ms } => syscalls(Duration::from_millis(*budget_ms)),
        Probe::Time { cwd, tmp, argv } => {
            let ns = time_command(cwd, tmp, argv)?;
            println!("elapsed_ns {ns}");
            Ok(0)
        }
        Probe::Sink { listen, once } => {
            let l = TcpListener::bind(listen).with_context(|| format!("listen on {listen}"))?;
            loop {
                let (s, _) = l.accept().with_context(|| format!("accept on {listen}"))?;
                if *once {
                    // A forwarded port can hand over a connection the source has
                    // already given up on (it retries until ready): wait for the next.
                    match sink_one(s) {
                        Ok(()) => return Ok(0),
                        Err(e) => eprintln!("claude-shim-bench: failed to receive a transfer: {e:#}"),
                    }
                    continue;
                }
                // A source that never closes must not hold up the next one.
                std::thread::spawn(move || {
                    if let Err(e) = sink_one(s) {
                        eprintln!("claude-shim-bench: failed to receive a transfer: {e:#}");
                    }
                });
            }
        }
        Probe::Source {
            connect,
            bytes,
            proxy,
            patience_ms,
        } => {
            let (n, ns) = source(connect, *bytes, proxy.as_deref(), Duration::from_millis(*patience_ms))?;
            println!("transfer {n} {ns}");
            Ok(0)
        }
    }
}

/// Calls `f` in growing batches until `budget` is spent; ns per call and calls made.
fn per_call(budget: Duration, mut f: impl FnMut()) -> (f64, u64) {
    for _ in 0..100 {
        f();
    }
    let mut batch = 64u64;
    let mut calls = 0u64;
    let mut spent = Duration::ZERO;
    while spent < budget {
        let t0 = Instant::now();
        for _ in 0..batch {
            f();
        }
        spent += t0.elapsed();
        calls += batch;
        batch = (batch * 2).min(65536);
    }
    (spent.as_nanos() as f64 / calls as f64, calls)
}

fn die(what: &str) -> ! {
    let e = std::io::Error::last_os_error();
    eprintln!("claude-shim-bench: failed to {what}: {e}");
    std::process::exit(1);
}

fn syscalls(budget: Duration) -> Result<i32> {
    // SAFETY: plain libc calls on valid, NUL-terminated paths and a stat
    // buffer of the right type; failures end the probe (a filter that blocks
    // a syscall must not be measured as a fast one).
    let (ns, n) = per_call(budget, || unsafe {
        libc::getppid();
    });
    println!("syscall getppid {ns:.1} {n}");
    let (ns, n) = per_call(budget, || unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::stat(PROBE_FILE.as_ptr(), &mut st) != 0 {
            die("stat /usr/bin/true");
        }
    });
    println!("syscall stat {ns:.1} {n}");
    let (ns, n) = per_call(budget, || unsafe {
        let fd = libc::open(PROBE_FILE.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            die("open /usr/bin/true");
        }
        libc::close(fd);
    });
    println!("syscall open_close {ns:.1} {n}");
    // SAFETY: as above.
    let null = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
    if null < 0 {
        die("open /dev/null");
    }
    let byte = [0u8; 1];
    let (ns, n) = per_call(budget, || unsafe {
        if libc::write(null, byte.as_ptr().cast(), 1) != 1 {
            die("write /dev/null");
        }
    });
    println!("syscall write_devnull {ns:.1} {n}");
    Ok(0)
}

/// Wall time of one command in ns, from spawn to exit; a failure is an error.
pub fn time_command(cwd: &Path, tmp: &Path, argv: &[String]) -> Result<u64> {
    let Some((prog, rest)) = argv.split_first() else {
        bail!("time a workload: no command given");
    };
    std::fs::create_dir_all(tmp).with_context(|| format!("create {}", tmp.display()))?;
    let mut cmd = Command::new(prog);
    cmd.args(rest)
        .current_dir(cwd)
        .env_clear()
        .envs(workload_env(tmp))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    let t0 = Instant::now();
    let status = cmd.status().with_context(|| format!("run {prog}"))?;
    let ns = t0.elapsed().as_nanos() as u64;
    if !status.success() {
        bail!("run workload {argv:?} in {}: it exited with {status}", cwd.display());
    }
    Ok(ns)
}

const READY: u8 = b'R';
const ACK: u8 = b'A';
const CHUNK: usize = 256 * 1024;

/// One transfer: say ready, read a length and that many bytes, acknowledge,
/// then wait for the source to close first: pasta 2023-03 hangs a connection
/// whose container side closes first (NOTES.md), and the sink may be the
/// container's side (host -> container).
fn sink_one(mut s: TcpStream) -> Result<()> {
    s.write_all(&[READY]).context("send ready")?;
    let mut len = [0u8; 8];
    s.read_exact(&mut len).context("read the length")?;
    let mut left = u64::from_be_bytes(len);
    let mut buf = vec![0u8; CHUNK];
    while left > 0 {
        let want = buf.len().min(left as usize);
        let n = s.read(&mut buf[..want]).context("read data")?;
        if n == 0 {
            bail!("the source closed with {left} bytes still due");
        }
        left -= n as u64;
    }
    s.write_all(&[ACK]).context("send the acknowledgement")?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let _ = s.read(&mut buf[..1]);
    Ok(())
}

fn connect_ready(target: &str, proxy: Option<&str>, patience: Duration) -> Result<TcpStream> {
    let deadline = Instant::now() + patience;
    loop {
        match try_connect_ready(target, proxy) {
            Ok(s) => return Ok(s),
            // A forwarded port (pasta -t) accepts before the sink inside listens; retry.
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => return Err(e),
        }
    }
}

fn try_connect_ready(target: &str, proxy: Option<&str>) -> Result<TcpStream> {
    let first = proxy.unwrap_or(target);
    let addr = first
        .to_socket_addrs()
        .with_context(|| format!("resolve {first}"))?
        .next()
        .with_context(|| format!("resolve {first}: no address"))?;
    let mut s =
        TcpStream::connect_timeout(&addr, Duration::from_secs(5)).with_context(|| format!("connect to {first}"))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.set_nodelay(true)?;
    if proxy.is_some() {
        write!(s, "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").context("send CONNECT")?;
        let mut head = Vec::new();
        let mut b = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            if s.read(&mut b).context("read the proxy's answer")? == 0 {
                bail!("proxy {first} closed before answering CONNECT {target}");
            }
            head.push(b[0]);
            if head.len() > 8192 {
                bail!("proxy {first} sent an answer head over 8 KiB");
            }
        }
        let status = String::from_utf8_lossy(&head);
        let line = status.lines().next().unwrap_or_default().to_owned();
        if line.split_whitespace().nth(1) != Some("200") {
            bail!("proxy {first} refused CONNECT {target}: {line}");
        }
    }
    let mut r = [0u8; 1];
    let n = s.read(&mut r).with_context(|| format!("read ready from {target}"))?;
    if n != 1 || r[0] != READY {
        bail!("sink {target} closed without saying ready");
    }
    Ok(s)
}

/// Sends `bytes` to the sink at `target`; (bytes, ns from the first byte to the acknowledgement).
pub fn source(target: &str, bytes: u64, proxy: Option<&str>, patience: Duration) -> Result<(u64, u64)> {
    let mut s = connect_ready(target, proxy, patience)?;
    // Generous for 1 Gbit/s; pasta 2023-03 sometimes loses data on its spliced
    // loopback path, and that transfer must fail, not hang the run.
    s.set_read_timeout(Some(
        Duration::from_secs(10) + Duration::from_nanos(bytes.saturating_mul(8)),
    ))?;
    let buf = vec![0x5au8; CHUNK];
    let t0 = Instant::now();
    s.write_all(&bytes.to_be_bytes()).context("send the length")?;
    let mut left = bytes;
    while left > 0 {
        let n = buf.len().min(left as usize);
        s.write_all(&buf[..n]).with_context(|| format!("send to {target}"))?;
        left -= n as u64;
    }
    let mut ack = [0u8; 1];
    s.read_exact(&mut ack)
        .with_context(|| format!("read the acknowledgement from {target}"))?;
    let ns = t0.elapsed().as_nanos() as u64;
    if ack[0] != ACK {
        bail!("sink {target} acknowledged with {:?}", ack[0]);
    }
    Ok((bytes, ns))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transfer_over_loopback_is_acknowledged() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let t = std::thread::spawn(move || sink_one(l.accept().unwrap().0));
        let (n, ns) = source(&addr.to_string(), 3 * CHUNK as u64 + 17, None, Duration::from_secs(2)).unwrap();
        assert_eq!(n, 3 * CHUNK as u64 + 17);
        assert!(ns > 0);
        t.join().unwrap().unwrap();
    }

    #[test]
    fn a_failing_workload_is_an_error() {
        let tmp = tempfile::tempdir().unwrap();
        let e = time_command(tmp.path(), tmp.path(), &["/bin/false".into()]).unwrap_err();
        assert!(e.to_string().contains("exited with"), "{e}");
        assert!(time_command(tmp.path(), tmp.path(), &["/bin/true".into()]).unwrap() > 0);
    }
}
