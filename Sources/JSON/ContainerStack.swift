/// The parser's explicit stack: open containers, and the values and keys parsed so far inside them.
///
/// Values live in manually managed buffers so that closing a container *moves* them into its exact-size
/// array (no retain/release, no growth of per-container arrays). Whatever is left is destroyed on deinit,
/// which covers the error paths.
internal struct ContainerStack: ~Copyable {
    private struct Frame {
        var isObject: Bool
        var valueStart: Int
        var keyStart: Int
    }

    private var frames: UnsafeMutablePointer<Frame>
    private var frameCapacity = 8
    private(set) var depth = 0

    private var values: UnsafeMutablePointer<JSONValue>
    private var valueCapacity = 32
    private var valueCount = 0

    private var keys: UnsafeMutablePointer<String>
    private var keyCapacity = 16
    private var keyCount = 0

    init() {
        frames = .allocate(capacity: frameCapacity)
        values = .allocate(capacity: valueCapacity)
        keys = .allocate(capacity: keyCapacity)
    }

    deinit {
        values.deinitialize(count: valueCount)
        values.deallocate()
        keys.deinitialize(count: keyCount)
        keys.deallocate()
        frames.deallocate()
    }

    var topIsObject: Bool {
        @inline(__always) get { frames[depth - 1].isObject }
    }

    @inline(__always)
    mutating func pushFrame(isObject: Bool) {
        if depth == frameCapacity {
            frames = Self.grow(frames, count: depth, capacity: &frameCapacity)
        }
        (frames + depth).initialize(to: Frame(isObject: isObject, valueStart: valueCount, keyStart: keyCount))
        depth += 1
    }

    @inline(__always)
    mutating func pushValue(_ value: consuming JSONValue) {
        if valueCount == valueCapacity {
            values = Self.grow(values, count: valueCount, capacity: &valueCapacity)
        }
        (values + valueCount).initialize(to: value)
        valueCount += 1
    }

    @inline(__always)
    mutating func pushKey(_ key: consuming String) {
        if keyCount == keyCapacity {
            keys = Self.grow(keys, count: keyCount, capacity: &keyCapacity)
        }
        (keys + keyCount).initialize(to: key)
        keyCount += 1
    }

    /// Closes the innermost container, an array.
    mutating func popArray() -> [JSONValue] {
        depth -= 1
        let start = frames[depth].valueStart
        let n = valueCount - start
        let source = values + start
        // (`Array(unsafeUninitializedCapacity:)` is not specialized and looks its storage metadata up on every
        // call; reserve + append is, and the appends only move.)
        var array = [JSONValue]()
        array.reserveCapacity(n)
        for k in 0 ..< n {
            array.append((source + k).move())
        }
        valueCount = start
        return array
    }

    /// Closes the innermost container, an object; on duplicate keys the last value wins.
    mutating func popObject() -> JSONObject {
        depth -= 1
        let frame = frames[depth]
        let n = valueCount - frame.valueStart
        let valueSource = values + frame.valueStart
        let keySource = keys + frame.keyStart
        var members = [JSONObject.Member]()
        members.reserveCapacity(n)
        for k in 0 ..< n {
            members.append(JSONObject.Member(key: (keySource + k).move(), value: (valueSource + k).move()))
        }
        valueCount = frame.valueStart
        keyCount = frame.keyStart
        var object = JSONObject(uniqueMembers: members)
        if n > 1 { object.removeDuplicateKeys() }
        return object
    }

    private static func grow<T>(_ buffer: UnsafeMutablePointer<T>, count: Int, capacity: inout Int) -> UnsafeMutablePointer<T> {
        let newCapacity = capacity * 2
        let newBuffer = UnsafeMutablePointer<T>.allocate(capacity: newCapacity)
        newBuffer.moveInitialize(from: buffer, count: count)
        buffer.deallocate()
        capacity = newCapacity
        return newBuffer
    }
}
