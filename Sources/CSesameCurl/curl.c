// libcurl loaded at run time with dlopen (see csesame_curl.h). curl_easy_setopt, curl_easy_getinfo and
// curl_multi_setopt are variadic, which Swift cannot call: the typed wrappers below are the way in.
#include "csesame_curl.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <sys/socket.h>

// libcurl's CURLMsg: { CURLMSG msg; CURL *easy_handle; union { void *whatever; CURLcode result; } data; }.
typedef struct {
    int msg;  // CURLMSG_DONE = 1
    void *easy_handle;
    union {
        void *whatever;
        int result;
    } data;
} MessageABI;

// The head of libcurl's struct curl_sockaddr, as its open-socket callback receives it (the address follows).
typedef struct {
    int family;
    int socktype;
    int protocol;
} SocketRequestABI;

typedef int (*GlobalInitFunction)(long);
typedef void *(*EasyInitFunction)(void);
typedef void (*EasyCleanupFunction)(void *);
typedef const char *(*EasyStrerrorFunction)(int);
typedef int (*EasySetoptFunction)(void *, int, ...);
typedef int (*EasyGetinfoFunction)(void *, int, ...);
typedef void *(*SlistAppendFunction)(void *, const char *);
typedef void (*SlistFreeAllFunction)(void *);
typedef void *(*MultiInitFunction)(void);
typedef int (*MultiSetoptFunction)(void *, int, ...);
typedef int (*MultiHandleFunction)(void *, void *);
typedef int (*MultiPerformFunction)(void *, int *);
typedef int (*MultiPollFunction)(void *, void *, unsigned int, int, int *);
typedef int (*MultiWakeupFunction)(void *);
typedef MessageABI *(*MultiInfoReadFunction)(void *, int *);

static pthread_once_t once = PTHREAD_ONCE_INIT;
static const char *load_error = NULL;
static GlobalInitFunction global_init;
static EasyInitFunction easy_init;
static EasyCleanupFunction easy_cleanup;
static EasyStrerrorFunction easy_strerror;
static EasySetoptFunction easy_setopt;
static EasyGetinfoFunction easy_getinfo;
static SlistAppendFunction slist_append;
static SlistFreeAllFunction slist_free_all;
static MultiInitFunction multi_init;
static MultiSetoptFunction multi_setopt;
static MultiHandleFunction multi_add_handle;
static MultiHandleFunction multi_remove_handle;
static MultiPerformFunction multi_perform;
static MultiPollFunction multi_poll;
static MultiWakeupFunction multi_wakeup;
static MultiInfoReadFunction multi_info_read;

// libcurl.so.4 is the run-time library (Debian libcurl4, Fedora libcurl); the unversioned name exists only where
// the development files are installed. (Scripts/check-curl-abi.sh builds with absent names to test the failure.)
#ifndef CSESAME_CURL_LIBRARY
#define CSESAME_CURL_LIBRARY "libcurl.so.4"
#endif
#ifndef CSESAME_CURL_FALLBACK_LIBRARY
#define CSESAME_CURL_FALLBACK_LIBRARY "libcurl.so"
#endif

static void load(void) {
    void *library = dlopen(CSESAME_CURL_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) library = dlopen(CSESAME_CURL_FALLBACK_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
        load_error = "libcurl.so.4 is not installed (Debian: apt-get install libcurl4)";
        return;
    }
    // POSIX allows storing dlsym's answer into a function pointer through a void * view of it.
    const struct {
        const char *name;
        void **slot;
    } symbols[] = {
        {"curl_global_init", (void **)&global_init},         {"curl_easy_init", (void **)&easy_init},
        {"curl_easy_cleanup", (void **)&easy_cleanup},       {"curl_easy_strerror", (void **)&easy_strerror},
        {"curl_easy_setopt", (void **)&easy_setopt},         {"curl_easy_getinfo", (void **)&easy_getinfo},
        {"curl_slist_append", (void **)&slist_append},       {"curl_slist_free_all", (void **)&slist_free_all},
        {"curl_multi_init", (void **)&multi_init},           {"curl_multi_setopt", (void **)&multi_setopt},
        {"curl_multi_add_handle", (void **)&multi_add_handle},
        {"curl_multi_remove_handle", (void **)&multi_remove_handle},
        {"curl_multi_perform", (void **)&multi_perform},
        {"curl_multi_poll", (void **)&multi_poll},      // 7.66+
        {"curl_multi_wakeup", (void **)&multi_wakeup},  // 7.68+
        {"curl_multi_info_read", (void **)&multi_info_read},
    };
    for (size_t index = 0; index < sizeof symbols / sizeof symbols[0]; index++) {
        *symbols[index].slot = dlsym(library, symbols[index].name);
        if (*symbols[index].slot == NULL) {
            load_error = "the installed libcurl is older than 7.68 (a function the transport needs is missing)";
            return;
        }
    }
    const long global_default = 3;  // CURL_GLOBAL_SSL | CURL_GLOBAL_WIN32
    if (global_init(global_default) != CSESAME_CURLE_OK) load_error = "libcurl could not initialise";
}

int csesame_curl_load(void) {
    pthread_once(&once, load);
    return load_error == NULL;
}

const char *csesame_curl_load_error(void) {
    pthread_once(&once, load);
    return load_error;
}

void *csesame_curl_easy_init(void) { return easy_init(); }
void csesame_curl_easy_cleanup(void *easy) { easy_cleanup(easy); }
const char *csesame_curl_easy_strerror(int code) { return easy_strerror(code); }
void *csesame_curl_slist_append(void *list, const char *line) { return slist_append(list, line); }
void csesame_curl_slist_free_all(void *list) {
    if (list != NULL) slist_free_all(list);
}
int csesame_curl_set_long(void *easy, int option, long value) { return easy_setopt(easy, option, value); }
int csesame_curl_set_string(void *easy, int option, const char *value) { return easy_setopt(easy, option, value); }
int csesame_curl_set_pointer(void *easy, int option, void *value) { return easy_setopt(easy, option, value); }
int csesame_curl_set_size(void *easy, int option, int64_t value) {
    return easy_setopt(easy, option, (long long)value);  // curl_off_t is 64 bits wherever libcurl 7.68+ runs
}
int csesame_curl_set_callback(void *easy, int option, csesame_curl_data_callback value) {
    return easy_setopt(easy, option, value);
}
// libcurl before 8.17 creates its connections without SOCK_CLOEXEC; this callback replaces its socket(2) call for
// each (the purpose is always a connection). No option reaches libcurl's other descriptors: its wake-up socket pair
// (close-on-exec from 8.8) and, during a name lookup, the threaded resolver's.
static int open_close_on_exec(void *context, int purpose, SocketRequestABI *request) {
    (void)context;
    (void)purpose;
#ifdef SOCK_CLOEXEC
    return socket(request->family, request->socktype | SOCK_CLOEXEC, request->protocol);
#else
    int fd = socket(request->family, request->socktype, request->protocol);
    if (fd >= 0) fcntl(fd, F_SETFD, FD_CLOEXEC);
    return fd;
#endif
}

int csesame_curl_set_close_on_exec(void *easy) {
    return easy_setopt(easy, CSESAME_CURLOPT_OPENSOCKETFUNCTION, open_close_on_exec);
}

int csesame_curl_response_code(void *easy, long *code) {
    return easy_getinfo(easy, CSESAME_CURLINFO_RESPONSE_CODE, code);
}

void *csesame_curl_multi_init(void) { return multi_init(); }
int csesame_curl_multi_set_long(void *multi, int option, long value) { return multi_setopt(multi, option, value); }
int csesame_curl_multi_add_handle(void *multi, void *easy) { return multi_add_handle(multi, easy); }
int csesame_curl_multi_remove_handle(void *multi, void *easy) { return multi_remove_handle(multi, easy); }
int csesame_curl_multi_perform(void *multi, int *running) { return multi_perform(multi, running); }
int csesame_curl_multi_poll(void *multi, int timeout_ms) { return multi_poll(multi, NULL, 0, timeout_ms, NULL); }
int csesame_curl_multi_wakeup(void *multi) { return multi_wakeup(multi); }

int csesame_curl_multi_next_done(void *multi, void **easy, int *result) {
    int left = 0;
    MessageABI *message;
    while ((message = multi_info_read(multi, &left)) != NULL) {
        if (message->msg != 1) continue;  // CURLMSG_DONE
        *easy = message->easy_handle;
        *result = message->data.result;
        return 1;
    }
    return 0;
}
