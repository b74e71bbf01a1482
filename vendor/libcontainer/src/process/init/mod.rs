mod context;
pub mod error;
mod no_pivot;
pub mod process;

pub use process::container_init_process;

type Result<T> = std::result::Result<T, error::InitProcessError>;
