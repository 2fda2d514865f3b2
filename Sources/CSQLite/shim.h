#ifndef THING_AGENT_CSQLITE_SHIM_H
#define THING_AGENT_CSQLITE_SHIM_H
#include <sqlite3.h>

// SQLITE_TRANSIENT is a cast macro Swift cannot import; this tells SQLite to copy bound text and blobs.
static inline sqlite3_destructor_type thing_sqlite_transient(void) {
    return (sqlite3_destructor_type)-1;
}

// sqlite3_db_config is variadic, which Swift cannot call: this one turns SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE on.
static inline int thing_sqlite_no_checkpoint_on_close(sqlite3 *db) {
    return sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)0);
}
#endif
