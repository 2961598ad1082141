//! **One TCP connection to a DNS server, and what it answered** — queries
//! pipelined on the connection (RFC 7766 §6.2.1.1), a zone transfer, and the
//! pool every answered record goes into.

use super::rules::{MAX_INSTANCES, MAX_IN_FLIGHT, MAX_POOL_BYTES, MAX_POOL_RECORDS, QUERY_TIMEOUT};
use futures::stream::{self, StreamExt};
use hickory_client::client::{Client, ClientHandle};
use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType};
use hickory_proto::runtime::iocompat::AsyncIoTokioAsStd;
use hickory_proto::serialize::binary::BinEncodable;
use hickory_proto::tcp::{TcpClientStream, TcpStream as HickoryTcpStream};
use hickory_proto::xfer::BufDnsStreamHandle;
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;

/// Why a browse could not run at all (per-instance trouble is reported
/// with the instance, not as this).
#[derive(Debug, thiserror::Error)]
pub enum DnsError {
    /// No server to ask.
    #[error("{0}")]
    Server(String),
    /// The connection or the PTR query failed.
    #[error("DNS server {server}: {what}")]
    Query {
        /// The server.
        server: SocketAddr,
        /// What failed.
        what: String,
    },
}

/// Every record seen so far, by lowercased owner name and type, each
/// RRset in arrival order without duplicates (a hash set: a PTR set of
/// thousands must not cost a quadratic scan).
#[derive(Debug, Default)]
pub struct Pool {
    pub(super) records: HashMap<(Name, RecordType), RrSet>,
    /// Records kept, and the bytes of their owner names and data: within
    /// [`MAX_POOL_RECORDS`] and [`MAX_POOL_BYTES`].
    kept: usize,
    bytes: usize,
    /// Records dropped for the budget.
    dropped: usize,
}

/// One RRset: its records in arrival order, and their wire forms (RData is
/// not `Hash`; the wire form is a faithful key).
type RrSet = (Vec<RData>, HashSet<Vec<u8>>);

impl Pool {
    pub(crate) fn add(&mut self, r: &Record) {
        if r.dns_class() != DNSClass::IN {
            return;
        }
        let Ok(wire) = r.data().to_bytes() else {
            return;
        };
        let cost = wire.len() + r.name().len();
        if self.kept >= MAX_POOL_RECORDS || self.bytes + cost > MAX_POOL_BYTES {
            self.dropped += 1;
            return;
        }
        let key = (r.name().to_lowercase(), r.record_type());
        let (list, seen) = self.records.entry(key).or_default();
        // Bounded: no RRset we read is legitimately larger (a PTR set is
        // capped separately, by instances).
        if list.len() <= MAX_INSTANCES && seen.insert(wire) {
            list.push(r.data().clone());
            self.kept += 1;
            self.bytes += cost;
        }
    }

    /// Records not kept because the browse's budget was spent.
    pub fn dropped(&self) -> usize {
        self.dropped
    }

    /// Adds every record of class IN, bounded per RRset.
    pub fn add_all(&mut self, rs: &[Record]) {
        for r in rs {
            self.add(r);
        }
    }

    /// The RRset of `name` (any case) and type `t`, in arrival order.
    pub fn get(&self, name: &Name, t: RecordType) -> Option<&[RData]> {
        self.records
            .get(&(name.to_lowercase(), t))
            .map(|(list, _)| list.as_slice())
    }

    pub(crate) fn has(&self, name: &Name, t: RecordType) -> bool {
        self.get(name, t).is_some_and(|v| !v.is_empty())
    }

    pub(crate) fn has_address(&self, name: &Name) -> bool {
        self.has(name, RecordType::A) || self.has(name, RecordType::AAAA)
    }
}

/// One connection and a query counter.
pub(crate) struct Conn {
    client: Client,
    pub(crate) queries: usize,
}

impl Conn {
    pub(crate) async fn open(server: SocketAddr) -> Result<Conn, DnsError> {
        let fail = |what: String| DnsError::Query { server, what };
        let tcp = tokio::time::timeout(QUERY_TIMEOUT, tokio::net::TcpStream::connect(server))
            .await
            .map_err(|_| {
                fail(format!(
                    "no TCP connection within {} ms",
                    QUERY_TIMEOUT.as_millis()
                ))
            })?
            .map_err(|e| fail(format!("cannot connect over TCP: {e}")))?;
        // Pipelined queries are small writes: without TCP_NODELAY, Nagle
        // holds one back until the previous one is acknowledged, and the
        // server's delayed ACK turns that into 40 ms stalls (measured).
        let _ = tcp.set_nodelay(true);
        let (sender, outbound) = BufDnsStreamHandle::new(server);
        let stream = TcpClientStream::from_stream(HickoryTcpStream::from_stream_with_receiver(
            AsyncIoTokioAsStd(tcp),
            server,
            outbound,
        ));
        let (client, bg) = Client::with_timeout(
            futures::future::ready(Ok(stream)),
            sender,
            QUERY_TIMEOUT,
            None,
        )
        .await
        .map_err(|e| fail(format!("cannot start the DNS client: {e}")))?;
        tokio::spawn(bg);
        Ok(Conn { client, queries: 0 })
    }

    /// Sends `queries` pipelined; returns each answer's records (answer and
    /// additional sections) or why it failed, in any order.
    pub(crate) async fn many(
        &mut self,
        queries: Vec<(Name, RecordType)>,
    ) -> Vec<(Name, Result<Vec<Record>, String>)> {
        self.queries += queries.len();
        let client = self.client.clone();
        stream::iter(queries)
            .map(|(name, t)| {
                let mut c = client.clone();
                async move {
                    let r = match c.query(name.clone(), DNSClass::IN, t).await {
                        Ok(resp) => match resp.response_code() {
                            ResponseCode::NoError | ResponseCode::NXDomain => {
                                let mut v = resp.answers().to_vec();
                                v.extend_from_slice(resp.additionals());
                                Ok(v)
                            }
                            rc => Err(format!("{t} query for {name}: {rc}")),
                        },
                        Err(e) => Err(format!("{t} query for {name}: {e}")),
                    };
                    (name, r)
                }
            })
            .buffer_unordered(MAX_IN_FLIGHT)
            .collect()
            .await
    }

    /// A zone transfer of `zone`: every record, or why not.
    pub(crate) async fn transfer(&mut self, zone: &Name) -> Result<Vec<Record>, String> {
        self.queries += 1;
        let mut s = self.client.zone_transfer(zone.clone(), None);
        let mut out = Vec::new();
        let mut bytes = 0usize;
        while let Some(part) = s.next().await {
            let resp = part.map_err(|e| e.to_string())?;
            if resp.response_code() != ResponseCode::NoError {
                return Err(resp.response_code().to_string());
            }
            bytes += resp
                .answers()
                .iter()
                .map(|r| r.name().len() + r.data().to_bytes().map_or(0, |b| b.len()))
                .sum::<usize>();
            out.extend_from_slice(resp.answers());
            if out.len() > MAX_POOL_RECORDS || bytes > MAX_POOL_BYTES {
                return Err("the zone is larger than any rlx registration zone".into());
            }
        }
        Ok(out)
    }
}
