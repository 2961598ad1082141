//! **What listens on the worker port** — the scan's identification of a
//! listener no agent vouched for. Defined in [`rlx_net::identify`], where
//! `rlx-agent` uses the same rules on its own worker port.

pub(crate) use rlx_net::identify::identify;
pub use rlx_net::identify::Identity;
