#include <hiredis/hiredis.h>
#include <sys/time.h>

// hiredis reports the connection's failure in fields Swift reads as tuples;
// these name them for Swift callers.
static inline const char *credis_errstr(const redisContext *c) { return c->errstr; }
static inline int credis_err(const redisContext *c) { return c->err; }
static inline int credis_set_timeout_ms(redisContext *c, long ms) {
  struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
  return redisSetTimeout(c, tv);
}
static inline redisContext *credis_connect_tcp(const char *host, int port, long ms) {
  struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
  return redisConnectWithTimeout(host, port, tv);
}
static inline redisContext *credis_connect_unix(const char *path, long ms) {
  struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
  return redisConnectUnixWithTimeout(path, tv);
}
