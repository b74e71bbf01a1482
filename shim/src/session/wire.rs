//! What `claude-shim-shell` and the session sandbox's spawner say to each
//! other over the session socket, one connection per call: the request
//! (argv, working directory, environment) as a length-prefixed JSON frame
//! whose first bytes carry the caller's stdin, stdout and stderr
//! (SCM_RIGHTS); then, from the caller, one byte per signal it was sent
//! (a signal number); from the spawner, the call's status as a shell
//! reports it (4 bytes). A closed connection ends the call.

use std::io::{IoSlice, IoSliceMut, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

use anyhow::{bail, Context, Result};
use nix::sys::socket::{recvmsg, sendmsg, ControlMessage, ControlMessageOwned, MsgFlags};
use serde::{Deserialize, Serialize};

/// A request larger than this is refused: Claude Code's commands are text
/// of a few kilobytes, the environment a few more.
pub const REQUEST_LIMIT: u32 = 8 << 20;

/// One command for the spawner to run.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
pub struct Request {
    pub argv: Vec<String>,
    pub cwd: String,
    pub env: Vec<(String, String)>,
}

/// Sends `req` with `stdio` (stdin, stdout, stderr) attached to its first bytes.
pub fn send_request(sock: &UnixStream, req: &Request, stdio: [RawFd; 3]) -> Result<()> {
    let body = serde_json::to_vec(req).context("encode the request")?;
    let len = u32::try_from(body.len())
        .ok()
        .filter(|l| *l <= REQUEST_LIMIT)
        .context("send the command: it is too large")?;
    let head = len.to_le_bytes();
    let iov = [IoSlice::new(&head)];
    let cmsg = [ControlMessage::ScmRights(&stdio)];
    let sent = sendmsg::<()>(sock.as_raw_fd(), &iov, &cmsg, MsgFlags::MSG_NOSIGNAL, None)
        .context("send the command and its stdio")?;
    if sent != head.len() {
        // A unix stream sends a 4-byte message whole or not at all.
        bail!("send the command: short write");
    }
    (&*sock).write_all(&body).context("send the command")
}

/// Receives a request and its three descriptors (close-on-exec).
pub fn receive_request(sock: &UnixStream) -> Result<(Request, [OwnedFd; 3])> {
    let mut head = [0u8; 4];
    let mut space = nix::cmsg_space!([RawFd; 3]);
    let mut fds: Vec<OwnedFd> = Vec::new();
    let got = {
        let mut iov = [IoSliceMut::new(&mut head)];
        let msg = recvmsg::<()>(
            sock.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC | MsgFlags::MSG_WAITALL,
        )
        .context("receive a command")?;
        for c in msg.cmsgs().context("read the command's descriptors")? {
            if let ControlMessageOwned::ScmRights(raw) = c {
                // SAFETY: the kernel just installed these descriptors in
                // this process; nothing else owns them.
                fds.extend(raw.into_iter().map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }));
            }
        }
        msg.bytes
    };
    if got != head.len() {
        bail!("receive a command: the connection closed");
    }
    let Ok(stdio) = <[OwnedFd; 3]>::try_from(fds) else {
        bail!("receive a command: it did not carry three descriptors");
    };
    let len = u32::from_le_bytes(head);
    if len > REQUEST_LIMIT {
        bail!("receive a command: {len} bytes is too large");
    }
    let mut body = vec![0u8; len as usize];
    (&*sock).read_exact(&mut body).context("receive a command")?;
    let req = serde_json::from_slice(&body).context("decode a command")?;
    Ok((req, stdio))
}

/// The call's status, as a shell reports it (0-255).
pub fn send_status(sock: &UnixStream, code: i32) -> Result<()> {
    (&*sock).write_all(&code.to_le_bytes()).context("report the status")
}

/// The status, or None when the spawner closed the connection first.
pub fn read_status(sock: &UnixStream) -> Result<Option<i32>> {
    let mut buf = [0u8; 4];
    let mut got = 0;
    while got < buf.len() {
        match (&*sock).read(&mut buf[got..]) {
            Ok(0) => return Ok(None),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e).context("read the command's status"),
        }
    }
    Ok(Some(i32::from_le_bytes(buf)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_crosses_with_its_descriptors() {
        let (a, b) = UnixStream::pair().unwrap();
        let req = Request {
            argv: vec!["/bin/bash".into(), "-c".into(), "echo 'a b'\n".into()],
            cwd: "/p".into(),
            env: vec![("PATH".into(), "/bin".into())],
        };
        let (r, w) = nix::unistd::pipe().unwrap();
        send_request(&a, &req, [r.as_raw_fd(), w.as_raw_fd(), w.as_raw_fd()]).unwrap();
        let (got, fds) = receive_request(&b).unwrap();
        assert_eq!(got, req);
        // The received write end reaches the same pipe.
        nix::unistd::write(&fds[1], b"x").unwrap();
        let mut buf = [0u8; 1];
        nix::unistd::read(r.as_raw_fd(), &mut buf).unwrap();
        assert_eq!(&buf, b"x");
        send_status(&b, 130).unwrap();
        assert_eq!(read_status(&a).unwrap(), Some(130));
        drop(b);
        assert_eq!(read_status(&a).unwrap(), None);
    }

    #[test]
    fn a_request_without_descriptors_is_refused() {
        let (a, b) = UnixStream::pair().unwrap();
        (&a).write_all(&2u32.to_le_bytes()).unwrap();
        (&a).write_all(b"{}").unwrap();
        let e = receive_request(&b).unwrap_err();
        assert!(format!("{e:#}").contains("three descriptors"), "{e:#}");
    }
}
