// The lower layers (protocol, model, cache, events, thing models, requests, support) are a module of their own,
// ThingAgentCore, which cannot import what sits above it; `import ThingAgent` gives a user both.
@_exported import ThingAgentCore
