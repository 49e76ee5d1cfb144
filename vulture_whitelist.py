"""Names vulture cannot see used: each is called by a framework, not by our code.

`vulture generator vulture_whitelist.py` (tests/test_layers.py) reads this file as code that uses
them. List only what a framework calls or reads, each with a comment naming who; anything else
vulture reports is dead code to delete.
"""

from gpu_execution_pack.api import responses, server
from gpu_execution_pack.dashboards import house
from gpu_execution_pack.demo import exporters

# Starlette reads a Response subclass's media_type to set the Content-Type header.
responses.EncodedJSON.media_type
responses.StreamedJSON.media_type

# logging.config builds the filter from its dotted path in the logging settings server.py hands uvicorn.
server.QuietStreamAborts
# uvicorn imports the app factory by its dotted path (server.FACTORY) in each worker process.
server.app_from_environment

# grafanalib serialises a panel's gridPos attribute, which house.py sets on each panel it lays out.
house.core.Panel.gridPos  # an attrs field of every grafanalib panel

# http.server calls a handler's do_GET and log_message, and reads a ThreadingHTTPServer's daemon_threads.
exporters.ScrapeHandler.do_GET
exporters.ScrapeHandler.log_message
exporters.ExporterServer.daemon_threads

# Starlette's Router reads redirect_slashes on every unmatched path (app.create_app turns it off).
from starlette.routing import Router  # noqa: E402

Router.redirect_slashes
