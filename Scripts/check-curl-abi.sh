#!/usr/bin/env bash
# Checks that CSesameCurl's own declarations (the option, result and message numbers and layouts it uses instead of
# libcurl's headers, which it does not need at build time) match the real <curl/curl.h>: a C file including both is
# compiled with a static assertion per number and layout. Installs libcurl's headers for this alone when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! echo '#include <curl/curl.h>' | cc -E -x c - >/dev/null 2>&1; then
    command -v apt-get >/dev/null 2>&1 || { echo "check-curl-abi.sh: install libcurl's headers first" >&2; exit 1; }
    echo "check-curl-abi.sh: installing libcurl4-openssl-dev (for this check only)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libcurl4-openssl-dev >/dev/null
fi
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
{
    echo '#include <curl/curl.h>'
    echo '#include <stddef.h>'
    echo "#include \"$PWD/Sources/CSesameCurl/curl.c\""
    # Every CSESAME_X in the header must equal libcurl's X.
    sed -nE 's/^#define CSESAME_([A-Z_]+) .*/_Static_assert(CSESAME_\1 == \1, "CSESAME_\1 differs from libcurl");/p' \
        Sources/CSesameCurl/include/csesame_curl.h
    cat <<'C'
_Static_assert(sizeof(MessageABI) == sizeof(CURLMsg), "CURLMsg's size");
_Static_assert(offsetof(MessageABI, easy_handle) == offsetof(CURLMsg, easy_handle), "CURLMsg.easy_handle");
_Static_assert(offsetof(MessageABI, data) == offsetof(CURLMsg, data), "CURLMsg.data");
_Static_assert(sizeof(curl_off_t) == sizeof(long long), "curl_off_t is 64 bits");
_Static_assert(CURL_GLOBAL_DEFAULT == 3, "CURL_GLOBAL_DEFAULT");
_Static_assert(CURLMSG_DONE == 1, "CURLMSG_DONE");
_Static_assert(CURLM_OK == 0, "CURLM_OK");
_Static_assert(offsetof(SocketRequestABI, family) == offsetof(struct curl_sockaddr, family), "curl_sockaddr.family");
_Static_assert(offsetof(SocketRequestABI, socktype) == offsetof(struct curl_sockaddr, socktype), "curl_sockaddr.socktype");
_Static_assert(offsetof(SocketRequestABI, protocol) == offsetof(struct curl_sockaddr, protocol), "curl_sockaddr.protocol");
_Static_assert(CURLSOCKTYPE_IPCXN == 0 && CURLSOCKTYPE_ACCEPT == 1, "curlsocktype");
_Static_assert(sizeof(curl_socket_t) == sizeof(int) && CURL_SOCKET_BAD == -1, "curl_socket_t is an int, -1 bad");
C
} >"$scratch/abi.c"
count=$(grep -c _Static_assert "$scratch/abi.c")
# (CURLOPT_PROTOCOLS is deprecated upstream; it is compared all the same, as the fallback for libcurl before 7.85.)
cc -std=c11 -Wall -Werror -Wno-deprecated-declarations -I Sources/CSesameCurl/include -c "$scratch/abi.c" -o "$scratch/abi.o" \
    || { echo "check-curl-abi.sh: CSesameCurl's declarations differ from libcurl's (above)" >&2; exit 1; }

# Where libcurl cannot be loaded, loading fails with a reason instead of crashing (the transport turns it into an
# AuthError): built with library names that do not exist, and run.
cat >"$scratch/absent.c" <<C
#include "$PWD/Sources/CSesameCurl/curl.c"
#include <stdio.h>
#include <string.h>
int main(void) {
    if (csesame_curl_load() != 0) return 1;
    const char *reason = csesame_curl_load_error();
    if (reason == NULL || strstr(reason, "libcurl.so.4 is not installed") == NULL) return 2;
    return csesame_curl_load() == 0 ? 0 : 3;  // asked again: still refused, no crash
}
C
cc -std=c11 -Wall -Werror -I Sources/CSesameCurl/include -DCSESAME_CURL_LIBRARY='"libsesame-absent.so.4"' \
    -DCSESAME_CURL_FALLBACK_LIBRARY='"libsesame-absent.so"' "$scratch/absent.c" -o "$scratch/absent" -ldl -lpthread
"$scratch/absent" || { echo "check-curl-abi.sh: a missing libcurl was not reported (status $?)" >&2; exit 1; }
echo "check-curl-abi.sh: $count numbers and layouts match <curl/curl.h> ($(curl-config --version 2>/dev/null || echo libcurl)); a missing libcurl is reported"
