import JSON
import Synchronization
import ThingAgentCore

/// Keeps the broker's dynamic-security roles and clients in line with the fleet (docs/provisioning.md): computes
/// what should be (`AccessPolicy`, from the provisioned devices, the cache's gateway links and the open pairings),
/// compares it with what the broker has, and sends the difference. Every change is idempotent, so a start after a
/// broker restored from an older plugin file brings it back in line. Changes run one at a time.
final class AccessManager: Sendable {
    let dynsec: DynsecClient
    let policy: AccessPolicy
    let agentUser: String
    let serviceUsers: [String]
    let store: PairingStore
    let cache: DeviceCache
    let logger: AgentLogger
    /// The ACLs of every role the agent manages, as the broker has them after the last change.
    private let applied = Mutex<[String: Set<RoleACL>]>([:])
    /// Device and pairing roles at the broker that the agent has no record of making (left alone; `/metrics`).
    let unmanagedRoles = Atomic<Int>(0)
    private let gate = SerialGate()
    /// Something changed that may change the roles (a removal, a gateway link); the sync loop takes it.
    private let dirty: AsyncStream<Void>
    private let dirtyContinuation: AsyncStream<Void>.Continuation

    init(dynsec: DynsecClient, policy: AccessPolicy, agentUser: String, serviceUsers: [String], store: PairingStore,
         cache: DeviceCache, logger: AgentLogger) {
        self.dynsec = dynsec
        self.policy = policy
        self.agentUser = agentUser
        self.serviceUsers = serviceUsers
        self.store = store
        self.cache = cache
        self.logger = logger
        (dirty, dirtyContinuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    // MARK: start

    /// Before the agent's main connection: gives the agent's own user its role (a change that disconnects every
    /// connection of that user, so it must come first), then creates or repairs every other role and client.
    func prepare() async throws {
        try await dynsec.connect()
        try await gate.run {
            try await self.ensureOwnRole()
            try await self.reconcile()
        }
    }

    /// A command's stand-in (no daemon runs): reads and repairs the broker's roles as the daemon's start does,
    /// but leaves its own user's roles alone (changing them would drop the command's connections). Throws when
    /// the command's broker user may not administer the plugin.
    func prepareAsStandIn() async throws {
        try await dynsec.connect()
        try await gate.run { try await self.reconcile() }
    }

    private func ensureOwnRole() async throws {
        try await syncFixedRole(AccessPolicy.agentRole, policy.agentRole)
        for attempt in 1...3 {
            let roles = try await clientRoles(agentUser)
            guard let roles else {
                throw DynsecError(description: "the broker's dynamic-security plugin has no client '\(agentUser)'"
                                  + " (initialise it with mosquitto_ctrl dynsec init FILE \(agentUser) PASSWORD)")
            }
            if roles.contains(AccessPolicy.agentRole) { return }
            logger.info("giving the agent's own broker user its role", metadata: [
                "user": agentUser, "role": AccessPolicy.agentRole, "attempt": "\(attempt)"])
            // The plugin disconnects this connection before it answers: wait for the drop, then for the reconnect.
            try await dynsec.send([.addClientRole(username: agentUser, role: AccessPolicy.agentRole)])
            let dropped = ContinuousClock.now + .seconds(3)
            while dynsec.isConnected, ContinuousClock.now < dropped { try await Task.sleep(for: .milliseconds(20)) }
            try await dynsec.waitUntilConnected()
        }
        throw DynsecError(description: "could not give the broker user '\(agentUser)' the role '\(AccessPolicy.agentRole)'")
    }

    /// Roles of the operators' CLI and the services, given to their users when those exist at the broker; then
    /// every managed role and client.
    private func reconcile() async throws {
        try await syncFixedRole(AccessPolicy.cliRole, policy.cliRole)
        try await syncFixedRole(AccessPolicy.serviceRole, policy.serviceRole)
        try await syncFixedRole(AccessPolicy.serviceControlRole, policy.serviceControlRole)
        try await attach(AccessPolicy.cliUser, roles: [AccessPolicy.cliRole])
        for user in serviceUsers {
            let own = AccessPolicy.serviceReplies(user)
            try await syncFixedRole(own, policy.serviceRepliesRole(user))
            try await attach(user, roles: [AccessPolicy.serviceRole, own], pinned: true)
        }
        // What the broker has of the roles this cache file says the agent made, read afresh: the plugin file may
        // be older than the cache. Any other role is never touched, whatever its name: an operator's
        // `device-readers`, another daemon's devices, or devices this file has no record of (a lost cache file, an
        // older backup of it) keep their credentials.
        let existing = Set(try await run([.listRoles]).first?.data?["roles"]?.arrayValue?.compactMap(\.stringValue) ?? [])
        let owned = try store.grants(.role)
        let managed = existing.intersection(owned).sorted()
        let unknown = existing.subtracting(owned).filter {
            $0.hasPrefix(AccessPolicy.devicePrefix) || $0.hasPrefix(AccessPolicy.pairingPrefix)
        }
        unmanagedRoles.store(unknown.count, ordering: .relaxed)
        if !unknown.isEmpty {
            logger.warning("the broker has device or pairing roles this cache file did not make: leaving them and "
                           + "their clients as they are (another daemon's, an operator's, or a lost or older cache file)",
                           metadata: ["roles": "\(unknown.count)"])
        }
        // Records of roles the broker no longer has and that are no longer wanted: nothing left to delete.
        let wanted = try desired()
        try store.forgetGrants(.role, owned.subtracting(existing).filter { wanted[$0] == nil }.sorted())
        var current: [String: Set<RoleACL>] = [:]
        for chunk in managed.chunked(100) {
            let answers = try await run(chunk.map(DynsecCommand.getRole))
            for (role, answer) in zip(chunk, answers) { current[role] = Self.acls(answer) ?? [] }
        }
        applied.withLock { applied in
            for (role, acls) in current { applied[role] = acls }
        }
        try await syncManaged()
        try await repairClients()
    }

    /// Every provisioned device with a client of its own must have its role; a lost client cannot be made again
    /// (its password is the device's alone), so it is said.
    private func repairClients() async throws {
        let owners = try deviceRoleOwners()
        let users = try brokerUsers(owners)
        for chunk in owners.chunked(100) {
            let answers = try await run(chunk.map { DynsecCommand.getClient(users[$0] ?? $0) })
            var repairs: [DynsecCommand] = []
            for (device, answer) in zip(chunk, answers) {
                guard answer.succeeded else {
                    logger.warning("a provisioned device has no broker client (the broker's plugin file lost it): "
                                   + "remove and pair the device again", metadata: ["device": device])
                    continue
                }
                let roles = Self.roleNames(answer)
                if !roles.contains(AccessPolicy.deviceRole(device)) {
                    repairs.append(.addClientRole(username: users[device] ?? device, role: AccessPolicy.deviceRole(device)))
                }
            }
            if !repairs.isEmpty {
                logger.info("gave provisioned devices back their broker roles", metadata: ["devices": "\(repairs.count)"])
                try await runChecked(repairs)
            }
        }
    }

    // MARK: changes

    /// Brings the managed roles in line with the fleet now (after a removal, a pairing, an activation).
    func sync() async throws {
        try await gate.run { try await self.syncManaged() }
    }

    /// Asks for a sync soon (from a watch, which must not wait).
    func needsSync() {
        dirtyContinuation.yield()
    }

    /// Runs the syncs asked for with `needsSync` until cancelled, at most a few a second: a burst of changes (a
    /// fleet reconnecting, a replacement moving many sub-devices) is taken in by the next one.
    func runSyncs() async {
        for await _ in dirty {
            do {
                try await sync()
            } catch {
                logger.warning("could not bring the broker's access in line with the fleet", metadata: ["error": "\(error)"])
            }
            try? await Task.sleep(for: .milliseconds(200))
        }
    }

    func finish() {
        dirtyContinuation.finish()
    }

    /// Names no device may take: the agent's own user and client ids, the operators' CLI user, the services'
    /// users, and the `pair-` prefix of bootstrap users (a device named like a pairing would lose its client when
    /// the pairing ends).
    func isReserved(_ id: String) -> Bool {
        let agent = policy.agentClientID
        return id.hasPrefix(Secrets.bootstrapPrefix) || id == agentUser || id == agent || id == agent + "-access"
            || id == AccessPolicy.cliUser || serviceUsers.contains(id)
    }

    /// Whether the broker has a client named for `device` (its id, or an Alink device's Linkkit user name), or its
    /// device role, that the agent did not make (an operator's, an application's, another daemon's): such a name is
    /// never taken over.
    func isTakenAtBroker(_ device: String, dialect: String? = nil) async throws -> Bool {
        try await gate.run {
            let role = AccessPolicy.deviceRole(device), user = AccessPolicy.brokerUser(device, dialect: dialect)
            let answers = try await self.run([.getClient(user), .getRole(role)])
            let clients = try self.store.grants(.client), roles = try self.store.grants(.role)
            return (answers[0].succeeded && !clients.contains(user)) || (answers[1].succeeded && !roles.contains(role))
        }
    }

    /// Creates a pairing's bootstrap client, pinned to its user name as client id (an unpinned user could connect
    /// as the agent or any device and take its session), its role first: the plugin refuses a client with an
    /// unknown role. Throws `NameTaken` when the broker already has a client or role of that name that the agent
    /// did not make: the pairing is recorded before this runs, so a sync for another change (an activation, a
    /// removal) may already have made its role, which is the agent's own and no reason to draw another name.
    func createBootstrap(_ username: String, password: String) async throws {
        try await gate.run {
            let role = AccessPolicy.pairingRole(username)
            let answers = try await self.run([.getClient(username), .getRole(role)])
            let clients = try self.store.grants(.client), roles = try self.store.grants(.role)
            if (answers[0].succeeded && !clients.contains(username)) || (answers[1].succeeded && !roles.contains(role)) {
                throw NameTaken(name: username)
            }
            try await self.syncManaged()
            try await self.createClient(username, password: password, role: AccessPolicy.pairingRole(username))
        }
    }

    struct NameTaken: Error {
        let name: String
    }

    /// Creates an activated device's own client, pinned to its id as client id (an Alink device's: its Linkkit
    /// user name and client id, `AccessPolicy.brokerUser`), its role made by the sync before. A leftover client of
    /// the same name is replaced only when the agent's records say it made it (a removal whose deletion did not
    /// reach the broker); anyone else's client is never deleted.
    func createDeviceClient(_ device: String, password: String, dialect: String? = nil) async throws {
        try await gate.run {
            try await self.syncManaged()
            let user = AccessPolicy.brokerUser(device, dialect: dialect)
            if try self.store.grants(.client).contains(user) {
                try await self.runChecked([.deleteClient(user)])
            }
            try await self.createClient(user, password: password, role: AccessPolicy.deviceRole(device),
                                        clientID: AccessPolicy.brokerClientID(device, dialect: dialect))
        }
    }

    /// Recorded before it is made (the name was just checked not to be anyone else's): a kill, or an answer lost,
    /// after the plugin made it still leaves the record that lets the next sync or start delete it. A name that
    /// turned out to be someone else's after all ("already exists") is forgotten again.
    private func createClient(_ user: String, password: String, role: String, clientID: String? = nil) async throws {
        try store.recordGrants(.client, [user], now: Timestamp.now())
        let answer = try await run([.createClient(username: user, password: password, clientID: clientID ?? user,
                                                  roles: [role])])[0]
        guard answer.succeeded else {
            if answer.error?.hasSuffix("already exists") == true { try store.forgetGrants(.client, [user]) }
            throw DynsecError(description: "the dynamic-security plugin refused createClient: \(answer.error ?? "")")
        }
    }

    /// Deletes a pairing's bootstrap client (when the agent made it); its role goes with the next sync.
    func deleteBootstrap(_ username: String) async throws {
        try await gate.run {
            if try self.store.grants(.client).contains(username) {
                try await self.runChecked([.deleteClient(username)])
                try self.store.forgetGrants(.client, [username])
            }
            try self.store.markCleaned(username)
            try await self.syncManaged()
        }
    }

    /// The ACLs of a managed role as the broker has them after the last change (nil: no such role).
    func acls(of role: String) -> Set<RoleACL>? {
        applied.withLock { $0[role] }
    }

    // MARK: the difference

    /// The managed roles as they should be.
    private func desired() throws -> [String: Set<RoleACL>] {
        let provisioned = try store.provisioned().filter { cache.device($0.key) != nil }
        let open = try store.open()
        var roles: [String: Set<RoleACL>] = [:]
        var subDevices: [String: [String]] = [:]
        // A sub-device's topics go to the gateway that activated it, or took it over in a replacement this agent
        // started (`PairingStore.moveSubDevices`), never to the `gatewayId` an info report names: anyone who may
        // publish the sub-device's info (its gateway, the operators' CLI) could move them.
        for (device, activatedBy) in provisioned {
            if let gateway = activatedBy { subDevices[gateway, default: []].append(device) }
        }
        let dialects = try store.provisionedDialects()
        for (device, activatedBy) in provisioned where activatedBy == nil {
            let pairings = open.filter { $0.gatewayId == device }.map(\.username)
            roles[AccessPolicy.deviceRole(device)] = policy.deviceRole(
                device, subDevices: subDevices[device] ?? [], pairings: pairings, dialects: dialects,
                gateway: cache.device(device)?.info.category == .gateway)
        }
        for pairing in open { roles[AccessPolicy.pairingRole(pairing.username)] = policy.pairingTopics(pairing.username) }
        return roles
    }

    /// Devices with a client and role of their own (not the sub-devices their gateways speak for).
    private func deviceRoleOwners() throws -> [String] {
        try store.provisioned().filter { $0.value == nil && cache.device($0.key) != nil }.map(\.key).sorted()
    }

    /// The broker user of each of `devices` (`AccessPolicy.brokerUser`: an Alink device's differs from its id).
    private func brokerUsers(_ devices: [String]) throws -> [String: String] {
        let dialects = try store.provisionedDialects()
        return Dictionary(uniqueKeysWithValues: devices.map { ($0, AccessPolicy.brokerUser($0, dialect: dialects[$0])) })
    }

    private func syncManaged() async throws {
        let desired = try desired()
        let current = applied.withLock { $0 }
        // Gone first: a removed device's client (it can no longer connect) and role, an ended pairing's role.
        // Only what the agent's records say it made, never a name derived from a role's.
        let wantedClients = Set(try brokerUsers(try deviceRoleOwners()).values).union(try store.open().map(\.username))
        let goneClients = try store.grants(.client).subtracting(wantedClients).sorted()
        // Also roles recorded but not known to exist: a batch that failed after their record may have made them.
        let goneRoles = Set(current.keys).union(try store.grants(.role)).filter { desired[$0] == nil }.sorted()
        let createdRoles = desired.keys.sorted().filter { current[$0] == nil }
        var commands: [DynsecCommand] = goneClients.map(DynsecCommand.deleteClient) + goneRoles.map(DynsecCommand.deleteRole)
        // Removals before additions, all in one batch: a sub-device's topics leave the faulty gateway's role and
        // join the new one's in the same change.
        var additions: [DynsecCommand] = []
        for (role, acls) in desired.sorted(by: { $0.key < $1.key }) {
            guard let had = current[role] else {
                additions.append(.createRole(role))
                additions += acls.sorted().map { .addRoleACL(role, $0) }
                continue
            }
            let changes = AccessPolicy.changes(role: role, from: had, to: acls)
            commands += changes.filter { if case .removeRoleACL = $0 { true } else { false } }
            additions += changes.filter { if case .addRoleACL = $0 { true } else { false } }
        }
        commands += additions
        guard !commands.isEmpty else { return }
        // Recorded before they are made, as clients are (`createClient`): whatever a kill leaves at the broker, the
        // cache file knows it made it.
        try store.recordGrants(.role, createdRoles, now: Timestamp.now())
        // One batch, so that a topic leaves one role and joins another in the same change; only a change too
        // large for one batch (a replacement of a gateway with some sixty sub-devices) is split.
        for chunk in commands.chunked(Self.batchLimit) { try await runChecked(chunk) }
        try store.forgetGrants(.client, goneClients)
        try store.forgetGrants(.role, goneRoles)
        applied.withLock { applied in
            for role in applied.keys where desired[role] == nil { applied.removeValue(forKey: role) }
            for (role, acls) in desired { applied[role] = acls }
        }
    }

    static let batchLimit = 2000

    /// Creates the role when missing and sets its ACLs to `acls` (role edits do not disconnect anyone).
    private func syncFixedRole(_ role: String, _ acls: Set<RoleACL>) async throws {
        let answer = try await run([.getRole(role)])[0]
        let had = Self.acls(answer)
        var commands: [DynsecCommand] = had == nil ? [.createRole(role)] : []
        commands += AccessPolicy.changes(role: role, from: had ?? [], to: acls)
        try await runChecked(commands)
    }

    /// Gives an existing client the roles it lacks (nothing when the operator has not made the client); `pinned`
    /// also ties it to its user name as client id, so that it cannot connect as the agent and take its session.
    private func attach(_ user: String, roles: [String], pinned: Bool = false) async throws {
        let answer = try await run([.getClient(user)])[0]
        guard answer.succeeded else { return }
        let has = Self.roleNames(answer)
        var commands: [DynsecCommand] = roles.filter { !has.contains($0) }.map { .addClientRole(username: user, role: $0) }
        if pinned, answer.data?["client"]?["clientid"]?.stringValue != user {
            commands.append(.setClientID(username: user, clientID: user))
        }
        try await runChecked(commands)
    }

    private func clientRoles(_ user: String) async throws -> Set<String>? {
        let answer = try await run([.getClient(user)])[0]
        return answer.succeeded ? Self.roleNames(answer) : nil
    }

    private func run(_ commands: [DynsecCommand]) async throws -> [DynsecAnswer] {
        let answers = try await dynsec.run(commands)
        guard answers.count == commands.count else {
            throw DynsecError(description: "the dynamic-security plugin answered \(answers.count) of \(commands.count) commands")
        }
        return answers
    }

    /// Runs commands and throws for a refusal other than "already so" / "already gone".
    private func runChecked(_ commands: [DynsecCommand]) async throws {
        guard !commands.isEmpty else { return }
        for answer in try await run(commands) where !answer.alreadyDone {
            throw DynsecError(description: "the dynamic-security plugin refused \(answer.command): \(answer.error ?? "")")
        }
    }

    private static func acls(_ answer: DynsecAnswer) -> Set<RoleACL>? {
        guard answer.succeeded, let list = answer.data?["role"]?["acls"]?.arrayValue else { return nil }
        return Set(list.compactMap { acl in
            guard let type = acl["acltype"]?.stringValue, let topic = acl["topic"]?.stringValue else { return nil }
            return RoleACL(type: type, topic: topic, allow: acl["allow"]?.boolValue ?? false,
                           priority: Int(acl["priority"]?.int64Value ?? 0))
        })
    }

    private static func roleNames(_ answer: DynsecAnswer) -> Set<String> {
        Set(answer.data?["client"]?["roles"]?.arrayValue?.compactMap { $0["rolename"]?.stringValue } ?? [])
    }
}

/// Runs async bodies one at a time, in the order they arrive.
actor SerialGate {
    private var tail: Task<Void, Never>?

    func run<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
        let previous = tail
        let task = Task {
            await previous?.value
            return try await body()
        }
        tail = Task { _ = try? await task.value }
        return try await task.value
    }
}

extension Array {
    func chunked(_ size: Int) -> [[Element]] {
        stride(from: 0, to: count, by: size).map { Array(self[$0..<Swift.min($0 + size, count)]) }
    }
}
