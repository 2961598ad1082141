//! **Link measurement, the agent's side** — answers a coordinator's
//! `{"rlx":"measure",...}` request on the handshake port: a challenge, the
//! coordinator's proof when this agent holds a cluster key, then the round
//! trips, the upload it receives and the download it sends
//! ([`rlx_proto::handshake::measure`] has the messages and why).
//!
//! The bounds hold whatever the request says: the agent grants at most its
//! hard limits (bytes and milliseconds per direction), refuses an upload
//! longer or larger than granted, and runs one measurement at a time (a
//! second is refused as busy, so two coordinators' tests do not measure
//! each other). The lock is taken only after the proof verified, so a
//! stranger cannot hold it.

use rlx_proto::handshake::measure::{
    error_line, parse_request, receive, send_for, verify_request, AgentLimits, Challenge, Prove,
    Ready, MEASURE_VERSION,
};
use rlx_proto::handshake::{endpoint_text, Binding, Nonce, DRAIN_GRACE, MAX_HELLO_BYTES};
use rlx_proto::keys::Key;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::Mutex;
use tokio::time::{timeout_at, Instant};

/// The one-at-a-time lock of a server's measurements.
pub type Busy = Arc<Mutex<()>>;

/// The refusal of a second measurement while one runs.
pub const BUSY: &str = "busy: a link measurement is already running on this agent (one at a \
                        time, so that two tests do not measure each other); try again when it ends";

/// Serves one measurement whose request `line` was read from `conn`.
/// `step` bounds every wait for the coordinator's next line or byte; the
/// transfers are bounded by the granted windows plus [`DRAIN_GRACE`].
/// Returns what happened, for the debug log; every refusal is also sent.
pub async fn serve(
    mut conn: BufReader<TcpStream>,
    line: &[u8],
    key: Option<&Key>,
    busy: &Busy,
    on: &Binding,
    step: Duration,
) -> Result<String, String> {
    let req = match parse_request(line) {
        Ok(r) => r,
        Err(why) => return refuse(&mut conn, why).await,
    };
    let nonce = match Nonce::random() {
        Ok(n) => n,
        Err(why) => return refuse(&mut conn, why).await,
    };
    let challenge = Challenge {
        rlx: "challenge".into(),
        v: MEASURE_VERSION,
        nonce: nonce.to_hex(),
        local: endpoint_text(on.local),
        peer: endpoint_text(on.peer),
        keyed: key.is_some(),
        limits: AgentLimits::default(),
    };
    send(&mut conn, challenge.line().as_bytes()).await?;
    let prove_line = read_line(&mut conn, Instant::now() + step).await?;
    let prove: Prove = match serde_json::from_slice::<Prove>(prove_line.trim_ascii_end()) {
        Ok(p) if p.rlx == "prove" => p,
        _ => {
            let why = "expected {\"rlx\":\"prove\",\"proof\":\"<64 hex>\"} after the challenge";
            return refuse(&mut conn, why.into()).await;
        }
    };
    if let Some(k) = key {
        let why = match prove.proof.as_deref() {
            None => Some(
                "this agent holds a cluster key and measures links only for key holders: \
                 the request carries no proof (give the coordinator the cluster's key_file)",
            ),
            Some(p) if !verify_request(k, &nonce, &challenge.local, &challenge.peer, line, p) => {
                Some(
                    "the proof does not verify under this agent's cluster key (the \
                     coordinator holds another key, or something in between changed the request)",
                )
            }
            Some(_) => None,
        };
        if let Some(why) = why {
            return refuse(&mut conn, why.into()).await;
        }
    }
    let Ok(_held) = Arc::clone(busy).try_lock_owned() else {
        return refuse(&mut conn, BUSY.into()).await;
    };
    let g = req.granted();
    send(&mut conn, Ready::line(g).as_bytes()).await?;

    for i in 0..g.pings {
        let mut b = [0u8; 1];
        match timeout_at(Instant::now() + step, conn.read_exact(&mut b)).await {
            Ok(Ok(_)) => send(&mut conn, &b).await?,
            _ => return Err(format!("round trip {} of {} did not come", i + 1, g.pings)),
        }
    }
    let up_deadline = Instant::now() + step + Duration::from_millis(g.up_ms) + DRAIN_GRACE;
    // Ends the upload as soon as its rate is steady: the figures line is
    // the coordinator's signal to stop sending; what it had in flight is
    // read and dropped below.
    let meter = match receive(&mut conn, g.up_bytes, up_deadline, true).await {
        Ok(m) => m,
        Err(why) => return refuse(&mut conn, format!("upload refused: {why}")).await,
    };
    let up = meter.result();
    let up_line = format!(
        "{{\"rlx\":\"up\",{}\n",
        &serde_json::to_string(&up).expect("serializes")[1..]
    );
    send(&mut conn, up_line.as_bytes()).await?;
    let rest = g.up_bytes - meter.total();
    if let Err(why) = receive(&mut conn, rest, up_deadline, false).await {
        return refuse(&mut conn, format!("upload refused: {why}")).await;
    }
    let down_deadline = Instant::now() + Duration::from_millis(g.down_ms) + DRAIN_GRACE;
    // The coordinator closes the connection once the download's rate is
    // steady: a failed write after that is the end, not an error.
    let sent = match send_for(conn.get_mut(), g.down_bytes, g.down_ms, down_deadline).await {
        Ok(n) => n.to_string(),
        Err(why) => format!("some (the coordinator ended it: {why})"),
    };
    let _ = conn.get_mut().shutdown().await;
    Ok(format!(
        "measured: {} round trips, {} bytes up ({:.0} Mbit/s), {sent} bytes down",
        g.pings,
        up.bytes,
        up.mbps()
    ))
}

async fn send(conn: &mut BufReader<TcpStream>, b: &[u8]) -> Result<(), String> {
    conn.get_mut()
        .write_all(b)
        .await
        .map_err(|e| format!("write failed: {e}"))
}

/// Sends the refusal and closes; the reason goes to the log too.
async fn refuse(conn: &mut BufReader<TcpStream>, why: String) -> Result<String, String> {
    let _ = conn.get_mut().write_all(error_line(&why).as_bytes()).await;
    let _ = conn.get_mut().shutdown().await;
    Err(format!("refused a link measurement: {why}"))
}

async fn read_line(conn: &mut BufReader<TcpStream>, by: Instant) -> Result<Vec<u8>, String> {
    let mut line = Vec::new();
    let mut limited = conn.take(MAX_HELLO_BYTES as u64 + 1);
    match timeout_at(by, limited.read_until(b'\n', &mut line)).await {
        Err(_) => Err("no answer to the challenge in time".into()),
        Ok(Err(e)) => Err(format!("read failed: {e}")),
        Ok(Ok(_)) if line.len() > MAX_HELLO_BYTES => Err(format!(
            "a line longer than {MAX_HELLO_BYTES} bytes; dropped"
        )),
        Ok(Ok(_)) => Ok(line),
    }
}

#[cfg(test)]
mod tests;
