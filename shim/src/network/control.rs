//! The control channel of a running allowlist sandbox: `claude-shim allow`
//! and `deny` on the host reach its proxy through a unix socket in the
//! container's state directory (<state>/control.sock) and change its lists at
//! once. One JSON line each way.
//!
//! Nothing inside a sandbox may use it. The socket lies in the runtime's
//! state directory, which no sandbox sees by default (/run is a private
//! tmpfs in every sandbox, /run/user is masked), but a `--root` elsewhere
//! may be visible read-only, and a read-only mount does not stop a connect.
//! So the proxy checks each peer: its uid must be the runtime's or root's
//! (SO_PEERCRED), and its network namespace the one the runtime started
//! the sandbox from (SO_NETNS_COOKIE of the accepted socket, which the
//! kernel makes in the connecting socket's namespace): every sandbox has a
//! network namespace of its own. The client checks the other way: the
//! socket's directory must belong to it (or root) and be writable by no one
//! else, so a socket planted there is not taken for the proxy.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::policy::change::Op;

/// The socket's name in the container's state directory.
pub const SOCKET: &str = "control.sock";
/// A request or reply is one line, at most this long.
const MAX_LINE: u64 = 64 * 1024;
const TIMEOUT: Duration = Duration::from_secs(5);
/// SO_NETNS_COOKIE (Linux 5.14), asm-generic's number (x86_64, aarch64);
/// the libc crate does not export it.
const SO_NETNS_COOKIE: libc::c_int = 71;

/// What `allow` and `deny` ask of the proxy.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    pub op: Op,
    pub entry: String,
}

/// The proxy's answer: the lists it now holds and what the change did, or why it refused.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Reply {
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub said: String,
    #[serde(default)]
    pub allow: Vec<String>,
    #[serde(default)]
    pub deny: Vec<String>,
}

/// The cookie of the network namespace `fd` was made in.
fn netns_cookie(fd: &impl AsFd) -> std::io::Result<u64> {
    let mut cookie: u64 = 0;
    let mut len = std::mem::size_of::<u64>() as libc::socklen_t;
    // SAFETY: a u64 out-parameter of the size passed.
    let r = unsafe {
        libc::getsockopt(
            fd.as_fd().as_raw_fd(),
            libc::SOL_SOCKET,
            SO_NETNS_COOKIE,
            (&mut cookie as *mut u64).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(cookie)
}

/// The proxy's side: the listening socket and whom it serves.
pub struct Server {
    listener: UnixListener,
    /// The runtime's uid (root's is served too).
    owner: u32,
    /// The network namespace the proxy (and the runtime before it) runs in.
    netns: u64,
}

impl Server {
    /// Binds <state_dir>/control.sock; called before the proxy drops its
    /// privileges, as the runtime's user. The path goes through the
    /// directory's descriptor so that a long state directory fits in sun_path.
    pub fn bind(state_dir: &Path) -> Result<Self> {
        let dir = std::fs::File::open(state_dir).with_context(|| format!("open {}", state_dir.display()))?;
        let at = format!("/proc/self/fd/{}/{SOCKET}", dir.as_raw_fd());
        let _ = std::fs::remove_file(&at);
        let listener = UnixListener::bind(&at).with_context(|| format!("bind {}", state_dir.join(SOCKET).display()))?;
        let netns = netns_cookie(&listener).context("read the network namespace of the control socket")?;
        Ok(Self {
            listener,
            owner: nix::unistd::geteuid().as_raw(),
            netns,
        })
    }

    /// Serves requests one at a time until the process ends: `handle`
    /// applies a request for a peer of uid `uid` and answers it.
    pub fn serve(self, handle: impl Fn(&Request, u32) -> Reply) {
        loop {
            let (stream, _) = match self.listener.accept() {
                Ok(c) => c,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                }
            };
            let _ = stream.set_read_timeout(Some(TIMEOUT));
            let _ = stream.set_write_timeout(Some(TIMEOUT));
            // Read before the peer is judged, so that a refused peer reads
            // why rather than a reset connection.
            let request = read_line(&stream)
                .map_err(|e| e.to_string())
                .and_then(|line| serde_json::from_str::<Request>(&line).map_err(|e| e.to_string()));
            let reply = match (self.peer_ok(&stream), request) {
                (Err(why), _) => Reply {
                    error: Some(why),
                    ..Reply::default()
                },
                (Ok(_), Err(e)) => Reply {
                    error: Some(format!("read the request: {e}")),
                    ..Reply::default()
                },
                (Ok(uid), Ok(req)) => handle(&req, uid),
            };
            let _ = write_line(&stream, &reply);
        }
    }

    /// The peer's uid, if it is the runtime's user or root and not inside a
    /// sandbox (another network namespace than ours).
    fn peer_ok(&self, stream: &UnixStream) -> Result<u32, String> {
        use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
        let cred = getsockopt(stream, PeerCredentials).map_err(|e| format!("read the peer's credentials: {e}"))?;
        let uid = cred.uid();
        if uid != self.owner && uid != 0 {
            return Err(format!(
                "uid {uid} may not change this sandbox's network policy (only uid {} or root)",
                self.owner
            ));
        }
        match netns_cookie(stream) {
            Ok(n) if n == self.netns => Ok(uid),
            Ok(_) => Err("the network policy is changed from the host only, not from a sandbox".to_owned()),
            Err(e) => Err(format!("read the peer's network namespace: {e}")),
        }
    }
}

fn read_line(stream: &UnixStream) -> std::io::Result<String> {
    let mut line = String::new();
    BufReader::new(stream.take(MAX_LINE)).read_line(&mut line)?;
    Ok(line)
}

fn write_line<T: Serialize>(mut stream: &UnixStream, value: &T) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(value).map_err(std::io::Error::other)?;
    line.push(b'\n');
    stream.write_all(&line)
}

/// The client's side: sends `req` to the proxy whose state directory is
/// `state_dir` and returns its reply (an error when it refused).
pub fn send(state_dir: &Path, req: &Request) -> Result<Reply> {
    let me = nix::unistd::geteuid().as_raw();
    let meta = std::fs::metadata(state_dir).with_context(|| format!("open {}", state_dir.display()))?;
    if meta.uid() != me && meta.uid() != 0 {
        bail!(
            "use {}: it belongs to uid {}, not to you or root",
            state_dir.display(),
            meta.uid()
        );
    }
    if meta.mode() & 0o022 != 0 {
        bail!("use {}: others may write it", state_dir.display());
    }
    let dir = std::fs::File::open(state_dir).with_context(|| format!("open {}", state_dir.display()))?;
    let at = format!("/proc/self/fd/{}/{SOCKET}", dir.as_raw_fd());
    let stream = UnixStream::connect(&at).with_context(|| {
        format!(
            "reach the proxy at {} (is the sandbox still running?)",
            state_dir.join(SOCKET).display()
        )
    })?;
    stream.set_read_timeout(Some(TIMEOUT))?;
    stream.set_write_timeout(Some(TIMEOUT))?;
    write_line(&stream, req).context("send the change to the proxy")?;
    let line = read_line(&stream).context("read the proxy's answer")?;
    if line.is_empty() {
        bail!("the proxy closed the connection without an answer");
    }
    let reply: Reply = serde_json::from_str(&line).map_err(|e| anyhow!("read the proxy's answer: {e}"))?;
    if let Some(e) = reply.error {
        bail!("the proxy refused the change: {e}");
    }
    Ok(reply)
}
