#!/usr/bin/env python3
"""Authlib's OAuth 2.0 client (a third-party client from PyPI) against the dev server's OIDC provider.

usage: authlib_client.py ISSUER EMAIL PASSWORD

Discovery, authorization code + PKCE S256 (signing in through the HTML form with requests), the code exchange,
ID-token verification against /jwks with Authlib's own JOSE, refresh, UserInfo, revocation. Prints one JSON object
with what it saw; exits non-zero with the failing step.
"""
import json
import re
import secrets
import sys
import html

import requests
from authlib.integrations.requests_client import OAuth2Session
from authlib.jose import JsonWebKey, jwt
from authlib.oauth2.rfc7636 import create_s256_code_challenge


def fail(step, detail):
    print(json.dumps({"error": step, "detail": str(detail)[:500]}))
    sys.exit(1)


def main():
    issuer, email, password = sys.argv[1:4]
    config = requests.get(issuer + "/.well-known/openid-configuration", timeout=10).json()
    if config["issuer"] != issuer:
        fail("discovery", "issuer %r" % config["issuer"])
    redirect_uri = "http://127.0.0.1:53682/callback"
    client = OAuth2Session(
        client_id="sesame-cli", redirect_uri=redirect_uri, scope="openid email profile offline_access",
        token_endpoint_auth_method="none", code_challenge_method="S256")
    verifier = secrets.token_urlsafe(48)
    nonce = secrets.token_urlsafe(16)
    url, state = client.create_authorization_url(
        config["authorization_endpoint"], code_verifier=verifier, nonce=nonce)
    if "code_challenge=" + create_s256_code_challenge(verifier) not in url:
        fail("authorization url", url)

    # Sign in through the form, as a browser would (cookies kept, redirects not followed).
    browser = requests.Session()
    page = browser.get(url, timeout=10)
    if page.status_code != 200:
        fail("sign-in page", page.status_code)
    form = page.text.split("<form", 2)[1]
    fields = {html.unescape(n): html.unescape(v)
              for n, v in re.findall(r'<input type="hidden" name="([^"]*)" value="([^"]*)">', form)}
    fields.update({"email": email, "password": password})
    answer = browser.post(config["authorization_endpoint"], data=fields, allow_redirects=False, timeout=10)
    location = answer.headers.get("Location", "")
    if answer.status_code != 303 or not location.startswith(redirect_uri):
        fail("sign-in", "%s %s" % (answer.status_code, location))
    if "iss=" not in location:
        fail("iss in the authorization response", location)

    token = client.fetch_token(
        config["token_endpoint"], authorization_response=location, code_verifier=verifier, state=state)
    keys = JsonWebKey.import_key_set(requests.get(config["jwks_uri"], timeout=10).json())
    claims = jwt.decode(token["id_token"], keys, claims_options={
        "iss": {"essential": True, "value": issuer},
        "aud": {"essential": True, "value": "sesame-cli"},
        "nonce": {"essential": True, "value": nonce},
        "sub": {"essential": True},
    })
    claims.validate()

    userinfo = client.get(config["userinfo_endpoint"], timeout=10).json()
    if userinfo.get("sub") != claims["sub"]:
        fail("userinfo sub", userinfo)

    refreshed = client.refresh_token(config["token_endpoint"], refresh_token=token["refresh_token"])
    if refreshed["refresh_token"] == token["refresh_token"]:
        fail("refresh rotation", "the refresh token was not rotated")
    refreshed_claims = jwt.decode(refreshed["id_token"], keys)
    refreshed_claims.validate()
    if refreshed_claims["sub"] != claims["sub"]:
        fail("refreshed sub", refreshed_claims["sub"])

    revoked = client.revoke_token(
        config["revocation_endpoint"], token=refreshed["refresh_token"], token_type_hint="refresh_token")
    if revoked.status_code != 200:
        fail("revocation", revoked.status_code)
    after = requests.post(config["token_endpoint"], data={
        "grant_type": "refresh_token", "refresh_token": refreshed["refresh_token"], "client_id": "sesame-cli"},
        timeout=10)
    print(json.dumps({
        "sub": claims["sub"], "email": claims.get("email"), "userinfoName": userinfo.get("name"),
        "refreshAfterRevoke": after.json().get("error"), "accessTokenType": token["token_type"],
        "scope": token.get("scope"),
    }))


if __name__ == "__main__":
    main()
