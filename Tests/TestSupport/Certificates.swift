import Foundation

/// PEM files made with the openssl CLI for one test broker: a CA, a server certificate for 127.0.0.1 (named as an IP
/// and as a DNS name) and localhost, a client certificate, and a second CA that signed none of them.
public struct TestCertificates: Sendable {
    public var caFile: String
    public var serverCertFile: String
    public var serverKeyFile: String
    public var clientCertFile: String
    public var clientKeyFile: String
    /// A CA unrelated to the others: verifying the broker with it must fail.
    public var wrongCAFile: String
    /// Server certificates signed by the test CA that must not verify: one names only another host, one expired.
    public var wrongHostCertFile: String
    public var wrongHostKeyFile: String
    public var expiredCertFile: String
    public var expiredKeyFile: String

    /// Makes all files in `directory` (EC P-256 keys, valid for two days).
    public static func make(in directory: String) throws -> TestCertificates {
        let openssl = "/usr/bin/openssl"
        func path(_ name: String) -> String { directory + "/" + name }
        func makeCA(_ name: String, _ subject: String) throws {
            try ChildProcess.run(
                openssl,
                [
                    "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", path("\(name).key"), "-out", path("\(name).crt"), "-days", "2", "-subj", subject,
                    "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
                ], in: directory)
        }
        func makeLeaf(_ name: String, _ subject: String, extensions: String, days: Int = 2) throws {
            try ChildProcess.run(
                openssl,
                [
                    "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", path("\(name).key"), "-out", path("\(name).csr"), "-subj", subject,
                ], in: directory)
            try extensions.write(toFile: path("\(name).ext"), atomically: true, encoding: .utf8)
            try ChildProcess.run(
                openssl,
                [
                    "x509", "-req", "-in", path("\(name).csr"), "-CA", path("ca.crt"), "-CAkey", path("ca.key"),
                    "-CAcreateserial", "-out", path("\(name).crt"), "-days", "\(days)", "-extfile", path("\(name).ext"),
                ], in: directory)
        }
        try makeCA("ca", "/CN=thing-agent test CA")
        try makeCA("wrong-ca", "/CN=unrelated test CA")
        // DNS:127.0.0.1 besides the IP entry: mbedTLS 2.16 (in Tuya's device SDK) matches a host only against the CN
        // and the DNS names, so it verifies 127.0.0.1 only with that entry; OpenSSL uses the IP entry.
        let serverNames = "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:127.0.0.1\nextendedKeyUsage=serverAuth\n"
        try makeLeaf("server", "/CN=localhost", extensions: serverNames)
        try makeLeaf("client", "/CN=test-client", extensions: "extendedKeyUsage=clientAuth\n")
        try makeLeaf(
            "wrong-host", "/CN=elsewhere.example",
            extensions: "subjectAltName=DNS:elsewhere.example\nextendedKeyUsage=serverAuth\n")
        // OpenSSL 3.0's x509 has no -not_after; a negative -days puts notAfter before now (and before notBefore),
        // which verification reports as "certificate has expired".
        try makeLeaf("expired", "/CN=localhost", extensions: serverNames, days: -1)
        return TestCertificates(
            caFile: path("ca.crt"), serverCertFile: path("server.crt"), serverKeyFile: path("server.key"),
            clientCertFile: path("client.crt"), clientKeyFile: path("client.key"), wrongCAFile: path("wrong-ca.crt"),
            wrongHostCertFile: path("wrong-host.crt"), wrongHostKeyFile: path("wrong-host.key"),
            expiredCertFile: path("expired.crt"), expiredKeyFile: path("expired.key"))
    }
}
