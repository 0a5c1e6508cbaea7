#!/usr/bin/env python3
"""Sign in to a Glewlwyd instance started by start.sh, with PKCE + DPoP (+ nonces).

Usage: signin.py ISSUER        e.g. signin.py http://127.0.0.1:4593/api/oidc

Steps (each one printed):
  1. discovery      GET  {issuer}/.well-known/openid-configuration
  2. authorize      GET  {authorization_endpoint}?...   -> 302 to login.html?...&callback_url=...
  3. login          POST {api}/auth/  {"username","password"} -> Set-Cookie GLEWLWYD2_SESSION_ID
  4. consent        PUT  {api}/auth/grant/{client_id}  {"scope":"openid offline_access email"}
                    (space separated; start.sh already granted it, so this is a no-op here)
  5. continue       GET  {callback_url}&g_continue  (with the cookie) -> 302 to redirect_uri?code=..&state=..
  6. token          POST {token_endpoint} + DPoP proof; 400 use_dpop_nonce -> retry with DPoP-Nonce
  7. userinfo       GET  {userinfo_endpoint}, Authorization: DPoP <at>, proof with ath;
                    401 use_dpop_nonce -> retry with DPoP-Nonce
  8. refresh        POST {token_endpoint} grant_type=refresh_token + DPoP proof (nonce retry too)

Only the standard library and `cryptography` are used. Exits 0 only if every step worked.
"""
import base64
import hashlib
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

CLIENT_ID = "sesame-test"
REDIRECT_URI = "http://127.0.0.1:5555/callback"
SCOPE = "openid offline_access email"
USERNAME = "alice"
PASSWORD = "correct-horse"


def b64u(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64u_decode(s: str) -> bytes:
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def jwt_claims(token: str) -> dict:
    return json.loads(b64u_decode(token.split(".")[1]))


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


OPENER = urllib.request.build_opener(NoRedirect)


def http(method, url, headers=None, body=None):
    """Returns (status, headers, body_bytes); never follows redirects, never raises on 4xx/5xx."""
    data = None
    if body is not None:
        data = body if isinstance(body, bytes) else body.encode()
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with OPENER.open(req, timeout=10) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


class DPoPKey:
    def __init__(self):
        self.key = ec.generate_private_key(ec.SECP256R1())
        nums = self.key.public_key().public_numbers()
        self.jwk = {
            "kty": "EC",
            "crv": "P-256",
            "x": b64u(nums.x.to_bytes(32, "big")),
            "y": b64u(nums.y.to_bytes(32, "big")),
        }
        canon = json.dumps({k: self.jwk[k] for k in ("crv", "kty", "x", "y")},
                           separators=(",", ":"), sort_keys=True)
        self.jkt = b64u(hashlib.sha256(canon.encode()).digest())

    def proof(self, htm, htu, nonce=None, access_token=None):
        header = {"typ": "dpop+jwt", "alg": "ES256", "jwk": self.jwk}
        claims = {"jti": b64u(os.urandom(16)), "htm": htm, "htu": htu, "iat": int(time.time())}
        if nonce:
            claims["nonce"] = nonce
        if access_token:
            claims["ath"] = b64u(hashlib.sha256(access_token.encode()).digest())
        signing_input = (b64u(json.dumps(header, separators=(",", ":")).encode()) + "." +
                         b64u(json.dumps(claims, separators=(",", ":")).encode()))
        der = self.key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256()))
        r, s = decode_dss_signature(der)
        return signing_input + "." + b64u(r.to_bytes(32, "big") + s.to_bytes(32, "big"))


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def step(name, msg):
    print(f"[{name}] {msg}")


def dpop_request(key, nonce_box, method, url, headers, body=None, access_token=None, label=""):
    """Send a request with a DPoP proof; on use_dpop_nonce retry once with the server nonce.
    nonce_box is a one-element list holding the last DPoP-Nonce seen (nonces rotate)."""
    for attempt in (1, 2):
        h = dict(headers)
        h["DPoP"] = key.proof(method, url, nonce=nonce_box[0], access_token=access_token)
        status, rh, rb = http(method, url, h, body)
        if rh.get("DPoP-Nonce"):
            nonce_box[0] = rh.get("DPoP-Nonce")
        www = rh.get("WWW-Authenticate") or ""
        is_nonce_err = False
        if status == 400:
            try:
                is_nonce_err = json.loads(rb or b"{}").get("error") == "use_dpop_nonce"
            except ValueError:
                pass
        elif status == 401:
            is_nonce_err = "use_dpop_nonce" in www
        if is_nonce_err and attempt == 1:
            step(label, f"attempt 1 -> {status} use_dpop_nonce "
                        f"(body={rb.decode(errors='replace')!r}, WWW-Authenticate={www!r}), "
                        f"DPoP-Nonce={nonce_box[0]!r}; retrying with nonce")
            if not rh.get("DPoP-Nonce"):
                fail(f"{label}: use_dpop_nonce without a DPoP-Nonce header")
            continue
        return status, rh, rb, attempt
    fail(f"{label}: still use_dpop_nonce after retry")


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    issuer = sys.argv[1].rstrip("/")
    api = issuer.rsplit("/", 1)[0]          # http://host:port/api  (plugin name is the last segment)

    # 1. discovery
    status, _, body = http("GET", issuer + "/.well-known/openid-configuration")
    if status != 200:
        fail(f"discovery -> {status}")
    disco = json.loads(body)
    if disco.get("issuer") != issuer:
        fail(f"issuer mismatch: {disco.get('issuer')!r} != {issuer!r}")
    step("discovery", f"issuer={disco['issuer']}")
    step("discovery", f"dpop_signing_alg_values_supported={disco.get('dpop_signing_alg_values_supported')}")
    if "ES256" not in (disco.get("dpop_signing_alg_values_supported") or []):
        fail("ES256 not in dpop_signing_alg_values_supported")

    # 2. authorize (PKCE S256 + state + nonce)
    verifier = b64u(os.urandom(32))
    challenge = b64u(hashlib.sha256(verifier.encode()).digest())
    state = b64u(os.urandom(12))
    oidc_nonce = b64u(os.urandom(12))
    auth_url = disco["authorization_endpoint"] + "?" + urllib.parse.urlencode({
        "response_type": "code", "client_id": CLIENT_ID, "redirect_uri": REDIRECT_URI,
        "scope": SCOPE, "state": state, "nonce": oidc_nonce,
        "code_challenge": challenge, "code_challenge_method": "S256",
    }, quote_via=urllib.parse.quote)
    status, h, _ = http("GET", auth_url)
    loc = h.get("Location", "")
    if status != 302 or "login.html" not in loc:
        fail(f"authorize (no session) -> {status} {loc}")
    callback_url = urllib.parse.parse_qs(urllib.parse.urlsplit(loc).query)["callback_url"][0]
    step("authorize", f"302 -> login page; callback_url={callback_url}")

    # 3. login via the JSON API (sets the session cookie)
    status, h, body = http("POST", api + "/auth/", {"Content-Type": "application/json"},
                           json.dumps({"username": USERNAME, "password": PASSWORD}))
    cookie = None
    for v in h.get_all("Set-Cookie") or []:
        if v.startswith("GLEWLWYD2_SESSION_ID="):
            cookie = v.split(";", 1)[0]
    if status != 200 or not cookie:
        fail(f"login -> {status} {body!r}")
    step("login", f"200, cookie {cookie.split('=')[0]}")
    jar = {"Cookie": cookie}

    # 4. consent: grant the scopes to the client (space separated!). Idempotent.
    status, _, body = http("PUT", f"{api}/auth/grant/{CLIENT_ID}",
                           {**jar, "Content-Type": "application/json"},
                           json.dumps({"scope": SCOPE}))
    if status != 200:
        fail(f"grant -> {status} {body!r}")
    step("consent", "PUT /auth/grant -> 200")

    # 5. continue the authorization with the session cookie: the login app appends g_continue
    status, h, _ = http("GET", callback_url + "&g_continue", jar)
    loc = h.get("Location", "")
    if status != 302 or not loc.startswith(REDIRECT_URI + "?"):
        fail(f"continue -> {status} {loc}")
    q = urllib.parse.parse_qs(urllib.parse.urlsplit(loc).query)
    if "error" in q:
        fail(f"authorization error: {q}")
    if q.get("state", [None])[0] != state:
        fail(f"state mismatch: {q.get('state')}")
    code = q["code"][0]
    step("authorize", f"302 -> {REDIRECT_URI}?code=...&state=ok  (iss param: {q.get('iss', ['-'])[0]})")

    # 6. token exchange with DPoP
    key = DPoPKey()
    nonce_box = [None]
    token_url = disco["token_endpoint"]
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    status, h, body, attempts = dpop_request(key, nonce_box, "POST", token_url, form, urllib.parse.urlencode({
        "grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT_URI,
        "client_id": CLIENT_ID, "code_verifier": verifier,
    }), label="token")
    if status != 200:
        fail(f"token -> {status} {body!r}")
    tok = json.loads(body)
    at = tok["access_token"]
    at_claims = jwt_claims(at)
    jkt = (at_claims.get("cnf") or {}).get("jkt")
    step("token", f"200 after {attempts} attempt(s); token_type={tok.get('token_type')}; "
                  f"scope={tok.get('scope')!r}; refresh_token={'yes' if tok.get('refresh_token') else 'no'}; "
                  f"id_token={'yes' if tok.get('id_token') else 'no'}")
    step("token", f"access token cnf.jkt present={jkt is not None} matches_key={jkt == key.jkt}")
    if tok.get("token_type", "").lower() != "dpop":
        fail(f"token_type is {tok.get('token_type')!r}, expected DPoP")
    if jkt != key.jkt:
        fail(f"cnf.jkt {jkt!r} != {key.jkt!r}")
    if tok.get("id_token"):
        idc = jwt_claims(tok["id_token"])
        if idc.get("nonce") != oidc_nonce:
            fail(f"id_token nonce mismatch {idc.get('nonce')!r}")
        step("token", f"id_token iss={idc.get('iss')} sub={idc.get('sub')} nonce ok")
    if not tok.get("refresh_token"):
        fail("no refresh_token")

    # 7. userinfo with Authorization: DPoP + proof with ath
    ui_url = disco["userinfo_endpoint"]
    status, h, body, attempts = dpop_request(key, nonce_box, "GET", ui_url, {"Authorization": "DPoP " + at},
                                             access_token=at, label="userinfo")
    if status != 200:
        fail(f"userinfo -> {status} {h.get('WWW-Authenticate')!r} {body!r}")
    step("userinfo", f"200 after {attempts} attempt(s): {body.decode()}")

    # 8. refresh with a proof
    status, h, body, attempts = dpop_request(key, nonce_box, "POST", token_url, form, urllib.parse.urlencode({
        "grant_type": "refresh_token", "refresh_token": tok["refresh_token"], "client_id": CLIENT_ID,
    }), label="refresh")
    if status != 200:
        fail(f"refresh -> {status} {body!r}")
    tok2 = json.loads(body)
    jkt2 = (jwt_claims(tok2["access_token"]).get("cnf") or {}).get("jkt")
    step("refresh", f"200 after {attempts} attempt(s); token_type={tok2.get('token_type')}; "
                    f"cnf.jkt matches={jkt2 == key.jkt}; new refresh_token={'yes' if tok2.get('refresh_token') else 'no'}")
    if tok2.get("token_type", "").lower() != "dpop" or jkt2 != key.jkt:
        fail("refreshed token is not DPoP-bound to the key")

    # 9. the provider really demands DPoP and nonces (not just accepts them)
    rt = tok2.get("refresh_token") or tok["refresh_token"]
    status, h, body = http("POST", token_url, form, urllib.parse.urlencode({
        "grant_type": "refresh_token", "refresh_token": rt, "client_id": CLIENT_ID}))
    step("check", f"refresh without DPoP header -> {status} {body.decode(errors='replace')}")
    if status == 200:
        fail("token endpoint issued a token without a DPoP proof")
    at2 = tok2["access_token"]
    status, h, body = http("GET", ui_url, {"Authorization": "DPoP " + at2,
                                           "DPoP": key.proof("GET", ui_url, access_token=at2)})
    www = h.get("WWW-Authenticate") or ""
    step("check", f"userinfo proof without nonce -> {status} WWW-Authenticate={www!r} "
                  f"DPoP-Nonce={h.get('DPoP-Nonce')!r}")
    if status != 401 or "use_dpop_nonce" not in www or not h.get("DPoP-Nonce"):
        fail("userinfo did not demand a DPoP nonce")

    print("OK")


if __name__ == "__main__":
    main()
