#!/usr/bin/python3
"""The python-zeroconf peer under churn: browse _rlx._tcp for DURATION_S
and print one JSON line per browser event, as it happens:
{"event": "added"|"updated"|"removed", "name": NAME, "wall_ms": ms}
(wall_ms: Unix time in ms, so the benchmark can set it beside its ground
truth). "added" and "updated" are python-zeroconf's ServiceStateChange as
its AsyncServiceBrowser reports them (an instance whose TXT changed is
"updated"); no handshake, no health check: that is what the browser alone
tells an application. Prints "ready" first. Runs only inside a lab
namespace.

usage: zc_watch.py IP DURATION_S
"""
import asyncio
import json
import sys
import time

from zeroconf import IPVersion, ServiceStateChange
from zeroconf.asyncio import AsyncServiceBrowser, AsyncZeroconf

TYPE = "_rlx._tcp.local."
WORDS = {
    ServiceStateChange.Added: "added",
    ServiceStateChange.Updated: "updated",
    ServiceStateChange.Removed: "removed",
}


async def main(ip, duration):
    azc = AsyncZeroconf(interfaces=[ip], ip_version=IPVersion.V4Only)

    def on_change(zeroconf, service_type, name, state_change):
        line = {
            "event": WORDS.get(state_change, str(state_change)),
            "name": name[: -len(TYPE) - 1] if name.endswith("." + TYPE) else name,
            "wall_ms": time.time() * 1000.0,
        }
        print(json.dumps(line), flush=True)

    browser = AsyncServiceBrowser(azc.zeroconf, [TYPE], handlers=[on_change])
    print("ready", flush=True)
    await asyncio.sleep(duration)
    await browser.async_cancel()
    await azc.async_close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], float(sys.argv[2])))
