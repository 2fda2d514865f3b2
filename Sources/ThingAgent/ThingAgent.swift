// ThingAgent module
