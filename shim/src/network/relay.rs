//! Bytes both ways between two TCP streams until both sides are done, a
//! half-close passed on: the proxy's tunnels and the published ports'
//! connections. Below both.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};

/// Copies both ways until both sides are done; a half-close is passed on.
pub fn tunnel(client: TcpStream, upstream: TcpStream) {
    let _ = client.set_read_timeout(None);
    let (Ok(c2), Ok(u2)) = (client.try_clone(), upstream.try_clone()) else {
        return;
    };
    let up = std::thread::Builder::new()
        .stack_size(128 * 1024)
        .spawn(move || copy_then_shutdown(c2, u2));
    copy_then_shutdown(upstream, client);
    if let Ok(h) = up {
        let _ = h.join();
    }
}

pub fn copy_then_shutdown(mut from: TcpStream, mut to: TcpStream) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    let _ = from.shutdown(Shutdown::Read);
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}
