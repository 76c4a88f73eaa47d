"""The schemathesis run (conformance.py) over the Swarm operations, called as a user and as the admin, against this
module's own server."""
from tests.server.api.conformance import api_schema, conformance_server, conformance_tests

assert api_schema and conformance_server  # the fixtures these tests use, imported so pytest finds them
globals().update(conformance_tests("swarm"))
