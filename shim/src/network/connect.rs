//! `__connect HOST PORT`, run inside an allowlist sandbox as ssh's
//! ProxyCommand: one TCP stream to HOST:PORT through the sandbox's SOCKS5
//! proxy, relayed over stdin and stdout. The sandbox has no route out, so
//! this is how `git clone git@allowed-host:...` gets there, and the proxy
//! still decides (an allow entry `host:22`, or `*:22`). Plain std: it runs
//! under the sandbox's seccomp filter and capabilities, needing neither.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::Duration;

use anyhow::{bail, Context, Result};

use super::proxy::SOCKS_PORT;
use super::wire::{socks_connect_request, SOCKS_NOT_ALLOWED};

pub use claude_shim_bundle::{git_ssh_command, CONNECT_PATH};

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

pub fn run(host: &str, port: u16) -> Result<i32> {
    let proxy = SocketAddr::from(([127, 0, 0, 1], SOCKS_PORT));
    let target = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    let mut s = TcpStream::connect(proxy).with_context(|| format!("reach the sandbox's proxy at {proxy}"))?;
    s.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
    let mut reply = [0u8; 2];
    s.write_all(&[5, 1, 0])
        .and_then(|_| s.read_exact(&mut reply))
        .with_context(|| format!("greet the proxy at {proxy}"))?;
    if reply != [5, 0] {
        bail!("the proxy at {proxy} answered the greeting with {reply:?}");
    }
    let request = socks_connect_request(host, port).map_err(|e| anyhow::anyhow!("connect to {target}: {e}"))?;
    let mut answer = [0u8; 10];
    s.write_all(&request)
        .and_then(|_| s.read_exact(&mut answer))
        .with_context(|| format!("ask the proxy for {target}"))?;
    match answer[1] {
        0 => {}
        // Read after "failed to": the verb first.
        SOCKS_NOT_ALLOWED => bail!(
            "reach {target}: the sandbox's network policy refuses it (allow it as {target}, or *:{port} for \
             every allowed host; from the host, while this sandbox runs: claude-shim allow {target})"
        ),
        code => bail!("reach {target}: the proxy could not (SOCKS reply {code})"),
    }
    s.set_read_timeout(None)?;
    relay(s)?;
    Ok(0)
}

/// stdin to the stream until EOF (then a half-close), the stream to stdout
/// until the peer closes.
fn relay(s: TcpStream) -> Result<()> {
    let mut up = s.try_clone().context("clone the proxy stream")?;
    let sender = std::thread::spawn(move || {
        let _ = io::copy(&mut io::stdin().lock(), &mut up);
        let _ = up.shutdown(Shutdown::Write);
    });
    let mut down = s;
    let mut out = io::stdout().lock();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match down.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if out.write_all(&buf[..n]).and_then(|_| out.flush()).is_err() {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e).context("read from the proxy"),
        }
    }
    // The peer is done: ssh has what it needs; stdin may stay open forever.
    drop(sender);
    Ok(())
}
