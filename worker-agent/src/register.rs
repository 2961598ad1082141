//! **Register this node in a unicast DNS zone** — DNS UPDATE (RFC 2136)
//! signed with TSIG (RFC 8945), so that coordinators beyond the LAN find it
//! with `[discover] dns_sd` (wide-area DNS-SD, RFC 6763).
//!
//! ```text
//! rlx-agent --register dns://10.0.0.53/rlx.example.org --tsig-key /etc/rlx/update.key
//! ```
//!
//! # Records (zone `Z`, instance `I`, host label `H`, TTL [`RECORD_TTL`])
//!
//! `H` is [`unique_host_label`]: the host name's first label and 6 hex
//! digits of the node id, so that two machines with one short host name do
//! not replace each other's address records.
//!
//! ```text
//! _rlx._tcp.Z.       PTR  I._rlx._tcp.Z.          one per agent in a shared RRset
//! I._rlx._tcp.Z.     SRV  0 0 <port> H.Z.
//! I._rlx._tcp.Z.     TXT  "txtvers=1" ... "expires=<unix seconds>"
//! H.Z.               A / AAAA  the address this host reaches the server from
//! ```
//!
//! One update message replaces the SRV, TXT and address RRsets and adds the
//! PTR, so a registration is atomic and re-registering is idempotent. The
//! zone should be dedicated to rlx (a delegated subzone such as
//! `rlx.example.org`): an agent replaces the address records at `H.Z.`.
//!
//! # Lease
//!
//! Plain DNS servers do not expire records by themselves, so the lease is
//! carried twice:
//!
//! - in the TXT record as `expires=<unix seconds>` (now + the lease), which
//!   coordinators honour ([`rlx_proto::dnssd`] sets aside an instance
//!   whose lease ran out), and which agents use to clean up: at each refresh
//!   an agent sweeps the zone with probability 1/N (N = instances it saw
//!   last), deleting the records of instances expired for more than
//!   [`SWEEP_GRACE`] (clocks differ), each on the condition that its TXT
//!   record is still the expired one ([`Registration::sweep_message`]), so
//!   that the zone as a whole is swept about once per refresh interval
//!   whatever its size and a racing re-registration is never deleted;
//! - as the EDNS(0) Update Lease option (RFC 9664, option code 2) on every
//!   update, for servers that implement it and expire records on their own.
//!   BIND 9.18 ignores it.
//!
//! The agent refreshes every third of the lease ([`DEFAULT_LEASE`] 180 s,
//! `--lease`), and at once when its caps change materially. On a clean
//! shutdown (SIGINT, SIGTERM) it deletes its records. A refused update (a
//! wrong TSIG key: NOTAUTH with BADKEY/BADSIG; a zone that does not allow
//! the key: REFUSED) is logged with what to check and retried at the next
//! refresh; it never stops the agent.

use crate::change::material_change;
use crate::naming::{unique_host_label, NodeNames};
use crate::shutdown::StopSignal;
use anyhow::Context;
use hickory_proto::dnssec::rdata::DNSSECRData;
use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query, ResponseCode, UpdateMessage};
use hickory_proto::rr::rdata::opt::EdnsOption;
use hickory_proto::rr::rdata::{A, AAAA, PTR, SRV, TXT};
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType};
use rlx_proto::caps::NodeCaps;
use rlx_proto::dnssd::{self, Expired, ZoneBrowse, ZoneOptions};
use rlx_proto::service::{parse_domain, service_name, unix_now, CLOCK_SKEW, EXPIRES_KEY};
use rlx_proto::txt;
use std::collections::HashSet;
use std::fmt;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tracing::{debug, info, warn};
use tsig::{tsig_error, tsig_error_name};

pub mod claim;
pub mod tsig;

pub use tsig::{parse_key_file, TsigKey, TSIG_FUDGE};

/// TTL of every registered record: how long resolvers may cache it. Short,
/// so that a coordinator behind a caching resolver sees a deletion or a
/// change within a minute.
pub const RECORD_TTL: u32 = 60;

/// Default lease: a registration not refreshed for this long belongs to a
/// crashed agent. Three refreshes fit in it, so two lost updates do not
/// make a live node look dead.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(180);

/// Shortest lease accepted: the refresh interval (a third) must stay above
/// a second, and leases shorter than the record TTL only make sense in tests.
pub const MIN_LEASE: Duration = Duration::from_secs(3);

/// The EDNS(0) option code of Update Lease (RFC 9664 §4; IANA "UL", 2).
pub const UPDATE_LEASE_OPTION: u16 = 2;

/// How long past its lease's end a registration must be before a sweep
/// deletes it: twice [`TSIG_FUDGE`] plus [`CLOCK_SKEW`] (130 s).
///
/// A sweeping agent judges another's `expires=` (written by that agent's
/// clock) by its own clock. The server accepts updates only from agents
/// within the fudge of its clock, so any two agents that can write the zone
/// disagree by at most twice the fudge: waiting that long (plus the skew
/// coordinators allow) means a fast sweeper never deletes a live agent's
/// records, even one whose last refresh is almost a lease old and whose
/// clock is as slow as the server allows. Coordinators already skip an
/// expired instance [`CLOCK_SKEW`] after its lease, so the grace only delays
/// the clean-up, not what coordinators see.
pub const SWEEP_GRACE: Duration = Duration::from_secs(2 * TSIG_FUDGE as u64 + CLOCK_SKEW.as_secs());

/// Whether a sweep at `now` (this host's clock) may delete a registration
/// whose lease ends at `expires` (its agent's clock): more than
/// [`SWEEP_GRACE`] ago.
pub fn sweep_due(expires: u64, now: u64) -> bool {
    expires.saturating_add(SWEEP_GRACE.as_secs()) < now
}

/// Deadline for one update exchange (connect, send, reply).
pub const UPDATE_TIMEOUT: Duration = Duration::from_secs(5);

/// Where to register: `dns://SERVER/ZONE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisterTarget {
    /// `HOST`, `HOST:PORT` or `[IPv6]:PORT` (port 53 by default).
    pub server: String,
    /// The zone the records go into.
    pub zone: Name,
}

impl std::str::FromStr for RegisterTarget {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let rest = s.strip_prefix("dns://").ok_or_else(|| {
            format!("`{s}` is not a registration URL: write dns://SERVER/ZONE, e.g. dns://10.0.0.53/rlx.example.org")
        })?;
        let (server, zone) = rest.split_once('/').ok_or_else(|| {
            format!("`{s}` names no zone: write dns://SERVER/ZONE, e.g. dns://10.0.0.53/rlx.example.org")
        })?;
        dnssd::check_server(server)?;
        let zone = parse_domain(zone).map_err(|e| format!("zone in `{s}`: {e}"))?;
        Ok(RegisterTarget {
            server: server.to_string(),
            zone,
        })
    }
}

impl fmt::Display for RegisterTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "dns://{}/{}", self.server, self.zone)
    }
}

/// What one registration is made of.
#[derive(Debug, Clone)]
pub struct Registration {
    /// Where.
    pub target: RegisterTarget,
    /// The server's address, resolved once at start.
    pub server: SocketAddr,
    /// The key.
    pub key: TsigKey,
    /// `I._rlx._tcp.Z.`: `base`, or `base (n)` when another machine holds
    /// that name in the zone ([`claim`]).
    pub instance: Name,
    /// The instance label asked for (`--name`, else the host name's first
    /// label).
    pub base: String,
    /// What the zone must hold at `instance` for the next update to apply
    /// ([`claim::Claim`]): `None` until the name is claimed.
    pub claim: Option<claim::Claim>,
    /// `H.Z.`
    pub host: Name,
    /// The worker port, which the SRV record names (the agent's own port rides in TXT,
    /// [`rlx_proto::txt::AGENT_PORT_KEY`]).
    pub port: u16,
    /// Addresses published for `host`.
    pub addrs: Vec<IpAddr>,
    /// The lease.
    pub lease: Duration,
}

/// Why an update did not go through. Each says what to check.
#[derive(Debug, thiserror::Error)]
pub enum UpdateError {
    /// The server answered with an error code.
    #[error("DNS server {server} refused the update of {zone}: {} ({rcode}){tsig}: {hint}", format!("{rcode:?}").to_uppercase())]
    Refused {
        /// The server.
        server: SocketAddr,
        /// The zone.
        zone: Name,
        /// Its response code.
        rcode: ResponseCode,
        /// `, TSIG error BADSIG` when the server said one.
        tsig: String,
        /// What to check.
        hint: String,
    },
    /// The exchange failed (connection, timeout, malformed or unverifiable
    /// reply).
    #[error("DNS update to {server}: {what}")]
    Exchange {
        /// The server.
        server: SocketAddr,
        /// What failed.
        what: String,
    },
}

fn refusal_hint(rcode: ResponseCode, tsig: Option<u16>, key: &TsigKey, zone: &Name) -> String {
    match (rcode, tsig) {
        (_, Some(17)) => format!(
            "the server knows no key named \"{}\" with this algorithm: check the key name in --tsig-key against the server's `key` statement",
            key.name
        ),
        (_, Some(16)) => format!(
            "the signature does not verify: the secret of key \"{}\" differs from the server's (wrong or old --tsig-key file)",
            key.name
        ),
        (_, Some(18)) => format!("the clocks of this host and the server differ by more than {TSIG_FUDGE} s: run NTP"),
        (ResponseCode::NotAuth, _) => format!("the server is not authoritative for {zone}, or did not accept key \"{}\"", key.name),
        (ResponseCode::Refused, _) => format!(
            "zone {zone} does not let key \"{}\" update it: add `allow-update {{ key \"{}\"; }};` (or an update-policy) to the zone",
            key.name, key.name
        ),
        (ResponseCode::NotZone, _) => format!("{zone} is not a zone on this server: check the ZONE of --register"),
        (ResponseCode::ServFail, _) => "the server failed to apply it; with BIND 9.18.28 or later and more than 100 agents, lift the RRset limit (`max-records-per-type 0;`); else see the server's log".into(),
        _ => "see the server's log".into(),
    }
}

impl Registration {
    /// The TXT record for `caps`, with `expires` (unix seconds).
    fn txt(&self, caps: &NodeCaps, expires: u64) -> anyhow::Result<TXT> {
        let mut strings = txt::to_strings(&txt::encode(caps)?);
        strings.push(format!("{EXPIRES_KEY}={expires}"));
        Ok(TXT::new(strings))
    }

    fn message(&self) -> Message {
        let mut m = Message::new();
        let mut id = [0u8; 2];
        let _ = getrandom::fill(&mut id);
        m.set_id(u16::from_be_bytes(id))
            .set_message_type(MessageType::Query)
            .set_op_code(OpCode::Update)
            .set_recursion_desired(false);
        let mut zone = Query::new();
        zone.set_name(self.target.zone.clone())
            .set_query_class(DNSClass::IN)
            .set_query_type(RecordType::SOA);
        m.add_zone(zone);
        m
    }

    fn delete_rrset(m: &mut Message, name: &Name, t: RecordType) {
        let mut r = Record::update0(name.clone(), 0, t);
        r.set_dns_class(DNSClass::ANY);
        m.add_update(r.into_record_of_rdata());
    }

    fn add(m: &mut Message, name: &Name, data: RData) {
        m.add_update(Record::from_rdata(name.clone(), RECORD_TTL, data));
    }

    /// The UPDATE that (re)registers: SRV, TXT and addresses replaced, PTR
    /// added, with the Update Lease option; `expires` = now + the lease.
    pub fn register_message(&self, caps: &NodeCaps) -> anyhow::Result<Message> {
        self.register_message_until(caps, unix_now() + self.lease.as_secs())
    }

    /// [`Registration::register_message`] with the lease ending at
    /// `expires` (unix seconds): for tools and tests that need a
    /// registration expired already.
    pub fn register_message_until(&self, caps: &NodeCaps, expires: u64) -> anyhow::Result<Message> {
        let mut m = self.message();
        if let Some(c) = &self.claim {
            claim::require(&mut m, &self.instance, c);
        }
        let svc = service_name(&self.target.zone);
        Self::add(&mut m, &svc, RData::PTR(PTR(self.instance.clone())));
        Self::delete_rrset(&mut m, &self.instance, RecordType::SRV);
        Self::add(
            &mut m,
            &self.instance,
            RData::SRV(SRV::new(0, 0, self.port, self.host.clone())),
        );
        Self::delete_rrset(&mut m, &self.instance, RecordType::TXT);
        Self::add(&mut m, &self.instance, RData::TXT(self.txt(caps, expires)?));
        Self::delete_rrset(&mut m, &self.host, RecordType::A);
        Self::delete_rrset(&mut m, &self.host, RecordType::AAAA);
        for ip in &self.addrs {
            let data = match ip {
                IpAddr::V4(v4) => RData::A(A(*v4)),
                IpAddr::V6(v6) => RData::AAAA(AAAA(*v6)),
            };
            Self::add(&mut m, &self.host, data);
        }
        let lease = u32::try_from(self.lease.as_secs()).unwrap_or(u32::MAX);
        let mut ul = lease.to_be_bytes().to_vec();
        ul.extend_from_slice(&lease.to_be_bytes()); // KEY-LEASE: the same
        let mut edns = Edns::new();
        edns.set_max_payload(1232).set_version(0);
        edns.options_mut()
            .insert(EdnsOption::Unknown(UPDATE_LEASE_OPTION, ul));
        m.set_edns(edns);
        Ok(m)
    }

    /// The UPDATE that deletes this registration: on the condition that
    /// the zone still holds what this agent wrote, so that a machine that
    /// took the name meanwhile keeps its records.
    pub fn delete_message(&self) -> Message {
        let mut m = self.message();
        if let Some(c @ claim::Claim::Txt(_)) = &self.claim {
            claim::require(&mut m, &self.instance, c);
        }
        delete_instance(
            &mut m,
            &self.target.zone,
            &self.instance,
            std::slice::from_ref(&self.host),
        );
        m
    }

    /// The UPDATE a sweep sends to delete `gone`, an expired registration
    /// seen by a browse: its PTR, SRV and TXT, and the addresses of those of
    /// its SRV targets that no live instance of the browse points to
    /// (`live_targets`, lowercased).
    ///
    /// On a condition (RFC 2136 §2.4.2, "RRset exists, value dependent"):
    /// the instance's TXT RRset is still exactly the expired one, `expires=`
    /// included. An agent that re-registered between the browse and this
    /// update has a new `expires=`, so the server applies none of it and
    /// answers NXRRSET: a racing sweep never deletes fresh records.
    pub fn sweep_message(&self, gone: &Expired, live_targets: &HashSet<Name>) -> Message {
        let mut m = self.message();
        let mut pre = Record::from_rdata(
            gone.instance.clone(),
            0,
            RData::TXT(TXT::from_bytes(
                gone.txt.iter().map(Vec::as_slice).collect(),
            )),
        );
        pre.set_dns_class(DNSClass::IN);
        m.add_pre_requisite(pre);
        let targets: Vec<Name> = gone
            .targets
            .iter()
            .filter(|t| !live_targets.contains(&t.to_lowercase()))
            .cloned()
            .collect();
        delete_instance(&mut m, &self.target.zone, &gone.instance, &targets);
        m
    }

    /// Sends `m` signed, and checks the reply.
    pub async fn send(&self, m: Message) -> Result<(), UpdateError> {
        exchange(self.server, &self.target.zone, &self.key, m).await
    }
}

/// Adds to `m` the deletion of one instance: its PTR, SRV and TXT, and the
/// addresses at its targets.
fn delete_instance(m: &mut Message, zone: &Name, instance: &Name, targets: &[Name]) {
    let svc = service_name(zone);
    let mut ptr = Record::from_rdata(svc, 0, RData::PTR(PTR(instance.clone())));
    ptr.set_dns_class(DNSClass::NONE);
    m.add_update(ptr);
    Registration::delete_rrset(m, instance, RecordType::SRV);
    Registration::delete_rrset(m, instance, RecordType::TXT);
    for t in targets.iter().filter(|t| zone.zone_of(t)) {
        Registration::delete_rrset(m, t, RecordType::A);
        Registration::delete_rrset(m, t, RecordType::AAAA);
    }
}

/// Signs `m` with `key`, sends it over TCP, and reads and verifies the reply.
pub async fn exchange(
    server: SocketAddr,
    zone: &Name,
    key: &TsigKey,
    mut m: Message,
) -> Result<(), UpdateError> {
    let err = |what: String| UpdateError::Exchange { server, what };
    let now = unix_now() as u32;
    let verifier = m
        .finalize(&key.signer(), now)
        .map_err(|e| err(format!("cannot sign the update: {e}")))?;
    let bytes = m
        .to_vec()
        .map_err(|e| err(format!("cannot encode the update: {e}")))?;
    let reply = tokio::time::timeout(UPDATE_TIMEOUT, async {
        let mut s = TcpStream::connect(server).await?;
        let len = u16::try_from(bytes.len()).map_err(std::io::Error::other)?;
        let mut framed = len.to_be_bytes().to_vec();
        framed.extend_from_slice(&bytes);
        s.write_all(&framed).await?;
        let mut len = [0u8; 2];
        s.read_exact(&mut len).await?;
        let mut buf = vec![0u8; u16::from_be_bytes(len) as usize];
        s.read_exact(&mut buf).await?;
        Ok::<_, std::io::Error>(buf)
    })
    .await
    .map_err(|_| err(format!("no reply within {} s", UPDATE_TIMEOUT.as_secs())))?
    .map_err(|e| err(e.to_string()))?;
    let parsed = Message::from_vec(&reply).map_err(|e| err(format!("malformed reply: {e}")))?;
    if parsed.id() != m.id() {
        return Err(err("reply to another message id".into()));
    }
    let rcode = parsed.response_code();
    if rcode != ResponseCode::NoError {
        let tsig_code = parsed.signature().iter().find_map(|r| match r.data() {
            RData::DNSSEC(DNSSECRData::TSIG(t)) => tsig_error(t).filter(|&c| c != 0),
            _ => None,
        });
        return Err(UpdateError::Refused {
            server,
            zone: zone.clone(),
            rcode,
            tsig: tsig_code
                .map(|c| format!(", TSIG error {}", tsig_error_name(c)))
                .unwrap_or_default(),
            hint: refusal_hint(rcode, tsig_code, key, zone),
        });
    }
    match verifier {
        Some(mut v) => v(&reply).map(|_| ()).map_err(|e| {
            err(format!(
                "the reply's TSIG does not verify ({e}): not from the server that holds the key?"
            ))
        }),
        None => Ok(()),
    }
}

/// The address this host reaches `server` from: what the server's side of
/// the network can dial back.
pub fn source_address(server: SocketAddr) -> std::io::Result<IpAddr> {
    let bind: SocketAddr = if server.is_ipv4() {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let s = std::net::UdpSocket::bind(bind)?;
    s.connect(server)?;
    Ok(s.local_addr()?.ip())
}

/// Options for [`Registration::prepare`].
#[derive(Debug, Clone)]
pub struct RegisterOptions {
    /// Where.
    pub target: RegisterTarget,
    /// The TSIG key file.
    pub key_file: PathBuf,
    /// Instance name (`--name`), else the host name's first label.
    pub name: Option<String>,
    /// The worker port, which the SRV record names.
    pub port: u16,
    /// The lease.
    pub lease: Duration,
    /// Addresses to publish; empty = the one this host reaches the server from.
    pub addrs: Vec<IpAddr>,
}

impl Registration {
    /// Reads the key, resolves the server and works out the names and
    /// addresses. Errors here are configuration errors: the agent refuses
    /// to start with them.
    pub async fn prepare(opts: &RegisterOptions, caps: &NodeCaps) -> anyhow::Result<Registration> {
        let key = TsigKey::load(&opts.key_file)?;
        let server = dnssd::resolve_server(Some(&opts.target.server))
            .await
            .map_err(|e| anyhow::anyhow!("--register {}: {e}", opts.target))?;
        let NodeNames {
            label,
            instance: instance_label,
        } = NodeNames::of(&caps.hostname, opts.name.as_deref());
        let svc = service_name(&opts.target.zone);
        let instance = svc
            .prepend_label(instance_label.as_bytes())
            .with_context(|| {
                format!("instance name {instance_label:?} is not a DNS label (at most 63 bytes)")
            })?;
        // Unique by construction (the node id), so that two machines with
        // one short host name do not replace each other's addresses.
        let label = unique_host_label(&label, &caps.id);
        let host = opts
            .target
            .zone
            .prepend_label(label.as_str())
            .with_context(|| format!("host label {label:?}"))?;
        let addrs = if opts.addrs.is_empty() {
            vec![source_address(server)
                .with_context(|| format!("no route to DNS server {server}"))?]
        } else {
            opts.addrs.clone()
        };
        Ok(Registration {
            target: opts.target.clone(),
            server,
            key,
            instance,
            base: instance_label,
            claim: None,
            host,
            port: opts.port,
            addrs,
            lease: opts.lease,
        })
    }
}

/// Registers, keeps the registration alive and current, and deletes it when
/// `stop` resolves (see the module docs). Never returns an error: refused
/// updates are logged and retried at the next refresh.
pub async fn maintain(
    mut reg: Registration,
    mut caps_rx: watch::Receiver<Arc<NodeCaps>>,
    stop: impl Future<Output = StopSignal>,
) {
    let refresh = (reg.lease / 3).max(Duration::from_secs(1));
    let mut registered: Option<NodeCaps> = None;
    let mut instances_seen: usize = 0;
    let mut tick = tokio::time::interval(refresh);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(stop);
    loop {
        let changed = tokio::select! {
            sig = &mut stop => {
                if registered.is_some() {
                    deregister(&reg, sig).await;
                }
                return;
            }
            _ = tick.tick() => false,
            r = caps_rx.changed() => {
                if r.is_err() {
                    // The sender is gone: run mode is ending; wait for stop.
                    let sig = (&mut stop).await;
                    if registered.is_some() {
                        deregister(&reg, sig).await;
                    }
                    return;
                }
                true
            }
        };
        let caps = caps_rx.borrow_and_update().as_ref().clone();
        if changed {
            match &registered {
                Some(old) if material_change(old, &caps).is_none() => continue,
                _ => {}
            }
        }
        let first = registered.is_none();
        if reg.claim.is_none() {
            if let Err(why) = claim_name(&mut reg, &caps).await {
                warn!("{why}; trying again in {} s", refresh.as_secs());
                continue;
            }
        }
        match reg.register_message(&caps) {
            Err(e) => warn!("cannot build the DNS registration: {e:#}"),
            Ok(m) => match reg.send(m.clone()).await {
                Ok(()) => {
                    reg.claim = claim::written_txt(&m, &reg.instance).map(claim::Claim::Txt);
                    if first {
                        info!(
                            instance = %reg.instance,
                            server = %reg.server,
                            addrs = ?reg.addrs,
                            lease_s = reg.lease.as_secs(),
                            "registered in DNS ({}); refreshing every {} s",
                            reg.target,
                            refresh.as_secs()
                        );
                    } else {
                        debug!(instance = %reg.instance, "DNS registration refreshed");
                    }
                    registered = Some(caps);
                }
                Err(UpdateError::Refused {
                    rcode: rcode @ (ResponseCode::NXRRSet | ResponseCode::YXDomain),
                    ..
                }) => {
                    // The zone no longer holds what this agent saw or
                    // wrote at its name: someone took it, or a sweep
                    // deleted it. Look again before the next update.
                    info!(
                        instance = %reg.instance,
                        "the zone changed at this instance name ({rcode:?}); claiming a name again"
                    );
                    reg.claim = None;
                    registered = None;
                    tick.reset_immediately();
                }
                Err(e) => warn!(
                    "DNS registration failed (retrying in {} s): {e}",
                    refresh.as_secs()
                ),
            },
        }
        if registered.is_some() && sweep_now(instances_seen) {
            instances_seen = sweep(&reg).await.unwrap_or(instances_seen);
        }
    }
}

/// Finds the first name of `reg.base`, `reg.base (2)` .. that the zone
/// holds for nobody else ([`claim`]), and sets `reg.instance` and the
/// condition its update is sent on. A zone that cannot be browsed leaves
/// the current name, on the condition that nobody holds it.
async fn claim_name(reg: &mut Registration, caps: &NodeCaps) -> Result<(), String> {
    let opts = ZoneOptions {
        domain: reg.target.zone.clone(),
        server: Some(reg.server.to_string()),
        zone_transfer: false,
        deadline: Duration::from_secs(10),
    };
    let b = match dnssd::browse(&opts).await {
        Ok(b) => b,
        Err(e) => {
            debug!(
                "cannot browse {} before registering ({e}); registering if {} is free",
                reg.target.zone, reg.instance
            );
            reg.claim = Some(claim::Claim::Free);
            return Ok(());
        }
    };
    let svc = service_name(&reg.target.zone);
    for n in 1..=claim::MAX_NAMES {
        let label = claim::candidate(&reg.base, n);
        let name = svc
            .prepend_label(label.as_bytes())
            .map_err(|e| format!("instance name {label:?}: {e}"))?;
        let c = match claim::holder(&b, &name, &caps.id) {
            claim::Holder::Free => claim::Claim::Free,
            claim::Holder::Ours(t) | claim::Holder::Expired(t) => claim::Claim::Txt(t),
            claim::Holder::Other(who) => {
                info!(
                    "DNS instance name {label:?} is another machine's (node id {who}) in {}; trying the next",
                    reg.target.zone
                );
                continue;
            }
        };
        if name != reg.instance {
            info!(instance = %name, "registering in DNS as {label:?}: {:?} is another machine's", reg.base);
        }
        reg.instance = name;
        reg.claim = Some(c);
        return Ok(());
    }
    Err(format!(
        "every DNS instance name from {:?} to {:?} is another machine's in {}: give this node a \
         name of its own with --name",
        reg.base,
        claim::candidate(&reg.base, claim::MAX_NAMES),
        reg.target.zone
    ))
}

/// Whether this refresh sweeps: probability 1/N over N instances, so that
/// the zone is swept about once per refresh interval in all.
fn sweep_now(instances_seen: usize) -> bool {
    let mut b = [0u8; 4];
    let _ = getrandom::fill(&mut b);
    let n = instances_seen.max(1) as u64;
    (u32::from_be_bytes(b) as u64) % n == 0
}

/// Browses the zone and deletes the registrations whose lease ran out more
/// than [`SWEEP_GRACE`] ago, each on the condition that it is unchanged
/// ([`Registration::sweep_message`]). Returns how many instances the zone
/// holds.
async fn sweep(reg: &Registration) -> Option<usize> {
    let opts = ZoneOptions {
        domain: reg.target.zone.clone(),
        server: Some(reg.server.to_string()),
        zone_transfer: false,
        deadline: Duration::from_secs(10),
    };
    let b = match dnssd::browse(&opts).await {
        Ok(b) => b,
        Err(e) => {
            debug!("sweep: cannot browse {}: {e}", reg.target.zone);
            return None;
        }
    };
    let live = live_targets(&b);
    let now = unix_now();
    for gone in &b.expired {
        if gone.instance == reg.instance {
            continue;
        }
        if !sweep_due(gone.expires, now) {
            debug!(
                instance = %gone.instance,
                "lease over {} s ago; left for a later sweep (deleted {} s after the lease, for clock differences)",
                now.saturating_sub(gone.expires),
                SWEEP_GRACE.as_secs()
            );
            continue;
        }
        match reg.send(reg.sweep_message(gone, &live)).await {
            Ok(()) => {
                info!(instance = %gone.instance, "deleted an expired DNS registration (a crashed agent's)")
            }
            Err(UpdateError::Refused {
                rcode: ResponseCode::NXRRSet,
                ..
            }) => {
                info!(instance = %gone.instance, "an expired DNS registration was renewed meanwhile; left as it is")
            }
            Err(e) => {
                debug!(instance = %gone.instance, "could not delete an expired registration: {e}")
            }
        }
    }
    Some(b.stats.instances)
}

/// The SRV targets of the live instances of a browse, lowercased: address
/// records a sweep must keep even when an expired instance points there too.
pub fn live_targets(b: &ZoneBrowse) -> HashSet<Name> {
    b.instances
        .iter()
        .filter_map(|i| i.registration.as_ref().ok())
        .map(|r| r.target.to_lowercase())
        .collect()
}

async fn deregister(reg: &Registration, sig: StopSignal) {
    match reg.send(reg.delete_message()).await {
        Ok(()) => info!(instance = %reg.instance, "{sig}: DNS registration deleted"),
        Err(e) => {
            warn!("{sig}: could not delete the DNS registration (it expires with its lease): {e}")
        }
    }
}

#[cfg(test)]
mod tests;
