import FanoutModel
import FanoutTestSupport
import Testing

@Suite("Devices, categories and the gateway gate")
struct GatewayGateTests {
  /// b has an apns and an email device; categories for every case.
  let setup = """
    INSERT INTO devices VALUES (20, 'b', 'email', 'b@x'), (19, 'b', 'apns', 'tb2');
    INSERT INTO categories VALUES ('news', 'opt_out', 0), ('promo', 'opt_in', 0), ('security', 'opt_in', 1);
    INSERT INTO category_gateways VALUES ('security', 'email', 1), ('promo', 'email', 0);

    """

  /// The devices of b that received message m.
  func devices(_ s: Scenario, _ m: String, _ user: String = "b") -> [Int] {
    (0..<s.index.gateways.count).flatMap { s.deliveries(s.index.gateways[$0]) }
      .filter { $0["message"] as? String == m }
      .flatMap { $0["recipients"] as! [[String: Any]] }.filter { $0["user"] as? String == user }
      .map { $0["device"] as! Int }.sorted()
  }

  @Test("no device, then a device per gateway ordered by device_id")
  func noDevice() throws {
    let s = try run(
      setup + "INSERT INTO users (user_id) VALUES ('x'); INSERT INTO members VALUES ('g', 'x');",
      msg())
    #expect(s.outcome("m", "x") == "-no_device")
    #expect(devices(s, "m") == [2, 19, 20])
    let apns = s.deliveries("apns").first!["recipients"] as! [[String: Any]]
    #expect(apns.map { $0["device"] as! Int } == [19, 3])  // users in id order: b then c
  }

  /// The kernel reads up to four devices on gateway rows below 128 from the
  /// user's record; others come from the device columns. Both must agree.
  @Test("more than four devices, or a device on gateway row 128 or later")
  func devicesOutsideTheUserRecord() throws {
    // A filler user's 130 gateways sort before 'zz', which comes after row 127.
    let filler = (0..<130).map { "(\(1000 + $0), 'f', 'gw\(1000 + $0)', 't\($0)')" }
    let sql =
      setup + """
        INSERT INTO users (user_id) VALUES ('f'), ('h'), ('k');
        INSERT INTO members VALUES ('g', 'h'), ('g', 'k');
        INSERT INTO devices VALUES \(filler.joined(separator: ", "));
        INSERT INTO devices VALUES (21, 'b', 'fcm', 'tb3'), (22, 'b', 'fcm', 'tb4'),
          (23, 'b', 'webpush', 'tb5'), (30, 'h', 'zz', 'th'), (31, 'k', 'zz', 'tk');
        INSERT INTO gateway_prefs VALUES ('b', 'fcm', 1), ('k', 'zz', 1);
        INSERT INTO category_prefs VALUES ('b', 'promo', 'webpush', 'opt_out');
        """
    let s = try run(sql, msg("plain"), msg("p", #""category":"promo""#))
    #expect(try #require(s.index.gateways.find("zz")) >= 128)
    #expect(devices(s, "plain") == [19, 20, 23])  // b's fcm devices restricted
    #expect(devices(s, "p") == [19, 20])  // and webpush opted out of promo
    #expect(devices(s, "plain", "h") == [30])
    #expect(s.outcome("plain", "k") == "-opted_out")
  }

  @Test("category default opt_out blocks; a category opt-in lifts it; a gateway opt-in does not")
  func categoryDefaults() throws {
    let sql =
      setup + """
        INSERT INTO category_prefs VALUES ('c', 'news', NULL, 'opt_in'), ('b', 'news', 'fcm', 'opt_in'),
          ('b', 'news', 'apns', 'opt_in');
        """
    let s = try run(sql, msg("m", #""category":"news""#))
    #expect(s.outcome("m", "b") == "-opted_out")
    #expect(s.outcome("m", "c") == "message")
  }

  @Test("a category opt-out blocks, unless the category is mandatory")
  func mandatoryCategory() throws {
    let sql =
      setup + """
        INSERT INTO category_prefs VALUES ('b', 'promo', NULL, 'opt_out'), ('b', 'security', NULL, 'opt_out');
        """
    let s = try run(
      sql, msg("p", #""category":"promo""#), msg("s", #""category":"security""#), msg("plain"))
    #expect(s.outcome("p", "b") == "-opted_out")
    #expect(s.outcome("s", "b") == "message")
    #expect(devices(s, "s") == [2, 19, 20])
    #expect(devices(s, "plain") == [2, 19, 20])  // category prefs apply only to that category
  }

  @Test("a per-gateway opt-out blocks that gateway, even in a mandatory category")
  func gatewayOptOut() throws {
    let sql =
      setup + """
        INSERT INTO category_prefs VALUES ('b', 'security', 'apns', 'opt_out'), ('b', 'promo', 'fcm', 'opt_out');
        """
    let s = try run(sql, msg("s", #""category":"security""#), msg("p", #""category":"promo""#))
    #expect(devices(s, "s") == [2, 20])
    #expect(devices(s, "p") == [19, 20])
  }

  @Test("a mandatory gateway passes even when restricted or opted out; restricted blocks otherwise")
  func restrictedAndMandatoryGateway() throws {
    let sql =
      setup + """
        INSERT INTO gateway_prefs VALUES ('b', 'email', 1), ('b', 'fcm', 0);
        INSERT INTO category_prefs VALUES ('b', 'security', 'email', 'opt_out'), ('b', 'promo', NULL, 'opt_out');
        """
    let s = try run(
      sql, msg("s", #""category":"security""#), msg("p", #""category":"promo""#), msg("plain"),
      msg("call", #""kind":"call""#))
    #expect(devices(s, "s") == [2, 19, 20])  // email mandatory in security
    #expect(s.outcome("p", "b") == "-opted_out")  // promo email not mandatory: restricted
    #expect(devices(s, "plain") == [2, 19])  // restricted without a category
    #expect(devices(s, "call") == [2, 19])  // the gate applies to calls too
  }

  @Test("opted_out when every device is blocked, counted once per pair")
  func optedOut() throws {
    let sql = setup + "INSERT INTO gateway_prefs VALUES ('c', 'apns', 1);"
    let s = try run(sql, msg())
    #expect(s.outcome("m", "c") == "-opted_out")
    #expect(s.result.counters.suppressed[Int(Reason.optedOut.rawValue)] == 1)
    #expect(s.result.counters.delivered == 1)
    #expect(s.result.counters.deliveries.reduce(0, +) == 3)
  }
}
