"""The kill switch: the ConfigMap `asg-reconciler-control` (DESIGN §5.1 `suspend|resume`).

A person stops every AWS and drain write of apply at once, without a Git commit (which might be the
very thing that is broken) and without apply's credentials: `kubectl` or `asg-reconciler suspend`
writes the ConfigMap, apply reads it after taking its Lease and before every change. Keys:

  suspend: "true"                    the whole cluster       reason, by, at: who and why
  suspend.<group>: "true"            one node group          reason.<group>, by.<group>, at.<group>
  suspend-escaped.<escaped>: "true"  a group whose name is no ConfigMap key (`team a/web`)
  suspend-sha256.<sha256>: "true"    a name too long even escaped; name-sha256.<sha256> holds it

A ConfigMap key must match `[-._a-zA-Z0-9]+` and be at most 253 characters, or the API server
refuses the whole write (422) — the switch would fail in the incident it exists for. A name that is
already such a key (and short enough) is written as it is; any other is escaped byte by byte (its
UTF-8 bytes other than letters, digits, `-` and `.` as `_` and two hex digits: `team a/web` ->
`team_20a_2Fweb`); one that would still be too long is named by the SHA-256 of its UTF-8 bytes.

Typed by hand in an incident, the switch fails safe: any value but absent, empty or "false"
(ignoring case and surrounding blanks) is on; key words in another case (`Suspend`) and group names
in another case (`suspend.General` for `general`) count. Each of these, a key we do not know
(`suspnd`) and a group no node group of the cluster is called, is a warning that names it (apply's
report, `run`'s log, `status`). The plan stage keeps planning: it writes only Git, and a plan made
while suspended is applied once resumed.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import urllib3
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from reconciler.config.settings import Config
from reconciler.domain.errors import RefusalKind, RefusedError, UserError
from reconciler.domain.lease_names import leader_lease_name
from reconciler.kube.client import SERVICE_ACCOUNT_NAMESPACE, run_namespace
from reconciler.kube.live import api_error, unreachable
from reconciler.kube.retry import with_retries

CONTROL_CONFIGMAP = "asg-reconciler-control"
_MERGE_PATCH = "application/merge-patch+json"

CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]+")  # what the API server accepts as a data key
MAX_KEY = 253
WORDS = ("suspend", "reason", "by", "at")
PLAIN, ESCAPED, HASHED = "", "-escaped", "-sha256"
_LONGEST = max(WORDS, key=len)  # every word of a group must fit in MAX_KEY
_NAME = "name"  # name-sha256.<digest>: the name a hashed key stands for
_KEPT = frozenset(b"-.abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_ESCAPE = re.compile(r"_([0-9A-Fa-f]{2})")
_OFF = ("", "false")


class SuspendedError(RefusedError):
    """The kill switch is on: nothing may be written, not even a taint given back."""

    kind: RefusalKind = "suspended"


# ------------------------------------------------------------------------------ keys for any name


def _escape(name: str) -> str:
    return "".join(chr(b) if b in _KEPT else f"_{b:02X}" for b in name.encode())


def _unescape(text: str) -> str | None:
    """The name an escaped key stands for; None when it is not a valid escape."""
    if "_" in _ESCAPE.sub("", text):
        return None
    try:
        return bytes(_unescape_bytes(text)).decode()
    except UnicodeDecodeError:
        return None


def _unescape_bytes(text: str) -> list[int]:
    out: list[int] = []
    at = 0
    while at < len(text):
        if text[at] == "_":
            out.append(int(text[at + 1 : at + 3], 16))
            at += 3
        else:
            out.extend(text[at].encode())
            at += 1
    return out


def _digest(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()


def _form(group: str) -> tuple[str, str]:
    """The form and the part after the dot of the keys that name `group`."""
    if CONFIG_KEY.fullmatch(group) and len(f"{_LONGEST}.{group}") <= MAX_KEY:
        return PLAIN, group
    escaped = _escape(group)
    if len(f"{_LONGEST}{ESCAPED}.{escaped}") <= MAX_KEY:
        return ESCAPED, escaped
    return HASHED, _digest(group)


def switch_key(word: str, group: str | None) -> str:
    """The key `word` (suspend, reason, by, at) has for `group` (None: the whole cluster)."""
    if group is None:
        return word
    form, rest = _form(group)
    return f"{word}{form}.{rest}"


def group_keys(group: str) -> dict[str, str]:
    """Every key `suspend` writes for `group`: word -> key (plus the name, for a hashed key)."""
    keys = {word: switch_key(word, group) for word in WORDS}
    form, rest = _form(group)
    if form == HASHED:
        keys[_NAME] = f"{_NAME}{HASHED}.{rest}"
    return keys


# ------------------------------------------------------------------------------ what it says


@dataclass(frozen=True)
class Suspension:
    reason: str = ""
    by: str = ""
    at: str = ""
    key: str = ""  # the key that pulled it, as written ("" for apply.suspend in the config)
    digest: str = ""  # a hashed key: the SHA-256 of the group's name
    odd: str = ""  # how an odd value ("no", "0") was read: as on, said wherever the switch is shown

    def describe(self, what: str, group: str | None = None) -> str:
        who = f" by {self.by}" if self.by else ""
        when = f" at {self.at}" if self.at else ""
        why = f": {self.reason}" if self.reason else ""
        key = f"key {self.key}; " if self.key else ""
        lift = f"asg-reconciler resume --node-group {group}" if group else "asg-reconciler resume"
        if not self.key:  # apply.suspend in the config, not the ConfigMap
            lift = "set apply.suspend: false in the config"
        odd = f"; {self.odd}" if self.odd else ""
        return f"{what} suspended{who}{when}{why} ({key}{lift} to lift it){odd}"

    def names(self, written: str, group: str) -> bool:
        """Whether this suspension, written for `written`, stops `group` (names compare ignoring
        case: a group typed in another case is stopped rather than missed)."""
        if self.digest and self.digest == _digest(group):
            return True
        return written.casefold() == group.casefold()


@dataclass(frozen=True)
class Control:
    """What the switch says now: the whole cluster, and each suspended group."""

    cluster: Suspension | None = None
    groups: Mapping[str, Suspension] = field(default_factory=dict)  # by the name the key gives
    source: str = ""  # where it was read from, for messages
    notes: tuple[str, ...] = ()  # what was read other than as written (typos, unknown keys)

    def group(self, name: str) -> Suspension | None:
        return self.cluster or self._match(name)

    def _match(self, name: str) -> Suspension | None:
        exact = self.groups.get(name)
        if exact is not None:
            return exact
        return next((why for written, why in self.groups.items() if why.names(written, name)), None)

    def refuse_if_suspended(self, group: str | None = None) -> None:
        """SuspendedError when the whole cluster, or `group`, is suspended (apply's guard, before
        every change)."""
        if self.cluster is not None:
            raise SuspendedError(self.cluster.describe(f"apply is ({self.source})"))
        why = self._match(group) if group is not None else None
        if why is not None:
            raise SuspendedError(why.describe(f"{group} is", group))

    def suspended_groups(self, known: Iterable[str]) -> dict[str, Suspension]:
        """Each of the cluster's groups (`known`) the switch stops, by its own name."""
        return {name: why for name in known if (why := self._match(name)) is not None}

    def lines(self) -> list[str]:
        """What is suspended, one line each (for `status`)."""
        found = [self.cluster.describe("apply is")] if self.cluster else []
        return found + [
            why.describe(f"node group {name} is", name) for name, why in sorted(self.groups.items())
        ]

    def warnings(self, known: Iterable[str]) -> list[str]:
        """What a person should correct: the notes of the read, and each group key that names none
        of the cluster's groups (`known`) as it is written."""
        names = sorted(set(known))
        found = [f"kill switch ({self.source}): {note}" for note in self.notes]
        for written, why in sorted(self.groups.items()):
            if not why.key:
                continue
            hits = [name for name in names if why.names(written, name)]
            if not hits:
                shown = ", ".join(names[:10]) + (", ..." if len(names) > 10 else "")
                found.append(
                    f'kill switch ({self.source}): "{why.key}" names no node group of this cluster '
                    f"({shown or 'none found'}): it suspends nothing"
                )
            elif hits != [written] and not why.digest:
                found.append(
                    f'kill switch ({self.source}): "{why.key}" is read as suspending {", ".join(hits)} '
                    f"(group names are compared ignoring case; the key for it is "
                    f'"{switch_key("suspend", hits[0])}")'
                )
        return found


@dataclass
class _Slot:
    """The keys of one group (or of the whole cluster): word -> [(key, value)], as written."""

    form: str
    rest: str
    words: dict[str, list[tuple[str, str]]] = field(default_factory=dict)

    def value(self, word: str) -> str:
        return next((v for _, v in self.words.get(word, []) if v), "")


def _parse_key(key: str) -> tuple[str, str, str] | None:
    """(word, form, rest) of one of our keys, the word matched ignoring case; None if unknown."""
    head, dot, rest = key.partition(".")
    lowered = head.lower()
    for word in (*WORDS, _NAME):
        for form in (PLAIN, ESCAPED, HASHED):
            if lowered != word + form:
                continue
            if not dot:
                return (word, form, "") if form == PLAIN and word != _NAME else None
            if not rest or (word == _NAME and form != HASHED):
                return None
            return word, form, rest.lower() if form == HASHED else rest
    return None


def _slots(data: Mapping[str, str]) -> tuple[dict[tuple[str, str], _Slot], list[str]]:
    """Every key sorted into the group it names; notes on keys read other than as written."""
    slots: dict[tuple[str, str], _Slot] = {}
    notes: list[str] = []
    for key in sorted(data):
        parsed = _parse_key(key)
        if parsed is None:
            notes.append(
                f'unknown key "{key}" ignored (the switch\'s keys: suspend, reason, by, at, each also '
                "as <key>.<group>; docs/apply.md#kill-switch)"
            )
            continue
        word, form, rest = parsed
        canonical = f"{word}{form}" + (f".{rest}" if rest else "")
        if key.partition(".")[0] != word + form:
            notes.append(f'key "{key}" is read as "{canonical}" (the switch\'s keys are lower case)')
        slot = slots.setdefault((form, rest), _Slot(form, rest))
        slot.words.setdefault(word, []).append((key, data[key]))
    return slots, notes


def _slot_name(slot: _Slot) -> tuple[str, str | None]:
    """The group a slot names, and a note when the key does not say it cleanly."""
    if slot.form == PLAIN:
        return slot.rest, None
    if slot.form == HASHED:
        return slot.value(_NAME) or f"sha256:{slot.rest}", None
    name = _unescape(slot.rest)
    if name is None:
        return slot.rest, (
            f'"{slot.words["suspend"][0][0]}" is not a valid escape (each byte other than letters, '
            f'digits, "-" and "." as "_" and two hex digits): read as the group "{slot.rest}"'
        )
    return name, None


def _on(value: str) -> bool:
    return value.strip().lower() not in _OFF


def control_from_data(data: Mapping[str, str], source: str) -> Control:
    """The switch in a ConfigMap's data. Pure."""
    slots, notes = _slots(data)
    cluster: Suspension | None = None
    groups: dict[str, Suspension] = {}
    for slot in slots.values():
        pulled = slot.words.get("suspend", [])
        odd: list[str] = []
        for key, value in pulled:
            if value.strip().lower() not in ("", "true", "false"):
                odd.append(
                    f'{key}: {value!r} is read as on (only absent, empty or "false" is off; '
                    'write "true" or "false")'
                )
        notes.extend(odd)
        on = [key for key, value in pulled if _on(value)]
        if not on:
            continue
        why = Suspension(
            slot.value("reason"),
            slot.value("by"),
            slot.value("at"),
            key=on[0],
            digest=slot.rest if slot.form == HASHED else "",
            odd="; ".join(odd),
        )
        if not slot.rest:
            cluster = why
            continue
        name, note = _slot_name(slot)
        if note:
            notes.append(note)
        groups.setdefault(name, why)
    return Control(cluster, groups, source, tuple(notes))


def keys_naming(data: Mapping[str, str], group: str | None) -> list[str]:
    """Every key of `data` that stands for `group` (None: the whole cluster), in any form or case:
    what `resume` removes. Pure."""
    slots, _ = _slots(data)
    found: list[str] = []
    for slot in slots.values():
        if group is None:
            hit = not slot.rest
        elif not slot.rest:
            hit = False
        else:
            name, _ = _slot_name(slot)
            digest = slot.rest if slot.form == HASHED else ""
            hit = Suspension(digest=digest).names(name, group)
        if hit:
            found += [key for pairs in slot.words.values() for key, _ in pairs]
    return sorted(found)


class ControlMap:
    """Reads and writes the switch in one namespace."""

    def __init__(self, api: k8s.ApiClient, namespace: str) -> None:
        self.api = api
        self.core = k8s.CoreV1Api(api)
        self.namespace = namespace

    @property
    def where(self) -> str:
        return f"configmap {self.namespace}/{CONTROL_CONFIGMAP}"

    def read(self) -> Control:
        """The switch now; no ConfigMap, or one we may not read, is "not suspended" only when it is
        absent: a 403 is an error (a kill switch that cannot be read must not be taken as off)."""
        data = self.data()
        return control_from_data(data or {}, self.where)

    def data(self) -> dict[str, str] | None:
        """The ConfigMap's data as it is now; None when there is no ConfigMap."""
        try:
            response: Any = with_retries(
                lambda: self.core.read_namespaced_config_map(
                    CONTROL_CONFIGMAP, self.namespace, _preload_content=False
                )
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise api_error(f"read {self.where}", exc) from None
        except urllib3.exceptions.HTTPError as exc:
            raise unreachable(self.api, exc) from None
        data = orjson.loads(response.data).get("data") or {}
        return {str(k): str(v) for k, v in data.items()}

    def suspend(self, group: str | None, reason: str, by: str, now: datetime | None = None) -> str:
        """Pull the switch for `group` (None: the whole cluster); the key it wrote."""
        at = (now or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        values = {"suspend": "true", "reason": reason, "by": by, "at": at}
        if group is None:
            self._write(values)
            return "suspend"
        keys = group_keys(group)
        self._write({key: values.get(word, group) for word, key in keys.items()})
        return keys["suspend"]

    def resume(self, group: str | None) -> list[str]:
        """Release the switch for `group` (None: the whole cluster): every key that stands for it,
        in any form or case a person may have typed; the keys removed."""
        data = self.data()
        if data is None:
            return []
        doomed = keys_naming(data, group)
        if doomed:
            self._write(dict.fromkeys(doomed))
        return doomed

    def _write(self, data: Mapping[str, str | None]) -> None:
        try:
            try:
                with_retries(
                    lambda: self.core.patch_namespaced_config_map(
                        CONTROL_CONFIGMAP,
                        self.namespace,
                        {"data": data},
                        _content_type=_MERGE_PATCH,
                        _preload_content=False,
                    )
                )
            except ApiException as exc:
                if exc.status != 404:
                    raise
                body = k8s.V1ConfigMap(
                    metadata=k8s.V1ObjectMeta(name=CONTROL_CONFIGMAP, namespace=self.namespace),
                    data={k: v for k, v in data.items() if v is not None},
                )
                with_retries(
                    lambda: self.core.create_namespaced_config_map(
                        self.namespace, body, _preload_content=False
                    )
                )
        except ApiException as exc:
            raise api_error(f"write {self.where}", exc) from None
        except urllib3.exceptions.HTTPError as exc:
            raise unreachable(self.api, exc) from None


def switch_namespace(
    config: Config, api: k8s.ApiClient, service_account: str = SERVICE_ACCOUNT_NAMESPACE
) -> tuple[str, str]:
    """Where `suspend` and `resume` write, and a note on how it was found. `run.namespace`, else the
    pod's own; outside a pod with neither, the namespace of the apply stage's leader Lease
    (`asg-reconciler-apply-leader-<cluster>`): a deployed apply reads the switch in its own
    namespace, and a guess of kube-system would stop nothing there. None found: kube-system, where a
    one-shot apply outside a pod reads it; several: refused (run.namespace says which)."""
    if config.run.namespace or Path(service_account).exists():
        return run_namespace(config, service_account), ""
    name = leader_lease_name("apply", config.cluster)
    try:
        leases = k8s.CoordinationV1Api(api).list_lease_for_all_namespaces(
            field_selector=f"metadata.name={name}", _request_timeout=10
        )
    except (ApiException, urllib3.exceptions.HTTPError):
        return "kube-system", (
            "; warning: run.namespace is not set and apply's leader Lease could not be looked for, so "
            "kube-system was written: set run.namespace to the namespace apply runs in"
        )
    places = sorted({str(lease.metadata.namespace) for lease in leases.items if lease.metadata})
    if len(places) > 1:
        raise UserError(
            f"run.namespace: not set, and apply runs in several namespaces ({', '.join(places)}); "
            "set run.namespace to the one whose apply you mean"
        )
    if places:
        return places[0], f"; the namespace of apply's leader Lease {name} (set run.namespace to say so)"
    return "kube-system", ""


class Switch:
    """The kill switch as apply finds it now: `apply.suspend` in its config and the ConfigMap. With
    `run.namespace` unset, an apply in a pod reads its own namespace AND kube-system (fail safe): a
    person who pulls the switch from outside a pod with the same config writes kube-system, and
    must stop this apply too."""

    def __init__(self, config: Config, api: k8s.ApiClient) -> None:
        self.config = config
        own = run_namespace(config)
        places = [own] if config.run.namespace or own == "kube-system" else [own, "kube-system"]
        self.maps = [ControlMap(api, namespace) for namespace in places]

    def read(self) -> Control:
        found = suspended_by_config(self.config.apply.suspend, self.config.source or "the config")
        for switch in self.maps:
            found = merged(found, switch.read())
        return found


def suspended_by_config(flag: bool, source: str) -> Control:
    """`apply.suspend: true` in apply's config: the whole cluster, until the config says otherwise."""
    if not flag:
        return Control(source=source)
    return Control(Suspension(reason="apply.suspend is true in the config"), {}, source)


def merged(first: Control, second: Control) -> Control:
    """Both switches at once: the config's and the ConfigMap's."""
    return Control(
        first.cluster or second.cluster,
        {**second.groups, **first.groups},
        first.source if first.cluster else second.source,
        first.notes + second.notes,
    )
