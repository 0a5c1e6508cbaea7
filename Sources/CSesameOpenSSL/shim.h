#ifndef CSESAME_OPENSSL_SHIM_H
#define CSESAME_OPENSSL_SHIM_H

// The libcrypto surface SesameJOSE's OpenSSL backend uses. Nothing here holds logic: the inline
// functions below only make macros (which Swift cannot call) into functions.
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>

/// `BIO_get_mem_data` is a macro.
static inline long csesame_BIO_get_mem_data(BIO *bio, char **data) {
    return BIO_get_mem_data(bio, data);
}

/// `EVP_PKEY_KEYPAIR` and `EVP_PKEY_PUBLIC_KEY` are macros built from other macros.
static const int CSESAME_EVP_PKEY_KEYPAIR = EVP_PKEY_KEYPAIR;
static const int CSESAME_EVP_PKEY_PUBLIC_KEY = EVP_PKEY_PUBLIC_KEY;

#endif
