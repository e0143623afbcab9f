"""A speculative run's uniform numbers: one seeded stream, read one at a time or a few ahead by a C call.

A round reads ~5-8 of them (the draft's draws, one per checked token, the residual's or bonus's draw). A `torch.rand`
call right after a forward pass cost ~150 us on the Intel Xeon VM (2026-12-03, caches cold), so the stream is drawn
in blocks and read through a memoryview: torch's CPU generator fills a float64 block one number after the other from
the same Mersenne twister, so a block holds exactly the numbers that many single draws would give, in the same order
(tests), and a seed replays a run exactly as before."""

import numpy as np
import torch

BLOCK = 64


class UniformStream:
    """Uniform numbers in [0, 1) from `torch.Generator().manual_seed(seed)`, in the order single draws would give."""

    def __init__(self, seed: int):
        self._generator = torch.Generator().manual_seed(seed)
        self._block = np.empty(0)
        self._items = memoryview(self._block)
        self._address = self._block.ctypes.data
        self._next = 0

    def __call__(self) -> float:
        """The next number."""
        if self._next == len(self._items):
            self._draw_block()
        u = self._items[self._next]
        self._next += 1
        return u

    def ahead(self, count: int) -> int:
        """The address of the next `count` numbers (contiguous float64), not used yet: a C call reads as many as it
        needs, then the caller `skip`s those."""
        while len(self._items) - self._next < count:
            self._draw_block()
        return self._address + 8 * self._next

    def skip(self, count: int) -> list[float]:
        """Mark the next `count` numbers used (after `ahead`); returns them."""
        used = self._items[self._next : self._next + count].tolist()
        self._next += count
        return used

    def _draw_block(self) -> None:
        fresh = torch.rand(BLOCK, generator=self._generator, dtype=torch.float64).numpy()
        self._block = np.concatenate([self._block[self._next :], fresh])
        self._items, self._address, self._next = memoryview(self._block), self._block.ctypes.data, 0
