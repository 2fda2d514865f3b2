#ifndef THING_AGENT_CMOSQUITTO_SHIM_H
#define THING_AGENT_CMOSQUITTO_SHIM_H
#include <mosquitto.h>
#include <mqtt_protocol.h>
#endif
