#ifndef THING_AGENT_COPENSSL_SHIM_H
#define THING_AGENT_COPENSSL_SHIM_H
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/x509_vfy.h>
#include <openssl/sha.h>
#endif
