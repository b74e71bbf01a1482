//! `create`, `start`, `kill`, `delete`: the OCI lifecycle verbs.

use anyhow::Result;

use crate::runtime::{CreateRequest, Runtime};

pub fn create(rt: &Runtime, args: &liboci_cli::Create) -> Result<i32> {
    let req = CreateRequest {
        id: &args.container_id,
        bundle: &args.bundle,
        pid_file: args.pid_file.as_deref(),
        console_socket: args.console_socket.as_deref(),
        preserve_fds: args.preserve_fds,
        no_pivot: args.no_pivot,
        stdio: None,
    };
    rt.create(req, &crate::admin::apply)?;
    rt.hand_over()?;
    Ok(0)
}

pub fn start(rt: &Runtime, args: &liboci_cli::Start) -> Result<i32> {
    rt.start(&args.container_id)?;
    Ok(0)
}

pub fn kill(rt: &Runtime, args: &crate::cli::Kill) -> Result<i32> {
    rt.kill(&args.container_id, &args.signal, args.all)?;
    Ok(0)
}

pub fn delete(rt: &Runtime, args: &liboci_cli::Delete) -> Result<i32> {
    rt.delete(&args.container_id, args.force)?;
    Ok(0)
}

pub fn pause(rt: &Runtime, id: &str) -> Result<i32> {
    rt.pause(id)?;
    Ok(0)
}

pub fn resume(rt: &Runtime, id: &str) -> Result<i32> {
    rt.resume(id)?;
    Ok(0)
}
