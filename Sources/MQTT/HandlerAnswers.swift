#if canImport(Glibc)
import Glibc
#endif

/// The answers the message handler publishes (`MQTTClient.publishFromHandler`) on a plain TCP connection: QoS 0
/// PUBLISH packets, encoded here and written by the network thread in one send(2) per turn, after the library's own
/// packets of the turn (the PUBACKs of the messages just read).
///
/// Handed to libmosquitto, each answer cost the network thread one of the library's packets (allocated, locked,
/// queued), a one-byte wake-up write to the library's socket pair and a send(2) of its own: an Alink backlog, one
/// answer per post, drained at two thirds of the pace it drains at unanswered.
///
/// The library and these answers share the socket, so neither may begin a packet while the other has one half
/// written. `LoopTurn` keeps the order: answers are written only when the library has nothing left to write
/// (`mosquitto_want_write` false after its write call), and answers a full socket left half written are finished
/// before the library writes again. Nothing else writes to the socket: in threaded mode libmosquitto writes only
/// in `mosquitto_loop_write`, which the network thread alone calls. Over TLS the library writes every answer (the
/// bytes must go through its TLS session).
package struct HandlerAnswers {
    /// Answers waiting beyond this many bytes are refused: the broker has stopped reading.
    package static let limit = 1 << 20

    private var bytes: [UInt8] = []
    /// How much of `bytes` is written.
    private var written = 0

    package init() {}

    package var isEmpty: Bool { bytes.isEmpty }
    /// The first answer went out in part: nothing else may be written to the socket before the rest of it.
    package var isHalfWritten: Bool { written > 0 }

    package enum Refusal: Error {
        /// Not encoded here; the library should send it (and check it): a topic outside printable ASCII, with a
        /// wildcard, empty or too long, or a packet over the broker's maximum packet size.
        case libraryDecides
        /// Over `limit`.
        case full
    }

    /// Appends a QoS 0 PUBLISH of `payload` on `topic`, in MQTT 5's form when `v5` (an empty property list).
    /// `maximumPacketSize` is the broker's (MQTT 5 CONNACK), nil when it set none.
    package mutating func append(topic: String, payload: [UInt8], v5: Bool, maximumPacketSize: UInt32?) throws(Refusal) {
        var topic = topic
        let topicLength = topic.utf8.count
        guard topicLength > 0, topicLength <= Int(UInt16.max),
              topic.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "+") && $0 != UInt8(ascii: "#") })
        else { throw .libraryDecides }
        let remaining = 2 + topicLength + (v5 ? 1 : 0) + payload.count
        let packetLength = 1 + Self.varintLength(remaining) + remaining
        guard remaining <= Self.maximumRemainingLength, packetLength <= Int(maximumPacketSize ?? UInt32.max) else {
            throw .libraryDecides
        }
        guard bytes.count - written + packetLength <= Self.limit else { throw .full }
        // No reserveCapacity here: it grows the array to exactly the size asked, a copy of every answer so far at
        // each append; appending alone grows it geometrically.
        bytes.append(0x30)  // PUBLISH, QoS 0, neither DUP nor RETAIN
        var length = remaining
        repeat {
            let digit = UInt8(length & 0x7F)
            length >>= 7
            bytes.append(length > 0 ? digit | 0x80 : digit)
        } while length > 0
        bytes.append(UInt8(topicLength >> 8))
        bytes.append(UInt8(topicLength & 0xFF))
        topic.withUTF8 { bytes.append(contentsOf: $0) }
        if v5 { bytes.append(0) }  // no properties
        bytes.append(contentsOf: payload)
    }

    package enum WriteResult {
        /// Everything is written.
        case done
        /// The socket is full; the rest waits for it to drain.
        case pending
        /// The connection is broken (the library's next call on it finds out and ends it); the answers are dropped.
        case failed
    }

    /// Writes what the socket takes now, without waiting.
    package mutating func write(to socket: Int32) -> WriteResult {
        while written < bytes.count {
            let sent = bytes.withUnsafeBytes { all in
                send(socket, all.baseAddress! + written, all.count - written, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
            }
            if sent > 0 {
                written += sent
            } else if sent < 0, errno == EINTR {
                continue
            } else if sent < 0, errno == EAGAIN || errno == EWOULDBLOCK {
                return .pending
            } else {
                reset()
                return .failed
            }
        }
        reset()
        return .done
    }

    /// Drops every answer: the connection they were for has ended.
    package mutating func reset() {
        bytes.removeAll(keepingCapacity: bytes.capacity <= 65_536)
        written = 0
    }

    /// MQTT's largest remaining length (four bytes of variable-length integer).
    package static let maximumRemainingLength = 268_435_455

    private static func varintLength(_ value: Int) -> Int {
        value < 128 ? 1 : value < 16_384 ? 2 : value < 2_097_152 ? 3 : 4
    }
}
