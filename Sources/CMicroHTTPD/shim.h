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
                                                          unsigned int per_ip_limit, unsigned int timeout,
                                                          MHD_NotifyConnectionCallback notify, void *notify_cls) {
    typedef struct MHD_Daemon *(*start_fn)(unsigned int, uint16_t, MHD_AcceptPolicyCallback, void *,
                                           MHD_AccessHandlerCallback, void *, ...);
    return ((start_fn)start_daemon)(flags, port, NULL, NULL, handler, handler_cls,
                                    MHD_OPTION_SOCK_ADDR, address,
                                    MHD_OPTION_CONNECTION_LIMIT, limit,
                                    MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip_limit,
                                    MHD_OPTION_CONNECTION_TIMEOUT, timeout,
                                    MHD_OPTION_NOTIFY_CONNECTION, notify, notify_cls,
                                    MHD_OPTION_END);
}

/* A connection's socket, through `get_info`, the address of MHD_get_connection_info (variadic too); -1 when the
 * library does not say. */
static inline int thing_agent_connection_fd(void *get_info, struct MHD_Connection *connection) {
    typedef const union MHD_ConnectionInfo *(*info_fn)(struct MHD_Connection *, enum MHD_ConnectionInfoType, ...);
    const union MHD_ConnectionInfo *info = ((info_fn)get_info)(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info ? info->connect_fd : -1;
}
#endif
