#include "CLazyLibraries.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

static struct thing_agent_mosquitto_functions libmosquitto;
static struct thing_agent_openssl_functions libssl;

/* What went wrong, for the error the caller shows; written once, by the one load of its library. */
static char mosquitto_failure[512];
static char openssl_failure[512];
static const char *mosquitto_result;
static const char *openssl_result;

/* Opens `soname` locally (only the table calls into it); NULL with `failure` filled when it cannot be loaded. */
static void *open_library(const char *soname, char *failure, size_t size) {
    void *library = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
        const char *reason = dlerror();
        snprintf(failure, size, "%s cannot be loaded (%s)", soname, reason ? reason : "not found");
    }
    return library;
}

#define THING_AGENT_LOOK_UP(table, failure, name)                                              \
    if ((table.name = (__typeof__(table.name))dlsym(library, #name)) == NULL) {                \
        snprintf(failure, sizeof failure, "%s has no function %s", soname, #name);            \
        return failure;                                                                        \
    }

static const char *load_mosquitto(void) {
    const char *soname = THING_AGENT_MOSQUITTO_SONAME;
    void *library = open_library(soname, mosquitto_failure, sizeof mosquitto_failure);
    if (library == NULL) return mosquitto_failure;
#define THING_AGENT_MOSQUITTO_LOOK_UP(name) THING_AGENT_LOOK_UP(libmosquitto, mosquitto_failure, name)
    THING_AGENT_MOSQUITTO_FUNCTIONS(THING_AGENT_MOSQUITTO_LOOK_UP)
    return NULL;
}

/* libssl's handle finds libcrypto's functions too: dlsym searches a library's dependencies. */
static const char *load_openssl(void) {
    const char *soname = THING_AGENT_SSL_SONAME;
    void *library = open_library(soname, openssl_failure, sizeof openssl_failure);
    if (library == NULL) return openssl_failure;
#define THING_AGENT_OPENSSL_LOOK_UP(name) THING_AGENT_LOOK_UP(libssl, openssl_failure, name)
    THING_AGENT_OPENSSL_FUNCTIONS(THING_AGENT_OPENSSL_LOOK_UP)
    return NULL;
}

static pthread_once_t mosquitto_once = PTHREAD_ONCE_INIT;
static pthread_once_t openssl_once = PTHREAD_ONCE_INIT;
static void run_mosquitto_load(void) { mosquitto_result = load_mosquitto(); }
static void run_openssl_load(void) { openssl_result = load_openssl(); }

const char *thing_agent_load_mosquitto(void) {
    pthread_once(&mosquitto_once, run_mosquitto_load);
    return mosquitto_result;
}

const char *thing_agent_load_openssl(void) {
    pthread_once(&openssl_once, run_openssl_load);
    return openssl_result;
}

const struct thing_agent_mosquitto_functions *thing_agent_mosquitto_table(void) { return &libmosquitto; }
const struct thing_agent_openssl_functions *thing_agent_openssl_table(void) { return &libssl; }
