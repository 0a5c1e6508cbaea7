// libcurl for Sesame's Linux transport, loaded at run time with dlopen: the package builds without libcurl's
// development files, and runs wherever libcurl.so.4 is (FoundationNetworking links it, so it is there wherever
// URLSession works). Only what the transport uses is declared; the numbers are libcurl's public ABI (7.68+),
// checked against the real <curl/curl.h> by Scripts/check-curl-abi.sh. Every name is prefixed so that a program
// importing the real header too sees no clash.
#ifndef CSESAME_CURL_H
#define CSESAME_CURL_H

#include <stddef.h>
#include <stdint.h>

// Options (CURLoption), information (CURLINFO) and multi options (CURLMoption).
#define CSESAME_CURLOPT_WRITEDATA 10001
#define CSESAME_CURLOPT_URL 10002
#define CSESAME_CURLOPT_HTTPHEADER 10023
#define CSESAME_CURLOPT_HEADERDATA 10029
#define CSESAME_CURLOPT_CUSTOMREQUEST 10036
#define CSESAME_CURLOPT_NOBODY 44
#define CSESAME_CURLOPT_FRESH_CONNECT 74
#define CSESAME_CURLOPT_FOLLOWLOCATION 52
#define CSESAME_CURLOPT_HTTPGET 80
#define CSESAME_CURLOPT_NOSIGNAL 99
#define CSESAME_CURLOPT_ACCEPT_ENCODING 10102
#define CSESAME_CURLOPT_TIMEOUT_MS 155
#define CSESAME_CURLOPT_COPYPOSTFIELDS 10165
#define CSESAME_CURLOPT_PROTOCOLS_STR 10318
#define CSESAME_CURLOPT_PROTOCOLS 181
#define CSESAME_CURLPROTO_HTTP 1
#define CSESAME_CURLPROTO_HTTPS 2
#define CSESAME_CURLOPT_WRITEFUNCTION 20011
#define CSESAME_CURLOPT_HEADERFUNCTION 20079
#define CSESAME_CURLOPT_OPENSOCKETFUNCTION 20163
#define CSESAME_CURLOPT_POSTFIELDSIZE_LARGE 30120
#define CSESAME_CURLINFO_RESPONSE_CODE 2097154
#define CSESAME_CURLMOPT_MAX_HOST_CONNECTIONS 7
#define CSESAME_CURLMOPT_MAX_TOTAL_CONNECTIONS 13

// Results (CURLcode).
#define CSESAME_CURLE_OK 0
#define CSESAME_CURLE_COULDNT_RESOLVE_PROXY 5
#define CSESAME_CURLE_COULDNT_RESOLVE_HOST 6
#define CSESAME_CURLE_COULDNT_CONNECT 7
#define CSESAME_CURLE_PARTIAL_FILE 18
#define CSESAME_CURLE_WRITE_ERROR 23
#define CSESAME_CURLE_OPERATION_TIMEDOUT 28
#define CSESAME_CURLE_SSL_CONNECT_ERROR 35
#define CSESAME_CURLE_GOT_NOTHING 52
#define CSESAME_CURLE_SEND_ERROR 55
#define CSESAME_CURLE_RECV_ERROR 56
#define CSESAME_CURLE_SSL_CERTPROBLEM 58
#define CSESAME_CURLE_PEER_FAILED_VERIFICATION 60
#define CSESAME_CURLE_SSL_CACERT_BADFILE 77

/// Called with received bytes (a body chunk or one header line); returns the count taken.
typedef size_t (*csesame_curl_data_callback)(char *data, size_t size, size_t count, void *context);

/// Loads libcurl once (thread-safe) and initialises it. Returns 1 when every function the transport needs was
/// found; 0 otherwise, and `csesame_curl_load_error` says why.
int csesame_curl_load(void);
/// Why loading failed (a static string), or NULL.
const char *csesame_curl_load_error(void);

// Thin calls into the loaded library: call them only after csesame_curl_load returned 1.
void *csesame_curl_easy_init(void);
void csesame_curl_easy_cleanup(void *easy);
const char *csesame_curl_easy_strerror(int code);
void *csesame_curl_slist_append(void *list, const char *line);
void csesame_curl_slist_free_all(void *list);
int csesame_curl_set_long(void *easy, int option, long value);
int csesame_curl_set_string(void *easy, int option, const char *value);
int csesame_curl_set_pointer(void *easy, int option, void *value);
int csesame_curl_set_size(void *easy, int option, int64_t value);
int csesame_curl_set_callback(void *easy, int option, csesame_curl_data_callback value);
/// Makes the transfer's sockets close-on-exec from their creation (an open-socket callback with SOCK_CLOEXEC), so a
/// program the app starts meanwhile inherits no connection. Returns libcurl's result.
int csesame_curl_set_close_on_exec(void *easy);
int csesame_curl_response_code(void *easy, long *code);

void *csesame_curl_multi_init(void);
int csesame_curl_multi_set_long(void *multi, int option, long value);
int csesame_curl_multi_add_handle(void *multi, void *easy);
int csesame_curl_multi_remove_handle(void *multi, void *easy);
int csesame_curl_multi_perform(void *multi, int *running);
/// Waits in poll(2) until a transfer's socket is ready, a timer is due, `timeout_ms` passes or a wake-up.
int csesame_curl_multi_poll(void *multi, int timeout_ms);
int csesame_curl_multi_wakeup(void *multi);
/// The next finished transfer: returns 1 with its handle and result, or 0 when none is left.
int csesame_curl_multi_next_done(void *multi, void **easy, int *result);

#endif
