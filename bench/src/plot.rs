//! **PNG plots with gnuplot**, one child module per scenario:
//!
//! - [`mdns`]: discovery time against N, one plot per loss level, ours and
//!   each peer (median with min-max bars, log scales);
//! - [`scan`]: the scan times per block size;
//! - [`soak`]: `watch`'s latency per kind of action against its bound, and
//!   the memory over the soak;
//! - [`links`]: link rates measured against iperf3's;
//! - [`footprint`]: an idle agent's memory, CPU and wake-ups beside the
//!   peers'.
//!
//! Each PNG's name starts with its scenario's (`mdns-loss5.png`,
//! `soak-memory.png`): the report puts it in that scenario's section. A
//! plot whose data the results do not hold is not drawn. [`gp`] holds what
//! the plots share (running gnuplot, the data cells, the titles).

mod footprint;
mod gp;
mod links;
pub(crate) mod mdns;
mod scan;
mod soak;

use crate::results::Results;
use anyhow::Result;
use std::path::{Path, PathBuf};

/// Writes every plot into `dir`; returns the PNG paths.
pub fn plot_all(r: &Results, dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let s = r.summaries();
    let mut pngs = mdns::plot(r, &s, dir)?;
    pngs.extend(scan::plot(r, &s, dir)?);
    pngs.extend(footprint::plot(r, &s, dir)?);
    pngs.extend(soak::plot(r, &s, dir)?);
    pngs.extend(links::plot(r, dir)?);
    Ok(pngs)
}
