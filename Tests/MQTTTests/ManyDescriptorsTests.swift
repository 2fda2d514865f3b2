import Foundation
import MQTT
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// Descriptors a process holds while it runs clients: an embedding HTTP server with many connections, a daemon with
/// many files, or this test process. select() cannot watch a descriptor numbered FD_SETSIZE (1024) or above, so a
/// client whose socket lands there must still connect and carry messages.
/// Run on its own (`THING_AGENT_MANY_DESCRIPTORS=1 swift test --skip-build --filter ManyDescriptorsTests`): filling
/// the shared test process with descriptors crashed Foundation's `Process.run` in a test that started a daemon at
/// the same moment (a memcpy fault inside `Process.run`), which has nothing to do with the client under test.
@Suite("Clients in a process holding many descriptors", .timeLimit(.minutes(1)),
       .enabled(if: ProcessInfo.processInfo.environment["THING_AGENT_MANY_DESCRIPTORS"] == "1",
                "holds 1,100 descriptors; Foundation's Process.run in concurrent tests crashes meanwhile"))
struct ManyDescriptorsTests {
    /// Every descriptor below this number is taken before the clients are made, so their sockets land above it.
    static let lowestClientDescriptor: Int32 = 1100

    @Test("a client whose socket is numbered above FD_SETSIZE connects, subscribes and publishes",
          .timeLimit(.minutes(1)), arguments: [false, true])
    func connectsAboveSelectLimit(overTLS: Bool) async throws {
        var options = MosquittoBroker.Options()
        options.tls = overTLS
        try await withBroker(options) { broker in
            var configuration = testConfiguration(broker.url)
            if overTLS {
                let certificates = try #require(broker.certificates)
                configuration = testConfiguration(try #require(broker.tlsURL))
                configuration.tls = MQTTTLS(
                    caFile: certificates.caFile, certFile: certificates.clientCertFile,
                    keyFile: certificates.clientKeyFile)
            }
            // Opened after the broker started, close-on-exec, so the broker process does not inherit them.
            let filler = try DescriptorFiller(upTo: Self.lowestClientDescriptor)
            defer { filler.close() }

            let subscriber = try await connectedClient(configuration)
            var publisherConfiguration = configuration
            publisherConfiguration.clientID = uniqueName("publisher")
            let publisher = try await connectedClient(publisherConfiguration)
            let inbox = Inbox(subscriber)
            let topic = uniqueName("things/dev/many-fds/properties")
            try await subscriber.subscribe(topic, qos: .atLeastOnce)
            try await publisher.publish(topic, "first", qos: .atLeastOnce)
            try await publisher.publish(topic, "second", qos: .exactlyOnce)

            let messages = try await inbox.waitFor(count: 2)
            #expect(messages.map(\.text) == ["first", "second"])
            #expect(subscriber.state == .connected)
            #expect(publisher.state == .connected)
            await publisher.disconnect()
            await subscriber.disconnect()
        }
    }
}

/// Holds `/dev/null` open until every descriptor number below `limit` is in use.
private final class DescriptorFiller {
    private var descriptors: [Int32] = []

    init(upTo limit: Int32) throws {
        var limits = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limits)
        let needed = rlim_t(limit) + 200
        if limits.rlim_cur < needed, limits.rlim_max >= needed {
            limits.rlim_cur = needed
            setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limits)
        }
        while true {
            let descriptor = open("/dev/null", O_RDONLY | O_CLOEXEC)
            if descriptor < 0 {
                close()
                throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EMFILE)
            }
            descriptors.append(descriptor)
            if descriptor >= limit - 1 { return }
        }
    }

    func close() {
        for descriptor in descriptors { _ = Glibc.close(descriptor) }
        descriptors.removeAll()
    }
}
