"""Put the RO-Crate 1.1 JSON-LD context into rocrate-validator's HTTP cache, so that
`rocrate-validator validate --offline` needs no network (w3id.org is not reachable from every
test machine). The context is the copy ro-crate-py (PyPI `rocrate` 0.10-0.15, CC0) ships as
`rocrate/data/ro-crate.jsonld`; it is served to the cache by a local adapter, with no request
leaving the machine.

usage: python rocrate-seed-cache.py [CACHE_BASE]   (default: the validator's own,
       ~/.cache/rocrate-validator/http_cache)
"""
import io
import json
import sys
from importlib import resources
from pathlib import Path

from requests.adapters import HTTPAdapter
from requests_cache import CachedSession
from urllib3.response import HTTPResponse

URL = "https://w3id.org/ro/crate/1.1/context"

body = resources.files("rocrate").joinpath("data/ro-crate.jsonld").read_bytes()
if json.loads(body).get("@id") != URL:
    sys.exit(f"rocrate's ro-crate.jsonld is not the RO-Crate 1.1 context (install rocrate==0.15.0)")


class Local(HTTPAdapter):
    def send(self, request, **kwargs):
        ok = request.url == URL
        raw = HTTPResponse(body=io.BytesIO(body if ok else b""), status=200 if ok else 404,
                           headers={"Content-Type": "application/ld+json"},
                           preload_content=False, request_url=request.url)
        return self.build_response(request, raw)


base = sys.argv[1] if len(sys.argv) > 1 else str(Path.home() / ".cache/rocrate-validator/http_cache")
Path(base).parent.mkdir(parents=True, exist_ok=True)
session = CachedSession(cache_name=base, backend="sqlite", expire_after=-1,
                        allowable_methods=("GET",), allowable_codes=(200,))
session.mount("https://", Local())
session.mount("http://", Local())
r = session.get(URL, headers={"Accept": "application/ld+json, application/json"})
if r.status_code != 200 or not session.cache.contains(url=URL):
    sys.exit(f"could not cache {URL}")
