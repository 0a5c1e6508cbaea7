#!/usr/bin/env python3
"""A real third-party OpenID Connect provider for interop tests: django-oauth-toolkit on SQLite, on loopback.

usage: dot_server.py DB_PATH PORT

Creates the database (migrations), a user alice@example.com / correct-horse, a public client `sesame-native`
(authorization code, PKCE required, redirect http://127.0.0.1:5555/callback, RS256 ID tokens, no consent page),
then serves on 127.0.0.1:PORT and prints "ready ISSUER" when it answers. Run by OIDCInteropTests.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
DB, PORT = sys.argv[1], int(sys.argv[2])
os.environ["SESAME_DOT_DB"] = DB
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dotsite")

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from oauth2_provider.models import get_application_model  # noqa: E402

call_command("migrate", verbosity=0, interactive=False)
User = get_user_model()
if not User.objects.filter(username="alice@example.com").exists():
    User.objects.create_user("alice@example.com", email="alice@example.com", password="correct-horse")
Application = get_application_model()
if not Application.objects.filter(client_id="sesame-native").exists():
    Application.objects.create(
        client_id="sesame-native", name="Sesame", client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris="http://127.0.0.1:5555/callback", skip_authorization=True,
        algorithm=Application.RS256_ALGORITHM, client_secret="",
    )

from socketserver import ThreadingMixIn  # noqa: E402
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server  # noqa: E402

from django.core.wsgi import get_wsgi_application  # noqa: E402


class ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class QuietHandler(WSGIRequestHandler):
    def log_message(self, *args):
        pass


server = make_server(
    "127.0.0.1", PORT, get_wsgi_application(), server_class=ThreadingServer, handler_class=QuietHandler)
print("ready http://127.0.0.1:%d/o" % server.server_port, flush=True)
server.serve_forever()
