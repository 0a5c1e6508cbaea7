#!/usr/bin/env bash
# Installs what the build and the tests need when it is missing (idempotent, quiet when everything is there):
# OpenSSL and SQLite headers, python3 (the CLI tests' one-shot HTTP server), D-Bus and GNOME Keyring (the real
# keyring test). Called by Scripts/test.sh and .ci/run.
set -euo pipefail
missing=()
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
pkg-config --exists openssl 2>/dev/null || missing+=(libssl-dev)
pkg-config --exists sqlite3 2>/dev/null || missing+=(libsqlite3-dev)  # the dev server's store
pkg-config --exists libcurl 2>/dev/null || missing+=(libcurl4-openssl-dev)  # the Linux HTTP transport
command -v python3 >/dev/null 2>&1 || missing+=(python3)  # the CLI tests' one-shot HTTP server
# The real Linux keyring for the Secret Service store's test (a private D-Bus session runs it).
command -v dbus-daemon >/dev/null 2>&1 || missing+=(dbus)
command -v gnome-keyring-daemon >/dev/null 2>&1 || missing+=(gnome-keyring)
[ -e /usr/lib/x86_64-linux-gnu/libsecret-1.so.0 ] || [ -e /usr/lib/aarch64-linux-gnu/libsecret-1.so.0 ] \
    || missing+=(libsecret-1-0)
if [ ${#missing[@]} -gt 0 ]; then
    echo "install-deps.sh: installing ${missing[*]}"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

