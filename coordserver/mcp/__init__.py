"""coord over the Model Context Protocol: the /mcp endpoint (endpoint.py), its tools (tools.py, over the
REST routes: routes.py), resources and wake push (wake_listeners.py) and the triage prompt (prompts.py)."""
