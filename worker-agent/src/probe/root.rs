//! **Where /proc and /sys live** — every file the probe reads goes through a
//! [`Root`], so tests point it at a checked-in fixture tree instead of this
//! machine (the approach of Kubernetes' node-feature-discovery).
//!
//! A fixture is an ordinary directory: `fixtures/amd/sys/class/drm/card0/...`
//! stands for `/sys/class/drm/card0/...`. Symlinks inside a fixture are read
//! with [`std::fs::read_link`] and only their last component is used (a PCI
//! address, a driver name), so a link never escapes the tree.

use std::fs;
use std::path::{Path, PathBuf};

/// The directory that stands for `/` while probing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root(PathBuf);

impl Default for Root {
    fn default() -> Self {
        Root(PathBuf::from("/"))
    }
}

impl Root {
    /// A root at `path` (`/` for this machine, a fixture tree in tests).
    pub fn new(path: impl Into<PathBuf>) -> Root {
        Root(path.into())
    }

    /// True when this is the real `/`, i.e. the machine we run on.
    pub fn is_host(&self) -> bool {
        self.0 == Path::new("/")
    }

    /// The root directory itself.
    pub fn dir(&self) -> &Path {
        &self.0
    }

    /// Maps an absolute machine path (`/sys/class/net`) into the root.
    pub fn path(&self, abs: impl AsRef<Path>) -> PathBuf {
        let abs = abs.as_ref();
        self.0.join(abs.strip_prefix("/").unwrap_or(abs))
    }

    /// Reads a small text file, trimmed; `None` when it is missing or
    /// unreadable. Probing is best-effort: a file the kernel does not provide
    /// (an old kernel, a permission-restricted DMI field) means "unknown".
    pub fn read(&self, abs: impl AsRef<Path>) -> Option<String> {
        let p = self.path(abs);
        match fs::read_to_string(&p) {
            Ok(s) => Some(s.trim().to_string()),
            Err(e) => {
                tracing::trace!(path = %p.display(), error = %e, "not readable");
                None
            }
        }
    }

    /// Reads a decimal number (`mem_info_vram_total`).
    pub fn read_u64(&self, abs: impl AsRef<Path>) -> Option<u64> {
        self.read(abs)?.parse().ok()
    }

    /// Reads a `0x`-prefixed hex number (`vendor`, `class` in sysfs).
    pub fn read_hex(&self, abs: impl AsRef<Path>) -> Option<u32> {
        let s = self.read(abs)?;
        u32::from_str_radix(s.trim_start_matches("0x"), 16).ok()
    }

    /// The last component of a symlink's target (`.../drivers/amdgpu` gives
    /// `amdgpu`), without following it.
    pub fn link_name(&self, abs: impl AsRef<Path>) -> Option<String> {
        let target = fs::read_link(self.path(abs)).ok()?;
        Some(target.file_name()?.to_string_lossy().into_owned())
    }

    /// Entry names of a directory, sorted so that output does not depend on
    /// the file system's order; empty when it does not exist.
    pub fn list(&self, abs: impl AsRef<Path>) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(self.path(abs))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// Whether a path exists in the root (a symlink counts even if dangling,
    /// since fixtures keep links whose targets are not part of the tree).
    pub fn exists(&self, abs: impl AsRef<Path>) -> bool {
        fs::symlink_metadata(self.path(abs)).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absolute_machine_paths_land_inside_the_root() {
        let r = Root::new("/tmp/fx");
        assert_eq!(
            r.path("/sys/class/net"),
            PathBuf::from("/tmp/fx/sys/class/net")
        );
        assert_eq!(
            Root::default().path("/proc/meminfo"),
            PathBuf::from("/proc/meminfo")
        );
        assert!(Root::default().is_host());
        assert!(!r.is_host());
    }

    #[test]
    fn sysfs_hex_values_parse_with_or_without_prefix() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("vendor"), "0x10de\n").unwrap();
        fs::write(dir.path().join("class"), "030200\n").unwrap();
        let r = Root::new(dir.path());
        assert_eq!(r.read_hex("/vendor"), Some(0x10de));
        assert_eq!(r.read_hex("/class"), Some(0x030200));
        assert_eq!(r.read_hex("/missing"), None);
    }
}
