"""nova's own Placement report client, driven the way nova-compute's resource tracker drives it.

Reads one JSON document on stdin (see ``bench/nova-report-client.ts``, which writes it), runs the
scenarios it names against a Placement with ``noauth2``, and prints one JSON document on stdout.

One pass is what the resource tracker's ``_update_to_placement`` does: ensure the root and take a
copy of the cached tree, read the allocations of every provider in the tree (the Zed resource
tracker does this on every pass, for PCI allocation healing), let a driver-like step put the
desired providers, inventories and traits into the copy, and flush it with
``update_from_provider_tree``; a generation conflict redrives the whole pass, up to four attempts,
as the tracker's ``retrying`` decorator does. "RC only" is the same pass less the allocation reads
(their requests and their time), which is what the report client itself sends.

Requests are counted by wrapping keystoneauth's ``Session.request``, which every report-client
request goes through. The one ``GET /`` openstacksdk sends to discover versions when the client is
built is reported apart (``setup``), since a long-running nova-compute pays it once.

Run with the system python3 (Debian's python3-nova lives there), never inside a virtualenv.
"""
# nova's own commands patch eventlet before anything else is imported; without it the deepcopy of
# the provider tree fails on its lock.
import nova.monkey_patch  # noqa: F401  pylint: disable=unused-import

import json
import logging
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from importlib import metadata

import retrying
from keystoneauth1 import session as ks_session

from nova import conf as nova_conf
from nova import context as nova_context
from nova import exception
from nova.scheduler.client import report

CONF = nova_conf.CONF
METHODS = ("GET", "PUT", "POST", "DELETE")


class Counter:
    """Requests seen by keystoneauth, split by method and by whether they read allocations."""

    def __init__(self):
        self.reset()

    def reset(self):
        self.by_method = {m: 0 for m in METHODS}
        self.conflicts = 0
        self.allocation_reads = 0
        self.routes = {}

    def record(self, method, url, status):
        method = method.upper()
        self.by_method[method] = self.by_method.get(method, 0) + 1
        if status == 409:
            self.conflicts += 1
        path = urllib.parse.urlsplit(url).path
        route = route_of(method, path)
        self.routes[route] = self.routes.get(route, 0) + 1
        if method == "GET" and (path.endswith("/allocations") or path.startswith("/allocations/")):
            self.allocation_reads += 1


def route_of(method, path):
    """``GET /resource_providers/{u}/allocations`` style: ids folded so routes can be summed."""
    parts = path.strip("/").split("/")
    if len(parts) >= 2 and parts[0] in ("resource_providers", "allocations"):
        parts[1] = "{id}"
    return f"{method} /{'/'.join(parts)}"


COUNTER = Counter()
_ORIGINAL_REQUEST = ks_session.Session.request


def _counted_request(self, url, method, *args, **kwargs):
    try:
        resp = _ORIGINAL_REQUEST(self, url, method, *args, **kwargs)
    except Exception as e:
        status = getattr(e, "http_status", None)
        COUNTER.record(method, url, status)
        raise
    COUNTER.record(method, url, resp.status_code)
    return resp


ks_session.Session.request = _counted_request


def configure(placement_url):
    """nova's [placement] options for a noauth2 Placement: a fixed token and the endpoint itself
    (auth_type none sends a token noauth2 refuses)."""
    conf = tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False)
    conf.write(
        "[placement]\nauth_type = admin_token\n"
        f"endpoint = {placement_url}\ntoken = admin\n"
    )
    conf.close()
    CONF([], project="nova", default_config_files=[conf.name])
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)


def rss_kb():
    out = {}
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0])
    return out


def claim(placement_url, root, spec):
    """A scheduler's claim on the root, sent around the report client so it is not counted."""
    body = json.dumps({
        "allocations": {root: {"resources": spec["resources"]}},
        "project_id": spec["project_id"],
        "user_id": spec["user_id"],
        "consumer_generation": None,
    }).encode()
    req = urllib.request.Request(
        f"{placement_url}/allocations/{spec['consumer']}", data=body, method="PUT",
        headers={"Content-Type": "application/json", "X-Auth-Token": "admin",
                 "OpenStack-API-Version": "placement 1.28"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        if resp.status != 204:
            raise RuntimeError(f"claim {spec['consumer']}: HTTP {resp.status}")


class Host:
    """The resource tracker's side of one compute node, with the report client it owns."""

    def __init__(self, client, nodename, root_uuid):
        self.client = client
        self.nodename = nodename
        self.root_uuid = root_uuid
        self.ctx = nova_context.get_admin_context()
        self.attempts = 0
        self.allocation_seconds = 0.0

    def apply(self, tree, providers):
        """What a virt driver's update_provider_tree does: create missing children (parents
        first), then set every provider's inventory and traits."""
        for p in providers:
            if not tree.exists(p["uuid"]):
                tree.new_child(p["name"], p["parent_uuid"], uuid=p["uuid"])
            tree.update_inventory(p["uuid"], p["inventories"])
            tree.update_traits(p["uuid"], p["traits"])

    def update(self, providers, with_allocations):
        @retrying.retry(
            stop_max_attempt_number=4,
            retry_on_exception=lambda e: isinstance(
                e, (exception.ResourceProviderUpdateConflict, exception.PlacementReshapeConflict)))
        def one_pass():
            self.attempts += 1
            tree = self.client.get_provider_tree_and_ensure_root(
                self.ctx, self.root_uuid, name=self.nodename)
            if with_allocations:
                t0 = time.perf_counter()
                self.client.get_allocations_for_provider_tree(self.ctx, self.nodename)
                self.allocation_seconds += time.perf_counter() - t0
            self.apply(tree, providers)
            self.client.update_from_provider_tree(self.ctx, tree)

        one_pass()

    def measure(self, providers, with_allocations):
        COUNTER.reset()
        self.attempts = 0
        self.allocation_seconds = 0.0
        cpu0 = time.process_time()
        t0 = time.perf_counter()
        self.update(providers, with_allocations)
        wall = time.perf_counter() - t0
        cpu = time.process_time() - cpu0
        by_method = dict(COUNTER.by_method)
        rc_only = dict(by_method)
        rc_only["GET"] -= COUNTER.allocation_reads
        return {
            "requests": by_method,
            "conflicts": COUNTER.conflicts,
            "attempts": self.attempts,
            "wall_ms": round(wall * 1000, 2),
            "cpu_ms": round(cpu * 1000, 2),
            "routes": dict(sorted(COUNTER.routes.items())),
            "rc_only": {
                "requests": rc_only,
                "wall_ms": round((wall - self.allocation_seconds) * 1000, 2),
            },
        }

    def expire_associations(self, seconds):
        """As if `seconds` had passed since every provider's traits and aggregates were read."""
        times = self.client._association_refresh_time  # pylint: disable=protected-access
        for uuid in list(times):
            times[uuid] -= seconds


def main():
    spec = json.load(sys.stdin)
    url = spec["placement_url"].rstrip("/")
    configure(url)
    providers = spec["tree"]
    root = spec["root_uuid"]
    COUNTER.reset()
    # Building the client makes openstacksdk discover Placement's versions (one GET /): counted
    # apart, so the scenarios hold only what a running nova-compute sends.
    client = report.SchedulerReportClient()
    setup = sum(COUNTER.by_method.values())
    host = Host(client, spec["nodename"], root)
    with_allocations = spec.get("with_allocations", True)
    refresh_s = CONF.compute.resource_provider_association_refresh
    scenarios = {}
    for name in spec["scenarios"]:
        if name == "first" or name == "steady":
            scenarios[name] = host.measure(providers, with_allocations)
        elif name == "refresh":
            host.expire_associations(refresh_s + 1)
            scenarios[name] = host.measure(providers, with_allocations)
        elif name == "claimed":
            claim(url, root, spec["claim"])
            scenarios[name] = host.measure(spec["tree_after_claim"], with_allocations)
        elif name == "consumers":
            # Instances on the host before a steady pass (not counted): each is a consumer the
            # resource tracker's allocation reads fetch one by one.
            for c in spec.get("consumers", []):
                claim(url, root, c)
        else:
            raise SystemExit(f"report_client.py: unknown scenario {name!r}")
    idle = float(spec.get("idle_s", 0))
    if idle > 0:
        time.sleep(idle)
    mem = rss_kb()
    json.dump({
        "nova_version": metadata.version("nova"),
        "refresh_interval_s": refresh_s,
        "setup_requests": setup,
        "scenarios": scenarios,
        "vm_rss_kb": mem.get("VmRSS", 0),
        "vm_hwm_kb": mem.get("VmHWM", 0),
    }, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
