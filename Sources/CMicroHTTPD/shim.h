#ifndef THING_AGENT_CMICROHTTPD_SHIM_H
#define THING_AGENT_CMICROHTTPD_SHIM_H
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <microhttpd.h>

/* Starts a server through `start_daemon`, the address of MHD_start_daemon found with dlsym (the library is loaded at
 * run time, see HTTPEndpoint/MicroHTTPD.swift), with the options the server uses. In C because the function is
 * variadic, which Swift cannot call. */
static inline struct MHD_Daemon *thing_agent_start_daemon(void *start_daemon, unsigned int flags, uint16_t port,
                                                          MHD_AccessHandlerCallback handler, void *handler_cls,
                                                          const struct sockaddr *address, unsigned int limit,
                                                          unsigned int timeout) {
    typedef struct MHD_Daemon *(*start_fn)(unsigned int, uint16_t, MHD_AcceptPolicyCallback, void *,
                                           MHD_AccessHandlerCallback, void *, ...);
    return ((start_fn)start_daemon)(flags, port, NULL, NULL, handler, handler_cls,
                                    MHD_OPTION_SOCK_ADDR, address,
                                    MHD_OPTION_CONNECTION_LIMIT, limit,
                                    MHD_OPTION_CONNECTION_TIMEOUT, timeout,
                                    MHD_OPTION_END);
}
#endif
