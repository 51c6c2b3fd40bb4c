#include <sqlite3.h>

/// SQLITE_TRANSIENT is a macro of a cast Swift cannot import.
static inline sqlite3_destructor_type chronicle_sqlite_transient(void) {
    return SQLITE_TRANSIENT;
}
