#ifndef FANOUT_CCHECKSUM_H
#define FANOUT_CCHECKSUM_H

#include <stddef.h>
#include <stdint.h>

// A fast 64-bit checksum of `length` bytes: eight lanes, each 8-byte word
// added to its neighbour lane and its two halves multiplied into its own
// (the shape of XXH3's accumulation, which compilers turn into vector
// multiplies). Catches corruption and truncation, not tampering.
uint64_t fanout_checksum(const void *bytes, size_t length);

#endif
