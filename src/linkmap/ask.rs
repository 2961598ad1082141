//! **Asking one agent to measure another**, with the one retry worth
//! making: a busy agent is asked again a few times.

use rlx_proto::handshake::measure::is_busy;
use rlx_proto::handshake::measure_peer::{measure_peer, PeerRequest, PeerResult};
use rlx_proto::handshake::MeasureError;
use std::net::SocketAddr;
use std::time::Duration;

/// Tries a busy agent again a few times: the measurement before it (of
/// this map, the agent's previous path, or another coordinator's) ends
/// within the agent's hold limit, and usually a moment after the client
/// has its figures, while the agent's last bytes drain.
pub(super) async fn measured(
    agent: SocketAddr,
    key: &rlx_proto::keys::Key,
    req: &PeerRequest,
    timeout: Duration,
) -> Result<PeerResult, MeasureError> {
    let mut wait = Duration::from_millis(100);
    loop {
        match measure_peer(agent, key, req, timeout).await {
            Err(MeasureError::Refused { why, .. }) if is_busy(&why) && wait < BUSY_GIVE_UP => {
                tokio::time::sleep(wait).await;
                wait *= 2;
            }
            other => return other,
        }
    }
}

/// After waits of 0.1, 0.2, ... 1.6 s (3.1 s in all), a busy agent is
/// reported busy.
const BUSY_GIVE_UP: Duration = Duration::from_millis(3200);
