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

#define THING_AGENT_LOOK_UP(table, name)                                                       \
    if ((table.name = (__typeof__(table.name))dlsym(library, #name)) == NULL) {                \
        snprintf(failure, size, "%s has no function %s", soname, #name);                      \
        return failure;                                                                        \
    }
#define THING_AGENT_MOSQUITTO_LOOK_UP(name) THING_AGENT_LOOK_UP(libmosquitto, name)
#define THING_AGENT_OPENSSL_LOOK_UP(name) THING_AGENT_LOOK_UP(libssl, name)

static const char *look_up_mosquitto(void *library, const char *soname, char *failure, size_t size) {
    THING_AGENT_MOSQUITTO_FUNCTIONS(THING_AGENT_MOSQUITTO_LOOK_UP)
    return NULL;
}

/* libssl's handle finds libcrypto's functions too: dlsym searches a library's dependencies. */
static const char *look_up_openssl(void *library, const char *soname, char *failure, size_t size) {
    THING_AGENT_OPENSSL_FUNCTIONS(THING_AGENT_OPENSSL_LOOK_UP)
    return NULL;
}

/* Opens `soname` locally (only its table calls into it) and fills the table; NULL, or what is missing. */
static const char *load(const char *soname, char *failure, size_t size,
                        const char *(*look_up)(void *, const char *, char *, size_t)) {
    void *library = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
        const char *reason = dlerror();
        snprintf(failure, size, "%s cannot be loaded (%s)", soname, reason ? reason : "not found");
        return failure;
    }
    return look_up(library, soname, failure, size);
}

static pthread_once_t mosquitto_once = PTHREAD_ONCE_INIT;
static pthread_once_t openssl_once = PTHREAD_ONCE_INIT;

static void load_mosquitto(void) {
    mosquitto_result = load(THING_AGENT_MOSQUITTO_SONAME, mosquitto_failure, sizeof mosquitto_failure, look_up_mosquitto);
}

static void load_openssl(void) {
    openssl_result = load(THING_AGENT_SSL_SONAME, openssl_failure, sizeof openssl_failure, look_up_openssl);
}

const char *thing_agent_load_mosquitto(void) {
    pthread_once(&mosquitto_once, load_mosquitto);
    return mosquitto_result;
}

const char *thing_agent_load_openssl(void) {
    pthread_once(&openssl_once, load_openssl);
    return openssl_result;
}

const struct thing_agent_mosquitto_functions *thing_agent_mosquitto_table(void) { return &libmosquitto; }
const struct thing_agent_openssl_functions *thing_agent_openssl_table(void) { return &libssl; }
