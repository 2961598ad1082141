#!/usr/bin/python3
"""The python-zeroconf peer: browse _rlx._tcp until N instances are fully
resolved (address, port and TXT) or DEADLINE_S passes, then print one JSON
line: {"found": [[name, ms], ...], "complete_ms": ms or null, "import_ms": ms,
"started_unix_us": us}.

usage: zc_browse.py IP N DEADLINE_S [v6]

With v6 (an IPv6-only lab) it browses over IPv6 on every interface.

Times are from the creation of the Zeroconf instance (after imports, like
rlx-discover's found_ms, which counts from the start of discovery), and
started_unix_us says when that was in Unix time, so that the benchmark can
time this peer from its spawn like every other tool. This is
python-zeroconf's documented async browsing pattern: AsyncServiceBrowser,
and an AsyncServiceInfo request per added instance. Runs only inside a lab
namespace.
"""
import time

t_exec = time.monotonic()
import asyncio  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402

from zeroconf import InterfaceChoice, IPVersion, ServiceStateChange  # noqa: E402
from zeroconf.asyncio import (  # noqa: E402
    AsyncServiceBrowser,
    AsyncServiceInfo,
    AsyncZeroconf,
)

TYPE = "_rlx._tcp.local."


async def main(ip, n, deadline, v6):
    t0 = time.monotonic()
    started_unix_us = time.time_ns() // 1000
    if v6:
        azc = AsyncZeroconf(interfaces=InterfaceChoice.All, ip_version=IPVersion.V6Only)
    else:
        azc = AsyncZeroconf(interfaces=[ip], ip_version=IPVersion.V4Only)
    found = {}
    pending = set()
    done = asyncio.Event()
    end = t0 + deadline

    async def resolve(name):
        info = AsyncServiceInfo(TYPE, name)
        while time.monotonic() < end:
            left_ms = max(1, int((end - time.monotonic()) * 1000))
            ok = await info.async_request(azc.zeroconf, min(3000, left_ms))
            if ok and info.parsed_addresses() and info.port and info.properties:
                found[name] = (time.monotonic() - t0) * 1000.0
                if len(found) >= n:
                    done.set()
                return

    def on_change(zeroconf, service_type, name, state_change):
        if state_change is ServiceStateChange.Added and name not in pending:
            pending.add(name)
            asyncio.ensure_future(resolve(name))

    browser = AsyncServiceBrowser(azc.zeroconf, TYPE, handlers=[on_change])
    try:
        await asyncio.wait_for(done.wait(), deadline)
    except asyncio.TimeoutError:
        pass
    out = {
        "found": sorted(([k, v] for k, v in found.items()), key=lambda kv: kv[1]),
        "complete_ms": max(found.values()) if len(found) >= n else None,
        "import_ms": (t0 - t_exec) * 1000.0,
        "started_unix_us": started_unix_us,
    }
    print(json.dumps(out), flush=True)
    await browser.async_cancel()
    await azc.async_close()


asyncio.run(
    main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4:5] == ["v6"])
)
