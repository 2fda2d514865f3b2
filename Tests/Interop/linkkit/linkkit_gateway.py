#!/usr/bin/env python3
"""A gateway with one sub-device on Alibaba's Linkkit SDK, for the thing-agent's Alink tests.

Usage:
  linkkit_gateway.py HOST PORT PK DN SECRET SUBPK SUBDN SUBSECRET [--auto-login] [--sub-post-on-login JSON]
                   [--sub-services svc,...] [all options of linkkit_device.py]

The SDK's gateway API covers topo add/delete, batch login/logout and sub-device registration only; everything a
sub-device says or hears travels on the sub-device's own /sys/SUBPK/SUBDN/... topics over the gateway's connection,
published and subscribed by the application (this script) with publish_topic()/subscribe_topic().

Extra stdin commands (besides linkkit_device.py's):
  {"cmd":"topo_add"}   {"cmd":"topo_delete"}   {"cmd":"topo_get"}      SDK API (topo_get: raw publish)
  {"cmd":"login"}      {"cmd":"logout"}                                SDK API (batch_login / batch_logout)
  {"cmd":"sub_post","params":{"temp":1}}                              raw publish on the sub-device's topic
  {"cmd":"sub_event","id":"alarm","params":{}}                        raw publish on the sub-device's topic
  {"cmd":"sub_answer","id":"svc","request_id":"3","code":200,"data":{}}
Sub-device property sets are answered like the SDK answers the gateway's own: set_reply code 200 first.
"""
import itertools
import json
import threading

import linkkit_device as base
from linkkit_device import emit, decode


def sub_downlinks(pk, dn, services):
    s = "/sys/%s/%s/" % (pk, dn)
    t = [s + "thing/service/property/set", s + "thing/event/+/post_reply", s + "thing/deviceinfo/update_reply",
         "/ota/device/upgrade/%s/%s" % (pk, dn)]
    for sv in services:
        t.append(s + "thing/service/" + sv)
    return t


class Gateway(base.Device):
    def __init__(self, args):
        self.spk, self.sdn, self.ssecret = args.subpk, args.subdn, args.subsecret
        self.sub_services = [s for s in (args.sub_services or "").split(",") if s]
        self.sub_ids = itertools.count(1)   # own counter: the SDK's is private and its reply handling is not ours
        self.sub_lock = threading.Lock()
        super().__init__(args, extra_topics=sub_downlinks(self.spk, self.sdn, self.sub_services), gateway=True)
        lk = self.lk
        lk.on_gateway_add_subdev_topo_reply = self.on_topo_add_reply
        lk.on_gateway_login_subdev_reply = self.on_login_reply

    def subdev(self, with_secret=True):
        return [[self.spk, self.sdn, self.ssecret]] if with_secret else [[self.spk, self.sdn]]

    def on_subscribe_topic(self, mid, granted_qos, ud):
        super().on_subscribe_topic(mid, granted_qos, ud)
        if mid == self.sub_mid and self.args.auto_login:
            self.command({"cmd": "topo_add"})

    def on_topo_add_reply(self, rid, code, data, msg, ud):
        emit("topo_add_reply", request_id=rid, code=code, data=data, message=msg)
        if self.args.auto_login and code == 200:
            self.command({"cmd": "login"})

    def on_login_reply(self, rid, code, data, msg, ud):
        emit("login_reply", request_id=rid, code=code, data=data, message=msg)
        if self.args.auto_login and code == 200 and self.args.sub_post_on_login:
            self.command({"cmd": "sub_post", "params": json.loads(self.args.sub_post_on_login)})

    def sub_topic(self, rest):
        return "/sys/%s/%s/%s" % (self.spk, self.sdn, rest)

    def on_topic_message(self, topic, payload, qos, ud):
        p = decode(payload)
        if topic == self.sub_topic("thing/service/property/set") and isinstance(p, dict) and "id" in p:
            # same behaviour as the SDK for the gateway itself: reply 200 before the application sees it
            reply = {"id": p["id"], "code": 200, "data": {}}
            self.lk.publish_topic(topic + "_reply", json.dumps(reply), 1)
            emit("sub_prop_set", pk=self.spk, dn=self.sdn, params=p.get("params"))
            return
        prefix = self.sub_topic("thing/service/")
        if topic.startswith(prefix) and isinstance(p, dict) and "params" in p:
            ident = topic[len(prefix):]
            emit("sub_service", pk=self.spk, dn=self.sdn, id=ident, request_id=p.get("id"), params=p.get("params"))
            if self.args.auto_answer:
                self.command({"cmd": "sub_answer", "id": ident, "request_id": p.get("id"), "code": 200,
                              "data": {"echo": p.get("params")}})
            return
        if topic.startswith(self.sub_topic("thing/event/")) and topic.endswith("/post_reply"):
            emit("sub_post_reply", pk=self.spk, dn=self.sdn, topic=topic, payload=p)
            return
        if topic.endswith("/thing/topo/get_reply"):
            emit("topo_get_reply", payload=p)
            return
        super().on_topic_message(topic, payload, qos, ud)

    def extra_command(self, c):
        lk = self.lk
        cmd = c.get("cmd")
        if cmd == "topo_add":
            rc, rid = lk.gateway_add_subdev_topo(self.subdev())
        elif cmd == "topo_delete":
            rc, rid = lk.gateway_delete_subdev_topo(self.subdev(False))
        elif cmd == "login":
            rc, rid = lk.gateway_login_subdev(self.subdev())
        elif cmd == "logout":
            rc, rid = lk.gateway_logout_subdev(self.subdev(False))
        elif cmd == "topo_get":
            rid = str(next(self.sub_ids))
            req = {"id": rid, "version": "1.0", "params": {}, "method": "thing.topo.get"}
            rc, _ = lk.publish_topic("/sys/%s/%s/thing/topo/get" % (self.pk, self.dn), json.dumps(req), 0)
        elif cmd == "sub_post":
            rid = str(next(self.sub_ids))
            req = {"id": rid, "version": "1.0", "params": c["params"], "method": "thing.event.property.post"}
            rc, _ = lk.publish_topic(self.sub_topic("thing/event/property/post"), json.dumps(req), 1)
        elif cmd == "sub_event":
            rid = str(next(self.sub_ids))
            req = {"id": rid, "version": "1.0", "params": {"value": c.get("params", {})},
                   "method": "thing.event.%s.post" % c["id"]}
            rc, _ = lk.publish_topic(self.sub_topic("thing/event/%s/post" % c["id"]), json.dumps(req), 0)
        elif cmd == "sub_answer":
            rid = c["request_id"]
            resp = {"id": rid, "code": c.get("code", 200), "data": c.get("data") or {}}
            rc, _ = lk.publish_topic(self.sub_topic("thing/service/%s_reply" % c["id"]), json.dumps(resp), 0)
        else:
            return False
        emit("result", cmd=cmd, rc=rc, request_id=rid)
        return True


def parser():
    p = base.parser()
    p.add_argument("subpk")
    p.add_argument("subdn")
    p.add_argument("subsecret")
    p.add_argument("--sub-services", default="", help="comma list of the sub-device's service identifiers")
    p.add_argument("--auto-login", action="store_true", help="topo add, then login, once subscribed")
    p.add_argument("--sub-post-on-login", default=None, help="JSON params the sub-device posts after login")
    return p


if __name__ == "__main__":
    Gateway(parser().parse_args()).run()
