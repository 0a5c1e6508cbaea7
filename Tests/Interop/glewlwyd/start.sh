#!/usr/bin/env bash
# Start a throw-away Glewlwyd (Debian package `glewlwyd`, 2.7.x) OpenID Connect provider on
# 127.0.0.1:PORT with SQLite, provisioned for the Sesame interop tests:
#
#   issuer    http://127.0.0.1:PORT/api/oidc      (no trailing slash)
#   client    sesame-test (public, no secret), redirect_uri http://127.0.0.1:5555/callback,
#             code + refresh_token, PKCE S256 required, DPoP required for this client
#   provider  DPoP allowed, DPoP nonces mandatory (token endpoint AND userinfo)
#   user      alice / correct-horse, scopes openid offline_access email (+ g_profile),
#             consent for sesame-test already granted
#   service   only with SERVICE_CLIENTS=1 (see below): confidential clients for the client credentials
#             grant (RFC 6749 §4.4), scope reports.read, Bearer tokens, no refresh token, no DPoP required
#             (a DPoP proof is honoured, with nonces):
#               sesame-service         private_key_jwt (RFC 7523), ES256; its key pair is generated into
#                                      WORKDIR/service.key (PKCS#8 PEM) and WORKDIR/service.jwk (private JWK,
#                                      kid = RFC 7638 thumbprint), both mode 0600; the assertion's aud must be
#                                      exactly the token endpoint http://127.0.0.1:PORT/api/oidc/token and its
#                                      header must carry that kid
#               sesame-service-secret  client_secret_basic, secret sesame-service-secret-0123456789
#
# Usage: start.sh PORT WORKDIR
#   Everything (config, SQLite DB, signing key, log) lives in WORKDIR. Existing files that
#   this script created in an earlier run are replaced, so a WORKDIR can be reused.
#   The script execs glewlwyd in the foreground (same PID as this script: kill it to stop).
#   A background provisioner configures the server through its admin REST API and prints
#       READY http://127.0.0.1:PORT/api/oidc
#   on stdout when done. On any failure it prints the reason (and the server log tail) on
#   stderr and kills the server, so the process exits non-zero.
#
# Optional environment:
#   GLEWLWYD_LOG_LEVEL      NONE|ERROR|WARNING|INFO|DEBUG (default INFO), log in WORKDIR/glewlwyd.log
#   DPOP_NONCE_COUNTER      uses of a DPoP nonce before the server rotates it (default 10)
#   REFRESH_TOKEN_ONE_USE   never|always (default never; "always" = rotate refresh tokens)
#   SERVICE_CLIENTS         0|1 (default 0). 1 = also provision sesame-service and sesame-service-secret (above).
#                           It turns on the plugin-wide allow-non-oidc (without it Glewlwyd refuses the grant),
#                           so sesame-test may then also get a code for an authorization request without openid;
#                           discovery then also lists client_secret_jwt/private_key_jwt and client_credentials.
#
# Requires: glewlwyd (apt-get install -y glewlwyd), sqlite3 (a dependency of it), openssl,
# curl, python3 (for JSON building only).
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 PORT WORKDIR" >&2
  exit 2
fi
PORT=$1
WORKDIR=$2
case "$PORT" in ''|*[!0-9]*) echo "start.sh: PORT must be a number, got '$PORT'" >&2; exit 2 ;; esac
SERVICE_CLIENTS=${SERVICE_CLIENTS:-0}
case "$SERVICE_CLIENTS" in 0|1) ;; *) echo "start.sh: SERVICE_CLIENTS must be 0 or 1, got '$SERVICE_CLIENTS'" >&2; exit 2 ;; esac

die() { echo "start.sh: $*" >&2; exit 1; }
for bin in glewlwyd sqlite3 openssl curl python3; do
  command -v "$bin" >/dev/null 2>&1 || die "'$bin' not found (apt-get install -y glewlwyd openssl curl python3)"
done

# Glewlwyd logs "started" before binding and then exits 2 if the port is taken; worse, the
# provisioner would then talk to whatever answers on that port. Refuse early and loudly.
if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
  die "something already listens on 127.0.0.1:$PORT"
fi

mkdir -p "$WORKDIR"
WORKDIR=$(cd "$WORKDIR" && pwd)
DB="$WORKDIR/glewlwyd.db"
CONF="$WORKDIR/glewlwyd.conf"
LOG="$WORKDIR/glewlwyd.log"
BASE="http://127.0.0.1:$PORT"
API="$BASE/api"
ISSUER="$API/oidc"
rm -f "$DB" "$DB-journal" "$CONF" "$LOG" "$WORKDIR"/sign.key "$WORKDIR"/sign.pub \
      "$WORKDIR"/service.key "$WORKDIR"/service.jwk "$WORKDIR"/*.jar "$WORKDIR"/provision.*

# --- database schema + default data (admin/password, g_admin, g_profile, openid, database backends)
INIT_SQL=/usr/share/dbconfig-common/data/glewlwyd/install/sqlite3
INIT_SQL_GZ=/usr/share/doc/glewlwyd/database/init.sqlite3.sql.gz
if [ -r "$INIT_SQL" ]; then
  sqlite3 "$DB" < "$INIT_SQL"
elif [ -r "$INIT_SQL_GZ" ]; then
  zcat "$INIT_SQL_GZ" | sqlite3 "$DB"
else
  die "no Glewlwyd SQLite init script ($INIT_SQL or $INIT_SQL_GZ); is the glewlwyd package installed?"
fi
# The client "database" backend only stores/returns properties listed in its data-format:
# add the property that marks a client as "DPoP required" (oauth-dpop-dpop_bound_access_tokens-property).
sqlite3 "$DB" "UPDATE g_client_module_instance SET gcmi_parameters =
  json_set(gcmi_parameters, '\$.\"data-format\".dpop_bound_access_tokens',
           json('{\"multiple\":false,\"read\":true,\"write\":true}')) WHERE gcmi_name='database';"
sqlite3 "$DB" "SELECT gcmi_parameters FROM g_client_module_instance WHERE gcmi_name='database'" \
  | grep -q dpop_bound_access_tokens || die "could not patch the client module data-format"

# --- ES256 signing key for id/access tokens (PKCS#8 private key + SPKI public key, PEM)
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$WORKDIR/sign.key" 2>/dev/null \
  || die "openssl genpkey failed"
openssl pkey -in "$WORKDIR/sign.key" -pubout -out "$WORKDIR/sign.pub" 2>/dev/null || die "openssl pkey failed"

# --- ES256 key pair of the confidential client sesame-service (private_key_jwt), both files 0600:
#     service.key = PKCS#8 PEM, service.jwk = the same private key as a JWK with kid (RFC 7638 thumbprint) and
#     alg ES256. provision.client-service.json = the client registration, with the public key as its "jwks".
if [ "$SERVICE_CLIENTS" = 1 ]; then
(umask 077 && openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$WORKDIR/service.key" 2>/dev/null) \
  || die "openssl genpkey (service key) failed"
chmod 600 "$WORKDIR/service.key"
KEY="$WORKDIR/service.key" JWK="$WORKDIR/service.jwk" python3 - > "$WORKDIR/provision.client-service.json" <<'PY' \
  || die "could not build WORKDIR/service.jwk"
import base64, hashlib, json, os, re, subprocess
text = subprocess.run(["openssl", "pkey", "-in", os.environ["KEY"], "-text", "-noout"],
                      check=True, capture_output=True, text=True).stdout
def hexblock(name):
    m = re.search(r"^%s:\s*\n((?:\s+[0-9a-f:]+\n?)+)" % name, text, re.M)
    return bytes.fromhex(re.sub(r"[\s:]", "", m.group(1)))
b64u = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
d = int.from_bytes(hexblock("priv"), "big").to_bytes(32, "big")
pub = hexblock("pub")
assert len(pub) == 65 and pub[0] == 4, "unexpected EC public key encoding"
x, y = b64u(pub[1:33]), b64u(pub[33:])
canon = json.dumps({"crv": "P-256", "kty": "EC", "x": x, "y": y}, separators=(",", ":"), sort_keys=True)
kid = b64u(hashlib.sha256(canon.encode()).digest())
public = {"kty": "EC", "crv": "P-256", "x": x, "y": y, "kid": kid, "alg": "ES256", "use": "sig"}
fd = os.open(os.environ["JWK"], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
with os.fdopen(fd, "w") as f:
    json.dump({**public, "d": b64u(d)}, f)
    f.write("\n")
print(json.dumps({
    "client_id": "sesame-service", "name": "Sesame service",
    "description": "Sesame interop test: client credentials with private_key_jwt",
    "confidential": True, "enabled": True, "redirect_uri": [],
    "authorization_type": ["client_credentials"],
    "token_endpoint_auth_method": ["private_key_jwt"],
    "token_endpoint_signing_alg": "ES256",
    "scope": ["reports.read"],
    "jwks": {"keys": [public]},
}))
PY
fi

# --- server config (libconfig syntax)
cat > "$CONF" <<EOF
port=$PORT
bind_address="127.0.0.1"
external_url="$BASE"
login_url="login.html"
api_prefix="api"
allow_origin="*"
log_mode="file"
log_file="$LOG"
log_level="${GLEWLWYD_LOG_LEVEL:-INFO}"
cookie_secure=0
cookie_same_site="empty"
session_expiration=2419200
session_key="GLEWLWYD2_SESSION_ID"
admin_session_authentication="cookie"
profile_session_authentication="cookie"
allow_multiple_user_per_session=true
login_api_enabled=true
plugin_api_run_enabled=""
add_x_frame_option_header_deny=true
admin_scope="g_admin"
profile_scope="g_profile"
user_module_path="/usr/lib/glewlwyd/user"
client_module_path="/usr/lib/glewlwyd/client"
user_auth_scheme_module_path="/usr/lib/glewlwyd/scheme"
plugin_module_path="/usr/lib/glewlwyd/plugin"
hash_algorithm="SHA512"
database =
{
  type = "sqlite3"
  path = "$DB"
};
EOF

# --- OIDC plugin instance parameters
PLUGIN_JSON="$WORKDIR/provision.plugin.json"
ISSUER="$ISSUER" KEY="$WORKDIR/sign.key" PUB="$WORKDIR/sign.pub" \
NONCE_COUNTER="${DPOP_NONCE_COUNTER:-10}" RT_ONE_USE="${REFRESH_TOKEN_ONE_USE:-never}" SERVICE="$SERVICE_CLIENTS" \
python3 - > "$PLUGIN_JSON" <<'PY'
import json, os
p = {
    "iss": os.environ["ISSUER"],
    "jwt-type": "ecdsa", "jwt-key-size": "256",
    "key": open(os.environ["KEY"]).read(), "cert": open(os.environ["PUB"]).read(),
    "access-token-duration": 3600, "refresh-token-duration": 1209600, "code-duration": 600,
    "refresh-token-rolling": True,
    "refresh-token-one-use": os.environ["RT_ONE_USE"],
    "allow-non-oidc": False,
    "auth-type-code-enabled": True, "auth-type-code-revoke-replayed": False,
    "auth-type-token-enabled": False, "auth-type-id-token-enabled": False,
    "auth-type-none-enabled": False, "auth-type-password-enabled": False,
    "auth-type-client-enabled": False, "auth-type-device-enabled": False,
    "auth-type-refresh-enabled": True,
    "scope": [], "additional-parameters": [], "claims": [],
    "jwks-show": True,
    "secret-type": "pairwise",
    "name-claim": "on-demand",
    "email-claim": "mandatory", "email-claim-scope": ["email"],
    "allowed-scope": ["openid", "offline_access", "email"],
    "oauth-as-iss-id": True,
    "pkce-allowed": True, "pkce-method-plain-allowed": False, "pkce-required": True,
    # DPoP (RFC 9449 as of draft 07+nonces): accept proofs, bind tokens (cnf.jkt) ...
    "oauth-dpop-allowed": True,
    "oauth-dpop-iat-duration": 60,
    "oauth-dpop-iat-gap-duration": 5,
    # ... a client whose property with this name is set requires DPoP ...
    "oauth-dpop-dpop_bound_access_tokens-property": "dpop_bound_access_tokens",
    # ... and every proof must carry a server nonce (token endpoint and userinfo).
    "oauth-dpop-nonce-mandatory": True,
    "oauth-dpop-nonce-counter": int(os.environ["NONCE_COUNTER"]),
}
if os.environ["SERVICE"] == "1":
    p.update({
        # the client credentials grant: the token endpoint answers 403 unless BOTH are true. allow-non-oidc is
        # plugin-wide: an authorization request without the openid scope is then no longer refused.
        "auth-type-client-enabled": True,
        "allow-non-oidc": True,
        # client_assertion (private_key_jwt, client_secret_jwt) at the token endpoint is only read when
        # request-parameter-allow is true (otherwise 403). The client's public keys are its "jwks" property
        # (already in the database backend's data-format); with a jwks the assertion header must name a kid.
        "request-parameter-allow": True,
        "request-maximum-exp": 3600,   # an assertion's exp may be at most this far ahead, in s (the default too)
        "client-jwks-parameter": "jwks",
    })
print(json.dumps({"module": "oidc", "name": "oidc", "display_name": "OpenID Connect", "parameters": p}))
PY

# true while $SERVER_PID exists and is not a zombie
server_alive() {
  local st
  st=$(cut -d' ' -f3 "/proc/$SERVER_PID/stat" 2>/dev/null) || return 1
  [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

provision() {
  local jar_admin="$WORKDIR/admin.jar" jar_alice="$WORKDIR/alice.jar" out="$WORKDIR/provision.out"
  fail() {
    echo "start.sh: provisioning FAILED: $*" >&2
    [ -s "$out" ] && { echo "--- last response body:" >&2; cat "$out" >&2; echo >&2; }
    if [ -f "$LOG" ]; then echo "--- tail of $LOG:" >&2; tail -n 25 "$LOG" >&2; fi
    # SIGKILL so the exit status is non-zero (glewlwyd exits 0 on SIGTERM); only if that PID
    # is still glewlwyd (guards against PID reuse)
    if [ "$(cat "/proc/$SERVER_PID/comm" 2>/dev/null)" = glewlwyd ]; then kill -KILL "$SERVER_PID" 2>/dev/null || true; fi
    exit 1
  }
  # call METHOD PATH [JSON] [JAR]  -> fails unless HTTP 200
  call() {
    local method=$1 path=$2 body=${3:-} jar=${4:-$jar_admin} code
    local args=(-s -o "$out" -w '%{http_code}' -X "$method" -b "$jar" -c "$jar" --max-time 10)
    # a body starting with @ is a file name (curl --data-binary semantics)
    [ -n "$body" ] && args+=(-H 'Content-Type: application/json' --data-binary "$body")
    code=$(curl "${args[@]}" "$API$path") || code="curl-error"
    [ "$code" = 200 ] || fail "$method $path -> HTTP $code"
  }

  # wait for the server (normally < 0.2 s)
  local i
  for i in $(seq 1 200); do
    server_alive || fail "glewlwyd exited during startup"
    curl -s -o /dev/null --max-time 1 "$BASE/config" && break
    sleep 0.05
    [ "$i" = 200 ] && fail "server did not answer on $BASE within 10 s"
  done

  call POST /auth/ '{"username":"admin","password":"password"}'
  # scopes: openid exists (password_required=false by default -> require the password session)
  call PUT /scope/openid '{"display_name":"Open ID","description":"Open ID Connect scope","password_required":true,"password_max_age":0}'
  call POST /scope/ '{"name":"offline_access","display_name":"Offline access","description":"Refresh tokens","password_required":true,"password_max_age":0}'
  call POST /scope/ '{"name":"email","display_name":"E-mail","description":"E-mail address","password_required":true,"password_max_age":0}'
  # the OIDC plugin instance, reachable at /api/oidc
  call POST /mod/plugin/ "@$PLUGIN_JSON"
  # the public client; dpop_bound_access_tokens makes DPoP mandatory for it
  call POST /client/ '{"client_id":"sesame-test","name":"Sesame test","description":"Sesame interop test client","confidential":false,"enabled":true,"redirect_uri":["http://127.0.0.1:5555/callback"],"authorization_type":["code","refresh_token"],"token_endpoint_auth_method":["none"],"scope":[],"dpop_bound_access_tokens":"1"}'
  call GET /client/sesame-test
  grep -q '"dpop_bound_access_tokens":"1"' "$out" || fail "client sesame-test lost its dpop_bound_access_tokens property"
  # the user
  call POST /user/ '{"username":"alice","name":"Alice","email":"alice@example.test","password":"correct-horse","enabled":true,"scope":["openid","offline_access","email","g_profile"]}'
  # pre-grant the consent of alice for sesame-test (scope list is SPACE separated)
  call POST /auth/ '{"username":"alice","password":"correct-horse"}' "$jar_alice"
  call PUT /auth/grant/sesame-test '{"scope":"openid offline_access email"}' "$jar_alice"
  if [ "$SERVICE_CLIENTS" = 1 ]; then
    # the confidential clients of the client credentials grant. Their "scope" list is all the grant looks at:
    # reports.read needs no entry under /api/scope (measured: the grant works without one, and with password_required)
    call POST /client/ "@$WORKDIR/provision.client-service.json"
    call GET /client/sesame-service
    grep -q '"jwks":{"keys":\[' "$out" || fail "client sesame-service lost its jwks property"
    call POST /client/ '{"client_id":"sesame-service-secret","name":"Sesame service (secret)","description":"Sesame interop test: client credentials with client_secret_basic","confidential":true,"enabled":true,"redirect_uri":[],"authorization_type":["client_credentials"],"token_endpoint_auth_method":["client_secret_basic"],"client_secret":"sesame-service-secret-0123456789","scope":["reports.read"]}'
  fi
  # sanity check: discovery answers with our issuer and DPoP algs
  curl -s --max-time 5 -o "$out" "$ISSUER/.well-known/openid-configuration" || fail "discovery unreachable"
  grep -q "\"issuer\":\"$ISSUER\"" "$out" || fail "discovery has an unexpected issuer"
  grep -q '"dpop_signing_alg_values_supported"' "$out" || fail "discovery lacks dpop_signing_alg_values_supported"
  if [ "$SERVICE_CLIENTS" = 1 ]; then
    grep -q '"private_key_jwt"' "$out" || fail "discovery lacks private_key_jwt in token_endpoint_auth_methods_supported"
  fi
  rm -f "$jar_admin" "$jar_alice" "$out"
  echo "READY $ISSUER"
}

SERVER_PID=$$   # after exec below, this PID is glewlwyd itself
# double fork: the provisioner is re-parented to init, so it never lingers as a zombie of glewlwyd
( provision & ) 
exec glewlwyd -c "$CONF"
