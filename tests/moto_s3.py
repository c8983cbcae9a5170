"""moto's S3 server, as ``moto_server`` starts it, for the tests that need many requests (a
fleet of thousands of runs): moto lists its own package folder (a ``stat`` per service) twice
for every request to find the service a host names; the folders do not change while it runs,
so the list is taken once. Nothing else of moto is changed."""

from __future__ import annotations

from moto import backends
from moto.server import main

_MODULES = tuple(backends.list_of_moto_modules())
backends.list_of_moto_modules = lambda: iter(_MODULES)  # type: ignore[assignment]

if __name__ == "__main__":
    main()
