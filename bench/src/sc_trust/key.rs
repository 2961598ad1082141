//! **The cluster key of a trust case**: `rlx-discover keygen`, shared by
//! the cases of [`super`] (its own module, so that the cases, which the
//! scenario calls, do not also import the scenario).

use crate::ctx::Ctx;
use anyhow::{Context, Result};
use std::process::Command;

/// Writes a new cluster key to `path` with `rlx-discover keygen`.
pub(super) fn keygen(ctx: &Ctx, path: &std::path::Path) -> Result<()> {
    let out = Command::new(&ctx.bins.discover)
        .arg("keygen")
        .arg(path)
        .output()
        .context("rlx-discover keygen")?;
    anyhow::ensure!(
        out.status.success(),
        "rlx-discover keygen {} failed: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}
