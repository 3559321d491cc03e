"""The three patch algorithms: JSON merge patch, strategic merge patch, JSON patch (RFC 6902)."""

from __future__ import annotations

import copy
from typing import Any

from reconciler.demo.kube_api.errors import ApiError
from reconciler.demo.kube_api.types import Obj

# -------------------------------------------------------------------------------------- patches


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: objects merge recursively, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            result.pop(k, None)
        else:
            result[k] = merge_patch(result.get(k), v)
    return result


# Lists the API merges by key in a strategic merge patch (patchMergeKey in the Go types) — the ones our
# objects carry. Other lists are replaced, as in a merge patch.
_SMP_MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "volumeMounts": "mountPath",
    "ports": "containerPort",
    "conditions": "type",
    "ownerReferences": "uid",
    "imagePullSecrets": "name",
    "addresses": "type",
    "hostAliases": "ip",
}
_SMP_SET_LISTS = {"finalizers"}


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """A strategic merge patch, enough for what clients send: merge-key lists (containers by name,
    conditions by type...), `$patch: replace|delete`, `$deleteFromPrimitiveList`, finalizers as a set.
    Other directives (`$setElementOrder`, `$retainKeys`) are ignored."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    result = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if k.startswith("$deleteFromPrimitiveList/"):
            name = k.split("/", 1)[1]
            if isinstance(result.get(name), list):
                result[name] = [x for x in result[name] if x not in v]
            continue
        if k.startswith("$"):
            continue
        if v is None:
            result.pop(k, None)
        elif isinstance(v, list) and k in _SMP_MERGE_KEYS and isinstance(result.get(k), list):
            result[k] = _smp_list(result[k], v, _SMP_MERGE_KEYS[k])
        elif isinstance(v, list) and k in _SMP_SET_LISTS and isinstance(result.get(k), list):
            result[k] = result[k] + [x for x in v if x not in result[k]]
        elif isinstance(v, dict):
            if v.get("$patch") == "delete":
                result.pop(k, None)
            else:
                result[k] = strategic_merge_patch(result.get(k), v)
        else:
            result[k] = copy.deepcopy(v)
    return result


def _smp_list(current: list[Any], patch: list[Any], key: str) -> list[Any]:
    if any(isinstance(i, dict) and i.get("$patch") == "replace" for i in patch):
        return [copy.deepcopy(i) for i in patch if not (isinstance(i, dict) and "$patch" in i)]
    out = list(current)
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            out.append(copy.deepcopy(item))
            continue
        pos = next((i for i, x in enumerate(out) if isinstance(x, dict) and x.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if pos is not None:
                del out[pos]
        elif pos is None:
            out.append(strategic_merge_patch({}, item))
        else:
            out[pos] = strategic_merge_patch(out[pos], item)
    return out


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ApiError(422, "Invalid", f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _container_at(doc: Any, parts: list[str], path: str) -> Any:
    cur = doc
    for p in parts:
        try:
            cur = cur[int(p)] if isinstance(cur, list) else cur[p]
        except (KeyError, IndexError, ValueError, TypeError):
            raise ApiError(422, "Invalid", f"jsonpatch: path {path!r} does not exist") from None
    return cur


def json_patch(doc: Obj, ops: list[Any]) -> Obj:
    """RFC 6902 JSON patch (add, remove, replace, move, copy, test) applied to a copy of `doc`."""
    doc = copy.deepcopy(doc)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise ApiError(400, "BadRequest", f"invalid JSON patch operation: {op!r}")
        kind, path = op["op"], op["path"]
        parts = _pointer(path)
        if kind in ("move", "copy"):
            src = _pointer(op.get("from", ""))
            value = copy.deepcopy(_container_at(doc, src, op.get("from", "")))
            if kind == "move":
                doc = json_patch(doc, [{"op": "remove", "path": op["from"]}])
            doc = json_patch(doc, [{"op": "add", "path": path, "value": value}])
            continue
        if kind == "test":
            if _container_at(doc, parts, path) != op.get("value"):
                raise ApiError(422, "Invalid", f"jsonpatch: test failed at {path!r}")
            continue
        if not parts:
            if kind in ("add", "replace"):
                doc = copy.deepcopy(op["value"])
                continue
            raise ApiError(422, "Invalid", "jsonpatch: cannot remove the whole document")
        parent = _container_at(doc, parts[:-1], path)
        last = parts[-1]
        if kind == "add":
            if isinstance(parent, list):
                idx = len(parent) if last == "-" else _index(last, len(parent) + 1, path)
                parent.insert(idx, copy.deepcopy(op["value"]))
            elif isinstance(parent, dict):
                parent[last] = copy.deepcopy(op["value"])
            else:
                raise ApiError(422, "Invalid", f"jsonpatch: cannot add at {path!r}")
        elif kind in ("remove", "replace"):
            if isinstance(parent, list):
                idx = _index(last, len(parent), path)
                if kind == "remove":
                    del parent[idx]
                else:
                    parent[idx] = copy.deepcopy(op["value"])
            elif isinstance(parent, dict) and last in parent:
                if kind == "remove":
                    del parent[last]
                else:
                    parent[last] = copy.deepcopy(op["value"])
            else:
                raise ApiError(422, "Invalid", f"jsonpatch: path {path!r} does not exist")
        else:
            raise ApiError(400, "BadRequest", f"unknown JSON patch operation {kind!r}")
    return doc


def _index(text: str, bound: int, path: str) -> int:
    try:
        i = int(text)
    except ValueError:
        raise ApiError(422, "Invalid", f"jsonpatch: bad array index in {path!r}") from None
    if not 0 <= i < bound:
        raise ApiError(422, "Invalid", f"jsonpatch: index out of range in {path!r}")
    return i
