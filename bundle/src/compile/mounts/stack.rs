//! The mounts the filesystem pass has stacked so far, with their layers,
//! indexed by destination: the passes ask which mounts lie over a path
//! (those at the path or above it) once per entry of lists that run to tens
//! of thousands (`protected`, `readonly`), so each question looks up the
//! path's ancestors instead of scanning every mount.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use oci_spec::runtime::Mount;

/// The order among mounts of equal depth: a later layer goes on top.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) enum Layer {
    Base,
    /// The empty home: over the host's tree, under the binds into it.
    Home,
    Bind,
    Protected,
    Hidden,
}

#[derive(Default)]
pub(super) struct Stack {
    list: Vec<(Layer, Mount)>,
    /// Destination -> positions in `list`, in the order they were pushed.
    by_dest: HashMap<PathBuf, Vec<usize>>,
}

impl Stack {
    pub(super) fn push(&mut self, layer: Layer, m: Mount) {
        self.by_dest
            .entry(m.destination().clone())
            .or_default()
            .push(self.list.len());
        self.list.push((layer, m));
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &(Layer, Mount)> {
        self.list.iter()
    }

    /// Whether some mount has `dest` as its destination.
    pub(super) fn has_dest(&self, dest: &Path) -> bool {
        self.by_dest.contains_key(dest)
    }

    /// The mounts whose destination is `p` or one of its ancestors, each
    /// with its position (the order the passes pushed them in).
    pub(super) fn over<'s>(&'s self, p: &'s Path) -> impl Iterator<Item = (usize, &'s (Layer, Mount))> + 's {
        p.ancestors()
            .filter_map(|a| self.by_dest.get(a))
            .flatten()
            .map(|&i| (i, &self.list[i]))
    }

    /// Drops the mounts of layers other than `keep` whose destination is in `dests`.
    pub(super) fn drop_at(&mut self, dests: &HashSet<PathBuf>, keep: Layer) {
        let list = std::mem::take(&mut self.list);
        self.by_dest.clear();
        for (layer, m) in list {
            if layer == keep || !dests.contains(m.destination()) {
                self.push(layer, m);
            }
        }
    }

    pub(super) fn into_vec(self) -> Vec<(Layer, Mount)> {
        self.list
    }
}

#[cfg(test)]
mod tests {
    use oci_spec::runtime::MountBuilder;

    use super::*;

    fn bind(dest: &str) -> Mount {
        MountBuilder::default()
            .destination(dest)
            .typ("bind")
            .source(dest)
            .build()
            .unwrap()
    }

    #[test]
    fn over_finds_the_mounts_at_a_path_and_above_it_only() {
        let mut s = Stack::default();
        s.push(Layer::Base, bind("/usr"));
        s.push(Layer::Bind, bind("/usr/lib"));
        s.push(Layer::Protected, bind("/usr/lib"));
        s.push(Layer::Bind, bind("/usr/libexec"));
        s.push(Layer::Bind, bind("/usr/lib/x/y"));
        let over: Vec<(usize, Layer)> = {
            let mut v: Vec<_> = s.over(Path::new("/usr/lib/x")).map(|(i, (l, _))| (i, *l)).collect();
            v.sort();
            v
        };
        assert_eq!(over, vec![(0, Layer::Base), (1, Layer::Bind), (2, Layer::Protected)]);
        assert!(s.has_dest(Path::new("/usr/libexec")));
        assert!(!s.has_dest(Path::new("/usr/lib/x")));
        let drop: HashSet<PathBuf> = [PathBuf::from("/usr/lib")].into();
        s.drop_at(&drop, Layer::Base);
        let left: Vec<&Path> = s.iter().map(|(_, m)| m.destination().as_path()).collect();
        assert_eq!(left, ["/usr", "/usr/libexec", "/usr/lib/x/y"].map(Path::new));
        assert_eq!(s.over(Path::new("/usr/lib/x/y/z")).count(), 2);
    }
}
