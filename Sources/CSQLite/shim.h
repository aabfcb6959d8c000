#include <sqlite3.h>

// SQLITE_TRANSIENT is a function-pointer cast macro that Swift cannot import.
static inline sqlite3_destructor_type csqlite_transient(void) { return SQLITE_TRANSIENT; }

// sqlite3_config is variadic, which Swift cannot call. Memory statistics
// off: with them on, every allocation of every connection takes one
// process-wide mutex, which threads reading and copying tables side by
// side (a what-if sweep's scenarios) wait on. Only before SQLite is
// initialized (SQLITE_MISUSE after, harmlessly).
static inline int csqlite_disable_memory_statistics(void) {
  return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}
