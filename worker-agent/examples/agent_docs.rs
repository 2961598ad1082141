//! Writes `rlx-agent`'s manual page and shell completions into a directory,
//! from the same clap definitions the agent parses, so they never fall
//! behind. Run at release time (`.ci/release`), not shipped as part of the
//! agent: the agent binary carries no man-page or completion generator.
//!
//! ```sh
//! cargo run -p rlx-agent --example agent_docs -- dist/share
//! # dist/share/man/man1/rlx-agent.1, dist/share/completions/{rlx-agent.bash,_rlx-agent,rlx-agent.fish}
//! ```

use clap::CommandFactory;
use clap_complete::Shell;
use rlx_agent::cli::AgentArgs;
use std::path::PathBuf;

fn main() -> std::io::Result<()> {
    let out = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "target/agent-docs".into()),
    );
    let man = out.join("man/man1");
    let comp = out.join("completions");
    std::fs::create_dir_all(&man)?;
    std::fs::create_dir_all(&comp)?;
    let mut page = Vec::new();
    clap_mangen::Man::new(AgentArgs::command()).render(&mut page)?;
    // clap's page, with ENVIRONMENT, FILES and SEE ALSO added.
    let page = rlx_agent::cli::manual::with_sections(&String::from_utf8_lossy(&page));
    std::fs::write(man.join("rlx-agent.1"), page)?;
    for (shell, name) in [
        (Shell::Bash, "rlx-agent.bash"),
        (Shell::Zsh, "_rlx-agent"),
        (Shell::Fish, "rlx-agent.fish"),
    ] {
        let mut buf = Vec::new();
        clap_complete::generate(shell, &mut AgentArgs::command(), "rlx-agent", &mut buf);
        std::fs::write(comp.join(name), buf)?;
    }
    eprintln!("wrote {} and {}", man.display(), comp.display());
    Ok(())
}
