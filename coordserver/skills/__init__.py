"""The skill docs: markdown pages for agents, one file per area, plus the reference monitor `script.py`.

This package is also their index, shared by the REST routes (api/skills.py) and the MCP resources
(mcp/endpoint.py): which pages exist, what each is called, and the overview with its page list.
"""
