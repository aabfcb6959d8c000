import FanoutStream
import Testing

@Suite("--redis addresses")
struct RedisAddressTests {
  @Test(
    "the forms taken",
    arguments: [
      ("redis://cache", RedisAddress.Endpoint.tcp(host: "cache", port: 6379), 0, nil),
      ("redis://cache:7000/", .tcp(host: "cache", port: 7000), 0, nil),
      ("redis://fanout@cache:7000?db=2", .tcp(host: "cache", port: 7000), 2, "fanout"),
      ("redis://[::1]:6380", .tcp(host: "::1", port: 6380), 0, nil),
      ("redis://[fe80::1]", .tcp(host: "fe80::1", port: 6379), 0, nil),
      ("unix:///run/redis.sock?db=1", .unix(path: "/run/redis.sock"), 1, nil),
    ] as [(String, RedisAddress.Endpoint, Int, String?)])
  func taken(url: String, endpoint: RedisAddress.Endpoint, database: Int, user: String?) {
    let address = RedisAddress(url)
    #expect(address?.endpoint == endpoint)
    #expect(address?.database == database)
    #expect(address?.user == user)
  }

  @Test(
    "the forms refused",
    arguments: [
      "redis://", "redis://cache:0", "redis://cache:70000", "redis://cache:x", "redis://a:1:2",
      "redis://[::1", "redis://[::1]x", "redis://@cache", "redis://cache?db=-1",
      "redis://cache?database=1", "unix://relative.sock", "http://cache",
    ])
  func refused(url: String) {
    #expect(RedisAddress(url) == nil)
  }
}
