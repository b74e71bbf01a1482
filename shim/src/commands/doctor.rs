//! `claude-shim doctor [--engines IMAGE]`: one line per check of the running
//! machine, exit 1 when something the caller's usage needs is missing.

use crate::cli::Doctor;
use crate::doctor;

pub fn doctor(args: &Doctor) -> anyhow::Result<i32> {
    let checks = doctor::run(&doctor::Options {
        engine_image: args.engines.as_deref(),
    });
    for c in &checks {
        println!("{}", c.line());
    }
    Ok(doctor::exit_code(&checks))
}
