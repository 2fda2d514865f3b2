// MQTT module
