"""toolbound as a service: an HTTP API, a web console and the CLI's ``serve`` (R18).

Install with ``pip install 'toolbound[service]'``. :func:`~toolbound.service.api.create_app`
builds the Starlette application from a :class:`~toolbound.service.core.Service`.
"""
