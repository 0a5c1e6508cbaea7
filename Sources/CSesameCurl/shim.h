// libcurl for Sesame's Linux transport (Debian libcurl4-openssl-dev). curl_easy_setopt and friends are variadic,
// which Swift cannot call: these typed wrappers are the only way in.
#ifndef CSESAME_CURL_SHIM_H
#define CSESAME_CURL_SHIM_H
#include <curl/curl.h>

typedef size_t (*csesame_curl_data_callback)(char *data, size_t size, size_t count, void *context);

static inline CURLcode csesame_curl_set_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode csesame_curl_set_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode csesame_curl_set_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode csesame_curl_set_size(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode csesame_curl_set_callback(CURL *handle, CURLoption option, csesame_curl_data_callback value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode csesame_curl_response_code(CURL *handle, long *code) {
    return curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, code);
}
static inline CURLMcode csesame_curl_multi_set_long(CURLM *multi, CURLMoption option, long value) {
    return curl_multi_setopt(multi, option, value);
}
static inline CURL *csesame_curl_message_handle(CURLMsg *message) { return message->easy_handle; }
static inline int csesame_curl_message_done(CURLMsg *message) { return message->msg == CURLMSG_DONE; }
static inline CURLcode csesame_curl_message_result(CURLMsg *message) { return message->data.result; }

#endif
