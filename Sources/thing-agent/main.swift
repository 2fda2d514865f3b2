import ThingAgent
print("thing-agent")
