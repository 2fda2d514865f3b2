#ifndef THING_AGENT_LAZY_LIBRARIES_H
#define THING_AGENT_LAZY_LIBRARIES_H
/*
 * libmosquitto's and OpenSSL's functions, looked up with dlopen/dlsym when the program first needs them instead of
 * by the dynamic loader at every start. Linked in, the two libraries (and libcrypto's 4,000 symbol bindings, all
 * resolved at load time) were a third of a short `thing-agent info`'s instructions, for a command that uses
 * neither. Each table's fields are typed from the libraries' own declarations (`__typeof__`), so a call through
 * them is checked against the real prototypes.
 */
#include <mosquitto.h>
#include <mqtt_protocol.h>
#include <openssl/err.h>
#include <openssl/sha.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#pragma clang assume_nonnull begin

/* The functions the MQTT module calls. */
#define THING_AGENT_MOSQUITTO_FUNCTIONS(F) \
    F(mosquitto_connack_string) \
    F(mosquitto_connect_bind_async) \
    F(mosquitto_connect_bind_v5) \
    F(mosquitto_connect_v5_callback_set) \
    F(mosquitto_destroy) \
    F(mosquitto_disconnect) \
    F(mosquitto_disconnect_v5_callback_set) \
    F(mosquitto_int_option) \
    F(mosquitto_lib_init) \
    F(mosquitto_log_callback_set) \
    F(mosquitto_loop_misc) \
    F(mosquitto_loop_read) \
    F(mosquitto_loop_write) \
    F(mosquitto_message_v5_callback_set) \
    F(mosquitto_new) \
    F(mosquitto_property_add_binary) \
    F(mosquitto_property_add_int32) \
    F(mosquitto_property_add_string) \
    F(mosquitto_property_free_all) \
    F(mosquitto_property_read_binary) \
    F(mosquitto_property_read_int32) \
    F(mosquitto_property_read_string) \
    F(mosquitto_publish) \
    F(mosquitto_publish_v5) \
    F(mosquitto_publish_v5_callback_set) \
    F(mosquitto_reason_string) \
    F(mosquitto_reconnect_async) \
    F(mosquitto_reinitialise) \
    F(mosquitto_socket) \
    F(mosquitto_strerror) \
    F(mosquitto_sub_topic_check) \
    F(mosquitto_subscribe) \
    F(mosquitto_subscribe_multiple) \
    F(mosquitto_subscribe_v5_callback_set) \
    F(mosquitto_threaded_set) \
    F(mosquitto_tls_insecure_set) \
    F(mosquitto_tls_set) \
    F(mosquitto_unsubscribe) \
    F(mosquitto_unsubscribe_v5_callback_set) \
    F(mosquitto_username_pw_set) \
    F(mosquitto_want_write) \
    F(mosquitto_will_set)

/* The functions the TLS diagnosis and the pairing tokens call (libssl, and libcrypto through it). */
#define THING_AGENT_OPENSSL_FUNCTIONS(F) \
    F(ERR_clear_error) \
    F(ERR_get_error) \
    F(ERR_reason_error_string) \
    F(SHA256) \
    F(SSL_CTX_free) \
    F(SSL_CTX_load_verify_locations) \
    F(SSL_CTX_new) \
    F(SSL_CTX_set_verify) \
    F(SSL_CTX_use_PrivateKey_file) \
    F(SSL_CTX_use_certificate_chain_file) \
    F(SSL_connect) \
    F(SSL_free) \
    F(SSL_get0_param) \
    F(SSL_get_verify_result) \
    F(SSL_new) \
    F(SSL_read) \
    F(SSL_set1_host) \
    F(SSL_set_fd) \
    F(SSL_shutdown) \
    F(TLS_client_method) \
    F(X509_VERIFY_PARAM_set1_ip_asc) \
    F(X509_verify_cert_error_string)

#define THING_AGENT_FUNCTION_FIELD(name) __typeof__(&name) name;
struct thing_agent_mosquitto_functions { THING_AGENT_MOSQUITTO_FUNCTIONS(THING_AGENT_FUNCTION_FIELD) };
struct thing_agent_openssl_functions { THING_AGENT_OPENSSL_FUNCTIONS(THING_AGENT_FUNCTION_FIELD) };
#undef THING_AGENT_FUNCTION_FIELD

/* The tables, filled by the load functions below: read one only after its load function returned NULL. */
const struct thing_agent_mosquitto_functions *thing_agent_mosquitto_table(void);
const struct thing_agent_openssl_functions *thing_agent_openssl_table(void);

/* The shared objects Debian's packages install (what the -dev packages' headers describe). */
#define THING_AGENT_MOSQUITTO_SONAME "libmosquitto.so.1"
#define THING_AGENT_SSL_SONAME "libssl.so.3"

/*
 * Loads the library and looks up every function of its table, the first time; later calls give the first call's
 * result. NULL when all were found; otherwise what is missing (the library, with dlerror's reason, or a function).
 * Thread-safe.
 */
const char *_Nullable thing_agent_load_mosquitto(void);
const char *_Nullable thing_agent_load_openssl(void);

/*
 * Points libmosquitto's import of read(2) at a reader that serves a followed socket from a buffer (socket_reads.c
 * says why). Call once, after loading the library and before any client reads. NULL when done; otherwise why not
 * (the library then reads unbuffered, as before).
 */
const char *_Nullable thing_agent_buffer_mosquitto_reads(void);
/*
 * Points libmosquitto's import of socketpair(2) at one that fails, so that no client gets the wake-up pair only
 * `mosquitto_loop` reads (socket_reads.c says why). Call once, before the first `mosquitto_new`. NULL when done;
 * otherwise why not (the library then makes the pair, as before).
 */
const char *_Nullable thing_agent_skip_mosquitto_wake_pipe(void);
/*
 * On the calling thread, the library's reads of `socket` go through this thread's buffer from now on; a different
 * socket than the one followed so far (or -1: none) drops what was buffered for the old one.
 */
void thing_agent_socket_buffer_follow(int socket);
/* Bytes the calling thread's buffer holds that the library has not read yet: poll(2) cannot see them. */
size_t thing_agent_socket_buffer_pending(void);
/* Frees the calling thread's buffer (at the thread's end). */
void thing_agent_socket_buffer_release(void);

#pragma clang assume_nonnull end

#endif
