"""A job's end heard across processes: with the `redis` backend a worker process ends the job,
and the client waiting on `GET /jobs/{id}?wait=` is held by an API process.

The process that records a job's end publishes its id on a Redis channel of the deployment;
every API process listens on it (one thread each) and rings its own waiters, who then read the
job from the table. Like the in-process doorbell, this is only a doorbell: a message lost (pub/sub
delivers to whoever listens at that moment, and Redis may be down) costs the waiter its periodic
read of the table (`app.services.job_wait.RECHECK_S`), never a wrong answer.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

import redis
from redis.client import PubSub

log = logging.getLogger(__name__)

# How long the listener blocks on the channel before it looks whether it should stop.
LISTEN_POLL_S = 1.0
# After Redis failed, the listener waits this long before it subscribes again.
RECONNECT_S = 1.0


def ending_channel(queue_name: str) -> str:
    """The channel a deployment's job ends are announced on (its queue's name keeps deployments
    that share a Redis apart)."""
    return f"{queue_name}:ended"


class RedisEndingBell:
    """Announces ended job ids on the deployment's channel, and hears them (`listen`)."""

    def __init__(self, client: redis.Redis[bytes], channel: str) -> None:
        self._client = client
        self._channel = channel
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def announce(self, job_ids: Sequence[str]) -> None:
        """Publish the ids of jobs whose end is committed; a Redis failure is logged, not
        raised (the job has ended all the same, and waiters read the table in time)."""
        if not job_ids:
            return
        try:
            self._client.publish(self._channel, " ".join(job_ids))
        except redis.RedisError as exc:
            log.warning("could not announce the end of %d job(s): %s", len(job_ids), exc)

    def listen(self, heard: Callable[[list[str]], None]) -> None:
        """Call `heard` with the ids of every announcement, from a thread of its own, until
        `stop`. It subscribes before it returns (so no end announced afterwards is missed) unless
        Redis is down; the thread subscribes again whenever Redis failed."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._listen,
            args=(heard, self._subscribed()),
            name="job-ending-bell",
            daemon=True,
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop listening (the thread ends within `LISTEN_POLL_S`)."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout=LISTEN_POLL_S + 1)

    def _subscribed(self) -> PubSub | None:
        pubsub = self._client.pubsub(ignore_subscribe_messages=True)
        try:
            pubsub.subscribe(self._channel)
        except redis.RedisError as exc:
            log.warning("job-end announcements unheard (%s); listening again", exc)
            pubsub.close()
            return None
        return pubsub

    def _listen(self, heard: Callable[[list[str]], None], pubsub: PubSub | None) -> None:
        while not self._stop.is_set():
            if pubsub is None:
                self._stop.wait(RECONNECT_S)
                pubsub = self._subscribed()
                continue
            try:
                message = pubsub.get_message(timeout=LISTEN_POLL_S)
            except redis.RedisError as exc:
                log.warning("job-end announcements unheard (%s); listening again", exc)
                pubsub.close()
                pubsub = None
                continue
            if message is not None and message["type"] == "message":
                _ring(heard, message["data"].decode().split())
        if pubsub is not None:
            pubsub.close()


def _ring(heard: Callable[[list[str]], None], job_ids: list[str]) -> None:
    try:
        heard(job_ids)
    except Exception:  # a waiter's fault must not end the listening for every other waiter
        log.exception("ringing the waiters of %d ended job(s) failed", len(job_ids))
