#!/usr/bin/env python3
"""A multi-tenant gateway in front of one Prometheus, as Mimir's or Cortex's: over TLS, it
refuses a request without `X-Scope-OrgID: <tenant>` (401), answers the tenant `huge` with a
50 MB JSON body, and passes every other request (its Authorization header included) on to the
Prometheus at UPSTREAM, trusting CA.

usage: tenant_proxy.py PORT CERT KEY UPSTREAM CA TENANT
"""
import http.server
import ssl
import sys
import urllib.error
import urllib.request

PORT, CERT, KEY, UPSTREAM, CA, TENANT = sys.argv[1:7]
UP_CTX = ssl.create_default_context(cafile=CA)


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def reply(self, status, body, ctype="application/json"):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        tenant = self.headers.get("X-Scope-OrgID")
        if tenant == "huge":
            pad = b"0" * (50 << 20)
            body = b'{"status":"success","data":{"resultType":"vector","result":[]},"pad":"' + pad + b'"}'
            return self.reply(200, body)
        if tenant != TENANT:
            return self.reply(401, b"no org id\n", "text/plain")
        req = urllib.request.Request(UPSTREAM + self.path)
        auth = self.headers.get("Authorization")
        if auth:
            req.add_header("Authorization", auth)
        try:
            with urllib.request.urlopen(req, context=UP_CTX, timeout=60) as r:
                return self.reply(r.status, r.read())
        except urllib.error.HTTPError as e:
            return self.reply(e.code, e.read(), e.headers.get("Content-Type", "text/plain"))


srv = http.server.ThreadingHTTPServer(("127.0.0.1", int(PORT)), Handler)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(CERT, KEY)
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
print("ready", flush=True)
srv.serve_forever()
