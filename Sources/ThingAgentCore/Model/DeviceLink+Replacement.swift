import JSON
import Synchronization

/// A link member that a gateway replacement took out: it moved to the new gateway, whose thing model does not let
/// it follow the link (a product of other codes is possible when foreign transfers are trusted).
public struct DroppedLinkMember: Sendable, Equatable {
    public var link: String
    public var member: DeviceLink.Member
    /// What the model refuses, in the words `link create` uses.
    public var reason: String

    public init(link: String, member: DeviceLink.Member, reason: String) {
        self.link = link
        self.member = member
        self.reason = reason
    }

    public var json: JSONValue {
        .object(JSONObject([("link", .string(link)), ("device", .string(member.deviceId)),
                            ("code", .string(member.code)), ("reason", .string(reason))]))
    }

    public init?(json: JSONValue) {
        guard let link = json["link"]?.stringValue, let device = json["device"]?.stringValue,
              let code = json["code"]?.stringValue else { return nil }
        self.init(link: link, member: DeviceLink.Member(deviceId: device, code: code),
                  reason: json["reason"]?.stringValue ?? "")
    }
}

extension DeviceLink {
    /// What the replacement of gateway `old` by `new` makes of this link: `old`'s members name `new` (once: a
    /// member `new` already was stays as it was), and each member that moved is checked again, by the rules of
    /// `check`, against the model of the device it now names; one that fails is dropped. The members that did not
    /// move were checked when the link was made, and lead. `sameProduct`: the new gateway is of the old one's
    /// product, so when no model is known for it its moved members keep what `check` found at create (the same
    /// codes). Nil link: fewer than two members are left, so the link is dissolved.
    package func replacing(_ old: String, by new: String, sameProduct: Bool, model: (String) -> ThingModel?)
        -> (link: DeviceLink?, dropped: [DroppedLinkMember]) {
        let unchecked = sameProduct && model(new) == nil
        var members: [Member] = []
        var moved = Set<Member>()
        for member in self.members {
            guard member.deviceId == old else {
                if !members.contains(member) { members.append(member) }
                continue
            }
            let next = Member(deviceId: new, code: member.code)
            if self.members.contains(next) || members.contains(next) { continue }
            members.append(next)
            moved.insert(next)
        }
        var leader: (member: Member, kind: PropertySpec.Kind)?
        for member in members where !moved.contains(member) {
            if let kind = try? Self.kind(of: member, model: model) {
                leader = (member, kind)
                break
            }
        }
        var kept: [Member] = []
        var dropped: [DroppedLinkMember] = []
        for member in members {
            guard moved.contains(member), !unchecked else {
                kept.append(member)
                continue
            }
            do {
                let kind = try Self.kind(of: member, model: model)
                if let leader, let refusal = Self.incompatibility(member, kind, with: leader) {
                    dropped.append(DroppedLinkMember(link: name, member: member, reason: refusal))
                    continue
                }
                if leader == nil { leader = (member, kind) }
                kept.append(member)
            } catch {
                dropped.append(DroppedLinkMember(link: name, member: member, reason: error.description))
            }
        }
        let link = kept.count < 2 ? nil : DeviceLink(name: name, members: kept, createdAt: createdAt)
        return (link, dropped)
    }
}
