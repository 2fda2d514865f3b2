import FoundationEssentials
import Glibc
import Platform
import ThingAgentCore

/// The daemon's metrics in Prometheus' text format (docs/operations.md, "Metrics").
///
/// A scrape reads only atomics kept up to date as things happen: counters of the receive path, the cache's status
/// tally, histograms, the connection state. It takes no lock the receive path takes, so it can neither block nor
/// slow it (the bench measures what a scrape costs the receive path anyway: docs/performance.md).
extension Agent {
    public func metricsText() -> String {
        var out = PrometheusText()
        let stats = ingestor.counters.snapshot

        out.family("thing_agent_messages_total", .counter,
                   "Messages received from the broker, by outcome (and, for drops, the reason).")
        out.sample("thing_agent_messages_total", [("outcome", "applied")], stats.applied)
        out.sample("thing_agent_messages_total", [("outcome", "unchanged")], stats.unchanged)
        out.sample("thing_agent_messages_total", [("outcome", "for_other_clients")], stats.forOtherClients)
        for reason in DropReason.allCases {
            out.sample("thing_agent_messages_total", [("outcome", "dropped"), ("reason", reason.rawValue)],
                       stats.dropped[reason] ?? 0)
        }
        out.family("thing_agent_guarded_total", .counter,
                   "Input corrected or refused besides each message's one outcome (clock skew, property limit, ...).")
        for reason in GuardReason.allCases {
            out.sample("thing_agent_guarded_total", [("reason", reason.rawValue)], stats.guarded[reason] ?? 0)
        }
        out.single("thing_agent_messages_received_total", .counter,
                   "Messages received from the broker (each ends in one outcome of thing_agent_messages_total).",
                   Double(stats.received))

        let devices = cache.statusTally.counts
        out.family("thing_agent_devices", .gauge, "Cached devices by status.")
        out.sample("thing_agent_devices", [("status", "online")], devices.online)
        out.sample("thing_agent_devices", [("status", "offline")], devices.offline)
        out.sample("thing_agent_devices", [("status", "unknown")], devices.unknown)

        out.single("thing_agent_broker_connected", .gauge, "1 while connected to the broker, else 0.",
                   connectionLog.isConnected ? 1 : 0)
        out.single("thing_agent_broker_connection_losses_total", .counter, "Connections to the broker lost.",
                   Double(connectionLog.lostConnections))
        let broker = connectionLog.broker
        out.family("thing_agent_broker_info", .gauge,
                   "Always 1: the broker of the list in use (while reconnecting, the one last tried) and the MQTT "
                       + "version spoken to it.")
        out.sample("thing_agent_broker_info", [("broker", broker.url), ("mqtt_version", broker.version)], 1)

        out.family("thing_agent_requests_total", .counter,
                   "Requests the agent sent to devices, by kind (topic suffix) and outcome.")
        for (key, count) in requestMetrics.snapshot {
            out.sample("thing_agent_requests_total", [("kind", key.kind), ("outcome", key.outcome)], count)
        }
        out.histogram("thing_agent_request_duration_seconds",
                      "Time from sending a request to its outcome (answer, refusal, timeout).",
                      requestMetrics.durations.snapshot)
        out.histogram("thing_agent_flush_duration_seconds", "Time one batch of changes takes to reach SQLite.",
                      flusher.status.durations.snapshot)
        out.single("thing_agent_flush_failures_total", .counter, "Writes to SQLite that failed (and were retried).",
                   Double(flusher.status.failedFlushes))
        out.single("thing_agent_journal_bytes", .gauge,
                   "Bytes of the journal in use: reports acknowledged to the broker, not yet emptied after SQLite "
                       + "took them in.", Double(writer.journalUsage?.value ?? 0))
        out.family("thing_agent_storage", .gauge,
                   "1 for the daemon's storage state: ok, degraded (a file fails, the journal keeps messages) or "
                       + "holding (new messages are left with the broker).")
        let storage = writer.storage
        let state = !storage.hasProblems ? "ok" : storage.holdsIntake ? "holding" : "degraded"
        for name in ["ok", "degraded", "holding"] {
            out.sample("thing_agent_storage", [("state", name)], name == state ? 1 : 0)
        }
        out.single("thing_agent_listener_events_dropped_total", .counter,
                   "Listener events dropped because a listener's queue was full.", Double(events.dropped))
        out.single("thing_agent_offline_warnings_total", .counter, "Offline warnings published.",
                   Double(offlineWatch.warningsPublished))
        let links = linkEngine.statistics
        out.family("thing_agent_link_total", .counter,
                   "What the multi-control links did: propagations, sets sent and failed, members skipped (offline, "
                       + "out of range), echoes of their own sets, sets superseded by a newer value, accepted sets "
                       + "never reported back, value fights that paused a link, changes not propagated while paused.")
        for (what, count) in [("propagations", links.propagations), ("sets_sent", links.setsSent),
                              ("sets_failed", links.setsFailed), ("skipped_offline", links.skippedOffline),
                              ("out_of_range", links.outOfRange), ("echoes", links.echoes),
                              ("superseded", links.superseded), ("expired", links.expired),
                              ("fights", links.fights), ("paused", links.paused)] {
            out.sample("thing_agent_link_total", [("what", what)], count)
        }
        let integration = integration.snapshot
        out.single("thing_agent_events_published_total", .counter, "Events published on the events topics.",
                   Double(integration.eventsPublished))
        out.single("thing_agent_events_not_sent_total", .counter,
                   "Events not acknowledged: not connected, connection lost (QoS 1 may still arrive later), or stopped.",
                   Double(integration.eventsNotSent))

        if let provisioning = provisioningCounters {
            out.family("thing_agent_activations_total", .counter,
                       "Device activations with a pairing: activated, refused by code (docs/protocol.md, Provisioning), or dropped unanswered from a full queue.")
            out.sample("thing_agent_activations_total", [("outcome", "activated")], provisioning.activated)
            out.sample("thing_agent_activations_total", [("outcome", "dropped")], provisioning.dropped)
            for (code, count) in provisioning.refusals.sorted(by: { $0.key < $1.key }) {
                out.sample("thing_agent_activations_total", [("outcome", "refused"), ("code", "\(code)")], count)
            }
        }

        if let group = standing.group {
            let labels = [("group", group), ("instance", standing.instance)]
            out.family("thing_agent_group_active", .gauge,
                       "1 while this instance is its group's active one (it acts for the fleet), 0 while it stands by.")
            out.sample("thing_agent_group_active", labels, standing.isActive ? 1 : 0)
            out.family("thing_agent_group_role_since_seconds", .gauge,
                       "When this instance took its current role (active or standby), Unix seconds.")
            out.sample("thing_agent_group_role_since_seconds", labels, Double(standing.since) / 1000)
            out.single("thing_agent_group_takeovers_total", .counter, "Times this instance took over its group's lease.",
                       Double(standing.takeoverCount))
            if let counts = replica?.counts {
                out.family("thing_agent_group_records_total", .counter,
                           "Records of the active instance's changes: published here (active), applied here.")
                out.sample("thing_agent_group_records_total", [("what", "published")], counts.published)
                out.sample("thing_agent_group_records_total", [("what", "applied")], counts.applied)
            }
        }

        out.family("thing_agent_build_info", .gauge, "The running version (always 1).")
        out.sample("thing_agent_build_info", [("version", ThingAgentVersion.current)], 1)
        out.single("process_start_time_seconds", .gauge, "Start time of the process since the Unix epoch in seconds.",
                   ProcessStart.seconds)
        return out.text
    }
}

/// The process's start time: the kernel's (from /proc) when readable, else the first time this was asked.
enum ProcessStart {
    static let seconds: Double = fromProc() ?? Date().timeIntervalSince1970

    /// Field 22 of /proc/self/stat is the start in clock ticks after boot; /proc/stat's btime is the boot time.
    private static func fromProc() -> Double? {
        guard let stat = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // After the command name: field 3 (state) is fields[0], so field 22 is fields[19].
        guard fields.count > 19, let ticks = Double(fields[19]) else { return nil }
        guard let system = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
              let line = system.split(separator: "\n").first(where: { $0.hasPrefix("btime ") }),
              let boot = Double(line.dropFirst(6).trimmingBlanks()) else { return nil }
        let hertz = Double(sysconf(Int32(_SC_CLK_TCK)))
        return hertz > 0 ? boot + ticks / hertz : nil
    }
}
