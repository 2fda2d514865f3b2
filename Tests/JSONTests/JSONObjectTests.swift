import JSON
import Testing

@Suite("JSONObject and accessors")
struct JSONObjectTests {
    @Test func orderAndMutation() {
        var object = JSONObject()
        #expect(object.isEmpty)
        object["b"] = 1
        object["a"] = 2
        object["c"] = 3
        #expect(object.keys == ["b", "a", "c"])
        object["a"] = "two"
        #expect(object.keys == ["b", "a", "c"])
        #expect(object["a"] == "two")
        object["b"] = nil
        #expect(object.keys == ["a", "c"])
        #expect(object.count == 2)
        #expect(object["missing"] == nil)
        object["missing"] = nil
        #expect(object.count == 2)
        #expect(object.removeValue(forKey: "c") == 3)
        #expect(object.removeValue(forKey: "c") == nil)
        #expect(object.contains(key: "a"))
        #expect(object.index(forKey: "a") == 0)
        #expect(object.values == ["two"])

        var seen: [String] = []
        for (key, value) in JSONObject([("x", 1), ("y", 2)]) {
            seen.append("\(key)=\(value)")
        }
        #expect(seen == ["x=1", "y=2"])
        #expect(JSONObject([("x", 1), ("y", 2)]).map(\.key) == ["x", "y"])
    }

    @Test func duplicatesInInitAndLiteralsLastWins() {
        let object = JSONObject([("a", 1), ("b", 2), ("a", 3)])
        #expect(object.keys == ["a", "b"])
        #expect(object["a"] == 3)
        let literal: JSONObject = ["k": 1, "k": 2]
        #expect(literal.count == 1)
        #expect(literal["k"] == 2)
        let value: JSONValue = ["k": 1, "j": 0, "k": 2]
        #expect(value.serialized() == #"{"k":2,"j":0}"#)
    }

    @Test func mergeKeepsOrderAndOverrides() {
        var info: JSONObject = ["name": "Hall", "ip": "1.2.3.4"]
        info.merge(["ip": "5.6.7.8", "mac": "aa"])
        #expect(info.keys == ["name", "ip", "mac"])
        #expect(info["ip"] == "5.6.7.8")
        #expect(JSONObject().merging(info) == info)
    }

    @Test func equalityIgnoresKeyOrder() {
        let a: JSONObject = ["x": 1, "y": [1, 2], "z": ["k": "v"]]
        let b: JSONObject = ["z": ["k": "v"], "x": 1, "y": [1, 2]]
        let c: JSONObject = ["z": ["k": "v"], "x": 1, "y": [2, 1]]
        #expect(a == b)
        #expect(a.hashValue == b.hashValue)
        #expect(a != c)
        #expect(a != ["x": 1, "y": [1, 2]])
        #expect(JSONObject([("x", 1)]) != JSONObject([("y", 1)]))
        #expect(Set<JSONValue>([.object(a), .object(b), .object(c)]).count == 2)

        let many = (0 ..< 50).map { ("k\($0)", JSONValue.integer(Int64($0))) }
        let forward = JSONObject(many)
        let backward = JSONObject(many.reversed())
        #expect(forward == backward)
        #expect(forward.hashValue == backward.hashValue)
        var changed = backward
        changed["k10"] = 11
        #expect(forward != changed)
        var renamed = backward
        renamed["k10"] = nil
        renamed["k100"] = 10
        #expect(forward != renamed)
    }

    @Test func valueEquality() {
        #expect(JSONValue.integer(1) != .double(1))
        #expect(JSONValue.double(0) == .double(-0.0))
        #expect(JSONValue.null != .bool(false))
        #expect(JSONValue.string("a") == "a")
        #expect(Set<JSONValue>([1, 1, "1", 1.0, .null, .null, [1], [1]]).count == 5)
    }

    @Test func accessors() {
        #expect(JSONValue.integer(5).int64Value == 5)
        #expect(JSONValue.double(5).int64Value == 5)
        #expect(JSONValue.double(-5).int64Value == -5)
        #expect(JSONValue.double(5.5).int64Value == nil)
        #expect(JSONValue.double(1e19).int64Value == nil)
        #expect(JSONValue.double(-9_223_372_036_854_775_808.0).int64Value == Int64.min)
        #expect(JSONValue.double(9_223_372_036_854_775_808.0).int64Value == nil)
        #expect(JSONValue.double(.nan).int64Value == nil)
        #expect(JSONValue.string("5").int64Value == nil)
        #expect(JSONValue.integer(5).doubleValue == 5)
        #expect(JSONValue.double(2.5).doubleValue == 2.5)
        #expect(JSONValue.bool(true).doubleValue == nil)
        #expect(JSONValue.string("s").stringValue == "s")
        #expect(JSONValue.integer(1).stringValue == nil)
        #expect(JSONValue.bool(false).boolValue == false)
        #expect(JSONValue.null.boolValue == nil)
        #expect(JSONValue.null.isNull)
        #expect(!JSONValue.integer(0).isNull)
        #expect(JSONValue.array([1]).arrayValue == [1])
        #expect(JSONValue.array([1]).objectValue == nil)
        #expect(JSONValue.object(["a": 1]).objectValue?["a"] == 1)
        #expect(JSONValue.object(["a": 1])["a"] == 1)
        #expect(JSONValue.array([1])["a"] == nil)
        #expect(JSONValue.object(["a": 1])[0] == nil)
        #expect(JSONValue.array([1])[-1] == nil)
        #expect(JSONValue.string("x")["a"] == nil)
    }

    @Test func literals() {
        let value: JSONValue = ["n": .null, "b": true, "i": 1, "d": 1.5, "s": "s", "a": [1, "x"], "o": ["k": false]]
        #expect(value["n"] == .null)
        #expect(value["b"] == .bool(true))
        #expect(value["i"] == .integer(1))
        #expect(value["d"] == .double(1.5))
        #expect(value["s"] == .string("s"))
        #expect(value["a"] == .array([.integer(1), .string("x")]))
        #expect(value["o"] == .object(JSONObject([("k", .bool(false))])))
        #expect(value.objectValue?.keys == ["n", "b", "i", "d", "s", "a", "o"])
    }
}
