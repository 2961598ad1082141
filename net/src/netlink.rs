//! **Netlink replies, walked once** — the framing every netlink dump this
//! crate reads shares (`nlmsghdr`, 4-byte aligned messages, `NLMSG_DONE`,
//! `NLMSG_ERROR`), so the neighbour table ([`crate::neighbour6`]) and the
//! listening sockets ([`crate::listening`]) parse only their own payloads.

/// Bytes of `struct nlmsghdr`.
pub(crate) const NLMSG_HDR: usize = 16;
/// `NLMSG_ERROR` and `NLMSG_DONE`.
pub(crate) const NLMSG_ERROR: u16 = 2;
pub(crate) const NLMSG_DONE: u16 = 3;

/// How one read of a dump ended.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct End {
    /// Whether the dump ended (`NLMSG_DONE`, or an error) in it.
    pub(crate) done: bool,
    /// An `NLMSG_ERROR` the kernel sent instead (a negative errno).
    pub(crate) error: Option<i32>,
}

/// The `u16` at `i` of `b`, in host byte order (netlink's).
pub(crate) fn u16_at(b: &[u8], i: usize) -> u16 {
    u16::from_ne_bytes([b[i], b[i + 1]])
}

/// The `u32` at `i` of `b`, in host byte order.
pub(crate) fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_ne_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

/// Calls `each(type, message)` for every whole message of `buf` other than
/// `NLMSG_DONE` and `NLMSG_ERROR` (the message with its header, so offsets
/// start at 0), and says how the read ended. A truncated message ends the
/// walk: the rest of the buffer cannot be framed.
pub(crate) fn walk(buf: &[u8], mut each: impl FnMut(u16, &[u8])) -> End {
    let mut end = End::default();
    let mut at = 0;
    while at + NLMSG_HDR <= buf.len() {
        let len = u32_at(buf, at) as usize;
        if len < NLMSG_HDR || at + len > buf.len() {
            break;
        }
        let msg = &buf[at..at + len];
        match u16_at(msg, 4) {
            NLMSG_DONE => end.done = true,
            NLMSG_ERROR if len >= NLMSG_HDR + 4 => {
                let errno = u32_at(msg, NLMSG_HDR) as i32;
                if errno != 0 {
                    end.error = Some(errno);
                }
                end.done = true;
            }
            t => each(t, msg),
        }
        at += (len + 3) & !3;
    }
    end
}
