//! One thin function per verb: turn arguments into a runtime call and an exit code.

pub mod allow;
pub mod claude;
pub mod create;
pub mod doctor;
pub mod events;
pub mod exec;
pub mod features;
pub mod gc;
pub mod info;
pub mod manual;
pub mod quarantine;
pub mod review;
pub mod run;
pub mod sandbox;
pub mod spec;
pub mod update;
pub mod verify;
pub mod verify_peers;
