//! **The agent's side of the handshake**: one hello line in, the reply line
//! or the refusal out. The agent reads the line (at most
//! [`MAX_HELLO_BYTES`](super::MAX_HELLO_BYTES)) and writes the result.

use super::messages::{parse_hello, reply_line_signed, reply_line_v1_signed, Binding, HelloError};
use crate::caps::NodeCaps;
use crate::identity::NodeKey;
use crate::keys::Key;

/// Everything an agent does with one hello line: the reply line to send, or
/// the reason to refuse (send [`HelloError::to_line`] and close).
///
/// An agent in a cluster (`caps.cluster`) refuses a hello that names another
/// one, so a coordinator of the neighbouring cluster does not get its caps.
/// A hello that names no cluster is answered (older coordinators, scripts),
/// and an agent without a cluster answers every hello: the coordinator
/// applies its own filter to the caps it gets. This is a filter against
/// mix-ups, not security: anyone can put any name in a hello.
///
/// `on` is the connection the hello came on: a version 2 (or later) hello
/// gets a version 2 reply whose proof binds it, so the proof is worth
/// nothing on another connection (a relay's). A version 1 hello, from a
/// coordinator that predates the binding, gets the version 1 reply it
/// understands; a coordinator of this version holding a key refuses that.
pub fn answer(
    hello: &[u8],
    caps: &NodeCaps,
    key: Option<&Key>,
    on: &Binding,
) -> Result<String, HelloError> {
    answer_signed(hello, caps, key, None, on)
}

/// [`answer`] for an agent with its own node key: the reply carries the
/// public key in its caps and the key's signature beside the proof, with
/// or without a cluster key.
pub fn answer_signed(
    hello: &[u8],
    caps: &NodeCaps,
    key: Option<&Key>,
    node: Option<&NodeKey>,
    on: &Binding,
) -> Result<String, HelloError> {
    let hello = parse_hello(hello)?;
    if let (Some(wanted), Some(mine)) = (&hello.cluster, &caps.cluster) {
        if wanted != mine {
            return Err(HelloError::other_cluster(mine, wanted));
        }
    }
    Ok(if hello.v == 1 {
        reply_line_v1_signed(&hello.nonce, caps, key, node)
    } else {
        reply_line_signed(&hello.nonce, caps, key, node, on)
    })
}
