//! **The plain data the probe's parts hand each other** — defined apart from
//! the code that produces it, so that the Linux reader ([`super::host`]) and
//! the macOS one ([`super::apple`]) can both build it without either
//! importing the other.

/// RAM as the kernel reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Memory {
    /// Bytes of RAM.
    pub total: u64,
    /// Bytes a new process can allocate without swapping.
    pub avail: u64,
}
