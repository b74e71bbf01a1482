//! Sizes as runc's `update` takes them (docker/go-units `RAMInBytes`): a
//! number with an optional binary unit, `50M`, `1.5g`, `512KiB`, `100 mb`;
//! `-1` for no limit. Part of the command line (`cli.rs`).

use anyhow::{bail, Result};

/// Bytes in `s`, or -1 for "no limit". Units are powers of 1024 whatever their
/// spelling (`k`, `KB`, `KiB`), as go-units reads them for memory.
pub fn parse_bytes(s: &str) -> Result<i64> {
    if s == "-1" {
        return Ok(-1);
    }
    let digits_end = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (number, rest) = s.split_at(digits_end);
    let rest = rest.strip_prefix(' ').unwrap_or(rest);
    let mut unit = rest.chars();
    let shift = match unit.next().map(|c| c.to_ascii_lowercase()) {
        None => 0,
        Some('b') if rest.len() == 1 => 0,
        Some('k') => 10,
        Some('m') => 20,
        Some('g') => 30,
        Some('t') => 40,
        Some('p') => 50,
        Some(_) => bail!("{s:?} is not a size: give bytes or a number with k, m, g, t or p"),
    };
    let tail: String = unit.collect::<String>().to_ascii_lowercase();
    if shift > 0 && !matches!(tail.as_str(), "" | "b" | "i" | "ib") {
        bail!("{s:?} is not a size: give bytes or a number with k, m, g, t or p");
    }
    let Ok(n) = number.parse::<f64>() else {
        bail!("{s:?} is not a size: give bytes or a number with k, m, g, t or p");
    };
    let bytes = n * (1u64 << shift) as f64;
    if !(0.0..=i64::MAX as f64).contains(&bytes) {
        bail!("{s:?} is out of range");
    }
    Ok(bytes as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_runc_reads_them() {
        assert_eq!(parse_bytes("52428800").unwrap(), 52_428_800);
        assert_eq!(parse_bytes("50M").unwrap(), 50 << 20);
        assert_eq!(parse_bytes("50m").unwrap(), 50 << 20);
        assert_eq!(parse_bytes("50MB").unwrap(), 50 << 20);
        assert_eq!(parse_bytes("50MiB").unwrap(), 50 << 20);
        assert_eq!(parse_bytes("50 mb").unwrap(), 50 << 20);
        assert_eq!(parse_bytes("1.5g").unwrap(), 3 << 29);
        assert_eq!(parse_bytes("512k").unwrap(), 512 << 10);
        assert_eq!(parse_bytes("7b").unwrap(), 7);
        assert_eq!(parse_bytes("-1").unwrap(), -1);
        for bad in ["", "M", "50x", "50MM", "-2", "1.2.3", "50Mx", "9999999999P"] {
            assert!(parse_bytes(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
