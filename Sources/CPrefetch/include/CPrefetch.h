#ifndef CPREFETCH_H
#define CPREFETCH_H

// Swift has no prefetch. The kernel asks for the cache lines of the next
// messages' member lists and users while it evaluates the current one; the
// loader's batched lookups and slot building ask for theirs ahead likewise.
static inline void cprefetch_read(const void *address) { __builtin_prefetch(address, 0, 3); }

#endif
