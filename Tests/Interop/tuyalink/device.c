/*
 * A TuyaLink device for thing-agent's tests, built on Tuya's own C device SDK (tuya-connect-kit-for-mqtt-embedded-c,
 * branch iotcore-develop; scripts/interop-tuyalink builds it from the vendor folder, nothing of it is copied here).
 * The SDK speaks TuyaLink: it signs the connection, builds every uplink and parses every downlink. This program only
 * wires it to the test's broker, does what a device's firmware does (answers sets and actions, reports what it
 * applied) and says on stdout what happens.
 *
 * Usage:
 *   tuyalink_device HOST PORT CACERT_FILE DEVICE_ID DEVICE_SECRET [--commands FILE] [--sub ID]... [--no-auto-answer]
 *                   [--timeout-ms N] [--keepalive S] [--log]
 *
 * TLS only (the SDK verifies the server against CACERT_FILE and matches HOST against its CN or DNS names).
 * --timeout-ms (500) is the SDK's timeout for each read, the CONNACK and one turn of its loop: commands run between
 * two turns. --keepalive (60, as Tuya's demos): the SDK reads a closed connection as "no data" and spins a CPU until
 * its keepalive gives up, about twice the keepalive after the drop; it then reconnects by itself, each second.
 * The SDK's limits, refused at the start: the secret needs at least 16 characters, the device id at most 24.
 * Prints one JSON object per line on stdout (SDK logs go to stderr, debug with --log):
 *   {"event":"connected"}            connected, and every downlink topic below subscribed (their SUBACKs arrived)
 *   {"event":"disconnected"}
 *   {"event":"connect_failed","rc":N}  a first connect failed (the SDK does not retry it: this program does, each 1 s)
 *        (reconnects after a drop are the SDK's own, silent until they succeed: "connected" again)
 *   {"event":"message","type":"THING_TYPE_PROPERTY_SET","topic":"tylink/<id>/thing/property/set","deviceId":"<id>",
 *    "msgId":"..."|null,"code":N,"time":N,"data":<the SDK's data string, parsed, else as a string>|null,
 *    "payload":<the raw payload, parsed, else as a string>,"sdkParsed":true}
 *        every downlink, as the SDK hands it over (tuyalink_message_t: "code" 0 and "time" 0 when absent, "time"
 *        read as a 32-bit int). Topics it has no type for are THING_TYPE_UNKNOWN (ext/time/response). On topics it
 *        cannot parse at all (fewer than 4 slashes: ota/issue, ota/get_response) it hands over an empty message
 *        claiming THING_TYPE_MODEL_GET: those are printed with "sdkParsed":false, type THING_TYPE_UNKNOWN and
 *        msgId, code, time and data read from the raw payload by this program (null when absent).
 *   {"event":"invalid_payload","topic":...,"payload":"..."}  a downlink the SDK's JSON check refuses: the SDK
 *        hands over a message whose device_id it already freed, then frees it again (the process aborts)
 *   {"event":"answered","type":"set_response","deviceId":...,"msgId":...,"rc":N}
 *   {"event":"answered","type":"execute_response","deviceId":...,"msgId":...,"rc":N,"data":{"actionCode":..,...}}
 *   {"event":"result","cmd":"report","deviceId":...,"rc":N,"data":{...}}   the report that follows a set
 *   {"event":"result","cmd":"<cmd>","rc":N}   a command's outcome; for the SDK's send functions rc >= 0 is the msgId
 *        the SDK put in the payload (its counter from 0; "report" -> "msgId":"<rc>"), < 0 an error; for publish the
 *        MQTT packet id (0: not sent); 0 for the others
 *   {"event":"subscribed","deviceId":"<sub>"}     a sub-device's downlinks subscribed (SUBACK arrived)
 *   {"event":"error","what":"...",...}
 *   {"event":"quit"}
 *
 * Commands: one JSON object per line appended to the --commands file (read by polling, run in order on the SDK's
 * thread). "deviceId" is optional where shown (a sub-device's id; default the device itself):
 *   {"cmd":"report","data":{...},"deviceId":..}       tuyalink_thing_property_report
 *   {"cmd":"report_ack","data":{...},"deviceId":..}   tuyalink_thing_property_report_with_ack (sys.ack=1)
 *   {"cmd":"event","data":{...},"deviceId":..}        tuyalink_thing_event_trigger
 *   {"cmd":"batch","data":{...}}                      tuyalink_thing_batch_report
 *   {"cmd":"bind","data":[...]}                       tuyalink_subdevice_bind
 *   {"cmd":"login","data":{...}} / logout             tuyalink_subdevice_bind_login / _logout
 *   {"cmd":"topo_add","data":[...]} / topo_delete     tuyalink_subdevice_topo_add / _delete
 *   {"cmd":"topo_get"}                                tuyalink_subdevice_topo_get
 *   {"cmd":"model_get","deviceId":..}                 tuyalink_thing_data_model_get
 *   {"cmd":"desired_get","data":[...],"deviceId":..}  tuyalink_thing_desired_get
 *   {"cmd":"publish","topic":"...","payload":{...}|"text","qos":0}   raw, through the SDK's MQTT layer (OTA, time)
 *   {"cmd":"subscribe_sub","deviceId":"..."}          subscribe a sub-device's downlinks (also after reconnects)
 *   {"cmd":"action_output","actionCode":"...","outputParams":{...}}  what an action answers (default {"result":"ok"})
 *   {"cmd":"auto","sets":true|false,"actions":true|false}   answer sets / actions (default both)
 *   {"cmd":"disconnect"}                              tuya_mqtt_disconnect, and stay offline
 *   {"cmd":"connect"}                                 go online again
 *   {"cmd":"quit"}                                    (also SIGTERM, SIGINT) disconnect and exit 0
 *
 * As firmware does: a property set is answered on set_response with the set's msgId (the SDK cannot carry a code),
 * then the values are reported as applied ({"code":{"value":v,"time":<ms>}}); an action execute is answered on
 * execute_response with its msgId and {"actionCode":..,"outputParams":{...}}.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "cJSON.h"
#include "core_json.h"
#include "log.h"
#include "mqtt_client_interface.h"
#include "tuya_error_code.h"
#include "tuyalink_core.h"

/* Exported by the SDK (src/tuyalink_core.c) without a declaration in its header: its one function that sends any
 * TuyaLink message (the only way to answer a set or an action with the request's msgId), and its table of topic
 * callbacks (the only way to see a downlink's topic and payload: tuyalink_message_t carries neither). */
int tuyalink_message_send(tuya_mqtt_context_t *context, tuyalink_message_t *message);
int tuya_mqtt_subscribe_message_callback_register(tuya_mqtt_context_t *context, const char *topic,
                                                  mqtt_subscribe_message_cb_t cb, void *userdata);
/* Its topic suffixes, indexed by tuyalink_thing_type_t. */
extern const char tylink_suffix_map[][48];

/* The platform-to-device topics (tylink/<id>/<suffix>) a device subscribes itself: Tuya's broker subscribes them
 * for it server-side (the SDK subscribes only tylink/<id>/channel/downlink/auto_subscribe), a plain one does not. */
static const char *const own_downlinks[] = {
    "thing/property/set",
    "thing/action/execute",
    "thing/property/report_response",
    "thing/event/trigger_response",
    "thing/model/get_response",
    "thing/property/desired/get_response",
    "thing/property/desired/delete_response",
    "thing/data/batch_report_response",
    "device/sub/bind_response",
    "device/topo/add_response",
    "device/topo/delete_response",
    "device/topo/get_response",
    "ota/issue",
    "ota/get_response",
    "ext/time/response",
};
/* A sub-device's: what the platform sends on the sub-device's own topics through its gateway. */
static const char *const sub_downlinks[] = {
    "thing/property/set",
    "thing/action/execute",
    "thing/property/report_response",
    "thing/event/trigger_response",
    "thing/model/get_response",
    "thing/property/desired/get_response",
    "thing/property/desired/delete_response",
};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

#define MAX_SUBS 64

static FILE *out;                       /* the JSON lines (a copy of stdout; fd 1 itself goes to stderr) */
static volatile sig_atomic_t stop_requested;
static tuya_mqtt_context_t client;
static const char *device_id;
static char *subs[MAX_SUBS];
static int sub_count;
static int own_registered, sub_registered[MAX_SUBS]; /* topics in the SDK's callback table */
static cJSON *action_outputs;           /* actionCode -> outputParams */
static int answer_sets = 1, answer_actions = 1;
static int offline;                     /* after a disconnect command: the SDK's loop is not run */
static int session_up;                  /* the SDK called on_connected for this connection */
static int subscribed;                  /* this connection's downlinks were subscribed */
static int awaiting;                    /* a SUBACK is awaited (through the SDK's auto_subscribe_id) */
static cJSON *pending;                  /* events printed once it arrives */
static char *raw_topic, *raw_payload;   /* the downlink being handed over (set by on_raw before on_messages) */
static size_t raw_length;
static int raw_invalid;                 /* it failed the SDK's JSON check */

/* ------------------------------------------------------------------------------------------------------------ */

static void emit(cJSON *event)
{
    char *text = cJSON_PrintUnformatted(event);
    if (text) {
        fprintf(out, "%s\n", text);
        fflush(out);
        cJSON_free(text);
    }
    cJSON_Delete(event);
}

static cJSON *event_named(const char *name)
{
    cJSON *event = cJSON_CreateObject();
    cJSON_AddStringToObject(event, "event", name);
    return event;
}

static void emit_error(const char *what, const char *detail)
{
    cJSON *event = event_named("error");
    cJSON_AddStringToObject(event, "what", what);
    if (detail) cJSON_AddStringToObject(event, "detail", detail);
    emit(event);
}

static cJSON *string_or_null(const char *s)
{
    return s ? cJSON_CreateString(s) : cJSON_CreateNull();
}

/* The text parsed as JSON (the whole of it), else the text as a string; null for NULL. */
static cJSON *parsed_or_string(const char *text, size_t length)
{
    if (!text) return cJSON_CreateNull();
    char *copy = strndup(text, length);
    cJSON *value = cJSON_ParseWithOpts(copy, NULL, 1);
    if (!value) value = cJSON_CreateString(copy);
    free(copy);
    return value;
}

static uint64_t now_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (uint64_t)tv.tv_sec * 1000u + (uint64_t)tv.tv_usec / 1000u;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR && !stop_requested) {
    }
}

static void on_signal(int number)
{
    (void)number;
    stop_requested = 1;
}

/* ------------------------------------------------------------------------------------------------------------ */
/* Subscriptions                                                                                                */

static void on_raw(uint16_t msgid, const mqtt_client_message_t *msg, void *userdata);

/* Subscribes tylink/<id>/<suffix> through the SDK's MQTT layer and, the first time, registers the topic in the SDK's
 * callback table (it keeps it across reconnects). Returns the SUBSCRIBE's packet id (0: not sent). */
static uint16_t subscribe_topic(const char *id, const char *suffix, int first_time)
{
    char topic[256];
    snprintf(topic, sizeof topic, "tylink/%s/%s", id, suffix);
    /* Registered while the SDK holds its auto-subscription enabled, the callback subscribes nothing itself. */
    if (first_time) tuya_mqtt_subscribe_message_callback_register(&client, topic, on_raw, NULL);
    uint16_t packet = mqtt_client_subscribe(client.mqtt_client, topic, MQTT_QOS_1);
    if (packet == 0) emit_error("subscribe failed", topic);
    return packet;
}

static uint16_t subscribe_device(const char *id, const char *const *suffixes, size_t count, int *registered)
{
    uint16_t last = 0;
    int first_time = !*registered;
    *registered = 1;
    for (size_t i = 0; i < count; i++) {
        uint16_t packet = subscribe_topic(id, suffixes[i], first_time);
        if (packet) last = packet;
    }
    return last;
}

/* The SUBACKs come in order: once the last one arrived, every topic before it is subscribed. The SDK reports only
 * the SUBACK whose packet id is its context's auto_subscribe_id (it then calls on_connected again): it is handed
 * the last packet id. */
static void await_suback(uint16_t packet)
{
    if (packet == 0) return;
    client.auto_subscribe_id = packet;
    awaiting = 1;
}

static void flush_pending(void)
{
    cJSON *event;
    while ((event = cJSON_DetachItemFromArray(pending, 0)) != NULL) emit(event);
}

static int is_sub(const char *id)
{
    for (int i = 0; i < sub_count; i++)
        if (strcmp(subs[i], id) == 0) return 1;
    return 0;
}

static int add_sub(const char *id)
{
    if (is_sub(id)) return 1;
    if (sub_count == MAX_SUBS) return 0;
    subs[sub_count++] = strdup(id);
    return 1;
}

/* ------------------------------------------------------------------------------------------------------------ */
/* The SDK's callbacks                                                                                          */

static void on_connected(tuya_mqtt_context_t *context, void *user_data)
{
    (void)context;
    (void)user_data;
    if (!subscribed) {
        /* First call for this connection: the SDK's auto_subscribe SUBACK arrived. */
        session_up = 1;
        subscribed = 1;
        uint16_t last = subscribe_device(device_id, own_downlinks, COUNT(own_downlinks), &own_registered);
        for (int i = 0; i < sub_count; i++) {
            uint16_t packet = subscribe_device(subs[i], sub_downlinks, COUNT(sub_downlinks), &sub_registered[i]);
            if (packet) last = packet;
        }
        cJSON_InsertItemInArray(pending, 0, event_named("connected"));
        await_suback(last);
        if (!awaiting) flush_pending();
    } else if (awaiting) {
        /* Called again: the awaited SUBACK arrived. */
        awaiting = 0;
        flush_pending();
    }
}

static void on_disconnect(tuya_mqtt_context_t *context, void *user_data)
{
    (void)context;
    (void)user_data;
    subscribed = 0;
    awaiting = 0;
    if (session_up) {
        session_up = 0;
        emit(event_named("disconnected"));
    }
}

static void clear_raw(void)
{
    free(raw_topic);
    free(raw_payload);
    raw_topic = raw_payload = NULL;
    raw_invalid = 0;
}

static void on_raw(uint16_t msgid, const mqtt_client_message_t *msg, void *userdata)
{
    (void)msgid;
    (void)userdata;
    clear_raw();
    raw_topic = strdup(msg->topic);
    raw_length = msg->length;
    raw_payload = malloc(msg->length + 1);
    memcpy(raw_payload, msg->payload, msg->length);
    raw_payload[msg->length] = '\0';
    raw_invalid = JSON_Validate(raw_payload, raw_length) != JSONSuccess;
    if (raw_invalid) {
        cJSON *event = event_named("invalid_payload");
        cJSON_AddStringToObject(event, "topic", msg->topic);
        cJSON_AddStringToObject(event, "payload", raw_payload);
        emit(event);
    }
}

static void answer_set(const tuyalink_message_t *msg)
{
    tuyalink_message_t response = {
        .type = THING_TYPE_PROPERTY_SET_RSP, .device_id = msg->device_id, .msgid = msg->msgid};
    int rc = tuyalink_message_send(&client, &response);
    cJSON *event = event_named("answered");
    cJSON_AddStringToObject(event, "type", "set_response");
    cJSON_AddItemToObject(event, "deviceId", string_or_null(msg->device_id));
    cJSON_AddItemToObject(event, "msgId", string_or_null(msg->msgid));
    cJSON_AddNumberToObject(event, "rc", rc);
    emit(event);

    /* Then the values, as applied. */
    cJSON *values = msg->data_string ? cJSON_Parse(msg->data_string) : NULL;
    if (!cJSON_IsObject(values)) {
        cJSON_Delete(values);
        return;
    }
    cJSON *report = cJSON_CreateObject();
    double time = (double)now_ms();
    cJSON *item;
    cJSON_ArrayForEach(item, values) {
        cJSON *entry = cJSON_CreateObject();
        cJSON_AddItemToObject(entry, "value", cJSON_Duplicate(item, 1));
        cJSON_AddNumberToObject(entry, "time", time);
        cJSON_AddItemToObject(report, item->string, entry);
    }
    char *text = cJSON_PrintUnformatted(report);
    rc = tuyalink_thing_property_report(&client, msg->device_id, text);
    event = event_named("result");
    cJSON_AddStringToObject(event, "cmd", "report");
    cJSON_AddItemToObject(event, "deviceId", string_or_null(msg->device_id));
    cJSON_AddNumberToObject(event, "rc", rc);
    cJSON_AddItemToObject(event, "data", report);
    emit(event);
    cJSON_free(text);
    cJSON_Delete(values);
}

static void answer_action(const tuyalink_message_t *msg)
{
    cJSON *request = msg->data_string ? cJSON_Parse(msg->data_string) : NULL;
    cJSON *code = cJSON_GetObjectItemCaseSensitive(request, "actionCode");
    const char *action = cJSON_IsString(code) ? code->valuestring : "";
    cJSON *configured = cJSON_GetObjectItemCaseSensitive(action_outputs, action);
    cJSON *data = cJSON_CreateObject();
    cJSON_AddStringToObject(data, "actionCode", action);
    if (configured) {
        cJSON_AddItemToObject(data, "outputParams", cJSON_Duplicate(configured, 1));
    } else {
        cJSON *output = cJSON_AddObjectToObject(data, "outputParams");
        cJSON_AddStringToObject(output, "result", "ok");
    }
    char *text = cJSON_PrintUnformatted(data);
    tuyalink_message_t response = {
        .type = THING_TYPE_ACTION_EXECUTE_RSP, .device_id = msg->device_id, .msgid = msg->msgid, .data_string = text};
    int rc = tuyalink_message_send(&client, &response);
    cJSON *event = event_named("answered");
    cJSON_AddStringToObject(event, "type", "execute_response");
    cJSON_AddItemToObject(event, "deviceId", string_or_null(msg->device_id));
    cJSON_AddItemToObject(event, "msgId", string_or_null(msg->msgid));
    cJSON_AddNumberToObject(event, "rc", rc);
    cJSON_AddItemToObject(event, "data", data);
    emit(event);
    cJSON_free(text);
    cJSON_Delete(request);
}

/* tylink/<id>/... -> <id> (malloc'd), NULL when the topic is not of that shape. */
static char *topic_device(const char *topic)
{
    if (!topic || strncmp(topic, "tylink/", 7) != 0) return NULL;
    const char *start = topic + 7, *end = strchr(start, '/');
    return end ? strndup(start, (size_t)(end - start)) : NULL;
}

static void on_messages(tuya_mqtt_context_t *context, void *user_data, const tuyalink_message_t *msg)
{
    (void)context;
    (void)user_data;
    if (raw_invalid) {
        /* The SDK freed the message's device_id without clearing it (and frees it again after this call): nothing
         * in msg can be read. */
        clear_raw();
        return;
    }
    cJSON *event = event_named("message");
    /* The SDK leaves device_id NULL when it could not parse the topic (it hands over a zeroed message then). */
    int sdk_parsed = msg->device_id != NULL;
    if (sdk_parsed) {
        const char *type = THING_TYPE_ID2STR(msg->type);
        cJSON_AddStringToObject(event, "type", strcmp(type, "Unknown") == 0 ? "THING_TYPE_UNKNOWN" : type);
        if (raw_topic) {
            cJSON_AddStringToObject(event, "topic", raw_topic);
        } else if (msg->type < THING_TYPE_MAX) {
            char topic[256];
            snprintf(topic, sizeof topic, "tylink/%s/%s", msg->device_id, tylink_suffix_map[msg->type]);
            cJSON_AddStringToObject(event, "topic", topic);
        } else {
            cJSON_AddNullToObject(event, "topic");
        }
        cJSON_AddStringToObject(event, "deviceId", msg->device_id);
        cJSON_AddItemToObject(event, "msgId", string_or_null(msg->msgid));
        cJSON_AddNumberToObject(event, "code", msg->code);
        cJSON_AddNumberToObject(event, "time", (double)msg->time);
        cJSON_AddItemToObject(event, "data",
                              parsed_or_string(msg->data_string, msg->data_string ? strlen(msg->data_string) : 0));
    } else {
        cJSON_AddStringToObject(event, "type", "THING_TYPE_UNKNOWN");
        cJSON_AddItemToObject(event, "topic", string_or_null(raw_topic));
        char *id = topic_device(raw_topic);
        cJSON_AddItemToObject(event, "deviceId", string_or_null(id));
        free(id);
        cJSON *payload = raw_payload ? cJSON_ParseWithOpts(raw_payload, NULL, 1) : NULL;
        cJSON *field = cJSON_GetObjectItemCaseSensitive(payload, "msgId");
        cJSON_AddItemToObject(event, "msgId", field ? cJSON_Duplicate(field, 1) : cJSON_CreateNull());
        field = cJSON_GetObjectItemCaseSensitive(payload, "code");
        cJSON_AddItemToObject(event, "code", field ? cJSON_Duplicate(field, 1) : cJSON_CreateNull());
        field = cJSON_GetObjectItemCaseSensitive(payload, "time");
        cJSON_AddItemToObject(event, "time", field ? cJSON_Duplicate(field, 1) : cJSON_CreateNull());
        field = cJSON_GetObjectItemCaseSensitive(payload, "data");
        cJSON_AddItemToObject(event, "data", field ? cJSON_Duplicate(field, 1) : cJSON_CreateNull());
        cJSON_Delete(payload);
    }
    cJSON_AddItemToObject(event, "payload", parsed_or_string(raw_payload, raw_length));
    cJSON_AddBoolToObject(event, "sdkParsed", sdk_parsed);
    emit(event);
    clear_raw();

    if (!sdk_parsed) return;
    if (msg->type == THING_TYPE_PROPERTY_SET && answer_sets) answer_set(msg);
    if (msg->type == THING_TYPE_ACTION_EXECUTE && answer_actions) answer_action(msg);
}

/* ------------------------------------------------------------------------------------------------------------ */
/* Commands                                                                                                     */

static void emit_result(const char *cmd, long rc)
{
    cJSON *event = event_named("result");
    cJSON_AddStringToObject(event, "cmd", cmd);
    cJSON_AddNumberToObject(event, "rc", (double)rc);
    emit(event);
}

static const char *optional_string(cJSON *command, const char *key)
{
    cJSON *item = cJSON_GetObjectItemCaseSensitive(command, key);
    return cJSON_IsString(item) ? item->valuestring : NULL;
}

static int connect_first(void);

static void run_command(cJSON *command, const char *line)
{
    const char *cmd = optional_string(command, "cmd");
    if (!cmd) {
        emit_error("no cmd", line);
        return;
    }
    const char *id = optional_string(command, "deviceId");
    cJSON *data = cJSON_GetObjectItemCaseSensitive(command, "data");
    char *text = data ? cJSON_PrintUnformatted(data) : NULL;
    int needs_data = 1;
    long rc = 0;

    if (strcmp(cmd, "report") == 0 && text) {
        rc = tuyalink_thing_property_report(&client, id, text);
    } else if (strcmp(cmd, "report_ack") == 0 && text) {
        rc = tuyalink_thing_property_report_with_ack(&client, id, text);
    } else if (strcmp(cmd, "event") == 0 && text) {
        rc = tuyalink_thing_event_trigger(&client, id, text);
    } else if (strcmp(cmd, "batch") == 0 && text) {
        rc = tuyalink_thing_batch_report(&client, text);
    } else if (strcmp(cmd, "bind") == 0 && text) {
        rc = tuyalink_subdevice_bind(&client, text);
    } else if (strcmp(cmd, "login") == 0 && text) {
        rc = tuyalink_subdevice_bind_login(&client, text);
    } else if (strcmp(cmd, "logout") == 0 && text) {
        rc = tuyalink_subdevice_bind_logout(&client, text);
    } else if (strcmp(cmd, "topo_add") == 0 && text) {
        rc = tuyalink_subdevice_topo_add(&client, text);
    } else if (strcmp(cmd, "topo_delete") == 0 && text) {
        rc = tuyalink_subdevice_topo_delete(&client, text);
    } else if (strcmp(cmd, "desired_get") == 0 && text) {
        rc = tuyalink_thing_desired_get(&client, id, text);
    } else {
        needs_data = 0;
    }
    if (needs_data) {
        emit_result(cmd, rc);
        cJSON_free(text);
        return;
    }
    cJSON_free(text);

    if (strcmp(cmd, "topo_get") == 0) {
        emit_result(cmd, tuyalink_subdevice_topo_get(&client));
    } else if (strcmp(cmd, "model_get") == 0) {
        emit_result(cmd, tuyalink_thing_data_model_get(&client, id));
    } else if (strcmp(cmd, "publish") == 0) {
        const char *topic = optional_string(command, "topic");
        cJSON *payload = cJSON_GetObjectItemCaseSensitive(command, "payload");
        cJSON *qos = cJSON_GetObjectItemCaseSensitive(command, "qos");
        if (!topic || !payload) {
            emit_error("publish needs topic and payload", line);
            return;
        }
        char *body = cJSON_IsString(payload) ? strdup(payload->valuestring) : cJSON_PrintUnformatted(payload);
        uint16_t packet = mqtt_client_publish(client.mqtt_client, topic, (const uint8_t *)body, strlen(body),
                                              cJSON_IsNumber(qos) ? (uint8_t)qos->valueint : MQTT_QOS_0);
        free(body);
        emit_result(cmd, packet);
    } else if (strcmp(cmd, "subscribe_sub") == 0) {
        if (!id) {
            emit_error("subscribe_sub needs deviceId", line);
            return;
        }
        if (!add_sub(id)) {
            emit_error("too many sub-devices", id);
            return;
        }
        cJSON *event = event_named("subscribed");
        cJSON_AddStringToObject(event, "deviceId", id);
        cJSON_AddItemToArray(pending, event); /* when disconnected: printed after the next connect's SUBACKs */
        if (subscribed) {
            int i = 0;
            while (strcmp(subs[i], id) != 0) i++;
            await_suback(subscribe_device(id, sub_downlinks, COUNT(sub_downlinks), &sub_registered[i]));
            if (!awaiting) flush_pending();
        }
    } else if (strcmp(cmd, "action_output") == 0) {
        const char *action = optional_string(command, "actionCode");
        cJSON *output = cJSON_GetObjectItemCaseSensitive(command, "outputParams");
        if (!action || !output) {
            emit_error("action_output needs actionCode and outputParams", line);
            return;
        }
        cJSON_DeleteItemFromObjectCaseSensitive(action_outputs, action);
        cJSON_AddItemToObject(action_outputs, action, cJSON_Duplicate(output, 1));
        emit_result(cmd, 0);
    } else if (strcmp(cmd, "auto") == 0) {
        cJSON *sets = cJSON_GetObjectItemCaseSensitive(command, "sets");
        cJSON *actions = cJSON_GetObjectItemCaseSensitive(command, "actions");
        if (cJSON_IsBool(sets)) answer_sets = cJSON_IsTrue(sets);
        if (cJSON_IsBool(actions)) answer_actions = cJSON_IsTrue(actions);
        emit_result(cmd, 0);
    } else if (strcmp(cmd, "disconnect") == 0) {
        /* tuya_mqtt_disconnect marks the disconnect manual only after its own callback set the SDK to reconnect:
         * left to its loop, the SDK would connect again at once. Not running the loop keeps it offline. */
        rc = tuya_mqtt_disconnect(&client);
        offline = 1;
        emit_result(cmd, rc);
    } else if (strcmp(cmd, "connect") == 0) {
        if (offline) {
            offline = 0;
            rc = connect_first();
        }
        emit_result(cmd, rc);
    } else if (strcmp(cmd, "quit") == 0) {
        stop_requested = 1;
    } else {
        emit_error("unknown or incomplete command", line);
    }
}

static long commands_offset;

/* Runs the complete lines appended to the commands file since the last call. */
static void poll_commands(const char *path)
{
    if (!path) return;
    FILE *file = fopen(path, "r");
    if (!file) return;
    if (fseek(file, commands_offset, SEEK_SET) != 0) {
        fclose(file);
        return;
    }
    char *line = NULL;
    size_t capacity = 0;
    ssize_t length;
    while (!stop_requested && (length = getline(&line, &capacity, file)) > 0) {
        if (line[length - 1] != '\n') break; /* not complete yet: read again next time */
        commands_offset += length;
        line[length - 1] = '\0';
        if (line[0] == '\0') continue;
        cJSON *command = cJSON_Parse(line);
        if (!command) {
            emit_error("bad json", line);
            continue;
        }
        run_command(command, line);
        cJSON_Delete(command);
    }
    free(line);
    fclose(file);
}

/* ------------------------------------------------------------------------------------------------------------ */

/* The SDK does not retry a failed first connect (tuya_mqtt_connect returns and its loop stays idle): retried here,
 * each second, until it succeeds or the program is stopped. */
static int connect_first(void)
{
    int rc;
    while ((rc = tuya_mqtt_connect(&client)) != OPRT_OK && !stop_requested) {
        cJSON *event = event_named("connect_failed");
        cJSON_AddNumberToObject(event, "rc", rc);
        emit(event);
        sleep_ms(1000);
    }
    return rc;
}

static char *read_file(const char *path, size_t *length)
{
    FILE *file = fopen(path, "rb");
    if (!file) return NULL;
    size_t size = 0, capacity = 4096;
    char *buffer = malloc(capacity);
    size_t n;
    while ((n = fread(buffer + size, 1, capacity - size - 1, file)) > 0) {
        size += n;
        if (capacity - size < 2) buffer = realloc(buffer, capacity *= 2);
    }
    fclose(file);
    buffer[size] = '\0';
    *length = size;
    return buffer;
}

static void usage(void)
{
    fprintf(stderr, "usage: tuyalink_device HOST PORT CACERT_FILE DEVICE_ID DEVICE_SECRET [--commands FILE] "
                    "[--sub ID]... [--no-auto-answer] [--timeout-ms N] [--keepalive S] [--log]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    /* The JSON lines go to a copy of stdout; stdout itself to stderr, with the SDK's logs (it logs to stderr, and
     * a port or a future version printing to stdout would break the lines). */
    int json_fd = dup(1);
    out = fdopen(json_fd, "w");
    dup2(2, 1);

    if (argc < 6) usage();
    const char *host = argv[1];
    long port = strtol(argv[2], NULL, 10);
    const char *cacert_file = argv[3];
    device_id = argv[4];
    const char *secret = argv[5];
    const char *commands = NULL;
    long timeout_ms = 500, keepalive = 60;
    int log_level = LOG_INFO;
    pending = cJSON_CreateArray();
    action_outputs = cJSON_CreateObject();
    for (int i = 6; i < argc; i++) {
        if (strcmp(argv[i], "--commands") == 0 && i + 1 < argc) {
            commands = argv[++i];
        } else if (strcmp(argv[i], "--sub") == 0 && i + 1 < argc) {
            if (!add_sub(argv[++i])) usage();
        } else if (strcmp(argv[i], "--timeout-ms") == 0 && i + 1 < argc) {
            timeout_ms = strtol(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--keepalive") == 0 && i + 1 < argc) {
            keepalive = strtol(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--no-auto-answer") == 0) {
            answer_sets = answer_actions = 0;
        } else if (strcmp(argv[i], "--log") == 0) {
            log_level = LOG_DEBUG;
        } else {
            usage();
        }
    }
    if (port <= 0 || port > 65535 || timeout_ms <= 0 || keepalive < 0 || keepalive > 65535) usage();
    /* Limits of the SDK, refused here rather than met as memory errors: it keys its HMAC with the secret's first 16
     * bytes whatever its length, and writes tylink/<id>/channel/downlink/auto_subscribe into 64 bytes. */
    if (strlen(secret) < 16) {
        fprintf(stderr, "tuyalink_device: the device secret must have at least 16 characters (the SDK reads 16)\n");
        return 2;
    }
    if (strlen(device_id) > 24) {
        fprintf(stderr, "tuyalink_device: the device id must have at most 24 characters (the SDK's topic buffer)\n");
        return 2;
    }
    size_t cacert_length = 0;
    char *cacert = read_file(cacert_file, &cacert_length);
    if (!cacert) {
        fprintf(stderr, "tuyalink_device: cannot read %s: %s\n", cacert_file, strerror(errno));
        return 2;
    }

    /* The SDK's Linux port writes to sockets without MSG_NOSIGNAL: a broker closing the connection would kill it. */
    signal(SIGPIPE, SIG_IGN);
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_signal;
    sigaction(SIGTERM, &action, NULL);
    sigaction(SIGINT, &action, NULL);
    log_set_level(log_level);

    int rc = tuya_mqtt_init(&client, &(const tuya_mqtt_config_t){
        .host = host,
        .port = (uint16_t)port,
        .cacert = (const uint8_t *)cacert,
        .cacert_len = cacert_length + 1, /* mbedTLS wants a PEM's terminating NUL counted */
        .device_id = device_id,
        .device_secret = secret,
        .keepalive = (uint32_t)keepalive,
        .timeout_ms = (uint32_t)timeout_ms,
        .on_connected = on_connected,
        .on_disconnect = on_disconnect,
        .on_messages = on_messages,
    });
    if (rc != OPRT_OK) {
        fprintf(stderr, "tuyalink_device: tuya_mqtt_init failed: %d\n", rc);
        return 1;
    }
    connect_first();
    while (!stop_requested) {
        if (offline) {
            sleep_ms(50);
        } else {
            /* Runs the SDK for up to timeout_ms (reads, keepalive, reconnects); commands run between two turns. */
            tuya_mqtt_loop(&client);
        }
        poll_commands(commands);
    }
    if (session_up) tuya_mqtt_disconnect(&client);
    emit(event_named("quit"));
    return 0;
}
