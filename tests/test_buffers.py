"""textnb.features.buffers.with_room: growth with room to spare, the used entries kept."""

import numpy as np

from textnb.features.buffers import with_room


def test_room_doubles_and_keeps_the_used_entries():
    buffer = np.array([[1.0, 2.0, 9.0], [3.0, 4.0, 9.0]])  # 2 used, 1 spare
    assert with_room(buffer, 2, 3) is buffer  # room enough: the same array
    grown = with_room(buffer, 2, 4)
    assert grown.shape == (2, 6) and grown.dtype == buffer.dtype  # twice the room
    assert grown.tolist() == [[1, 2, 0, 0, 0, 0], [3, 4, 0, 0, 0, 0]]  # spare filled
    assert with_room(np.zeros(2, np.int32), 2, 9).shape == (9,)  # at least n
    mask = with_room(np.array([False, True]), 2, 3, fill=True)
    assert mask.tolist() == [False, True, True, True]
