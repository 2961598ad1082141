//! `rlx-discover`: the coordinator CLI. Parses flags, starts logging and
//! calls the library.

fn main() {
    eprintln!("rlx-discover: under construction");
    std::process::exit(2);
}
