//! **Interface and address change notifications** — the agent's name for
//! [`rlx_net::links`], where the platform-specific part lives (netlink on
//! Linux, the route socket on macOS, mdns-sd's poll elsewhere).

pub use rlx_net::links::LinkChanges;
