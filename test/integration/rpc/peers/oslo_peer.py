#!/usr/bin/python3
"""A real oslo.messaging peer for compute-agent's integration tests and benchmark.

Run with Debian 12's interpreter (/usr/bin/python3), which sees python3-oslo.messaging 14.0.3, or
Debian 13's in the release root (oslo.messaging 16.1; test/integration/rpc/oslo-release.ts).
[DEFAULT] options go as --default key=value, [oslo_messaging_rabbit] ones as --rabbit key=value.

  oslo_peer.py server --url U --exchange X --topic T --server H [--rabbit k=v ...]
      An RPC server (threading executor) with endpoints echo, fail, fail_custom, slow,
      get_host_uptime and record (a cast sink). Prints READY once consuming, one JSON line per
      record() cast, and stops on SIGTERM or when stdin closes.

  oslo_peer.py client --url U --exchange X --topic T [--server H] --ops JSON [--rabbit k=v ...]
      Runs a list of operations in order on one RPCClient and prints one JSON line per operation:
      {"op": "call", "method": m, "args": {...}, "timeout": s, "cm_timeout": s, "version": v,
       "namespace": ns, "fanout": bool, "server": host} or {"op": "cast", ...} or
      {"op": "bench", "method": m, "args": {...}, "count": n, "threads": t, "warmup": w}.
      Results: {"ok": true, "result": R} or {"ok": false, "class": C, "module": M,
      "message": str(e), "exc_type": RemoteError.exc_type, "value": RemoteError.value};
      bench prints {"ok": true, "calls": n, "seconds": s, "rate": r, "p50_ms": x, "p99_ms": y}.
"""
import argparse
import json
import os
import signal
import sys
import tempfile
import threading
import time

from oslo_config import cfg
import oslo_messaging


def configure(args):
    conf_lines = [
        "[DEFAULT]",
        "transport_url = %s" % args.url,
        "control_exchange = %s" % args.exchange,
    ]
    for kv in args.default or []:
        conf_lines.append(kv.replace("=", " = ", 1))
    conf_lines += [
        "[oslo_messaging_metrics]",
        "metrics_thread_stop_timeout = 0",
        "[oslo_messaging_rabbit]",
    ]
    for kv in args.rabbit or []:
        conf_lines.append(kv.replace("=", " = ", 1))
    fd, path = tempfile.mkstemp(prefix="oslo-peer-", suffix=".conf")
    with os.fdopen(fd, "w") as f:
        f.write("\n".join(conf_lines) + "\n")
    try:
        cfg.CONF(["--config-file", path], project="oslo-peer")
    finally:
        os.unlink(path)
    return oslo_messaging.get_rpc_transport(cfg.CONF)


class HarnessError(Exception):
    def __init__(self, message, **kwargs):
        super().__init__(message)
        self.kwargs = kwargs


class Endpoint(object):
    target = oslo_messaging.Target(version="6.0")

    def echo(self, ctxt, payload=None):
        return {"echo": payload, "request_id": ctxt.get("request_id")}

    def fail(self, ctxt, message="boom"):
        raise ValueError(message)

    def fail_custom(self, ctxt, **kwargs):
        raise HarnessError("custom failure", **kwargs)

    def slow(self, ctxt, seconds=1):
        time.sleep(seconds)
        return {"slept": seconds}

    def get_host_uptime(self, ctxt):
        return " 00:00:00 up 1 day,  1:01,  0 user,  load average: 0.00, 0.00, 0.00\n"

    def record(self, ctxt, **kwargs):
        print(json.dumps({"cast": kwargs}), flush=True)


def serve(args):
    transport = configure(args)
    target = oslo_messaging.Target(topic=args.topic, server=args.server, exchange=args.exchange)
    server = oslo_messaging.get_rpc_server(transport, target, [Endpoint()], executor="threading")
    server.start()
    print("READY", flush=True)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())

    def stdin_watch():
        sys.stdin.read()
        done.set()

    threading.Thread(target=stdin_watch, daemon=True).start()
    done.wait()
    server.stop()
    server.wait()
    transport.cleanup()


def describe(e):
    out = {"ok": False, "class": type(e).__name__, "module": type(e).__module__, "message": str(e)}
    if isinstance(e, oslo_messaging.RemoteError):
        out["exc_type"] = e.exc_type
        out["value"] = e.value
    return out


def context():
    return {"request_id": "req-oslo-peer", "is_admin": True, "user": None, "project_id": None}


def bench(client, op):
    ctxt = context()
    method, kwargs = op["method"], op.get("args", {})
    for _ in range(op.get("warmup", 20)):
        client.call(ctxt, method, **kwargs)
    count, threads = op["count"], op.get("threads", 1)
    lat = []
    lock = threading.Lock()

    def worker(n):
        mine = []
        for _ in range(n):
            t0 = time.perf_counter()
            client.call(ctxt, method, **kwargs)
            mine.append((time.perf_counter() - t0) * 1000.0)
        with lock:
            lat.extend(mine)

    per = [count // threads + (1 if i < count % threads else 0) for i in range(threads)]
    workers = [threading.Thread(target=worker, args=(n,)) for n in per]
    start = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    seconds = time.perf_counter() - start
    lat.sort()

    def pct(p):
        return lat[min(len(lat) - 1, int(p * len(lat)))]

    return {"ok": True, "calls": count, "threads": threads, "seconds": seconds, "rate": count / seconds,
            "p50_ms": pct(0.50), "p99_ms": pct(0.99)}


def run_client(args):
    transport = configure(args)
    target = oslo_messaging.Target(topic=args.topic, server=args.server, exchange=args.exchange, version="6.0")
    client = oslo_messaging.get_rpc_client(transport, target)
    for op in json.loads(args.ops):
        try:
            prep = {}
            for key, name in (("timeout", "timeout"), ("cm_timeout", "call_monitor_timeout"),
                              ("version", "version"), ("namespace", "namespace"), ("fanout", "fanout"),
                              ("server", "server")):
                if key in op:
                    prep[name] = op[key]
            c = client.prepare(**prep) if prep else client
            if op["op"] == "call":
                out = {"ok": True, "result": c.call(context(), op["method"], **op.get("args", {}))}
            elif op["op"] == "cast":
                c.cast(context(), op["method"], **op.get("args", {}))
                out = {"ok": True}
            elif op["op"] == "bench":
                out = bench(c, op)
            else:
                out = {"ok": False, "message": "unknown op %s" % op["op"]}
        except Exception as e:  # report every failure as data
            out = describe(e)
        print(json.dumps(out), flush=True)
    transport.cleanup()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["server", "client"])
    p.add_argument("--url", required=True)
    p.add_argument("--exchange", required=True)
    p.add_argument("--topic", default="compute")
    p.add_argument("--server", default=None)
    p.add_argument("--ops", default="[]")
    p.add_argument("--rabbit", action="append", help="[oslo_messaging_rabbit] option as key=value")
    p.add_argument("--default", action="append", help="[DEFAULT] option as key=value")
    args = p.parse_args()
    if args.mode == "server":
        serve(args)
    else:
        run_client(args)


if __name__ == "__main__":
    main()
