"""A fake Kubernetes API server over real HTTP, for the demo, the tests and the benchmarks (DESIGN §6).

It ships in the package so `asg-reconciler demo` can run the whole story, drains included, on a
machine with no cluster; nothing else in the product imports it.

No kube-apiserver can run here, so the official `kubernetes` client and `kubectl` talk to this
instead. It keeps what our code relies on faithful to the real server: typed lists with
`limit`/`continue` paging (every page at the first page's resourceVersion, one snapshot, as etcd
serves it; a token older than a compaction, `compact()`, is 410 Expired), label and field
selectors, a global resourceVersion with 409 on stale updates, merge / strategic-merge / JSON
patches, watches, the eviction subresource with PDB checks (429), `Status` error bodies, and enough
discovery for `kubectl get`.

Built for speed because a benchmark lists 150,000 ~4 KB pods through it: each object is stored once
as serialized bytes (without kind/apiVersion, as list items are printed) plus the few indexed
fields selectors need; list pages are joined bytes over per-kind sorted keys, and a continue token
is the last key served and the list's revision (a later page merges in, from the watch log, the
earlier state of what changed since). Dicts are parsed again only for writes.

Tests use `FakeKubeAPI` in-process (see tests/support/kube.py); benchmarks run it in its own
process: `python -m reconciler.demo.kube_api --objects FILE.jsonl --port-file PATH`, or
`serve_in_subprocess(path)`.

The package, bottom up (each module imports only those before it; .importlinter holds it to that):
types, resources (the resource table), errors, selectors, validation (what a real server refuses),
store_view (the narrow view of the store that eviction and the controllers act through), disruption
(the PDB controller), replicaset (the ReplicaSet controller), eviction (the subresource), storage
(entries, the event log, pages), patches, wire (requests, replies, discovery, tokens), core (state,
the Python face for tests, the store's internals), http (the server; it names FakeKubeAPI only as a
type), writes and watches (the verbs), api (FakeKubeAPI: request handling and lists), process
(`python -m reconciler.demo.kube_api`).
"""

from reconciler.demo.kube_api.api import FakeKubeAPI
from reconciler.demo.kube_api.errors import ApiError, status_body
from reconciler.demo.kube_api.process import serve_in_subprocess
from reconciler.demo.kube_api.resources import Resource, resource_for
from reconciler.demo.kube_api.types import DROP, Fault, FaultResult, Obj, Query
from reconciler.demo.kube_api.wire import RecordedRequest

__all__ = [
    "DROP",
    "ApiError",
    "FakeKubeAPI",
    "Fault",
    "FaultResult",
    "Obj",
    "Query",
    "RecordedRequest",
    "Resource",
    "resource_for",
    "serve_in_subprocess",
    "status_body",
]
