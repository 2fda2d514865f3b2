#!/usr/bin/env python3
"""A device built on Alibaba's own device SDK, Linkkit (aliyun-iot-linkkit 1.2.13 on paho-mqtt 1.6.1), for the
thing-agent's Alink tests (Tests/EndToEndTests/LinkkitTests.swift): the SDK does the protocol; this script only
wires it to a local broker and says on stdout what happens.

Usage:
  linkkit_device.py HOST PORT PK DN SECRET [--events alarm,...] [--services reboot,...]
                  [--auto-answer] [--ota-auto] [--post-on-ready JSON] [--follow-sets] [--ntp-on-ready] [--commands FILE]
                  [--username U --client-id C --password P] [--no-stdin] [--log]

With --username, --client-id and --password the SDK connects with them as given (its direct mode, for credentials
the platform issued, as a provisioning agent's activation gives them) instead of signing with SECRET.

Prints one JSON object per line on stdout ({"ev": ...}); SDK debug logs go to stderr with --log.
Reads commands from stdin, one JSON object per line (EOF = quit, unless --no-stdin):
  {"cmd":"post","params":{"temp":21.5}}                    thing_post_property
  {"cmd":"event","id":"alarm","params":{"level":2}}         thing_trigger_event (id must be in --events)
  {"cmd":"answer","id":"reboot","request_id":"7","code":200,"data":{}}   thing_answer_service
  {"cmd":"tags_update","tags":{"room":"lab"}}               thing_update_tags
  {"cmd":"tags_delete","keys":["room"]}                     thing_remove_tags
  {"cmd":"ota_inform","version":"1.0.0","module":null}       ota_report_version
  {"cmd":"ota_get","module":null}                           query_ota_firmware
  {"cmd":"ota_download","url":"http://..","sign_method":"Md5","sign":"<hex>","path":null}
  {"cmd":"ota_progress","step":"50","desc":"","module":null} manual publish (the SDK has no API)
  {"cmd":"ntp"}                                             manual publish (the SDK has no API)
  {"cmd":"publish","topic":"...","payload":{...}|"text","qos":0}
  {"cmd":"subscribe","topic":"...","qos":1}
  {"cmd":"reconnect"}                                       force_reconnect
  {"cmd":"quit"}
"""
import argparse
import json
import os
import signal
import sys
import tempfile
import threading
import time

from linkkit import linkkit

_out_lock = threading.Lock()


def emit(ev, **kw):
    obj = {"ev": ev, "t": round(time.time(), 3)}
    obj.update(kw)
    with _out_lock:
        sys.stdout.write(json.dumps(obj, default=str) + "\n")
        sys.stdout.flush()


def decode(payload):
    if isinstance(payload, (bytes, bytearray)):
        try:
            payload = payload.decode("utf-8")
        except UnicodeDecodeError:
            return {"hex": payload.hex()}
    try:
        return json.loads(payload)
    except Exception:
        return payload


def write_tsl(events, services):
    """thing_setup() needs a TSL file: events/services not in it are not handled by the SDK."""
    tsl = {
        "schema": "https://iotx-tsl.oss-ap-southeast-1.aliyuncs.com/schema.json",
        "properties": [],
        "events": [{"identifier": "post", "method": "thing.event.property.post", "outputData": []}]
        + [{"identifier": e, "method": "thing.event.%s.post" % e, "type": "info", "outputData": []} for e in events],
        "services": [
            {"identifier": "set", "method": "thing.service.property.set", "inputData": [], "outputData": []},
            {"identifier": "get", "method": "thing.service.property.get", "inputData": [], "outputData": []},
        ]
        + [{"identifier": s, "method": "thing.service.%s" % s, "callType": "async", "inputData": [],
            "outputData": []} for s in services],
    }
    fd, path = tempfile.mkstemp(prefix="alink-tsl-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(tsl, f)
    return path


def device_downlinks(pk, dn, services=(), gateway=False):
    """Topics a Linkkit device must subscribe itself on a plain broker (Alibaba's does it via _ss=1)."""
    s = "/sys/%s/%s/" % (pk, dn)
    topics = [
        s + "thing/service/property/set",
        s + "thing/service/property/get",
        s + "thing/event/+/post_reply",          # property/post_reply and every event's post_reply
        s + "thing/deviceinfo/update_reply",
        s + "thing/deviceinfo/delete_reply",
        s + "thing/ota/firmware/get_reply",
        s + "thing/model/down_raw",
        s + "thing/model/up_raw_reply",
        "/ota/device/upgrade/%s/%s" % (pk, dn),
        "/ext/ntp/%s/%s/response" % (pk, dn),
        "/shadow/get/%s/%s" % (pk, dn),
    ]
    for sv in services:
        topics.append(s + "thing/service/" + sv)
        topics.append("/ext/rrpc/+" + s + "thing/service/" + sv)   # synchronous (RRPC) calls
    if gateway:
        topics += [
            s + "thing/topo/add_reply",
            s + "thing/topo/delete_reply",
            s + "thing/topo/get_reply",
            s + "thing/topo/change",
            s + "thing/sub/register_reply",
            "/ext/session/%s/%s/combine/batch_login_reply" % (pk, dn),
            "/ext/session/%s/%s/combine/batch_logout_reply" % (pk, dn),
            "/ext/session/%s/%s/combine/login_reply" % (pk, dn),
            "/ext/session/%s/%s/combine/logout_reply" % (pk, dn),
        ]
    return topics


class Device(object):
    def __init__(self, args, extra_topics=None, gateway=False):
        self.args = args
        self.pk, self.dn = args.pk, args.dn
        self.events = [e for e in (args.events or "").split(",") if e]
        self.services = [s for s in (args.services or "").split(",") if s]
        self.extra_topics = extra_topics or []
        self.gateway = gateway
        self.sub_mid = None
        self.ready = threading.Event()
        self.quit = threading.Event()
        if args.username:
            self.lk = linkkit.LinkKit(host_name="cn-shanghai", product_key=self.pk, device_name=self.dn,
                                      device_secret="", username=args.username, client_id=args.client_id,
                                      password=args.password)
        else:
            self.lk = linkkit.LinkKit(host_name="cn-shanghai", product_key=self.pk, device_name=self.dn,
                                      device_secret=args.secret)
        if args.log:
            import logging
            logging.basicConfig(stream=sys.stderr, level=logging.DEBUG,
                                format="%(asctime)s %(name)s %(levelname)s %(message)s")
            self.lk.enable_logger(logging.DEBUG)
        self.lk.config_mqtt(endpoint=args.host, port=args.port, secure="")
        self.tsl = write_tsl(self.events, self.services)
        rc = self.lk.thing_setup(self.tsl)
        if rc != 0:
            emit("error", what="thing_setup", rc=rc)
        lk = self.lk
        lk.on_connect = self.on_connect
        lk.on_disconnect = self.on_disconnect
        lk.on_thing_enable = self.on_thing_enable
        lk.on_thing_disable = lambda ud: emit("thing_disable")
        lk.on_subscribe_topic = self.on_subscribe_topic
        lk.on_publish_topic = lambda mid, ud: emit("publish_ack", mid=mid)
        lk.on_topic_message = self.on_topic_message
        lk.on_topic_rrpc_message = lambda rid, topic, payload, qos, ud: emit(
            "rrpc_message", rrpc_id=rid, topic=topic, payload=decode(payload), qos=qos)
        lk.on_thing_prop_changed = self.on_prop_changed
        lk.on_thing_prop_post = lambda rid, code, data, msg, ud: emit(
            "prop_post_reply", request_id=rid, code=code, data=data, message=msg)
        lk.on_thing_event_post = lambda event, rid, code, data, msg, ud: emit(
            "event_post_reply", id=event, request_id=rid, code=code, data=data, message=msg)
        lk.on_thing_call_service = self.on_call_service
        lk.on_thing_device_info_update = lambda rid, code, data, msg, ud: emit(
            "deviceinfo_update_reply", request_id=rid, code=code, data=data, message=msg)
        lk.on_thing_device_info_delete = lambda rid, code, data, msg, ud: emit(
            "deviceinfo_delete_reply", request_id=rid, code=code, data=data, message=msg)
        lk.on_thing_raw_data_arrived = lambda payload, ud: emit("raw_down", payload=decode(payload))
        lk.on_thing_raw_data_post = lambda payload, ud: emit("raw_up_reply", payload=decode(payload))
        lk.on_thing_shadow_get = lambda payload, ud: emit("shadow_get", payload=payload)
        lk.on_ota_message_arrived = self.on_ota
        lk.on_gateway_add_subdev_topo_reply = lambda rid, code, data, msg, ud: emit(
            "topo_add_reply", request_id=rid, code=code, data=data, message=msg)
        lk.on_gateway_delete_subdev_topo_reply = lambda rid, code, data, msg, ud: emit(
            "topo_delete_reply", request_id=rid, code=code, data=data, message=msg)
        lk.on_gateway_login_subdev_reply = lambda rid, code, data, msg, ud: emit(
            "login_reply", request_id=rid, code=code, data=data, message=msg)
        lk.on_gateway_logout_subdev_reply = lambda rid, code, data, msg, ud: emit(
            "logout_reply", request_id=rid, code=code, data=data, message=msg)
        lk.on_gateway_register_subdev_reply = lambda rid, code, data, msg, ud: emit(
            "sub_register_reply", request_id=rid, code=code, data=data, message=msg)
        lk.on_gateway_topo_change = lambda rid, params, ud: emit("topo_change", request_id=rid, params=params)

    # --- callbacks -------------------------------------------------------------------------
    def on_connect(self, session_flag, rc, ud):
        emit("connect", rc=rc, session_present=session_flag)
        if rc != 0:
            return
        # The SDK subscribes nothing and forgets subscriptions on every disconnect: subscribe here.
        topics = device_downlinks(self.pk, self.dn, self.services, self.gateway) + list(self.extra_topics)
        rc, mid = self.lk.subscribe_topic([(t, 1) for t in topics])
        self.sub_mid = mid
        emit("subscribe", rc=rc, mid=mid, topics=topics)

    def on_disconnect(self, rc, ud):
        self.ready.clear()
        emit("disconnect", rc=rc)

    def on_thing_enable(self, ud):
        emit("thing_enable")

    def on_subscribe_topic(self, mid, granted_qos, ud):
        emit("suback", mid=mid, granted_qos=list(granted_qos))
        if mid == self.sub_mid:
            self.ready.set()
            emit("ready")
            if self.args.post_on_ready:
                self.command({"cmd": "post", "params": json.loads(self.args.post_on_ready)})
            if self.args.ntp_on_ready:
                self.command({"cmd": "ntp"})

    def on_topic_message(self, topic, payload, qos, ud):
        p = decode(payload)
        if topic.startswith("/ext/rrpc/") and isinstance(p, dict) and "code" in p and "params" not in p:
            # a plain broker echoes the device's own RRPC reply (same topic as the request) back to it
            emit("rrpc_echo", topic=topic, payload=p)
            return
        emit("message", topic=topic, payload=p, qos=qos)

    def on_prop_changed(self, params, ud):
        # The SDK has already published property/set_reply {"id","code":200,"data":{}} at this point.
        emit("prop_set", params=params)
        if self.args.follow_sets:
            # As firmware does: apply the values, then post them.
            self.command({"cmd": "post", "params": params})

    def on_ota(self, ntype, version, size, url, sign_method, sign, module, extra):
        # ntype 1 = pushed on /ota/device/upgrade, 2 = reply on thing/ota/firmware/get_reply
        emit("ota", notice_type=ntype, version=version, size=size, url=url, sign_method=sign_method,
             sign=sign, module=module, ext_data=extra)
        if self.args.ota_auto:
            threading.Thread(target=self.ota_auto, args=(version, url, sign_method, sign, module),
                             daemon=True).start()

    def ota_auto(self, version, url, sign_method, sign, module):
        """Download with the SDK, report progress (no SDK API: raw publish), then report the new version."""
        mod = None if module == "default" else module
        self.command({"cmd": "ota_progress", "step": "1", "desc": "downloading", "module": mod})
        path = tempfile.mktemp(prefix="alink-fw-")
        try:
            rc = self.lk.download_ota_firmware(url, path, sign_method, sign)
        except Exception as e:
            rc = repr(e)
        emit("ota_download", rc=str(rc), path=path)
        if rc == linkkit.LinkKit.ErrorCode.SUCCESS:
            self.command({"cmd": "ota_progress", "step": "100", "desc": "done", "module": mod})
            self.command({"cmd": "ota_inform", "version": version, "module": mod})
        else:
            step = "-3" if rc == linkkit.LinkKit.ErrorCode.OTA_DIGEST_MISMATCH else "-2"
            self.command({"cmd": "ota_progress", "step": step, "desc": str(rc), "module": mod})
        try:
            os.unlink(path)
        except OSError:
            pass

    def on_call_service(self, identifier, request_id, params, ud):
        emit("service", id=identifier, request_id=request_id, params=params)
        if self.args.auto_answer:
            rc = self.lk.thing_answer_service(identifier, request_id, 200, {"echo": params})
            emit("result", cmd="answer", rc=rc, id=identifier, request_id=request_id)

    # --- commands --------------------------------------------------------------------------
    def command(self, c):
        lk = self.lk
        cmd = c.get("cmd")
        try:
            if cmd == "post":
                rc, rid = lk.thing_post_property(c["params"])
                emit("result", cmd=cmd, rc=rc, request_id=rid)
            elif cmd == "event":
                r = lk.thing_trigger_event((c["id"], c.get("params", {})))
                rc, rid = r if isinstance(r, tuple) else (r, None)
                emit("result", cmd=cmd, rc=rc, request_id=rid)
            elif cmd == "answer":
                rc = lk.thing_answer_service(c["id"], c["request_id"], c.get("code", 200), c.get("data"))
                emit("result", cmd=cmd, rc=rc)
            elif cmd == "tags_update":
                r = lk.thing_update_tags(c["tags"])
                emit("result", cmd=cmd, rc=r[0], request_id=r[1])
            elif cmd == "tags_delete":
                r = lk.thing_remove_tags(c["keys"])
                rc, rid = r if isinstance(r, tuple) else (r, None)
                emit("result", cmd=cmd, rc=rc, request_id=rid)
            elif cmd == "ota_inform":
                rc = lk.ota_report_version(c.get("module"), c["version"])
                emit("result", cmd=cmd, rc=rc)
            elif cmd == "ota_get":
                rc = lk.query_ota_firmware(c.get("module"))
                emit("result", cmd=cmd, rc=rc)
            elif cmd == "ota_download":
                path = c.get("path") or tempfile.mktemp(prefix="alink-fw-")
                rc = lk.download_ota_firmware(c["url"], path, c["sign_method"], c["sign"])
                emit("result", cmd=cmd, rc=str(rc), path=path)
            elif cmd == "ota_progress":
                params = {"step": str(c.get("step", "0")), "desc": c.get("desc", "")}
                if c.get("module"):
                    params["module"] = c["module"]
                payload = json.dumps({"id": str(c.get("id", "1")), "params": params})
                rc, mid = lk.publish_topic("/ota/device/progress/%s/%s" % (self.pk, self.dn), payload, 0)
                emit("result", cmd=cmd, rc=rc, mid=mid)
            elif cmd == "ntp":
                payload = json.dumps({"deviceSendTime": str(int(time.time() * 1000))})
                rc, mid = lk.publish_topic("/ext/ntp/%s/%s/request" % (self.pk, self.dn), payload, 0)
                emit("result", cmd=cmd, rc=rc, mid=mid)
            elif cmd == "publish":
                p = c.get("payload")
                if not isinstance(p, str):
                    p = json.dumps(p)
                rc, mid = lk.publish_topic(c["topic"], p, c.get("qos", 0))
                emit("result", cmd=cmd, rc=rc, mid=mid)
            elif cmd == "subscribe":
                rc, mid = lk.subscribe_topic(c["topic"], c.get("qos", 1))
                emit("result", cmd=cmd, rc=rc, mid=mid)
            elif cmd == "reconnect":
                lk.force_reconnect()
                emit("result", cmd=cmd, rc=0)
            elif cmd == "quit":
                self.quit.set()
            elif not self.extra_command(c):
                emit("error", what="unknown cmd", cmd=c)
        except Exception as e:
            emit("error", what="command failed", cmd=c, error=repr(e))

    def extra_command(self, c):
        return False

    def run(self):
        signal.signal(signal.SIGTERM, lambda *a: self.quit.set())
        self.lk.connect_async()
        if self.args.commands:
            def follower():
                # Commands appended to the file by the test, one JSON object per line, run in order.
                done = 0
                while not self.quit.is_set():
                    try:
                        with open(self.args.commands) as f:
                            lines = f.read().split("\n")
                    except OSError:
                        lines = []
                    for line in lines[done:-1]:
                        if line.strip():
                            self.command(json.loads(line))
                    done = max(done, len(lines) - 1)
                    time.sleep(0.05)
            threading.Thread(target=follower, daemon=True).start()
        if not self.args.no_stdin:
            def reader():
                for line in sys.stdin:
                    line = line.strip()
                    if not line:
                        continue
                    try:
                        c = json.loads(line)
                    except ValueError as e:
                        emit("error", what="bad json", line=line)
                        continue
                    self.command(c)
                self.quit.set()
            threading.Thread(target=reader, daemon=True).start()
        try:
            while not self.quit.wait(0.2):
                pass
        except KeyboardInterrupt:
            pass
        emit("quit")
        try:
            self.lk.disconnect()
        except Exception:
            pass
        os.unlink(self.tsl)
        os._exit(0)   # the SDK's threads do not always stop


def parser():
    p = argparse.ArgumentParser(description="Linkkit test device")
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("pk")
    p.add_argument("dn")
    p.add_argument("secret")
    p.add_argument("--events", default="alarm", help="comma list of event identifiers (TSL)")
    p.add_argument("--services", default="reboot", help="comma list of service identifiers (TSL)")
    p.add_argument("--auto-answer", action="store_true", help="answer every service call with 200")
    p.add_argument("--post-on-ready", default=None, help="JSON params to post once subscribed")
    p.add_argument("--ota-auto", action="store_true",
                   help="on an OTA notice: download, report progress and the new version")
    p.add_argument("--follow-sets", action="store_true", help="post the values of every property set received")
    p.add_argument("--ntp-on-ready", action="store_true", help="send an NTP request once subscribed")
    p.add_argument("--no-stdin", action="store_true", help="run until SIGTERM, no stdin commands")
    p.add_argument("--commands", default=None, help="also run the commands appended to this file")
    p.add_argument("--log", action="store_true", help="SDK debug log on stderr")
    p.add_argument("--username", default=None, help="connect with this user name (with --client-id, --password)")
    p.add_argument("--client-id", default=None, help="connect with this client id, as given")
    p.add_argument("--password", default=None, help="connect with this password")
    return p


if __name__ == "__main__":
    Device(parser().parse_args()).run()
