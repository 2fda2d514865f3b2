internal import CLazyLibraries

extension MQTTClient {
    /// Publishes at QoS 0 from the message handler, which runs on the client's network thread: the message is
    /// queued with the library and written in the same turn as the acknowledgements of the messages just read
    /// (corked into the same TCP segments), without waking the thread (it is this one) and without waiting. For an
    /// answer a protocol owes the sender of a message (an Alink post's reply). Anywhere else, use `publish`.
    /// Throws `.notConnected` when not connected.
    public func publishFromHandler(_ topic: String, payload: [UInt8]) throws(MQTTError) {
        let context = "publish to \"\(topic)\""
        let outcome: Result<Void, MQTTError> = core.withState { state in
            guard let handle = connectedHandle(state, context: context) else {
                return .failure(notConnectedError(state, context: context))
            }
            var mid: Int32 = 0
            let rc = payload.withUnsafeBytes { bytes in
                libmosquitto.mosquitto_publish_v5(handle.pointer, &mid, topic, Int32(bytes.count), bytes.baseAddress,
                                                  0, false, nil)
            }
            return rc == 0 ? .success(()) : .failure(.library(rc, context: context))
        }
        try outcome.get()
    }
}
