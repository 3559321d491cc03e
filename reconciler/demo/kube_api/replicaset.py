"""The fake API's ReplicaSet controller, reduced to what a drain meets: a pod that is evicted or
deleted is replaced at once by a new pod of another name (`<replicaset>-xxxxx`), pending, on no node.

Off unless a test turns it on (`FakeKubeAPI.run_controllers`). It only ever creates: a ReplicaSet
with fewer active pods (not being deleted, not finished) than `spec.replicas` gets the missing ones
from its template, whenever one of its pods or the ReplicaSet itself is written — so put a
ReplicaSet's pods before the ReplicaSet, or they are created twice. It never deletes surplus pods,
and there is no scheduler: a replacement stays Pending until a test binds it.
"""

from __future__ import annotations

import copy

from reconciler.demo.kube_api.store_view import Store, controller_of, terminating
from reconciler.demo.kube_api.types import Obj

_FINISHED = ("Succeeded", "Failed")


class ReplicaSetController:
    def changed(self, store: Store, kind: str, namespace: str, name: str, owner: Obj | None) -> None:
        """React to a write: a pod (its controller `owner`, read before the write) or a ReplicaSet."""
        if kind == "ReplicaSet":
            replicaset = store.get("ReplicaSet", namespace, name)
        elif kind == "Pod" and owner is not None and owner.get("kind") == "ReplicaSet":
            replicaset = store.get("ReplicaSet", namespace, str(owner.get("name") or ""))
            if replicaset is not None and replicaset["metadata"].get("uid") != owner.get("uid"):
                replicaset = None  # another ReplicaSet of that name: not this pod's
        else:
            return
        if replicaset is not None and not terminating(replicaset):
            self.sync(store, replicaset)

    def sync(self, store: Store, replicaset: Obj) -> None:
        meta = replicaset["metadata"]
        namespace, uid = meta.get("namespace", ""), meta.get("uid")
        active = [
            p
            for p in store.list("Pod", namespace)
            if (controller_of(p) or {}).get("uid") == uid
            and not terminating(p)
            and (p.get("status") or {}).get("phase") not in _FINISHED
        ]
        replicas = (replicaset.get("spec") or {}).get("replicas")
        missing = (1 if replicas is None else int(replicas)) - len(active)
        for _ in range(max(0, missing)):
            store.create("Pod", _pod_from_template(replicaset))


def _pod_from_template(replicaset: Obj) -> Obj:
    meta = replicaset["metadata"]
    template = (replicaset.get("spec") or {}).get("template") or {}
    template_meta = template.get("metadata") or {}
    pod_meta: Obj = {
        "generateName": f"{meta['name']}-",
        "namespace": meta.get("namespace", ""),
        "labels": dict(template_meta.get("labels") or {}),
        "ownerReferences": [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": meta["name"],
                "uid": meta.get("uid"),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    if template_meta.get("annotations"):
        pod_meta["annotations"] = dict(template_meta["annotations"])
    spec = copy.deepcopy(template.get("spec") or {})
    spec.pop("nodeName", None)
    return {"metadata": pod_meta, "spec": spec, "status": {"phase": "Pending"}}
