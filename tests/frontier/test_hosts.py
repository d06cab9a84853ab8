"""HostQueue: which hosts a claim looks at, lowest head first, without scanning parked or sleeping ones."""

from __future__ import annotations

from webtrawl.frontier.hosts import HostQueue


def walk(queue: HostQueue, now: float = 0.0) -> list[int]:
    """The hosts one claim would look at, serving each (as a claim that gets URLs from all of them)."""
    seen = []
    for host_id in queue.candidates(now):
        seen.append(host_id)
        queue.served(host_id)
    return seen


def test_lowest_head_first_round_robin_within_a_depth() -> None:
    queue = HostQueue({1: 2, 2: 1, 3: 1})
    order = walk(queue)
    assert order[:2] == [2, 3] and order[2] == 1
    assert walk(queue)[:2] == [2, 3]  # served hosts went to the end of their bucket, in turn


def test_parked_hosts_are_skipped_until_woken_and_sleeping_until_their_time() -> None:
    queue = HostQueue({1: 0, 2: 0, 3: 0})
    queue.park(1, None)
    queue.park(2, 5.0)
    assert walk(queue, 1.0) == [3]
    queue.wake(1)
    assert sorted(walk(queue, 1.0)) == [1, 3]
    assert queue.next_wake() == 5.0
    assert sorted(walk(queue, 5.0)) == [1, 2, 3]


def test_heads_move_between_buckets_and_leave_when_empty() -> None:
    queue = HostQueue({})
    queue.raise_head(7, 4)
    queue.raise_head(7, 2)
    queue.raise_head(7, 3)  # not lower: ignored
    assert queue.heads == {7: 2}
    queue.raise_head(8, 1)
    assert walk(queue) == [8, 7]
    queue.set_head(8, None)
    assert walk(queue) == [7]
    queue.park(7, None)
    queue.raise_head(7, 0)  # a parked host keeps waiting for its event, with its new head
    assert walk(queue) == [] and queue.heads[7] == 0
    queue.set_head(7, None)
    assert not queue
