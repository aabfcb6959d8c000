#include <sqlite3.h>

// SQLITE_TRANSIENT is a function-pointer cast macro that Swift cannot import.
static inline sqlite3_destructor_type csqlite_transient(void) { return SQLITE_TRANSIENT; }
