// Header-only module: CPrefetch.h holds the one static inline function.
#include "CPrefetch.h"
