#include "CChecksum.h"

#include <string.h>

static const uint64_t prime1 = 0x9E3779B185EBCA87ULL;
static const uint64_t prime2 = 0xC2B2AE3D27D4EB4FULL;

uint64_t fanout_checksum(const void *bytes, size_t length) {
  static const uint64_t keys[8] = {
      0xBE4BA423396CFEB8ULL, 0x1CAD21F72C81017CULL, 0xDB979083E96DD4DEULL,
      0x1F67B3B7A4A44072ULL, 0x78E5C0CC4EE679CBULL, 0x2172FFCC7DD05A82ULL,
      0x8E2443F7744608B8ULL, 0x4C263A81E69035E0ULL,
  };
  uint64_t acc[8] = {prime1, prime2, 1, length, prime2 ^ length, prime1 + 1, 2, prime1 ^ prime2};
  const unsigned char *p = bytes;
  size_t i = 0;
  for (; i + 64 <= length; i += 64) {
    for (int lane = 0; lane < 8; lane++) {
      uint64_t word;
      memcpy(&word, p + i + 8 * lane, 8);
      uint64_t mixed = word ^ keys[lane];
      acc[lane ^ 1] += word;
      acc[lane] += (mixed & 0xFFFFFFFFULL) * (mixed >> 32);
    }
  }
  for (; i < length; i++) acc[0] = (acc[0] ^ (uint64_t)(p[i] + 0x100)) * prime1;
  uint64_t h = (uint64_t)length * prime1;
  for (int lane = 0; lane < 8; lane++) {
    h ^= acc[lane] * prime2;
    h = (h << 31 | h >> 33) * prime1;
  }
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDULL;
  h ^= h >> 33;
  return h;
}
