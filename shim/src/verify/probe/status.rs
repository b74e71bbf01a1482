//! /proc/self/status as the probe reads it (proc(5)): the privilege fields
//! (NoNewPrivs, Seccomp, the five capability sets) and the ids.

use std::collections::BTreeMap;

use crate::verify::plan::StatusField;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcStatus {
    fields: BTreeMap<String, String>,
}

impl ProcStatus {
    pub fn parse(text: &str) -> Self {
        let fields = text
            .lines()
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
            .collect();
        Self { fields }
    }

    pub fn read_self() -> std::io::Result<Self> {
        std::fs::read_to_string("/proc/self/status").map(|t| Self::parse(&t))
    }

    pub fn raw(&self, key: &str) -> Option<&str> {
        self.fields.get(key).map(String::as_str)
    }

    /// A field's value: capability sets are hexadecimal, the others decimal.
    pub fn get(&self, field: StatusField) -> Option<u64> {
        let raw = self.raw(field.key())?;
        if field.is_mask() {
            u64::from_str_radix(raw, 16).ok()
        } else {
            raw.parse().ok()
        }
    }

    /// The real, effective, saved and filesystem ids of "Uid:" or "Gid:".
    pub fn ids(&self, key: &str) -> Option<Vec<u32>> {
        self.raw(key)?.split_whitespace().map(|v| v.parse().ok()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "Name:\tclaude-shim\nUmask:\t0022\nState:\tR (running)\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\n\
CapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapBnd:\t000001ffffffffff\n\
CapAmb:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t2\nSeccomp_filters:\t1\nSpeculation_Store_Bypass:\tthread force mitigated\n";

    #[test]
    fn reads_privilege_fields() {
        let s = ProcStatus::parse(SAMPLE);
        assert_eq!(s.get(StatusField::NoNewPrivs), Some(1));
        assert_eq!(s.get(StatusField::Seccomp), Some(2));
        assert_eq!(s.get(StatusField::CapEff), Some(0));
        assert_eq!(s.get(StatusField::CapBnd), Some(0x1ff_ffff_ffff));
        assert_eq!(s.ids("Uid"), Some(vec![0, 0, 0, 0]));
        assert_eq!(s.raw("Speculation_Store_Bypass"), Some("thread force mitigated"));
    }

    #[test]
    fn missing_or_garbled_fields_are_none() {
        let s = ProcStatus::parse("CapEff:\tzz\nSeccomp:\n");
        assert_eq!(s.get(StatusField::CapEff), None);
        assert_eq!(s.get(StatusField::Seccomp), None);
        assert_eq!(s.get(StatusField::NoNewPrivs), None);
    }

    #[test]
    fn this_process_has_a_status() {
        let s = ProcStatus::read_self().unwrap();
        assert!(s.get(StatusField::CapBnd).is_some());
        assert_eq!(s.ids("Uid").map(|v| v.len()), Some(4));
    }
}
