//! **Files kept across restarts in the state directory** (the random node
//! id, the cached GFLOP/s): written so that a reader, or the next start after
//! a crash, never sees half of one.

use std::path::Path;

/// Writes a small file so that readers never see half of it: a temporary
/// file beside it, then a rename.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}
