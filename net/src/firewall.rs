//! **Firewall rules that would hide agents** — reads the nftables ruleset
//! (`nft -j list ruleset`) and, where the legacy tool is in use,
//! `iptables-save`, and finds the rules that drop or reject what discovery
//! needs: UDP 5353 (mDNS queries out, answers in) and the agent's TCP port
//! (the handshake).
//!
//! The parsers are plain functions over the tools' text, so they are tested
//! here on recorded outputs; [`rulesets`] runs the tools, once for every
//! port asked about.
//!
//! What counts as blocking, per rule of a chain hooked at `input`,
//! `output`, `prerouting` or `ingress` (the paths a query and its answer
//! take; `forward` is other machines' traffic): a `drop` or `reject` verdict
//! together with a match on the port (`udp dport 5353`, a set or range that
//! holds it; for mDNS also `udp sport 5353`, the source port of every answer).
//! A rule that also matches something else (a source address, an
//! interface, a random share) blocks only some of the traffic: it is
//! reported as partial. A base chain whose policy is `drop` blocks whatever
//! no rule accepts; it is reported unless a rule of that chain accepts the
//! port.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// What discovery needs through the firewall.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Needs {
    /// A TCP port that must get through: the agents' (`[discover]
    /// agent_port`), or, read a second time, the workers' (`port`).
    pub agent_port: u16,
}

/// The mDNS port (RFC 6762 §3).
const MDNS_PORT: u16 = 5353;

/// One rule or policy in the way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocker {
    /// Where: `nftables inet f input` or `iptables INPUT`.
    pub chain: String,
    /// What it stops: `udp 5353` or `tcp 9100`.
    pub what: String,
    /// The rule as the tool would print it, shortened.
    pub rule: String,
    /// True when the rule also matches something else, so only part of the
    /// traffic is stopped.
    pub partial: bool,
}

/// What [`read`] found in the rulesets.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Findings {
    /// Rules and policies in the way.
    pub blockers: Vec<Blocker>,
    /// The tools that could be read (`nftables`, `iptables`).
    pub read: Vec<String>,
    /// Why a tool could not be read (not installed, not root, ...).
    pub unreadable: Vec<String>,
}

/// Where the firewall tools are looked for, in order: the system's own
/// directories, never `PATH` (doctor often runs as root, and a `nft` that
/// an unprivileged user put earlier in `PATH` must not run then).
const TOOL_DIRS: [&str; 4] = ["/usr/sbin", "/sbin", "/usr/bin", "/bin"];

/// The longest a tool may take: a ruleset is listed in milliseconds, and a
/// hung tool (a wedged netlink socket) must not hang the doctor.
const TOOL_TIMEOUT: Duration = Duration::from_secs(5);

/// The most output read from a tool: rulesets of large hosts (Kubernetes
/// nodes) run to megabytes; more than this is refused, not parsed.
const MAX_OUTPUT: u64 = 32 << 20;

/// The rulesets as the tools printed them, read once for every need.
#[derive(Debug, Clone, Default)]
pub struct Rulesets {
    /// `nft -j list ruleset`, or why it could not be read.
    nft: Option<Result<String, String>>,
    /// `iptables-legacy-save`, when the legacy backend is there.
    legacy: Option<String>,
    /// Where nothing is read (macOS), what to look at instead.
    elsewhere: Option<String>,
}

/// Runs `nft -j list ruleset` and `iptables-legacy-save` (each when
/// installed), bounded in time and size.
pub async fn rulesets() -> Rulesets {
    if cfg!(target_os = "macos") {
        // Not parsed here: say what to look at instead of a bare "no nft".
        return Rulesets {
            elsewhere: Some(
                "macOS: pf and the application firewall are not read; check `sudo pfctl -sr` \
                 and `/usr/libexec/ApplicationFirewall/socketfilterfw --listapps`"
                    .into(),
            ),
            ..Default::default()
        };
    }
    let (nft, legacy) = tokio::join!(
        run("nft", &["-j", "list", "ruleset"]),
        run("iptables-legacy-save", &[])
    );
    Rulesets {
        nft: Some(nft),
        // iptables-nft writes into nftables, already read; only the legacy
        // backend keeps rules nft cannot see.
        legacy: legacy.ok(),
        elsewhere: None,
    }
}

/// [`read`] for two TCP ports at once, the agents' and the workers': UDP
/// 5353 and `agent_port` as `read` finds them, and the rules that stop TCP
/// `worker_port` besides (each blocker once).
pub fn read_both(r: &Rulesets, agent_port: u16, worker_port: u16) -> Findings {
    let mut f = read(r, Needs { agent_port });
    let w = read(
        r,
        Needs {
            agent_port: worker_port,
        },
    );
    let worker_tcp = format!("tcp {worker_port}");
    for b in w.blockers.into_iter().filter(|b| b.what == worker_tcp) {
        if !f.blockers.contains(&b) {
            f.blockers.push(b);
        }
    }
    f
}

/// What in `r` blocks `needs`.
pub fn read(r: &Rulesets, needs: Needs) -> Findings {
    let mut f = Findings::default();
    if let Some(why) = &r.elsewhere {
        f.unreadable.push(why.clone());
        return f;
    }
    match &r.nft {
        Some(Ok(text)) => match nft_blockers(text, needs) {
            Ok(b) => {
                f.read.push("nftables".into());
                f.blockers.extend(b);
            }
            Err(e) => f.unreadable.push(format!("nftables: {e}")),
        },
        Some(Err(e)) => f.unreadable.push(format!("nftables: {e}")),
        None => {}
    }
    if let Some(text) = &r.legacy {
        f.read.push("iptables (legacy)".into());
        f.blockers.extend(iptables_blockers(text, needs));
    }
    f
}

/// The first of [`TOOL_DIRS`] that holds `program`.
fn locate(program: &str) -> Option<PathBuf> {
    TOOL_DIRS
        .iter()
        .map(|d| Path::new(d).join(program))
        .find(|p| p.is_file())
}

/// Runs `program` from [`TOOL_DIRS`] with [`TOOL_TIMEOUT`] and
/// [`MAX_OUTPUT`].
async fn run(program: &str, args: &[&str]) -> Result<String, String> {
    let path = locate(program).ok_or_else(|| {
        format!(
            "`{program}` is not installed (looked in {})",
            TOOL_DIRS.join(", ")
        )
    })?;
    run_bounded(&path, args, TOOL_TIMEOUT, MAX_OUTPUT).await
}

/// Runs `path` and returns its output: at most `max` bytes within
/// `timeout`, or an error saying which bound it broke (the child is killed
/// then, by its handle).
async fn run_bounded(
    path: &Path,
    args: &[&str],
    timeout: Duration,
    max: u64,
) -> Result<String, String> {
    let shown = format!("`{} {}`", path.display(), args.join(" "));
    let mut child = tokio::process::Command::new(path)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot run {shown} ({e})"))?;
    let mut out = Vec::new();
    let mut stdout = child.stdout.take().expect("piped").take(max + 1);
    let mut stderr = child.stderr.take().expect("piped").take(64 << 10);
    // Read beside stdout, so a tool that fills its stderr pipe cannot
    // stall; it ends with the child (or is dropped with it).
    let errors = tokio::spawn(async move {
        let mut e = Vec::new();
        let _ = stderr.read_to_end(&mut e).await;
        e
    });
    let read = tokio::time::timeout(timeout, stdout.read_to_end(&mut out)).await;
    let status = match read {
        Err(_) => Err(format!(
            "{shown} did not finish within {} ms: stopped",
            timeout.as_millis()
        )),
        Ok(Err(e)) => Err(format!("{shown}: {e}")),
        Ok(Ok(_)) if out.len() as u64 > max => Err(format!(
            "{shown} printed more than {max} bytes: stopped, not parsed"
        )),
        Ok(Ok(_)) => match tokio::time::timeout(timeout, child.wait()).await {
            Ok(Ok(status)) => Ok(status),
            Ok(Err(e)) => Err(format!("{shown}: {e}")),
            Err(_) => Err(format!(
                "{shown} closed its output but did not exit within {} ms: stopped",
                timeout.as_millis()
            )),
        },
    };
    let status = match status {
        Ok(s) => s,
        Err(why) => {
            let _ = child.start_kill();
            errors.abort();
            return Err(why);
        }
    };
    let err = errors.await.unwrap_or_default();
    if !status.success() {
        let err = String::from_utf8_lossy(&err);
        return Err(format!(
            "{shown} failed: {} (reading the ruleset usually needs root)",
            err.trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// The hooks a query and its answer pass through on this host.
fn relevant_hook(hook: &str) -> bool {
    matches!(hook, "input" | "output" | "prerouting" | "ingress")
}

/// The blockers in an `nft -j list ruleset` document.
pub fn nft_blockers(json: &str, needs: Needs) -> Result<Vec<Blocker>, String> {
    let v: Value = serde_json::from_str(json).map_err(|e| format!("unreadable JSON ({e})"))?;
    let items = v
        .get("nftables")
        .and_then(Value::as_array)
        .ok_or("no `nftables` array")?;
    // Base chains: (family, table, name) -> (hook, policy).
    let mut chains = Vec::new();
    for it in items {
        if let Some(c) = it.get("chain") {
            let (Some(hook), Some(policy)) = (
                c.get("hook").and_then(Value::as_str),
                c.get("policy").and_then(Value::as_str),
            ) else {
                continue;
            };
            chains.push((key_of(c), hook.to_string(), policy.to_string()));
        }
    }
    let hook_of = |k: &(String, String, String)| chains.iter().find(|(ck, _, _)| ck == k);
    let mut out = Vec::new();
    let mut accepted: Vec<((String, String, String), &'static str)> = Vec::new();
    for it in items {
        let Some(r) = it.get("rule") else { continue };
        let k = (str_of(r, "family"), str_of(r, "table"), str_of(r, "chain"));
        // Rules in chains jumped to from a base chain are not followed: a
        // user chain with a drop is reported only when it is a base chain.
        let Some((_, hook, _)) = hook_of(&k) else {
            continue;
        };
        if !relevant_hook(hook) {
            continue;
        }
        let exprs = r
            .get("expr")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let verdict = exprs.iter().find_map(|e| {
            ["drop", "reject", "accept"]
                .into_iter()
                .find(|v| e.get(*v).is_some())
        });
        let mut hits = Vec::new();
        let mut other = false;
        for e in &exprs {
            let Some(m) = e.get("match") else {
                // counters, logs and verdicts change nothing; anything else
                // (numgen, limit, ...) makes the rule partial.
                if !["counter", "log", "drop", "reject", "accept"]
                    .iter()
                    .any(|k| e.get(*k).is_some())
                {
                    other = true;
                }
                continue;
            };
            match port_match(m) {
                Some((proto, field, right, op)) => {
                    for (p, what) in [("udp", MDNS_PORT), ("tcp", needs.agent_port)] {
                        let ours =
                            proto == p && (field == "dport" || (p == "udp" && field == "sport"));
                        if ours && holds(&right, what) == (op == "==") {
                            hits.push(if p == "udp" { "udp 5353" } else { "tcp" });
                        } else if proto == p {
                            other = true;
                        }
                    }
                }
                None => {
                    if !is_proto_only(m) {
                        other = true;
                    }
                }
            }
        }
        hits.dedup();
        for h in hits {
            let what = if h == "tcp" {
                format!("tcp {}", needs.agent_port)
            } else {
                h.to_string()
            };
            match verdict {
                Some("drop") | Some("reject") => out.push(Blocker {
                    chain: format!("nftables {} {} {} (hook {hook})", k.0, k.1, k.2),
                    what,
                    rule: short_rule(&exprs),
                    partial: other,
                }),
                Some("accept") => {
                    accepted.push((k.clone(), if h == "tcp" { "tcp" } else { "udp" }))
                }
                _ => {}
            }
        }
    }
    for (k, hook, policy) in &chains {
        if policy != "drop" || !relevant_hook(hook) {
            continue;
        }
        for (proto, what) in [
            ("udp", "udp 5353".to_string()),
            ("tcp", format!("tcp {}", needs.agent_port)),
        ] {
            if !accepted.iter().any(|(ak, p)| ak == k && *p == proto) {
                out.push(Blocker {
                    chain: format!("nftables {} {} {} (hook {hook})", k.0, k.1, k.2),
                    what,
                    rule: "policy drop, and no rule of the chain accepts it".into(),
                    partial: true,
                });
            }
        }
    }
    Ok(out)
}

fn key_of(c: &Value) -> (String, String, String) {
    (str_of(c, "family"), str_of(c, "table"), str_of(c, "name"))
}

fn str_of(v: &Value, k: &str) -> String {
    v.get(k).and_then(Value::as_str).unwrap_or("").to_string()
}

/// `{"op": "==", "left": {"payload": {"protocol": "udp", "field": "dport"}},
/// "right": ...}` -> (`udp`, `dport`, right, `==`).
fn port_match(m: &Value) -> Option<(String, String, Value, String)> {
    let p = m.get("left")?.get("payload")?;
    let proto = p.get("protocol")?.as_str()?;
    let field = p.get("field")?.as_str()?;
    if !matches!(proto, "udp" | "tcp" | "th") || !matches!(field, "dport" | "sport") {
        return None;
    }
    let op = m.get("op").and_then(Value::as_str).unwrap_or("==");
    let proto = if proto == "th" { "udp" } else { proto };
    Some((
        proto.to_string(),
        field.to_string(),
        m.get("right")?.clone(),
        op.to_string(),
    ))
}

/// A match on the protocol alone (`meta l4proto udp`, `ip protocol tcp`):
/// it narrows nothing that the port match does not already.
fn is_proto_only(m: &Value) -> bool {
    let left = m.get("left");
    let meta = left
        .and_then(|l| l.get("meta"))
        .and_then(|x| x.get("key"))
        .and_then(Value::as_str);
    let payload_field = left
        .and_then(|l| l.get("payload"))
        .and_then(|x| x.get("field"))
        .and_then(Value::as_str);
    matches!(meta, Some("l4proto") | Some("nfproto"))
        || matches!(payload_field, Some("protocol") | Some("nexthdr"))
}

/// Whether a match's right-hand side (a number, a set, a range) holds `port`.
fn holds(right: &Value, port: u16) -> bool {
    let p = u64::from(port);
    match right {
        Value::Number(n) => n.as_u64() == Some(p),
        Value::String(s) => service_port(s) == Some(port),
        Value::Object(o) => {
            if let Some(set) = o.get("set").and_then(Value::as_array) {
                set.iter().any(|x| holds(x, port))
            } else if let Some(r) = o.get("range").and_then(Value::as_array) {
                matches!((r.first().and_then(Value::as_u64), r.get(1).and_then(Value::as_u64)),
                    (Some(a), Some(b)) if a <= p && p <= b)
            } else {
                false
            }
        }
        _ => false,
    }
}

/// The ports nft prints by service name (`mdns`, from /etc/services).
fn service_port(name: &str) -> Option<u16> {
    match name {
        "mdns" => Some(MDNS_PORT),
        _ => name.parse().ok(),
    }
}

/// A rule's expressions, as one short line for the report: in nft's own
/// words for the usual shapes (`udp dport 5353 drop`), else as JSON.
fn short_rule(exprs: &[Value]) -> String {
    let words: Option<Vec<String>> = exprs.iter().map(nft_words).collect();
    let mut s = match words {
        Some(w) => w
            .into_iter()
            .filter(|w| !w.is_empty())
            .collect::<Vec<_>>()
            .join(" "),
        None => serde_json::to_string(exprs).unwrap_or_default(),
    };
    if s.len() > 160 {
        let mut cut = 157;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str("...");
    }
    s
}

/// One expression in nft syntax, or `None` for a shape not rendered here.
fn nft_words(e: &Value) -> Option<String> {
    for v in ["drop", "accept"] {
        if e.get(v).is_some() {
            return Some(v.to_string());
        }
    }
    if e.get("reject").is_some() {
        return Some("reject".into());
    }
    if e.get("counter").is_some() {
        return Some("counter".into());
    }
    let m = e.get("match")?;
    let op = m.get("op").and_then(Value::as_str).unwrap_or("==");
    let left = m.get("left")?;
    let left = if let Some(p) = left.get("payload") {
        format!(
            "{} {}",
            p.get("protocol")?.as_str()?,
            p.get("field")?.as_str()?
        )
    } else {
        let k = left.get("meta")?.get("key")?.as_str()?;
        format!("meta {k}")
    };
    let right = match m.get("right")? {
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        Value::Object(o) => {
            if let Some(set) = o.get("set").and_then(Value::as_array) {
                let items: Vec<String> = set.iter().map(|x| x.to_string()).collect();
                format!("{{ {} }}", items.join(", "))
            } else if let Some(p) = o.get("prefix") {
                format!("{}/{}", p.get("addr")?.as_str()?, p.get("len")?)
            } else if let Some(r) = o.get("range").and_then(Value::as_array) {
                format!("{}-{}", r.first()?, r.get(1)?)
            } else {
                return None;
            }
        }
        _ => return None,
    };
    let op = if op == "==" {
        String::new()
    } else {
        format!("{op} ")
    };
    Some(format!("{left} {op}{right}"))
}

/// The blockers in `iptables-save` output (legacy backend).
pub fn iptables_blockers(text: &str, needs: Needs) -> Vec<Blocker> {
    let mut out = Vec::new();
    let mut accepted: Vec<(String, &'static str)> = Vec::new();
    let mut policies: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix(':') {
            let mut w = rest.split_whitespace();
            if let (Some(chain), Some(policy)) = (w.next(), w.next()) {
                policies.push((chain.to_string(), policy.to_string()));
            }
            continue;
        }
        let Some(rest) = line.strip_prefix("-A ") else {
            continue;
        };
        let words: Vec<&str> = rest.split_whitespace().collect();
        let Some(chain) = words.first() else { continue };
        if !matches!(*chain, "INPUT" | "OUTPUT" | "PREROUTING") {
            continue;
        }
        let arg = |flag: &str| {
            words
                .iter()
                .position(|w| *w == flag)
                .and_then(|i| words.get(i + 1))
                .copied()
        };
        let target = arg("-j").unwrap_or("");
        let proto = arg("-p").unwrap_or("");
        let dports: Vec<u16> = arg("--dport")
            .or(arg("--dports"))
            .map(|p| p.split(',').filter_map(|x| x.parse().ok()).collect())
            .unwrap_or_default();
        let sport: Option<u16> = arg("--sport").and_then(|p| p.parse().ok());
        let what = if proto == "udp" && (dports.contains(&MDNS_PORT) || sport == Some(MDNS_PORT)) {
            Some(("udp", "udp 5353".to_string()))
        } else if proto == "tcp" && dports.contains(&needs.agent_port) {
            Some(("tcp", format!("tcp {}", needs.agent_port)))
        } else {
            None
        };
        let Some((p, what)) = what else { continue };
        match target {
            "DROP" | "REJECT" => {
                let known = ["-p", "-m", "--dport", "--dports", "--sport", "-j"];
                let partial = words
                    .iter()
                    .skip(1)
                    .any(|w| w.starts_with('-') && !known.contains(w));
                out.push(Blocker {
                    chain: format!("iptables {chain}"),
                    what,
                    rule: format!("-A {rest}"),
                    partial,
                });
            }
            "ACCEPT" => accepted.push((chain.to_string(), p)),
            _ => {}
        }
    }
    for (chain, policy) in policies {
        if policy != "DROP" || !matches!(chain.as_str(), "INPUT" | "OUTPUT") {
            continue;
        }
        for (p, what) in [
            ("udp", "udp 5353".to_string()),
            ("tcp", format!("tcp {}", needs.agent_port)),
        ] {
            if !accepted.iter().any(|(c, ap)| *c == chain && *ap == p) {
                out.push(Blocker {
                    chain: format!("iptables {chain}"),
                    what,
                    rule: "policy DROP, and no rule of the chain accepts it".into(),
                    partial: true,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Guards against a hung tool hanging the doctor.
    #[tokio::test]
    async fn a_tool_that_hangs_is_stopped_at_the_deadline() {
        let t0 = std::time::Instant::now();
        let r = run_bounded(
            Path::new("/bin/sleep"),
            &["30"],
            Duration::from_millis(200),
            1 << 20,
        )
        .await;
        assert!(r.as_ref().unwrap_err().contains("did not finish"), "{r:?}");
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    }

    /// Guards against a tool that prints without end filling the memory.
    #[tokio::test]
    async fn a_tool_that_prints_without_end_is_stopped_at_the_bound() {
        let r = run_bounded(
            Path::new("/usr/bin/yes"),
            &[],
            Duration::from_secs(20),
            1 << 20,
        )
        .await;
        assert!(
            r.as_ref().unwrap_err().contains("printed more than"),
            "{r:?}"
        );
    }

    #[test]
    fn the_tools_are_looked_for_in_the_system_directories_only() {
        assert!(TOOL_DIRS.iter().all(|d| d.starts_with('/')));
        assert_eq!(locate("no-such-tool-rlx"), None);
    }

    const NEEDS: Needs = Needs { agent_port: 9100 };

    /// Recorded with nftables 1.0.6 (Debian 12) in a lab namespace:
    /// `nft add rule inet f input udp dport 5353 drop`, `... tcp dport { 22,
    /// 9100 } reject`, `... ip saddr 10.0.0.0/8 udp dport mdns counter drop`.
    const RULESET: &str = r#"{"nftables": [{"metainfo": {"version": "1.0.6", "release_name": "Lester Gooch #5", "json_schema_version": 1}}, {"table": {"family": "inet", "name": "f", "handle": 1}}, {"chain": {"family": "inet", "table": "f", "name": "input", "handle": 1, "type": "filter", "hook": "input", "prio": 0, "policy": "accept"}}, {"rule": {"family": "inet", "table": "f", "chain": "input", "handle": 2, "expr": [{"match": {"op": "==", "left": {"payload": {"protocol": "udp", "field": "dport"}}, "right": 5353}}, {"drop": null}]}}, {"rule": {"family": "inet", "table": "f", "chain": "input", "handle": 4, "expr": [{"match": {"op": "==", "left": {"payload": {"protocol": "tcp", "field": "dport"}}, "right": {"set": [22, 9100]}}}, {"reject": {"type": "icmpx", "expr": "port-unreachable"}}]}}, {"rule": {"family": "inet", "table": "f", "chain": "input", "handle": 5, "expr": [{"match": {"op": "==", "left": {"payload": {"protocol": "ip", "field": "saddr"}}, "right": {"prefix": {"addr": "10.0.0.0", "len": 8}}}}, {"match": {"op": "==", "left": {"payload": {"protocol": "udp", "field": "dport"}}, "right": 5353}}, {"counter": {"packets": 0, "bytes": 0}}, {"drop": null}]}}]}"#;

    #[test]
    fn an_nft_drop_of_udp_5353_and_a_reject_of_the_agent_port_are_found() {
        let b = nft_blockers(RULESET, NEEDS).unwrap();
        assert_eq!(b.len(), 3, "{b:#?}");
        assert_eq!((b[0].what.as_str(), b[0].partial), ("udp 5353", false));
        assert_eq!(b[0].chain, "nftables inet f input (hook input)");
        assert_eq!(b[0].rule, "udp dport 5353 drop", "in nft's own words");
        assert_eq!(b[1].rule, "tcp dport { 22, 9100 } reject");
        assert_eq!(b[2].rule, "ip saddr 10.0.0.0/8 udp dport 5353 counter drop");
        assert_eq!((b[1].what.as_str(), b[1].partial), ("tcp 9100", false));
        assert_eq!(
            (b[2].what.as_str(), b[2].partial),
            ("udp 5353", true),
            "a drop from 10.0.0.0/8 only is partial"
        );
    }

    #[test]
    fn an_empty_ruleset_and_other_ports_block_nothing() {
        let empty =
            r#"{"nftables": [{"metainfo": {"version": "1.0.6", "json_schema_version": 1}}]}"#;
        assert!(nft_blockers(empty, NEEDS).unwrap().is_empty());
        let other = RULESET.replace("5353", "53").replace("9100", "9200");
        assert!(nft_blockers(&other, NEEDS).unwrap().is_empty(), "{other}");
    }

    #[test]
    fn a_drop_policy_blocks_what_no_rule_of_its_chain_accepts() {
        let doc = r#"{"nftables": [{"chain": {"family": "inet", "table": "fw", "name": "in", "hook": "input", "prio": 0, "policy": "drop"}}, {"rule": {"family": "inet", "table": "fw", "chain": "in", "expr": [{"match": {"op": "==", "left": {"payload": {"protocol": "udp", "field": "dport"}}, "right": "mdns"}}, {"accept": null}]}}]}"#;
        let b = nft_blockers(doc, NEEDS).unwrap();
        assert_eq!(
            b.len(),
            1,
            "mDNS is accepted, the agent port is not: {b:#?}"
        );
        assert_eq!(b[0].what, "tcp 9100");
    }

    #[test]
    fn the_labs_random_loss_and_forwarding_chains_are_not_blockers() {
        // The lab's loss table (netdev ingress, numgen drop) matches no port,
        // and a forward chain carries other machines' traffic.
        let doc = r#"{"nftables": [{"chain": {"family": "netdev", "table": "loss", "name": "in", "hook": "ingress", "prio": 0, "policy": "accept"}}, {"rule": {"family": "netdev", "table": "loss", "chain": "in", "expr": [{"match": {"op": "<", "left": {"numgen": {"mode": "random", "mod": 100, "offset": 0}}, "right": 20}}, {"drop": null}]}}, {"chain": {"family": "inet", "table": "f", "name": "fwd", "hook": "forward", "prio": 0, "policy": "drop"}}]}"#;
        assert!(nft_blockers(doc, NEEDS).unwrap().is_empty());
    }

    #[test]
    fn unreadable_nft_output_is_an_error_not_a_clean_bill() {
        assert!(nft_blockers("not json", NEEDS).is_err());
        assert!(nft_blockers("{}", NEEDS).is_err());
    }

    /// The shape of `iptables-save` (iptables 1.8, legacy backend).
    #[test]
    fn iptables_drops_rejects_and_a_drop_policy_are_found() {
        let text = "*filter\n:INPUT DROP [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n\
                    -A INPUT -p tcp -m tcp --dport 22 -j ACCEPT\n\
                    -A INPUT -p tcp -m tcp --dport 9100 -j ACCEPT\n\
                    -A OUTPUT -p udp -m udp --dport 5353 -j DROP\n\
                    -A INPUT -s 192.168.0.0/16 -p udp -m udp --sport 5353 -j REJECT\nCOMMIT\n";
        let b = iptables_blockers(text, NEEDS);
        let got: Vec<(&str, &str, bool)> = b
            .iter()
            .map(|x| (x.chain.as_str(), x.what.as_str(), x.partial))
            .collect();
        assert_eq!(
            got,
            vec![
                ("iptables OUTPUT", "udp 5353", false),
                ("iptables INPUT", "udp 5353", true),
                ("iptables INPUT", "udp 5353", true),
            ],
            "{b:#?}"
        );
    }
}
