#!/usr/bin/env bash
# Installs what the build and the tests need when it is missing (idempotent, quiet when everything is there).
# On Debian/Ubuntu it uses apt-get (with sudo when not root) and says what it installs; elsewhere it prints the
# list to install by hand and stops.
#
#   build:  pkg-config, OpenSSL headers (libssl-dev), SQLite headers (libsqlite3-dev); all three are on a new
#           machine of the kind we build on. libcurl is opened at run time (libcurl.so.4, which the toolchain's
#           FoundationNetworking links): the build needs no libcurl headers
#           (check-curl-abi.sh installs libcurl's headers itself, to compare our declarations with them)
#   tests:  python3 (a one-shot HTTP server), curl, D-Bus + GNOME Keyring + libsecret + secret-tool (the real
#           keyring tests),
#           zsh and fish (completion scripts are syntax-checked), Chromium + chromedriver (the provider's sign-in
#           page in a real browser), and from PyPI Selenium, Authlib (a third-party OAuth client) and
#           django-oauth-toolkit (a third-party OpenID Connect provider); Glewlwyd (a third-party provider with
#           DPoP nonces), sqlite3 and openssl for its set-up
set -euo pipefail
missing=()
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
pkg-config --exists openssl 2>/dev/null || missing+=(libssl-dev)
pkg-config --exists sqlite3 2>/dev/null || missing+=(libsqlite3-dev)  # the dev server's store
command -v python3 >/dev/null 2>&1 || missing+=(python3)  # the CLI tests' one-shot HTTP server
command -v curl >/dev/null 2>&1 || missing+=(curl)
# The real Linux keyring for the Secret Service store's test (a private D-Bus session runs it).
command -v dbus-daemon >/dev/null 2>&1 || missing+=(dbus)
command -v gnome-keyring-daemon >/dev/null 2>&1 || missing+=(gnome-keyring)
[ -e /usr/lib/x86_64-linux-gnu/libsecret-1.so.0 ] || [ -e /usr/lib/aarch64-linux-gnu/libsecret-1.so.0 ] \
    || missing+=(libsecret-1-0)
command -v secret-tool >/dev/null 2>&1 || missing+=(libsecret-tools)  # writes an earlier release's keyring item
command -v zsh >/dev/null 2>&1 || missing+=(zsh)
command -v fish >/dev/null 2>&1 || missing+=(fish)
python3 -m pip --version >/dev/null 2>&1 || missing+=(python3-pip)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
# wrk: `sesame-bench server` drives the dev server with 10 and 1,000 keep-alive connections.
command -v wrk >/dev/null 2>&1 || missing+=(wrk)
# Glewlwyd: a real OpenID Connect provider that demands DPoP nonces (the DPoP interop test), with sqlite3 and
# openssl for its set-up script.
command -v glewlwyd >/dev/null 2>&1 || missing+=(glewlwyd)
command -v sqlite3 >/dev/null 2>&1 || missing+=(sqlite3)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
python3 -c 'import cryptography' 2>/dev/null || missing+=(python3-cryptography)

# Python test peers from PyPI (never dependencies of the product).
install_python_peers() {
    python3 -c 'import selenium, authlib, requests, django, oauth2_provider' 2>/dev/null && return 0
    # django-oauth-toolkit is the real third-party OpenID Connect provider of the client's interop test; oauthlib
    # 4.x breaks its device endpoint (GROUND.md).
    local peers=(selenium authlib requests django-oauth-toolkit "oauthlib==3.3.1")
    echo "install-deps.sh: installing from PyPI: ${peers[*]}"
    python3 -m pip install --quiet --disable-pip-version-check "${peers[@]}" 2>/dev/null \
        || python3 -m pip install --quiet --disable-pip-version-check --break-system-packages "${peers[@]}"
}
if [ ${#missing[@]} -eq 0 ]; then
    install_python_peers
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-deps.sh: this is not a Debian-like system; install these (Debian package names) by hand:" >&2
    echo "  ${missing[*]}" >&2
    echo "  (OpenSSL and SQLite development headers, pkg-config, python3, curl, D-Bus, GNOME Keyring," >&2
    echo "   libsecret, zsh, fish — e.g. 'dnf install openssl-devel sqlite-devel ...')" >&2
    exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "install-deps.sh: run as root, or install: ${missing[*]}" >&2; exit 1; }
    sudo="sudo"
fi
echo "install-deps.sh: installing with ${sudo:+sudo }apt-get: ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
install_python_peers
