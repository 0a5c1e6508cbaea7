// Secret Service (GNOME Keyring, KWallet) through libsecret, loaded at run time with dlopen so that the package
// builds and runs where libsecret is absent. The schema and GError layouts below are libsecret's and GLib's
// public ABI (libsecret 0.18+, GLib 2.x).
#include "csesame_secret.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *name;
    int type;  // SECRET_SCHEMA_ATTRIBUTE_STRING = 0
} SchemaAttribute;

typedef struct {
    const char *name;
    int flags;  // SECRET_SCHEMA_NONE = 0
    SchemaAttribute attributes[32];
    int reserved;
    void *reserved1, *reserved2, *reserved3, *reserved4, *reserved5, *reserved6, *reserved7;
} SecretSchema;

typedef struct {
    unsigned int domain;
    int code;
    char *message;
} GErrorABI;

typedef int (*StoreFunction)(const SecretSchema *, const char *, const char *, const char *, void *, GErrorABI **, ...);
typedef char *(*LookupFunction)(const SecretSchema *, void *, GErrorABI **, ...);
typedef int (*ClearFunction)(const SecretSchema *, void *, GErrorABI **, ...);
typedef void (*PasswordFreeFunction)(char *);
typedef void (*ErrorFreeFunction)(GErrorABI *);
typedef struct GListABI {
    void *data;
    struct GListABI *next, *prev;
} GListABI;
typedef GListABI *(*SearchFunction)(const SecretSchema *, int, void *, GErrorABI **, ...);
typedef void (*ListFreeFullFunction)(GListABI *, void (*)(void *));
typedef void (*ObjectUnrefFunction)(void *);

static const SecretSchema schema = {
    "dev.sesame.Credentials", 0, {{"service", 0}, {"account", 0}, {NULL, 0}}, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static StoreFunction store_function;
static LookupFunction lookup_function;
static ClearFunction clear_function;
static PasswordFreeFunction password_free_function;
static ErrorFreeFunction error_free_function;
static SearchFunction search_function;            // libsecret 0.19+; optional
static ListFreeFullFunction list_free_full_function;
static ObjectUnrefFunction object_unref_function;

static void load(void) {
    void *secret = dlopen("libsecret-1.so.0", RTLD_NOW | RTLD_LOCAL);
    void *glib = dlopen("libglib-2.0.so.0", RTLD_NOW | RTLD_LOCAL);
    if (secret == NULL || glib == NULL) return;
    store_function = (StoreFunction)dlsym(secret, "secret_password_store_sync");
    lookup_function = (LookupFunction)dlsym(secret, "secret_password_lookup_sync");
    clear_function = (ClearFunction)dlsym(secret, "secret_password_clear_sync");
    password_free_function = (PasswordFreeFunction)dlsym(secret, "secret_password_free");
    error_free_function = (ErrorFreeFunction)dlsym(glib, "g_error_free");
    void *gobject = dlopen("libgobject-2.0.so.0", RTLD_NOW | RTLD_LOCAL);
    search_function = (SearchFunction)dlsym(secret, "secret_password_search_sync");
    list_free_full_function = (ListFreeFullFunction)dlsym(glib, "g_list_free_full");
    object_unref_function = gobject != NULL ? (ObjectUnrefFunction)dlsym(gobject, "g_object_unref") : NULL;
}

// Whether an item for service/account exists in any collection, locked ones included. A lookup answers "no
// item" for an item in a locked collection it cannot unlock (no prompt in a headless session): that must read
// as "the keyring is locked", never as "signed out". Returns 1 (exists), 0 (does not), -1 (cannot tell).
static int item_exists_locked_or_not(const char *service, const char *account) {
    if (search_function == NULL || list_free_full_function == NULL || object_unref_function == NULL) return -1;
    GErrorABI *gerror = NULL;
    const int search_all = 1 << 1;  // SECRET_SEARCH_ALL, without SECRET_SEARCH_UNLOCK
    GListABI *items = search_function(&schema, search_all, NULL, &gerror, "service", service, "account", account, NULL);
    if (gerror != NULL) {
        error_free_function(gerror);
        if (items != NULL) list_free_full_function(items, object_unref_function);
        return -1;
    }
    int exists = items != NULL;
    if (items != NULL) list_free_full_function(items, object_unref_function);
    return exists;
}

int csesame_secret_available(void) {
    pthread_once(&once, load);
    return store_function && lookup_function && clear_function && password_free_function && error_free_function;
}

static void report(GErrorABI *gerror, char *error, size_t error_length, const char *fallback) {
    if (error != NULL && error_length > 0) {
        snprintf(error, error_length, "%s", gerror != NULL && gerror->message != NULL ? gerror->message : fallback);
    }
    if (gerror != NULL) error_free_function(gerror);
}

int csesame_secret_store(const char *service, const char *account, const char *label, const char *secret,
                         char *error, size_t error_length) {
    if (!csesame_secret_available()) {
        report(NULL, error, error_length, "libsecret is not installed");
        return 0;
    }
    GErrorABI *gerror = NULL;
    int ok = store_function(&schema, NULL, label, secret, NULL, &gerror, "service", service, "account", account, NULL);
    if (!ok || gerror != NULL) {
        report(gerror, error, error_length, "the Secret Service refused to store the item");
        return 0;
    }
    return 1;
}

char *csesame_secret_lookup(const char *service, const char *account, int *failed, char *error, size_t error_length) {
    *failed = 0;
    if (!csesame_secret_available()) {
        *failed = 1;
        report(NULL, error, error_length, "libsecret is not installed");
        return NULL;
    }
    GErrorABI *gerror = NULL;
    char *found = lookup_function(&schema, NULL, &gerror, "service", service, "account", account, NULL);
    if (gerror != NULL) {
        *failed = 1;
        report(gerror, error, error_length, "the Secret Service lookup failed");
        if (found != NULL) password_free_function(found);
        return NULL;
    }
    if (found == NULL) {
        if (item_exists_locked_or_not(service, account) == 1) {
            *failed = 1;
            report(NULL, error, error_length, "the keyring holds the item but it is locked; unlock it and try again");
        }
        return NULL;
    }
    char *copy = strdup(found);
    password_free_function(found);  // libsecret wipes it
    return copy;
}

int csesame_secret_clear(const char *service, const char *account, char *error, size_t error_length) {
    if (!csesame_secret_available()) {
        report(NULL, error, error_length, "libsecret is not installed");
        return 0;
    }
    GErrorABI *gerror = NULL;
    clear_function(&schema, NULL, &gerror, "service", service, "account", account, NULL);
    if (gerror != NULL) {
        report(gerror, error, error_length, "the Secret Service refused to delete the item");
        return 0;
    }
    return 1;
}

void csesame_secret_free(char *secret) {
    if (secret == NULL) return;
    volatile char *cursor = secret;
    while (*cursor != '\0') *cursor++ = 0;
    free(secret);
}
