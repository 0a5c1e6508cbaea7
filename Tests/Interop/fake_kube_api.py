#!/usr/bin/env python3
"""A stand-in Kubernetes API server for kubectl's exec credential plugin test (run by CredentialPluginTests).

usage: fake_kube_api.py FOLDER

kubectl runs exec plugins only for TLS connections, so this serves HTTPS on 127.0.0.1 (a free port) with a
self-signed certificate made with openssl in FOLDER. It prints "READY PORT" when listening, appends each request's
Authorization header to FOLDER/authorization.log, and answers GET /version with a version object when the header is
there, 401 when it is not. It stops when its standard input closes.
"""
import http.server
import os
import ssl
import subprocess
import sys
import threading

folder = sys.argv[1]
key, cert = os.path.join(folder, "api.key"), os.path.join(folder, "api.crt")
subprocess.run(
    ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key,
     "-out", cert, "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
    check=True, capture_output=True)
log = os.path.join(folder, "authorization.log")


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        authorization = self.headers.get("Authorization")
        with open(log, "a") as file:
            file.write((authorization or "") + "\n")
        if not authorization:
            self.send_response(401)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = b'{"major":"1","minor":"30","gitVersion":"v1.30.0"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *arguments):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(cert, key)
server.socket = context.wrap_socket(server.socket, server_side=True)
threading.Thread(target=server.serve_forever, daemon=True).start()
print("READY %d" % server.server_address[1], flush=True)
sys.stdin.read()
server.shutdown()
