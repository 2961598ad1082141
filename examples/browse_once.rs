//! One-shot mDNS browse printed as JSON, for tests and the benchmark until
//! `rlx-discover browse --json` is wired. Run it only inside a network
//! namespace you created:
//!
//! ```sh
//! ip netns exec t env RLX_NETNS_GUARD=1 target/debug/examples/browse_once --interface lo --browse-ms 2000
//! ```
//!
//! Flags: `--interface NAME` (repeatable), `--browse-ms N`,
//! `--no-early-stop`. Exit code 0 when the browse ran, 2 when it could not.

use rlx_discover::mdns::{browse, browse_json, BrowseOptions};
use std::time::{Duration, Instant};

fn main() -> std::process::ExitCode {
    let started = Instant::now();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let mut opts = BrowseOptions::default();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--interface" => opts.interfaces.push(args.next().expect("--interface NAME")),
            "--browse-ms" => {
                let n: u64 = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--browse-ms N");
                opts.browse = Duration::from_millis(n);
            }
            "--no-early-stop" => opts.early_stop = false,
            other => {
                eprintln!("unknown argument {other:?}");
                return std::process::ExitCode::from(2);
            }
        }
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    match rt.block_on(browse(&opts, started)) {
        Ok(b) => {
            println!("{}", browse_json(&b));
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::from(2)
        }
    }
}
