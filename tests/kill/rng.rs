//! Where the kills fall: a seeded generator, its seed from CLAUDE_SHIM_KILL_SEED
//! or the clock, so a run can be replayed.

/// xorshift64* (Vigna), as bench/src/workloads.rs: reproducible from its seed.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

pub(crate) fn seed() -> u64 {
    if let Ok(s) = std::env::var("CLAUDE_SHIM_KILL_SEED") {
        let s = s.trim();
        let parsed = match s.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16),
            None => s.parse(),
        };
        return parsed.expect("CLAUDE_SHIM_KILL_SEED is a number (decimal or 0x hex)");
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    (nanos ^ ((std::process::id() as u64) << 32)) | 1
}
