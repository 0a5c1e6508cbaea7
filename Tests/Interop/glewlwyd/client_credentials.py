#!/usr/bin/env python3
"""Client credentials grant (RFC 6749 §4.4) against a Glewlwyd instance started by start.sh.

Usage: client_credentials.py ISSUER WORKDIR
       e.g. client_credentials.py http://127.0.0.1:4593/api/oidc /tmp/tmp.XXXX

WORKDIR is start.sh's WORKDIR, started with SERVICE_CLIENTS=1: the private key of `sesame-service` is read
from WORKDIR/service.jwk.

Checks (each one printed; token values are never printed):
  1. discovery: token endpoint, auth methods, signing algs
  2. private_key_jwt (RFC 7523), ES256 assertion with kid, aud = token endpoint -> 200, Bearer, no refresh token
     [required]
  3. the same assertion again (same jti)                       -> reported (refused or accepted)
  4. aud = the issuer / an array / another URL                   -> wrong aud must be refused [required]
  5. expired assertion                                           -> must be refused [required]
  6. more (reported only): no kid, exp too far ahead, no jti, another key, no client_id parameter,
     unknown scope, no scope, DPoP proof (nonce dance) with the grant
  7. client_secret_basic with `sesame-service-secret`            -> 200 [required]; wrong secret refused
     [required]; the secret as client_secret_post -> reported

Only the standard library and `cryptography` are used. Exits 0 only if every required check passed.
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

CLIENT_ID = "sesame-service"
SECRET_CLIENT_ID = "sesame-service-secret"
SECRET = "sesame-service-secret-0123456789"
SCOPE = "reports.read"
ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
FORM = {"Content-Type": "application/x-www-form-urlencoded"}

failures = []


def b64u(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64u_decode(s: str) -> bytes:
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def http(method, url, headers=None, body=None):
    """Returns (status, headers, body_bytes); never raises on 4xx/5xx."""
    data = None if body is None else (body if isinstance(body, bytes) else body.encode())
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def es256(key, header, claims):
    signing_input = (b64u(json.dumps(header, separators=(",", ":")).encode()) + "." +
                     b64u(json.dumps(claims, separators=(",", ":")).encode()))
    r, s = decode_dss_signature(key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
    return signing_input + "." + b64u(r.to_bytes(32, "big") + s.to_bytes(32, "big"))


def load_jwk(path):
    st = os.stat(path)
    jwk = json.load(open(path))
    key = ec.derive_private_key(int.from_bytes(b64u_decode(jwk["d"]), "big"), ec.SECP256R1())
    nums = key.public_key().public_numbers()
    if (b64u(nums.x.to_bytes(32, "big")), b64u(nums.y.to_bytes(32, "big"))) != (jwk["x"], jwk["y"]):
        fail_now(f"{path}: d does not match x/y")
    return jwk, key, oct(st.st_mode & 0o777)


def fail_now(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def require(ok, msg):
    print(("  ok: " if ok else "  FAIL: ") + msg)
    if not ok:
        failures.append(msg)


def summary(status, headers, body):
    """The response without token values: status, JSON keys (+ harmless values), WWW-Authenticate."""
    text = f"{status}"
    try:
        j = json.loads(body) if body else None
    except ValueError:
        j = None
    if isinstance(j, dict):
        shown = {k: (v if k in ("token_type", "expires_in", "scope", "error", "error_description") else "…")
                 for k, v in j.items()}
        text += f" {json.dumps(shown)}"
    elif body:
        text += f" body={body[:200]!r}"
    else:
        text += " (empty body)"
    for h in ("WWW-Authenticate", "DPoP-Nonce"):
        if headers.get(h):
            text += f" {h}={headers.get(h)!r}"
    return text


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        sys.exit(2)
    issuer = sys.argv[1].rstrip("/")
    workdir = sys.argv[2]
    if not os.path.exists(os.path.join(workdir, "service.jwk")):
        fail_now(f"no {workdir}/service.jwk: start the server with SERVICE_CLIENTS=1 bash start.sh PORT WORKDIR")

    # 1. discovery
    status, _, body = http("GET", issuer + "/.well-known/openid-configuration")
    if status != 200:
        fail_now(f"discovery -> {status}")
    disco = json.loads(body)
    token_url = disco["token_endpoint"]
    print(f"[discovery] issuer={disco['issuer']} token_endpoint={token_url}")
    print(f"[discovery] token_endpoint_auth_methods_supported={disco.get('token_endpoint_auth_methods_supported')}")
    print(f"[discovery] token_endpoint_auth_signing_alg_values_supported="
          f"{disco.get('token_endpoint_auth_signing_alg_values_supported')}")
    print(f"[discovery] grant_types_supported={disco.get('grant_types_supported')} "
          f"response_types_supported={disco.get('response_types_supported')}")

    jwk, key, mode = load_jwk(os.path.join(workdir, "service.jwk"))
    print(f"[key] {workdir}/service.jwk mode {mode}, kty={jwk['kty']} crv={jwk['crv']} kid={jwk['kid']} "
          f"alg={jwk.get('alg')}")

    def assertion(aud=token_url, exp_in=60, kid=jwk["kid"], jti="new", signer=key, iss=CLIENT_ID, drop=()):
        now = int(time.time())
        header = {"alg": "ES256", "typ": "JWT"}
        if kid:
            header["kid"] = kid
        claims = {"iss": iss, "sub": iss, "aud": aud, "iat": now, "exp": now + exp_in,
                  "jti": b64u(os.urandom(18)) if jti == "new" else jti}
        for k in drop:
            claims.pop(k, None)
        return es256(signer, header, claims)

    def grant(client_assertion, scope=SCOPE, client_id=CLIENT_ID, headers=None, extra=None):
        form = {"grant_type": "client_credentials"}
        if scope is not None:
            form["scope"] = scope
        if client_id:
            form["client_id"] = client_id
        if client_assertion:
            form["client_assertion_type"] = ASSERTION_TYPE
            form["client_assertion"] = client_assertion
        form.update(extra or {})
        return http("POST", token_url, {**FORM, **(headers or {})}, urllib.parse.urlencode(form))

    # 2. the good case
    good = assertion()
    status, h, body = grant(good)
    print(f"[private_key_jwt] aud=token endpoint, kid, ES256 -> {summary(status, h, body)}")
    if status != 200:
        fail_now("client credentials with private_key_jwt did not work")
    tok = json.loads(body)
    print(f"[private_key_jwt] response keys: {sorted(tok)}")
    require(tok.get("token_type", "").lower() == "bearer", f"token_type is Bearer ({tok.get('token_type')!r})")
    require("refresh_token" not in tok, "no refresh_token")
    require("id_token" not in tok, "no id_token")
    require(tok.get("scope") == SCOPE, f"scope is {SCOPE!r} ({tok.get('scope')!r})")
    at = tok["access_token"]
    if at.count(".") == 2:
        hdr = json.loads(b64u_decode(at.split(".")[0]))
        claims = json.loads(b64u_decode(at.split(".")[1]))
        print(f"[private_key_jwt] access token: JWT typ={hdr.get('typ')} alg={hdr.get('alg')}; claims "
              f"{sorted(claims)}; sub={claims.get('sub')!r} client_id={claims.get('client_id')!r} "
              f"aud={claims.get('aud')!r} scope={claims.get('scope')!r} cnf={'yes' if 'cnf' in claims else 'no'} "
              f"lifetime={claims.get('exp', 0) - claims.get('iat', 0)} s")

    # 3. replay of the same assertion (same jti)
    status, h, body = grant(good)
    print(f"[replay] the same assertion again -> {summary(status, h, body)}")
    print(f"[replay] RESULT: replayed assertion {'ACCEPTED' if status == 200 else 'REFUSED'}")
    # same jti, otherwise a new assertion
    status, h, body = grant(assertion(jti=json.loads(b64u_decode(good.split(".")[1]))["jti"]))
    print(f"[replay] a new assertion reusing the jti -> {summary(status, h, body)}")

    # 4. wrong audiences
    for label, aud in (("issuer", issuer), ("issuer + '/'", issuer + "/"),
                       ("token endpoint + '/'", token_url + "/"),
                       ("another URL", "http://127.0.0.1:1/api/oidc/token")):
        status, h, body = grant(assertion(aud=aud))
        print(f"[aud] aud = {label} -> {summary(status, h, body)}")
        require(status != 200, f"aud = {label} refused")
    status, h, body = grant(assertion(aud=[token_url]))
    print(f"[aud] aud = [token endpoint] (array) -> {summary(status, h, body)} (reported only)")

    # 5. expired
    status, h, body = grant(assertion(exp_in=-5))
    print(f"[exp] expired 5 s ago -> {summary(status, h, body)}")
    require(status != 200, "expired assertion refused")

    # 6. reported only
    for label, kwargs in (
            ("no kid in the header", {"kid": None}),
            ("unknown kid", {"kid": "not-the-kid"}),
            ("exp 3590 s ahead", {"exp_in": 3590}),
            ("exp 3700 s ahead", {"exp_in": 3700}),
            ("no jti", {"drop": ("jti",)}),
            ("no iat", {"drop": ("iat",)}),
            ("signed by another key (same kid)", {"signer": ec.generate_private_key(ec.SECP256R1())}),
    ):
        status, h, body = grant(assertion(**kwargs))
        print(f"[more] {label} -> {summary(status, h, body)}")
    status, h, body = grant(assertion(), client_id=None)
    print(f"[more] no client_id form parameter -> {summary(status, h, body)}")
    status, h, body = grant(assertion(), scope="reports.write")
    print(f"[more] scope not registered for the client (reports.write) -> {summary(status, h, body)}")
    status, h, body = grant(assertion(), scope="openid reports.read")
    print(f"[more] scope 'openid reports.read' -> {summary(status, h, body)}")
    status, h, body = grant(assertion(), scope=None)
    print(f"[more] no scope parameter -> {summary(status, h, body)}")
    status, h, body = grant(None)
    print(f"[more] no client authentication at all -> {summary(status, h, body)}")

    # DPoP with the grant: the plugin-wide nonce requirement applies only when a proof is sent
    dkey = ec.generate_private_key(ec.SECP256R1())
    dn = dkey.public_key().public_numbers()
    djwk = {"kty": "EC", "crv": "P-256", "x": b64u(dn.x.to_bytes(32, "big")), "y": b64u(dn.y.to_bytes(32, "big"))}

    def proof(nonce=None):
        c = {"jti": b64u(os.urandom(16)), "htm": "POST", "htu": token_url, "iat": int(time.time())}
        if nonce:
            c["nonce"] = nonce
        return es256(dkey, {"typ": "dpop+jwt", "alg": "ES256", "jwk": djwk}, c)

    status, h, body = grant(assertion(), headers={"DPoP": proof()})
    print(f"[dpop] proof without nonce -> {summary(status, h, body)}")
    if h.get("DPoP-Nonce"):
        status, h, body = grant(assertion(), headers={"DPoP": proof(h.get("DPoP-Nonce"))})
        cnf = None
        if status == 200:
            t = json.loads(body)
            cnf = json.loads(b64u_decode(t["access_token"].split(".")[1])).get("cnf")
        print(f"[dpop] proof with the nonce -> {summary(status, h, body)}; cnf.jkt present={bool(cnf)}")

    # 7. client_secret_basic
    def basic(cid, secret):
        raw = urllib.parse.quote(cid, safe="") + ":" + urllib.parse.quote(secret, safe="")
        return {"Authorization": "Basic " + base64.b64encode(raw.encode()).decode()}

    status, h, body = grant(None, client_id=None, headers=basic(SECRET_CLIENT_ID, SECRET))
    print(f"[client_secret_basic] {SECRET_CLIENT_ID} -> {summary(status, h, body)}")
    require(status == 200, "client_secret_basic works")
    if status == 200:
        t = json.loads(body)
        require(t.get("token_type", "").lower() == "bearer" and "refresh_token" not in t,
                "client_secret_basic: Bearer, no refresh_token")
    status, h, body = grant(None, client_id=None, headers=basic(SECRET_CLIENT_ID, SECRET + "x"))
    print(f"[client_secret_basic] wrong secret -> {summary(status, h, body)}")
    require(status != 200, "wrong secret refused")
    status, h, body = grant(None, client_id=SECRET_CLIENT_ID, extra={"client_secret": SECRET})
    print(f"[client_secret_post] (not registered for the client) -> {summary(status, h, body)} (reported only)")
    status, h, body = grant(None, client_id=None, headers=basic(CLIENT_ID, "anything"))
    print(f"[client_secret_basic] {CLIENT_ID} (private_key_jwt client) with a secret -> "
          f"{summary(status, h, body)} (reported only)")

    if failures:
        print(f"FAILED: {len(failures)} check(s): {failures}")
        sys.exit(1)
    print("OK")


if __name__ == "__main__":
    main()
