//! A runtime that embeds discovery, as the RLX runtime would: at start-up
//! it expands the cluster file into its node list, then follows the
//! membership and prints each member as it joins, restarts, changes, has
//! its worker start or stop, or leaves. Run it only inside a network
//! namespace you created:
//!
//! ```sh
//! ip netns exec t env RLX_NETNS_GUARD=1 target/debug/examples/runtime cluster.toml --for-ms 30000
//! ```
//!
//! Output, one line each: `node ADDR DEVICE` for the expanded list, then
//! `EVENT INSTANCE ADDR` per membership event. Exit code 0 when it ran to
//! the end, 1 on an error (printed).

use rlx_discover::{expand_config, ClusterConfig, LiveWatch, Overrides, Silent, WatchOptions};
use std::time::Duration;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .ok_or_else(|| anyhow::anyhow!("usage: runtime CLUSTER.toml [--for-ms N]"))?;
    let for_ms: Option<u64> = match (args.next().as_deref(), args.next()) {
        (Some("--for-ms"), Some(n)) => Some(n.parse()?),
        (None, _) => None,
        _ => anyhow::bail!("usage: runtime CLUSTER.toml [--for-ms N]"),
    };

    // Start-up: the node list, as `rlx-discover expand` writes it.
    let cfg = ClusterConfig::load(path.as_ref())?;
    let expansion = expand_config(&cfg, &Overrides::default(), &Silent).await?;
    for n in &expansion.nodes {
        println!("node {} {}", n.addr, n.device);
    }

    // Then the membership, until told to stop.
    let section = cfg.discover.clone().unwrap_or_default();
    let stop = async move {
        match for_ms {
            Some(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
            None => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    };
    LiveWatch::start(&section, WatchOptions::default())?
        .run(stop, |e| {
            let addr = e.node.as_ref().map_or("-", |n| n.addr.as_str());
            println!("{} {} {addr}", e.event.as_str(), e.instance);
        })
        .await?;
    Ok(())
}
