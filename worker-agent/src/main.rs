//! `rlx-agent`: runs on every box of an RLX cluster.

fn main() {
    eprintln!("rlx-agent: under construction");
    std::process::exit(2);
}
