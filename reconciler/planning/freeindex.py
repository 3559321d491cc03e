"""An index over a node list answering "first node at or after i with at least this much CPU and
memory free and a pod slot" in about log(n) steps instead of a scan.

In a full cluster most nodes refuse most pods on resources alone; walking 5,000 of them in Python for
every pod that fits nowhere is what would make scale-down checks slow. This is a max segment tree
over (free CPU, free memory, free pod slots) per node.

Stored values are *upper bounds*: the pool books pods without updating the index (free only goes
down), and refreshes a node when it finds the stored value stale or when a pod leaves it (free goes
up, which must be seen). An upper bound can only send the search to a node that then refuses; it can
never hide one that fits.
"""

from __future__ import annotations

from reconciler.planning.simnode import SimNode

NEVER = -(2**62)  # stored for retired nodes and padding: below any threshold
ANY = -(2**63)  # threshold for a resource the pod does not request: even overcommitted nodes pass


class FreeIndex:
    __slots__ = ("_cpu", "_mem", "_n", "_pods", "_retired", "_size")

    def __init__(self, nodes: list[SimNode]) -> None:
        self._retired: set[int] = set()
        self._n = 0
        self._size = 1
        self._cpu: list[int] = []
        self._mem: list[int] = []
        self._pods: list[int] = []
        self._build(nodes, max(1, len(nodes)))

    def _build(self, nodes: list[SimNode], capacity: int) -> None:
        size = 1
        while size < capacity:
            size *= 2
        self._size, self._n = size, len(nodes)
        cpu, mem, pods = [NEVER] * (2 * size), [NEVER] * (2 * size), [NEVER] * (2 * size)
        for i, node in enumerate(nodes):
            if i not in self._retired:
                cpu[size + i], mem[size + i], pods[size + i] = node.cpu_free, node.mem_free, node.pods_free
        for i in range(size - 1, 0, -1):
            left, right = 2 * i, 2 * i + 1
            cpu[i] = max(cpu[left], cpu[right])
            mem[i] = max(mem[left], mem[right])
            pods[i] = max(pods[left], pods[right])
        self._cpu, self._mem, self._pods = cpu, mem, pods

    def append(self, node: SimNode, nodes: list[SimNode]) -> None:
        """Index `node`, just appended as `nodes[-1]`; grows (rebuilds from `nodes`) when full."""
        if self._n >= self._size:
            self._build(nodes, 2 * self._size)
            return
        self._n += 1
        self.set(self._n - 1, node.cpu_free, node.mem_free, node.pods_free)

    def refresh(self, index: int, node: SimNode) -> None:
        if index not in self._retired:
            self.set(index, node.cpu_free, node.mem_free, node.pods_free)

    def retire(self, index: int) -> None:
        """The node never matches again (a rebuild keeps it so)."""
        self._retired.add(index)
        self.set(index, NEVER, NEVER, NEVER)

    def set(self, index: int, cpu_free: int, mem_free: int, pods_free: int) -> None:
        cpu, mem, pods = self._cpu, self._mem, self._pods
        i = self._size + index
        cpu[i], mem[i], pods[i] = cpu_free, mem_free, pods_free
        i //= 2
        while i:
            left, right = 2 * i, 2 * i + 1
            cpu[i] = cpu[left] if cpu[left] > cpu[right] else cpu[right]
            mem[i] = mem[left] if mem[left] > mem[right] else mem[right]
            pods[i] = pods[left] if pods[left] > pods[right] else pods[right]
            i //= 2

    def find(self, start: int, cpu_need: int, mem_need: int) -> int:
        """The first index >= start whose stored bounds admit the request, or -1. A zero request
        should be passed as `ANY` (the scheduler ignores resources a pod does not request)."""
        if start >= self._n:
            return -1
        cpu, mem, pods, size = self._cpu, self._mem, self._pods, self._size
        i = start + size
        while True:
            if cpu[i] >= cpu_need and mem[i] >= mem_need and pods[i] >= 1:
                if i >= size:
                    return i - size
                i *= 2  # descend, leftmost first
                continue
            while i & 1:  # a right child: climb until we can step right
                i >>= 1
            if i == 0:
                return -1
            i += 1
