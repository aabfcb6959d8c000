#include <lz4.h>
#include <lz4frame.h>

// LZ4F_isError's result is a plain unsigned; this names the check for Swift callers.
static inline int clz4_is_error(size_t code) { return LZ4F_isError(code) ? 1 : 0; }
