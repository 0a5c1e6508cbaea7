#ifndef CSESAME_SECRET_H
#define CSESAME_SECRET_H

#include <stddef.h>

/// Whether libsecret could be loaded (it is opened with dlopen, so the package builds without it).
int csesame_secret_available(void);

/// Stores `secret` under (service, account). Returns 1 on success; 0 with a message in `error`.
int csesame_secret_store(const char *service, const char *account, const char *label, const char *secret,
                         char *error, size_t error_length);

/// Looks up (service, account). Returns a copy the caller frees with csesame_secret_free, or NULL: then
/// `*failed` is 1 with a message in `error` on failure, 0 when there is no such item.
char *csesame_secret_lookup(const char *service, const char *account, int *failed, char *error, size_t error_length);

/// Deletes (service, account). Returns 1 on success (also when absent); 0 with a message in `error`.
int csesame_secret_clear(const char *service, const char *account, char *error, size_t error_length);

/// Wipes and frees a secret returned by csesame_secret_lookup.
void csesame_secret_free(char *secret);

#endif
