/// The parser's explicit stack: open containers, and the values and keys parsed so far inside them.
///
/// Values live in manually managed buffers so that closing a container *moves* them into its exact-size
/// array (no retain/release, no growth of per-container arrays). The first buffers are carved from memory the
/// caller provides (the parser uses a stack allocation, so typical payloads need no heap for this); they move
/// to the heap when they outgrow it. Whatever is left is destroyed on deinit, which covers the error paths.
internal struct ContainerStack: ~Copyable {
    /// An open container: where its values (and, for an object, its keys) start. Arrays have `keyStart == -1`.
    private struct Frame {
        var valueStart: Int
        var keyStart: Int
    }

    private static let inlineFrames = 8
    private static let inlineValues = 24
    private static let inlineKeys = 16
    private static let valuesOffset = inlineFrames * MemoryLayout<Frame>.stride
    private static let keysOffset = valuesOffset + inlineValues * MemoryLayout<JSONValue>.stride
    /// Bytes of caller memory used for the initial buffers (kept within the stdlib's 1 KiB stack-allocation limit).
    static let inlineByteCount = keysOffset + inlineKeys * MemoryLayout<String>.stride
    static let inlineAlignment = 16

    private var frames: UnsafeMutablePointer<Frame>
    private var frameCapacity = inlineFrames
    private(set) var depth = 0

    private var values: UnsafeMutablePointer<JSONValue>
    private var valueCapacity = inlineValues
    private var valueCount = 0

    private var keys: UnsafeMutablePointer<String>
    private var keyCapacity = inlineKeys
    private var keyCount = 0

    private var framesOnHeap = false
    private var valuesOnHeap = false
    private var keysOnHeap = false

    /// `memory` must hold `inlineByteCount` bytes aligned to `inlineAlignment`, and outlive the stack.
    init(memory: UnsafeMutableRawPointer) {
        frames = memory.bindMemory(to: Frame.self, capacity: Self.inlineFrames)
        values = (memory + Self.valuesOffset).bindMemory(to: JSONValue.self, capacity: Self.inlineValues)
        keys = (memory + Self.keysOffset).bindMemory(to: String.self, capacity: Self.inlineKeys)
    }

    deinit {
        values.deinitialize(count: valueCount)
        keys.deinitialize(count: keyCount)
        if valuesOnHeap { values.deallocate() }
        if keysOnHeap { keys.deallocate() }
        if framesOnHeap { frames.deallocate() }
    }

    var topIsObject: Bool {
        @inline(__always) get { frames[depth - 1].keyStart >= 0 }
    }

    @inline(__always)
    mutating func pushFrame(isObject: Bool) {
        if depth == frameCapacity {
            frames = Self.grow(frames, count: depth, capacity: &frameCapacity, onHeap: &framesOnHeap)
        }
        (frames + depth).initialize(to: Frame(valueStart: valueCount, keyStart: isObject ? keyCount : -1))
        depth += 1
    }

    @inline(__always)
    mutating func pushValue(_ value: consuming JSONValue) {
        if valueCount == valueCapacity {
            values = Self.grow(values, count: valueCount, capacity: &valueCapacity, onHeap: &valuesOnHeap)
        }
        (values + valueCount).initialize(to: value)
        valueCount += 1
    }

    @inline(__always)
    mutating func pushKey(_ key: consuming String) {
        if keyCount == keyCapacity {
            keys = Self.grow(keys, count: keyCount, capacity: &keyCapacity, onHeap: &keysOnHeap)
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

    private static func grow<T>(
        _ buffer: UnsafeMutablePointer<T>, count: Int, capacity: inout Int, onHeap: inout Bool
    ) -> UnsafeMutablePointer<T> {
        let newCapacity = capacity * 2
        let newBuffer = UnsafeMutablePointer<T>.allocate(capacity: newCapacity)
        newBuffer.moveInitialize(from: buffer, count: count)
        if onHeap { buffer.deallocate() }
        onHeap = true
        capacity = newCapacity
        return newBuffer
    }
}
