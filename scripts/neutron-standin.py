#!/usr/bin/python3
"""A neutron stand-in for the nova control plane of scripts/nova-stack.

nova-api reads ports on every GET /servers/{id} and networks on create; the compute side asks
during delete. Servers here boot with "networks": "none", so every collection is empty:
GET /v2.0/<collection> answers {"<collection>": []}, anything else under /v2.0 answers {}.
Usage: neutron-standin.py PORT
"""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'

    def _answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _handle(self):
        length = int(self.headers.get('Content-Length') or 0)
        if length:
            self.rfile.read(length)
        path = self.path.split('?', 1)[0].rstrip('/')
        parts = [p for p in path.split('/') if p]
        if parts[:1] == ['v2.0'] and len(parts) == 2:
            collection = parts[1].removesuffix('.json')
            self._answer(200, {collection: []})
        elif parts[:1] == ['v2.0']:
            self._answer(404, {'NeutronError': {'type': 'NotFound', 'message': 'not found', 'detail': ''}})
        else:
            self._answer(200, {'versions': [{'id': 'v2.0', 'status': 'CURRENT'}]})

    do_GET = do_POST = do_PUT = do_DELETE = _handle

    def log_message(self, fmt, *args):
        sys.stderr.write('neutron-standin: ' + (fmt % args) + '\n')


if __name__ == '__main__':
    ThreadingHTTPServer(('127.0.0.1', int(sys.argv[1])), Handler).serve_forever()
