#!/usr/bin/env python3
"""Drives a real Home Assistant (homeassistant 2025.4.4, pinned in requirements.txt) for thing-agent's tests
(Tests/EndToEndTests/HomeAssistantTests.swift) and for the screenshot in docs/home-assistant.md: the setup a person
does in Home Assistant's screens, done through its REST and WebSocket APIs, and what Home Assistant then shows,
printed as JSON.

Usage (CONFIG is Home Assistant's configuration directory; the token is kept in CONFIG/.test-token):
  ha.py configure CONFIG --port P                  writes a minimal configuration.yaml (no default_config)
  ha.py onboard CONFIG --port P --broker-port B    waits for the API, onboards (owner test/test-password), adds the
                                                   MQTT entry (127.0.0.1:B, discovery on, birth message on)
  ha.py wait CONFIG --port P                       waits until the API answers (after a restart)
  ha.py dump CONFIG --port P                       {"devices":[...],"entities":[...],"states":[...]} (mqtt only)
  ha.py call CONFIG --port P DOMAIN SERVICE JSON   calls a service, prints its answer
  ha.py auth-code CONFIG --port P                  an authorization code for the frontend (the login flow)
  ha.py screenshot CONFIG --port P PATH OUT.png    headless Chromium shows PATH of the frontend, logged in
Exits 1 with the reason on stderr when Home Assistant does not answer as expected.
"""
import argparse
import asyncio
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import aiohttp

USER, PASSWORD = "test", "test-password"


def fail(message):
    sys.stderr.write(message + "\n")
    sys.exit(1)


def base(args):
    return f"http://127.0.0.1:{args.port}"


def configure(args):
    os.makedirs(args.config, exist_ok=True)
    with open(os.path.join(args.config, "configuration.yaml"), "w") as f:
        # No default_config: only what the frontend, the REST API and MQTT need (the rest wants packages and
        # hardware a test machine does not have).
        f.write(f"""homeassistant:
  name: thing-agent test
  unit_system: metric
  time_zone: UTC
  country: DE
  latitude: 0
  longitude: 0
  elevation: 0
http:
  server_host: 127.0.0.1
  server_port: {args.port}
frontend:
config:
logger:
  default: warning
""")
    # The core_config step of onboarding also sets up the integrations a new installation gets (weather,
    # text-to-speech, radio browser), which want packages of their own: marked done beforehand, so the REST
    # onboarding below makes the owner alone.
    storage = os.path.join(args.config, ".storage")
    os.makedirs(storage, exist_ok=True)
    onboarding = os.path.join(storage, "onboarding")
    if not os.path.exists(onboarding):
        with open(onboarding, "w") as f:
            json.dump({"version": 4, "minor_version": 1, "key": "onboarding", "data": {"done": ["core_config"]}}, f)


async def wait_api(session, args, timeout=120):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            async with session.get(base(args) + "/api/onboarding") as r:
                if r.status in (200, 401, 404):
                    return
                last = f"HTTP {r.status}"
        except aiohttp.ClientError as e:
            last = str(e)
        await asyncio.sleep(0.2)
    fail(f"Home Assistant's API did not answer within {timeout} s ({last})")


async def expect(r, what):
    text = await r.text()
    if r.status >= 300:
        fail(f"{what}: HTTP {r.status}: {text}")
    return json.loads(text) if text else None


async def token_from_code(session, args, code):
    async with session.post(base(args) + "/auth/token", data={
        "grant_type": "authorization_code", "code": code, "client_id": base(args) + "/"}) as r:
        return await expect(r, "token")


async def ws_call(session, args, token, message):
    async with session.ws_connect(base(args) + "/api/websocket") as ws:
        await ws.receive_json()
        await ws.send_json({"type": "auth", "access_token": token})
        auth = await ws.receive_json()
        if auth.get("type") != "auth_ok":
            fail(f"websocket auth: {auth}")
        message = dict(message, id=1)
        await ws.send_json(message)
        while True:
            answer = await ws.receive_json()
            if answer.get("id") == 1 and answer.get("type") == "result":
                if not answer.get("success"):
                    fail(f"{message['type']}: {answer}")
                return answer.get("result")


def token_file(args):
    return os.path.join(args.config, ".test-token")


def read_token(args):
    try:
        with open(token_file(args)) as f:
            return f.read().strip()
    except OSError:
        fail("not onboarded (no token in the configuration directory)")


async def onboard(args):
    async with aiohttp.ClientSession() as session:
        await wait_api(session, args)
        async with session.get(base(args) + "/api/onboarding") as r:
            steps = await expect(r, "onboarding")
        if not os.path.exists(token_file(args)):
            if any(s["step"] == "user" and s["done"] for s in steps):
                fail("the owner exists but its token was lost")
            client = base(args) + "/"
            async with session.post(base(args) + "/api/onboarding/users", json={
                "client_id": client, "name": "Test", "username": USER, "password": PASSWORD,
                "language": "en"}) as r:
                code = (await expect(r, "onboarding user"))["auth_code"]
            tokens = await token_from_code(session, args, code)
            headers = {"Authorization": "Bearer " + tokens["access_token"]}
            for step, body in [("analytics", {}),
                               ("integration", {"client_id": client, "redirect_uri": client + "?auth_callback=1"})]:
                async with session.post(base(args) + "/api/onboarding/" + step, json=body, headers=headers) as r:
                    await expect(r, "onboarding " + step)
            long_lived = await ws_call(session, args, tokens["access_token"], {
                "type": "auth/long_lived_access_token", "client_name": "thing-agent tests", "lifespan": 3650})
            with open(token_file(args), "w") as f:
                f.write(long_lived)
        token = read_token(args)
        headers = {"Authorization": "Bearer " + token}
        async with session.get(base(args) + "/api/config/config_entries/entry", headers=headers) as r:
            entries = await expect(r, "config entries")
        if not any(e["domain"] == "mqtt" for e in entries):
            async with session.post(base(args) + "/api/config/config_entries/flow", headers=headers,
                                    json={"handler": "mqtt", "show_advanced_options": False}) as r:
                flow = await expect(r, "mqtt flow")
            async with session.post(base(args) + "/api/config/config_entries/flow/" + flow["flow_id"],
                                    headers=headers, json={"broker": "127.0.0.1", "port": args.broker_port}) as r:
                result = await expect(r, "mqtt broker step")
            if result.get("type") != "create_entry":
                fail(f"the MQTT entry was not created: {result}")
        print(json.dumps({"onboarded": True}))


async def wait(args):
    async with aiohttp.ClientSession() as session:
        await wait_api(session, args)
        token = read_token(args)
        headers = {"Authorization": "Bearer " + token}
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            # Ready for the tests once the MQTT entry is loaded (it connects and subscribes to discovery).
            async with session.get(base(args) + "/api/config/config_entries/entry", headers=headers) as r:
                if r.status == 200:
                    entries = await r.json()
                    if any(e["domain"] == "mqtt" and e["state"] == "loaded" for e in entries):
                        print(json.dumps({"ready": True}))
                        return
            await asyncio.sleep(0.2)
        fail("the MQTT entry did not load within 120 s")


async def dump(args):
    token = read_token(args)
    async with aiohttp.ClientSession() as session:
        devices = await ws_call(session, args, token, {"type": "config/device_registry/list"})
        entities = await ws_call(session, args, token, {"type": "config/entity_registry/list"})
        async with session.get(base(args) + "/api/states", headers={"Authorization": "Bearer " + token}) as r:
            states = await expect(r, "states")
    mqtt_devices = [d for d in devices if any(i[0] == "mqtt" for i in d.get("identifiers", []))]
    mqtt_entities = [e for e in entities if e.get("platform") == "mqtt"]
    ids = {e["entity_id"] for e in mqtt_entities}
    print(json.dumps({"devices": mqtt_devices, "entities": mqtt_entities,
                      "states": [s for s in states if s["entity_id"] in ids]}))


async def call(args):
    token = read_token(args)
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{base(args)}/api/services/{args.domain}/{args.service}",
                                headers={"Authorization": "Bearer " + token}, json=json.loads(args.data)) as r:
            print(json.dumps(await expect(r, f"{args.domain}.{args.service}")))


async def login_code(session, args):
    client = base(args) + "/"
    async with session.post(base(args) + "/auth/login_flow", json={
        "client_id": client, "handler": ["homeassistant", None], "redirect_uri": client + "?auth_callback=1"}) as r:
        flow = await expect(r, "login flow")
    async with session.post(base(args) + "/auth/login_flow/" + flow["flow_id"], json={
        "client_id": client, "username": USER, "password": PASSWORD}) as r:
        result = await expect(r, "login")
    return result["result"]


async def auth_code(args):
    async with aiohttp.ClientSession() as session:
        print(json.dumps({"code": await login_code(session, args)}))


async def screenshot(args):
    async with aiohttp.ClientSession() as session:
        code = await login_code(session, args)
    state = base64.b64encode(json.dumps({"hassUrl": base(args), "clientId": base(args) + "/"}).encode()).decode()
    sep = "&" if "?" in args.path else "?"
    url = f"{base(args)}{args.path}{sep}auth_callback=1&code={code}&state={state}"
    browser = shutil.which("chromium") or fail("no chromium on PATH (Debian's package chromium)")
    with tempfile.TemporaryDirectory() as profile:
        result = subprocess.run([
            browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--user-data-dir={profile}",
            f"--window-size={args.width},{args.height}", f"--virtual-time-budget={args.wait_ms}",
            "--force-device-scale-factor=1", f"--screenshot={os.path.abspath(args.out)}", url,
        ], capture_output=True, text=True, timeout=180)
    if result.returncode != 0 or not os.path.exists(args.out):
        fail(f"chromium failed ({result.returncode}): {result.stderr[-2000:]}")
    print(json.dumps({"screenshot": args.out}))


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ["configure", "onboard", "wait", "dump", "call", "auth-code", "screenshot"]:
        p = sub.add_parser(name)
        p.add_argument("config")
        p.add_argument("--port", type=int, required=True)
        if name == "onboard":
            p.add_argument("--broker-port", type=int, required=True)
        if name == "call":
            p.add_argument("domain")
            p.add_argument("service")
            p.add_argument("data")
        if name == "screenshot":
            p.add_argument("path")
            p.add_argument("out")
            p.add_argument("--width", type=int, default=1280)
            p.add_argument("--height", type=int, default=1000)
            p.add_argument("--wait-ms", type=int, default=20000)
    args = parser.parse_args()
    if args.command == "configure":
        configure(args)
        return
    coroutine = {"onboard": onboard, "wait": wait, "dump": dump, "call": call, "auth-code": auth_code,
                 "screenshot": screenshot}[args.command]
    asyncio.run(coroutine(args))


if __name__ == "__main__":
    main()
