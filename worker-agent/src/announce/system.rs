//! **Announcing through the system's responder** — the DNS-SD client API
//! (`dns_sd.h`: `DNSServiceRegister`, `DNSServiceUpdateRecord`,
//! `DNSServiceRefDeallocate`) instead of a second responder on UDP 5353.
//!
//! On macOS every box runs mDNSResponder, which owns port 5353. A second
//! responder beside it shares the port (SO_REUSEPORT): unicast replies and
//! QU answers reach only one of the two sockets (RFC 6762 §15.1), the two
//! defend and probe names independently, and Bonjour's sleep proxy and
//! interface handling do not know about the agent's records. Handing the
//! service to mDNSResponder makes the agent one more service of the box's
//! one responder, which is how every Mac program announces itself.
//!
//! The same API is offered on Linux by avahi's compatibility library
//! (`libdns_sd.so.1`, package libavahi-compat-libdnssd1), which talks to
//! avahi-daemon over D-Bus; that is how this backend is tested here, and
//! what `responder = "system"` uses on a Linux box. docs/protocol.md,
//! "Responders", says why it is not the default there.
//!
//! The library is opened at run time (as NVML and Vulkan are), so the agent
//! has no link-time dependency on it and a box without it gets an error
//! that names the library and the package, not a loader failure. The
//! registration lives on its own thread: a `DNSServiceRef` may be used by
//! one thread at a time, and its replies arrive on a socket that the
//! thread polls (`DNSServiceRefSockFD`, `DNSServiceProcessResult`).
//!
//! What the system responder decides, not the agent:
//! - the host name in the SRV target (the system's local host name, which
//!   mDNSResponder and avahi already keep unique on the LAN by renaming);
//! - the address records, and following interfaces as they come and go;
//! - probing, conflict renames (reported back and logged), announcing and
//!   the goodbye when the registration is deallocated.
//!
//! With `--interface` the service is registered once per named interface
//! (the API takes one interface index per registration); without it, on
//! every interface the system responder uses (interface index 0).

use super::ifaces::lock;
use super::options::{AnnounceError, DAEMON_REPLY_TIMEOUT};
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tracing::{debug, info, warn};

/// Where the DNS-SD client API lives: libSystem on macOS (which re-exports
/// libsystem_dnssd), avahi's compatibility library elsewhere.
#[cfg(target_os = "macos")]
pub(super) const LIBRARY: &str = "/usr/lib/libSystem.B.dylib";
/// Where the DNS-SD client API lives: libSystem on macOS (which re-exports
/// libsystem_dnssd), avahi's compatibility library elsewhere.
#[cfg(not(target_os = "macos"))]
pub(super) const LIBRARY: &str = "libdns_sd.so.1";

/// What to install when [`LIBRARY`] is missing.
#[cfg(target_os = "macos")]
const PROVIDED_BY: &str = "it is part of macOS";
/// What to install when [`LIBRARY`] is missing.
#[cfg(not(target_os = "macos"))]
const PROVIDED_BY: &str =
    "install libavahi-compat-libdnssd1 (Debian, Ubuntu) or avahi-compat-libdns_sd (Fedora, RHEL)";

/// The daemon the API talks to, for messages.
#[cfg(target_os = "macos")]
const DAEMON: &str = "mDNSResponder";
/// The daemon the API talks to, for messages.
#[cfg(not(target_os = "macos"))]
const DAEMON: &str = "avahi-daemon";

/// `kDNSServiceFlagsAdd`: the reply reports a registration, not a removal.
const FLAGS_ADD: u32 = 0x2;
/// `kDNSServiceErr_NameConflict`.
const ERR_NAME_CONFLICT: i32 = -65548;
/// `kDNSServiceErr_ServiceNotRunning`.
const ERR_SERVICE_NOT_RUNNING: i32 = -65563;
/// `kDNSServiceErr_Unknown`: what avahi's library returns when it cannot
/// reach avahi-daemon.
const ERR_UNKNOWN: i32 = -65537;

/// How long the thread waits on the sockets before looking at its commands:
/// the latency of a TXT update and of the goodbye.
const POLL: Duration = Duration::from_millis(50);

type ServiceRef = *mut c_void;
type RegisterReply = unsafe extern "C" fn(
    ServiceRef,
    u32,
    i32,
    *const c_char,
    *const c_char,
    *const c_char,
    *mut c_void,
);
type RegisterFn = unsafe extern "C" fn(
    *mut ServiceRef,
    u32,
    u32,
    *const c_char,
    *const c_char,
    *const c_char,
    *const c_char,
    u16,
    u16,
    *const c_void,
    Option<RegisterReply>,
    *mut c_void,
) -> i32;
type SockFdFn = unsafe extern "C" fn(ServiceRef) -> c_int;
type ProcessFn = unsafe extern "C" fn(ServiceRef) -> i32;
type DeallocFn = unsafe extern "C" fn(ServiceRef);
type UpdateFn = unsafe extern "C" fn(ServiceRef, *mut c_void, u32, u16, *const c_void, u32) -> i32;

/// The functions of [`LIBRARY`] this backend calls, with the library kept
/// open as long as they may be.
struct Api {
    register: RegisterFn,
    sock_fd: SockFdFn,
    process: ProcessFn,
    dealloc: DeallocFn,
    update: UpdateFn,
    _lib: libloading::Library,
}

impl Api {
    fn load() -> Result<Api, AnnounceError> {
        let unavailable = |why: String| AnnounceError::System(why);
        // SAFETY: loading a system library runs its initialisers, which for
        // libSystem and libdns_sd do nothing but set up their own state.
        let lib = unsafe { libloading::Library::new(LIBRARY) }.map_err(|e| {
            unavailable(format!(
                "cannot open {LIBRARY} ({e}): {PROVIDED_BY}, or use the built-in responder \
                 (responder = \"builtin\")"
            ))
        })?;
        // SAFETY: the types are dns_sd.h's prototypes, the same on macOS
        // and in avahi's library.
        unsafe {
            let sym = |name: &str| {
                unavailable(format!(
                    "{LIBRARY} has no {name}: it is not a DNS-SD client library"
                ))
            };
            Ok(Api {
                register: *lib
                    .get::<RegisterFn>(b"DNSServiceRegister\0")
                    .map_err(|_| sym("DNSServiceRegister"))?,
                sock_fd: *lib
                    .get::<SockFdFn>(b"DNSServiceRefSockFD\0")
                    .map_err(|_| sym("DNSServiceRefSockFD"))?,
                process: *lib
                    .get::<ProcessFn>(b"DNSServiceProcessResult\0")
                    .map_err(|_| sym("DNSServiceProcessResult"))?,
                dealloc: *lib
                    .get::<DeallocFn>(b"DNSServiceRefDeallocate\0")
                    .map_err(|_| sym("DNSServiceRefDeallocate"))?,
                update: *lib
                    .get::<UpdateFn>(b"DNSServiceUpdateRecord\0")
                    .map_err(|_| sym("DNSServiceUpdateRecord"))?,
                _lib: lib,
            })
        }
    }
}

/// Whether [`LIBRARY`] opens and has the functions this backend calls.
pub(super) fn probe_library() -> Result<(), AnnounceError> {
    Api::load().map(drop)
}

/// What one registration reports back from its thread.
struct Context {
    /// The instance name asked for, to tell a rename.
    asked: String,
    /// Which interface the registration is for, for the logs.
    on: String,
    /// The announced names (instance, host), shared with the announcer.
    names: Arc<Mutex<(String, String)>>,
    /// The daemon confirmed the registration once (the first confirmation
    /// is logged, later ones, such as after a TXT update, are not).
    confirmed: AtomicBool,
}

/// One registration and the context its replies are given.
struct Registered {
    sd: ServiceRef,
    context: Box<Context>,
    /// Its socket failed or the daemon withdrew it: no longer polled.
    dead: bool,
}

/// The registrations, moved to their thread once made.
struct Owned {
    api: Api,
    regs: Vec<Registered>,
}

// SAFETY: a `DNSServiceRef` may be used from any thread, one at a time
// (dns_sd.h); after `start` moves it, only the registration thread does.
unsafe impl Send for Owned {}

enum Command {
    /// New TXT rdata, replacing the registered one.
    Txt(Vec<u8>),
    /// Deallocate every registration (the goodbye) and end the thread.
    Stop(tokio::sync::oneshot::Sender<()>),
}

/// What to register.
pub(super) struct Spec<'a> {
    /// The instance name (`box`).
    pub instance: &'a str,
    /// The service type without the domain (`_rlx._tcp`).
    pub service: &'a str,
    /// The SRV port (the worker's).
    pub port: u16,
    /// The TXT rdata ([`txt_rdata`]).
    pub txt: Vec<u8>,
    /// (interface name, index) to register on; empty = every interface the
    /// system responder uses.
    pub interfaces: Vec<(String, u32)>,
}

/// The registration thread's handle: send a new TXT record, stop.
#[derive(Clone)]
pub(super) struct Handle(mpsc::Sender<Command>);

impl Handle {
    /// Replaces the TXT record (the system responder announces it, RFC 6762
    /// §8.4, without probing again).
    pub(super) fn update_txt(&self, txt: Vec<u8>) -> Result<(), AnnounceError> {
        self.0.send(Command::Txt(txt)).map_err(|_| {
            AnnounceError::System(format!(
                "the {DAEMON} registration thread has ended; restart the agent"
            ))
        })
    }
}

/// The running registration.
pub(super) struct System {
    handle: Handle,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl System {
    /// Registers the service with the system responder. Errors name the
    /// library or the daemon that is missing; the service is then not
    /// registered anywhere.
    pub(super) fn start(
        spec: Spec<'_>,
        names: Arc<Mutex<(String, String)>>,
    ) -> Result<System, AnnounceError> {
        let api = Api::load()?;
        let name = cstring("instance name", spec.instance)?;
        let service = cstring("service type", spec.service)?;
        let txt_len = u16::try_from(spec.txt.len()).map_err(|_| {
            AnnounceError::System(format!(
                "a TXT record of {} bytes is over the 65535 the API takes",
                spec.txt.len()
            ))
        })?;
        let targets: Vec<(String, u32)> = if spec.interfaces.is_empty() {
            vec![("every interface".to_string(), 0)]
        } else {
            spec.interfaces
        };
        let mut owned = Owned {
            api,
            regs: Vec::new(),
        };
        for (on, index) in targets {
            let context = Box::new(Context {
                asked: spec.instance.to_string(),
                on: on.clone(),
                names: names.clone(),
                confirmed: AtomicBool::new(false),
            });
            let mut sd: ServiceRef = std::ptr::null_mut();
            // SAFETY: every pointer is valid for the call; `context` is
            // boxed and lives in `owned` until after the deallocation, the
            // last point a reply can be delivered.
            let err = unsafe {
                (owned.api.register)(
                    &mut sd,
                    0,
                    index,
                    name.as_ptr(),
                    service.as_ptr(),
                    std::ptr::null(),
                    std::ptr::null(),
                    spec.port.to_be(),
                    txt_len,
                    spec.txt.as_ptr().cast(),
                    Some(on_reply),
                    (&*context as *const Context).cast_mut().cast(),
                )
            };
            if err != 0 {
                stop_all(&mut owned);
                return Err(AnnounceError::System(format!(
                    "cannot register {:?} on {on} with {DAEMON}: {}",
                    spec.instance,
                    describe(err)
                )));
            }
            debug!(interface = %on, "mDNS: registered with {DAEMON}");
            owned.regs.push(Registered {
                sd,
                context,
                dead: false,
            });
        }
        let (tx, rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("rlx-dns-sd".into())
            .spawn(move || serve(owned, rx))
            .map_err(|e| AnnounceError::System(format!("cannot start its thread: {e}")))?;
        info!("mDNS: announcing through {DAEMON} ({LIBRARY})");
        Ok(System {
            handle: Handle(tx),
            thread: Some(thread),
        })
    }

    /// A handle for the announcer's watcher.
    pub(super) fn handle(&self) -> Handle {
        self.handle.clone()
    }

    /// Deallocates the registrations, so the system responder sends the
    /// goodbye packets (TTL 0), and ends the thread.
    pub(super) async fn shutdown(mut self) -> Result<(), AnnounceError> {
        let (done, stopped) = tokio::sync::oneshot::channel();
        if self.handle.0.send(Command::Stop(done)).is_ok() {
            let waited = tokio::time::timeout(DAEMON_REPLY_TIMEOUT, stopped).await;
            if waited.is_err() {
                return Err(AnnounceError::Timeout {
                    what: "the system responder's goodbye",
                });
            }
        }
        if let Some(t) = self.thread.take() {
            let _ = tokio::task::spawn_blocking(move || t.join()).await;
        }
        Ok(())
    }
}

impl Drop for System {
    /// Dropped without [`System::shutdown`]: the thread still deallocates
    /// (so the goodbye goes out) when its channel closes.
    fn drop(&mut self) {
        let (done, _) = tokio::sync::oneshot::channel();
        let _ = self.handle.0.send(Command::Stop(done));
    }
}

/// The registration thread: delivers the daemon's replies, applies TXT
/// updates, deallocates on stop or when the announcer is gone.
fn serve(mut owned: Owned, rx: mpsc::Receiver<Command>) {
    loop {
        let mut polled: Vec<(usize, libc::pollfd)> = Vec::new();
        for (k, r) in owned.regs.iter().enumerate().filter(|(_, r)| !r.dead) {
            // SAFETY: `r.sd` is a live registration.
            let fd = unsafe { (owned.api.sock_fd)(r.sd) };
            if fd >= 0 {
                polled.push((
                    k,
                    libc::pollfd {
                        fd,
                        events: libc::POLLIN,
                        revents: 0,
                    },
                ));
            }
        }
        let mut fds: Vec<libc::pollfd> = polled.iter().map(|(_, p)| *p).collect();
        if fds.is_empty() {
            std::thread::sleep(POLL);
        } else {
            // SAFETY: `fds` is a valid array of `fds.len()` pollfds.
            unsafe {
                libc::poll(
                    fds.as_mut_ptr(),
                    fds.len() as libc::nfds_t,
                    POLL.as_millis() as c_int,
                )
            };
        }
        for (p, (k, _)) in fds.iter().zip(&polled) {
            if p.revents == 0 {
                continue;
            }
            let r = &mut owned.regs[*k];
            // SAFETY: `r.sd` is live; the reply callback gets `r.context`.
            let err = unsafe { (owned.api.process)(r.sd) };
            if err != 0 {
                warn!(
                    interface = %r.context.on,
                    "mDNS: lost the connection to {DAEMON} ({}); the service is no longer \
                     announced there. Restart the agent once {DAEMON} runs again",
                    describe(err)
                );
                r.dead = true;
            }
        }
        loop {
            match rx.try_recv() {
                Ok(Command::Txt(txt)) => apply_txt(&owned, &txt),
                Ok(Command::Stop(done)) => {
                    stop_all(&mut owned);
                    let _ = done.send(());
                    return;
                }
                Err(mpsc::TryRecvError::Empty) => break,
                Err(mpsc::TryRecvError::Disconnected) => {
                    stop_all(&mut owned);
                    return;
                }
            }
        }
    }
}

fn apply_txt(owned: &Owned, txt: &[u8]) {
    let Ok(len) = u16::try_from(txt.len()) else {
        warn!(
            "mDNS: a TXT record of {} bytes is over the 65535 the API takes; not updated",
            txt.len()
        );
        return;
    };
    for r in owned.regs.iter().filter(|r| !r.dead) {
        // SAFETY: `r.sd` is live; a null record ref is the primary TXT
        // record (dns_sd.h); `txt` outlives the call.
        let err = unsafe {
            (owned.api.update)(r.sd, std::ptr::null_mut(), 0, len, txt.as_ptr().cast(), 0)
        };
        if err != 0 {
            warn!(interface = %r.context.on, "mDNS: {DAEMON} refused the new TXT record: {}", describe(err));
        }
    }
}

/// Deallocates every registration: the system responder then sends their
/// goodbye packets.
fn stop_all(owned: &mut Owned) {
    for r in owned.regs.drain(..) {
        // SAFETY: each registration is deallocated once, here; no reply is
        // delivered after it, so its context may be dropped next.
        unsafe { (owned.api.dealloc)(r.sd) };
        debug!(interface = %r.context.on, "mDNS: registration with {DAEMON} withdrawn");
    }
}

/// `DNSServiceRegisterReply`: the daemon registered the service (perhaps
/// under a new name after a conflict), or failed to.
unsafe extern "C" fn on_reply(
    _sd: ServiceRef,
    flags: u32,
    err: i32,
    name: *const c_char,
    regtype: *const c_char,
    domain: *const c_char,
    context: *mut c_void,
) {
    // No panic may unwind into C.
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: `context` is the `Context` given to DNSServiceRegister,
        // alive until the deallocation; the strings are the daemon's, valid
        // for the call.
        let ctx = unsafe { &*(context as *const Context) };
        let text = |p: *const c_char| {
            if p.is_null() {
                String::new()
            } else {
                unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
            }
        };
        if err != 0 {
            warn!(
                interface = %ctx.on,
                "mDNS: {DAEMON} could not announce {:?}: {}",
                ctx.asked,
                describe(err)
            );
            return;
        }
        let (name, regtype, domain) = (text(name), text(regtype), text(domain));
        // mDNSResponder sets kDNSServiceFlagsAdd on every successful
        // registration and clears it only when a wide-area one is dropped;
        // avahi's library never sets it. So a reply without it is a
        // withdrawal only on macOS.
        if flags & FLAGS_ADD == 0 && cfg!(target_os = "macos") {
            warn!(interface = %ctx.on, "mDNS: {DAEMON} withdrew {name:?} in {domain:?}");
            return;
        }
        let fullname = format!(
            "{name}.{}{}",
            with_dot(&regtype),
            with_dot(if domain.is_empty() { "local" } else { &domain })
        );
        let mut names = lock(&ctx.names);
        if name != ctx.asked {
            warn!(
                interface = %ctx.on,
                "mDNS name conflict: instance name {:?} is already taken on the network; \
                 {DAEMON} announces it as {name:?} (RFC 6762 §9). Give each agent a distinct \
                 --name to avoid this",
                ctx.asked
            );
        } else if !ctx.confirmed.swap(true, Ordering::Relaxed) {
            info!(interface = %ctx.on, name = %fullname, "mDNS: announced through {DAEMON}");
        }
        names.0 = fullname;
    });
}

fn with_dot(s: &str) -> String {
    if s.ends_with('.') {
        s.to_string()
    } else {
        format!("{s}.")
    }
}

fn cstring(what: &str, s: &str) -> Result<CString, AnnounceError> {
    CString::new(s).map_err(|_| AnnounceError::System(format!("the {what} {s:?} contains a NUL")))
}

/// A `DNSServiceErrorType` in words, with what to do for the likely ones.
fn describe(err: i32) -> String {
    match err {
        ERR_SERVICE_NOT_RUNNING | ERR_UNKNOWN => format!(
            "error {err}: {DAEMON} is not running or not reachable (start it, or use the \
             built-in responder: responder = \"builtin\")"
        ),
        ERR_NAME_CONFLICT => format!("error {err}: the name is taken and renaming is off"),
        _ => format!("error {err} (dns_sd.h's kDNSServiceErr_ codes)"),
    }
}

/// TXT rdata (RFC 6763 §6): each `key=value` as one length-prefixed
/// string; an empty record is one empty string (RFC 6763 §6.1).
pub(super) fn txt_rdata(pairs: &[(String, String)]) -> Result<Vec<u8>, AnnounceError> {
    let mut out = Vec::new();
    for (k, v) in pairs {
        let s = format!("{k}={v}");
        let len = u8::try_from(s.len()).map_err(|_| {
            AnnounceError::System(format!(
                "the TXT string for {k:?} is {} bytes, over 255",
                s.len()
            ))
        })?;
        out.push(len);
        out.extend_from_slice(s.as_bytes());
    }
    if out.is_empty() {
        out.push(0);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn txt_rdata_is_length_prefixed_strings_and_never_empty() {
        let pairs = vec![
            ("txtvers".to_string(), "1".to_string()),
            ("k".to_string(), String::new()),
        ];
        assert_eq!(txt_rdata(&pairs).unwrap(), b"\x09txtvers=1\x02k=".to_vec());
        assert_eq!(txt_rdata(&[]).unwrap(), vec![0]);
        let long = vec![("k".to_string(), "x".repeat(300))];
        let err = txt_rdata(&long).unwrap_err().to_string();
        assert!(err.contains("over 255"), "{err}");
    }

    #[test]
    fn an_unreachable_daemon_is_named_with_what_to_do() {
        let d = describe(ERR_SERVICE_NOT_RUNNING);
        assert!(d.contains(DAEMON) && d.contains("builtin"), "{d}");
    }
}
