"""core.live.Listening leaves nothing behind in the channel layer, however its waiter ends."""
import asyncio

import anyio

from core.live import Listening


def _slow_discards(layer, monkeypatch) -> None:
    """A discard that takes a moment, as Redis's does: an await a cancelled task cannot pass."""
    discard = layer.group_discard

    async def slow(group, channel):
        await asyncio.sleep(0.01)
        await discard(group, channel)

    monkeypatch.setattr(layer, "group_discard", slow)


def test_a_waiter_cancelled_mid_wait_still_leaves_the_group(monkeypatch):
    """A client that leaves a stream cancels its run (anyio: every later await of the task is cancelled
    too); its channel still leaves the conversation's group, not a day later when Redis expires it."""

    async def scenario():
        listening = Listening("conversation-test")
        _slow_discards(listening.layer, monkeypatch)
        entered = anyio.Event()

        async def follow():
            async with listening:
                entered.set()
                await listening.wait(60)

        async with anyio.create_task_group() as group:
            group.start_soon(follow)
            await entered.wait()
            assert listening.channel in listening.layer.groups["conversation-test"]
            group.cancel_scope.cancel()
        with anyio.fail_after(2):
            while listening.layer.groups.get("conversation-test"):
                await anyio.sleep(0.01)

    asyncio.run(scenario())


def test_a_waiter_that_ends_normally_leaves_the_group():
    async def scenario():
        async with Listening("conversation-done") as listening:
            await listening.wait(0.01)
        return listening

    listening = asyncio.run(scenario())
    assert not listening.layer.groups.get("conversation-done")
