internal import CLazyLibraries

extension MQTTClient {
    /// Publishes at QoS 0 from the message handler, which runs on the client's network thread: for an answer a
    /// protocol owes the sender of a message (an Alink post's reply). The answers of a network turn go out together
    /// after the acknowledgements of the messages just read, without waking the thread (it is this one) and without
    /// waiting (`HandlerAnswers`). Anywhere else, use `publish`.
    /// Throws `.notConnected` when not connected, and when the broker has stopped reading (a megabyte of answers
    /// waiting).
    public func publishFromHandler(_ topic: String, payload: [UInt8]) throws(MQTTError) {
        let context = "publish to \"\(topic)\""
        let outcome: Result<Void, MQTTError> = core.withState { state in
            guard let handle = connectedHandle(state, context: context) else {
                return .failure(notConnectedError(state, context: context))
            }
            if !core.configuration.usesTLS(core.addresses[state.broker]) {
                let appended = core.answers.withLock { answers in
                    Result { () throws(HandlerAnswers.Refusal) in
                        try answers.append(topic: topic, payload: payload, v5: state.version == .v5,
                                           maximumPacketSize: state.connack?.maximumPacketSize)
                    }
                }
                switch appended {
                case .success:
                    return .success(())
                case .failure(.full):
                    return .failure(MQTTError(kind: .notConnected, code: MQTTError.Code.noMemory,
                                              message: "the broker is not reading: a megabyte of answers waits",
                                              context: context))
                case .failure(.libraryDecides):
                    break  // the library checks and sends what the encoding here leaves to it
                }
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
