#ifndef THING_AGENT_CSQLITE_SHIM_H
#define THING_AGENT_CSQLITE_SHIM_H
#include <sqlite3.h>

// SQLITE_TRANSIENT is a cast macro Swift cannot import; this tells SQLite to copy bound text and blobs.
static inline sqlite3_destructor_type thing_sqlite_transient(void) {
    return (sqlite3_destructor_type)-1;
}
#endif
